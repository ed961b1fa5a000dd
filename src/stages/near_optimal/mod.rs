//! `near_optimal.*`: the near-optimal mechanism of Wu, He & Xia 2017
//! ([`crate::mech::near_optimal`]): rate grids over (δ, ε), convergence steps, densities beside
//! the Laplace and staircase mechanisms, and the checks (Algorithm 2's Monte-Carlo E|X|,
//! measured privacy loss, the paper's two conclusions).
//!
//! A neighbour set is written as text, `"[0, 1] ∪ [1000, 1001]"`, so that it can be the
//! value of an axis (`neighbour_set: $V`) and the label of a panel.

pub mod best_delta;
pub mod convergence;
pub mod density;
pub mod noise;
pub mod privacy;
pub mod rate;
pub mod sample_mean;
pub mod trend;

use std::borrow::Cow;
use std::ops::Deref;

use anyhow::{Context, Result};
use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};
use serde_yaml_ng::Value;

use crate::mech::interval::{Decimal, Touching};
use crate::mech::near_optimal::{NeighbourSet, Options, MAX_STEPS};
use crate::mech::ParamRangeError;
use crate::stages::columns::{f64_col, str_col, FrameBuilder};
use crate::stages::param::Between;
use crate::stages::ParamError;

/// A neighbour set V, parsed when `with:` is read: `"[0, a] ∪ [b, c]"` (0 < a < b < c) or
/// `"[0, c]"`. A text that is not one is reported by [`Set::check`] (from `validate`), as
/// `neighbour_set = "…" is invalid: …` at the key.
#[derive(Clone, Debug)]
pub struct Set(Result<NeighbourSet, ParamRangeError>);

impl Set {
    /// The parse error, located at `neighbour_set`.
    pub fn check(&self) -> Result<(), ParamError> {
        match &self.0 {
            Ok(_) => Ok(()),
            Err(e) => Err(ParamError::at("neighbour_set", e.to_string())),
        }
    }
}

impl Deref for Set {
    type Target = NeighbourSet;
    /// The set; only called once `validate` ran, which refuses a set that did not parse.
    fn deref(&self) -> &NeighbourSet {
        self.0.as_ref().expect("checked by validate")
    }
}

impl<'de> Deserialize<'de> for Set {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Set(NeighbourSet::parse(&String::deserialize(d)?)))
    }
}

impl JsonSchema for Set {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "NeighbourSet".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "string"})
    }
}

/// `max_steps`: give up if Definition 2 does not hold by this step.
pub(crate) type MaxSteps = Between<1, { MAX_STEPS as u64 }>;

pub(crate) fn max_steps() -> MaxSteps {
    MaxSteps::of(100_000)
}

/// ⌈x / step⌉ for step > 0 (0 for x ≤ 0); `None` when it does not fit in 64 bits.
pub(crate) fn steps_in(x: f64, step: f64) -> Option<u64> {
    let n = (x / step).ceil();
    if x <= 0.0 {
        Some(0)
    } else if n < u64::MAX as f64 {
        Some(n as u64)
    } else {
        None
    }
}

/// δ as an exact decimal (at most 18 decimals, bounded magnitude), as the interval arithmetic
/// needs it; its range (δ ≥ 0) is the parameter's type.
pub(crate) fn check_decimals(key: &str, delta: f64) -> Result<(), ParamError> {
    Decimal::from_f64("delta", delta)
        .map(|_| ())
        .map_err(|e| ParamError::at(key, e.to_string()))
}

/// One value of a δ grid: ≥ 0 and an exact decimal.
fn check_grid_delta(key: &str, delta: f64) -> Result<(), ParamError> {
    if delta < 0.0 {
        return Err(ParamError::at(
            key,
            format!("delta = {delta} is invalid: must be ≥ 0"),
        ));
    }
    check_decimals(key, delta)
}

/// One value of an ε grid: > 0.
fn check_grid_eps(key: &str, eps: f64) -> Result<(), ParamError> {
    crate::mech::check_epsilon(eps).map_err(|e| ParamError::at(key, e.to_string()))
}

/// A grid parameter: a list, a number or `{from, to, step}` / `{linspace}` / `{logspace}`,
/// checked in `validate` by [`check_grid`].
pub fn grid(key: &str, v: &Value) -> Result<Vec<f64>> {
    let vals = crate::stages::grid_param(key, v).map_err(|e| anyhow::anyhow!(e.message))?;
    vals.iter()
        .map(|x| match x {
            crate::axis::AxisValue::Num(t) => Ok(*t),
            _ => anyhow::bail!("`{key}` must be numbers"),
        })
        .collect()
}

/// The values a grid of numbers must each satisfy.
#[derive(Clone, Copy)]
pub(crate) enum GridOf {
    /// δ ≥ 0, an exact decimal.
    Delta,
    /// ε > 0.
    Epsilon,
}

/// Checks a numeric grid parameter value by value, keeping none; returns its length.
pub(crate) fn check_grid(key: &str, v: &Value, of: GridOf) -> Result<u64, ParamError> {
    let check = match of {
        GridOf::Delta => check_grid_delta,
        GridOf::Epsilon => check_grid_eps,
    };
    crate::stages::check_grid_param(key, v, &mut |x| match x {
        crate::axis::AxisValue::Num(t) => check(key, t),
        _ => Err(ParamError::at(key, format!("`{key}` must be numbers"))),
    })
}

pub fn options(max_steps: usize, keep_sets: bool) -> Options {
    Options {
        touching: Touching::Merge,
        max_steps,
        keep_sets,
    }
}

/// The columns naming the set, leading every frame made with [`RowBuilder::with_set`].
pub(crate) const SET_COLUMNS: [&str; 3] = ["V", "sensitivity", "measure"];

/// A column's type in a [`RowBuilder`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Col {
    F,
    I,
    S,
}

/// The names of `cols`, after the set's columns when `with_set`: what a kind's `columns_out`
/// declares, from the same list its [`RowBuilder`] is made from.
pub(crate) fn column_names(with_set: bool, cols: &[(&str, Col)]) -> Vec<String> {
    let set = if with_set { &SET_COLUMNS[..] } else { &[] };
    set.iter()
        .copied()
        .chain(cols.iter().map(|c| c.0))
        .map(str::to_string)
        .collect()
}

/// Columns filled row by row, declared up front (so an empty table has them too).
pub(crate) struct RowBuilder {
    f: IndexMap<&'static str, Vec<f64>>,
    i: IndexMap<&'static str, Vec<i64>>,
    s: IndexMap<&'static str, Vec<String>>,
    order: &'static [(&'static str, Col)],
    set: Option<(String, f64, f64)>,
}

impl RowBuilder {
    pub fn new(order: &'static [(&'static str, Col)]) -> Self {
        RowBuilder {
            f: IndexMap::new(),
            i: IndexMap::new(),
            s: IndexMap::new(),
            order,
            set: None,
        }
    }
    pub fn f(&mut self, name: &'static str, x: f64) {
        self.f.entry(name).or_default().push(x);
    }
    pub fn i(&mut self, name: &'static str, x: i64) {
        self.i.entry(name).or_default().push(x);
    }
    pub fn s(&mut self, name: &'static str, x: impl Into<String>) {
        self.s.entry(name).or_default().push(x.into());
    }
    /// Leading columns naming the set: V, Δf and μ(V).
    pub(crate) fn with_set(mut self, v: &NeighbourSet) -> Self {
        self.set = Some((v.to_string(), v.sensitivity(), v.measure()));
        self
    }
    pub fn build(mut self) -> Result<polars::prelude::DataFrame> {
        let rows = self.order.first().map_or(0, |&(n, k)| match k {
            Col::F => self.f.get(n).map_or(0, Vec::len),
            Col::I => self.i.get(n).map_or(0, Vec::len),
            Col::S => self.s.get(n).map_or(0, Vec::len),
        });
        let mut fb = FrameBuilder::new();
        if let Some((v, df, mu)) = self.set.take() {
            fb = fb
                .str(SET_COLUMNS[0], vec![v; rows])
                .f64(SET_COLUMNS[1], vec![df; rows])
                .f64(SET_COLUMNS[2], vec![mu; rows]);
        }
        for &(name, kind) in self.order {
            fb = match kind {
                Col::F => fb.f64(name, self.f.swap_remove(name).unwrap_or_default()),
                Col::I => fb.i64(name, self.i.swap_remove(name).unwrap_or_default()),
                Col::S => fb.str(name, self.s.swap_remove(name).unwrap_or_default()),
            };
        }
        let undeclared: Vec<&str> = (self.f.keys().chain(self.i.keys()).chain(self.s.keys()))
            .copied()
            .collect();
        anyhow::ensure!(
            undeclared.is_empty(),
            "columns [{}] were filled but not declared (a bug in the kind)",
            undeclared.join(", ")
        );
        fb.build()
    }
}

/// The columns of a gathered `near_optimal.rate` frame that summaries need.
pub(crate) struct RateFrame {
    pub sets: Vec<String>,
    pub sensitivity: Vec<f64>,
    pub measure: Vec<f64>,
    pub delta: Vec<f64>,
    pub epsilon: Vec<f64>,
    pub rate: Vec<f64>,
}

impl RateFrame {
    pub fn read(df: &polars::prelude::DataFrame) -> Result<Self> {
        let ctx = || "the input must be a `near_optimal.rate` frame gathered over V";
        Ok(RateFrame {
            sets: str_col(df, "V").with_context(ctx)?,
            sensitivity: f64_col(df, "sensitivity").with_context(ctx)?,
            measure: f64_col(df, "measure").with_context(ctx)?,
            delta: f64_col(df, "delta").with_context(ctx)?,
            epsilon: f64_col(df, "epsilon").with_context(ctx)?,
            rate: f64_col(df, "rate").with_context(ctx)?,
        })
    }

    /// Per (set, ε), in first-seen order, the best δ of the grid.
    pub(crate) fn best_delta(&self) -> IndexMap<(String, u64), Best> {
        let mut acc: IndexMap<(String, u64), Best> = IndexMap::new();
        for r in 0..self.rate.len() {
            let e = acc
                .entry((self.sets[r].clone(), self.epsilon[r].to_bits()))
                .or_insert(Best {
                    row: r,
                    delta: f64::NAN,
                    rate: f64::INFINITY,
                    below_one: 0,
                    points: 0,
                });
            if self.rate[r] < e.rate {
                e.delta = self.delta[r];
                e.rate = self.rate[r];
            }
            e.below_one += usize::from(self.rate[r] < 1.0);
            e.points += 1;
        }
        acc
    }
}

/// The smallest rate over the δ grid for one (set, ε).
pub(crate) struct Best {
    /// A row of the set and ε (for the set's Δf and μ(V)).
    pub row: usize,
    pub delta: f64,
    pub rate: f64,
    pub below_one: usize,
    pub points: usize,
}
