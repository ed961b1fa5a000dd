//! Stage kinds for the near-optimal mechanism of Wu, He & Xia 2017 ([`crate::mech::near_optimal`]):
//! rate grids over (δ, ε), convergence steps, densities beside the Laplace and staircase
//! mechanisms, and the checks (Algorithm 2's Monte-Carlo E|X|, measured privacy loss, the
//! paper's two conclusions).
//!
//! A neighbour set is written as text, `"[0, 1] ∪ [1000, 1001]"`, so that it can be the
//! value of an axis (`neighbour_set: $V`) and the label of a panel.

use anyhow::{anyhow, Context, Result};
use indexmap::IndexMap;
use rand::Rng;
use rayon::prelude::*;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::frame::{f64_col, str_col, FrameBuilder};
use super::mechanism::select::range_error;
use super::{
    build, check_size_at, check_size_run, product, Ctx, Gather, KindInfo, Limit, Output, ParamDoc,
    ParamError, Params, Stage,
};
use crate::mech::interval::{Decimal, Int, Touching};
use crate::mech::laplace::Laplace;
use crate::mech::near_optimal::{
    construct, sweep, GeometricSupport, Levels, NearOptimalError, NeighbourSet, Options, MAX_STEPS,
};
use crate::mech::staircase::Staircase;
use crate::mech::stats::normal_quantile;

/// Draws per sub-stream (see `Ctx::substream`).
const CHUNK: u64 = 1 << 16;

/// Columns of a `near_optimal.rate` frame: its rows × this are checked against `--max-cells`.
const RATE_COLUMNS: u64 = 12;
/// Columns of a `near_optimal.convergence` frame.
const CONVERGENCE_COLUMNS: u64 = 10;

const SET_DOC: ParamDoc = ParamDoc {
    name: "neighbour_set",
    ty: "string",
    default: None,
    meaning: "V as \"[0, a] ∪ [b, c]\" (0 < a < b < c) or \"[0, c]\"; usually `$V`",
};
const STEPS_DOC: ParamDoc = ParamDoc {
    name: "max_steps",
    ty: "integer in [1, 1000000]",
    default: Some("100000"),
    meaning: "give up if Definition 2 does not hold by this step",
};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "near_optimal.rate",
            version: 1,
            random: true,
            summary: "Algorithm 1 of Wu–He–Xia 2017 over a grid of δ and ε for one neighbour set V: per (δ, ε) the steps n to convergence, E|X| (closed form with the geometric tail), the staircase and Laplace E|X|, rate = E|X|(e^ε − 1)/(Δf e^(ε/2)) and the tail's probability. The sets I_i are built once and shared by every δ.",
            params: Params::Doc(&[
                SET_DOC,
                ParamDoc { name: "delta", ty: "grid of numbers ≥ 0", default: None, meaning: "δ, the half-width of R_0 (a list or {from, to, step}, {linspace}, {logspace}); at most 18 decimals" },
                ParamDoc { name: "epsilon", ty: "grid of numbers > 0", default: None, meaning: "privacy parameters ε" },
                STEPS_DOC,
            ]),
            gather: Gather::Nothing,
            build: build::<Rate>,
        },
        KindInfo {
            name: "near_optimal.convergence",
            version: 1,
            random: true,
            summary: "Steps to convergence (Definition 2) of the sets R_i for one V over a grid of δ, with touching intervals merged (closed sets) and kept separate, beside the step predicted by the widest-gap formula; a_n, the largest number of intervals in one R_i (the paper's N) and their total.",
            params: Params::Doc(&[
                SET_DOC,
                ParamDoc { name: "delta", ty: "grid of numbers ≥ 0", default: None, meaning: "δ values (δ = 0 gives the minimal sequence I_i itself)" },
                STEPS_DOC,
            ]),
            gather: Gather::Nothing,
            build: build::<Convergence>,
        },
        KindInfo {
            name: "near_optimal.density",
            version: 1,
            random: true,
            summary: "The noise densities of the Laplace mechanism (b = Δf/ε), the optimal staircase mechanism and Algorithm 1 for one (V, δ, ε) on [−range, range]; step densities are given at their breakpoints (left and right values), so lines draw them exactly. Columns: mechanism, panel (the mechanism and its E|X|), r, density, level (Algorithm 1; −1 otherwise).",
            params: Params::Doc(&[
                SET_DOC,
                ParamDoc { name: "delta", ty: "number ≥ 0", default: None, meaning: "δ" },
                ParamDoc { name: "epsilon", ty: "number > 0", default: None, meaning: "ε" },
                ParamDoc { name: "range", ty: "number > 0", default: Some("a_n + 4Δf"), meaning: "half-width of the plotted interval" },
                ParamDoc { name: "points", ty: "integer ≥ 2", default: Some("1001"), meaning: "grid points for the (smooth) Laplace density" },
            ]),
            gather: Gather::Nothing,
            build: build::<Density>,
        },
        KindInfo {
            name: "near_optimal.sample_mean",
            version: 1,
            random: true,
            summary: "Algorithm 2's Monte-Carlo E|X| with a normal confidence interval against Algorithm 1's closed form, for both readings of its geometric variable (trials to the first success, j ≥ 1; failures before it, j ≥ 0).",
            params: Params::Doc(&[
                SET_DOC,
                ParamDoc { name: "delta", ty: "number ≥ 0", default: None, meaning: "δ" },
                ParamDoc { name: "epsilon", ty: "number > 0", default: None, meaning: "ε" },
                ParamDoc { name: "samples", ty: "integer ≥ 1000", default: Some("200000"), meaning: "draws per geometric convention" },
                ParamDoc { name: "level", ty: "number in (0, 1)", default: Some("0.99"), meaning: "confidence level of the interval" },
            ]),
            gather: Gather::Nothing,
            build: build::<SampleMean>,
        },
        KindInfo {
            name: "near_optimal.privacy",
            version: 1,
            random: true,
            summary: "Measured privacy loss of Algorithm 1 for one (V, δ, ε), in exact arithmetic: the largest |level(r) − level(r − v)| over outputs r (random, and every boundary of the R_i with its neighbours) and shifts v ∈ ±V (its endpoints and random points), i.e. max |ln p(r)/p(r − v)|/ε; and ∫p through the partition of [0, a_n + Δf] by the R_i (checked for gaps and overlaps).",
            params: Params::Doc(&[
                SET_DOC,
                ParamDoc { name: "delta", ty: "number ≥ 0", default: None, meaning: "δ" },
                ParamDoc { name: "epsilon", ty: "number > 0", default: None, meaning: "ε" },
                ParamDoc { name: "random_points", ty: "integer ≥ 0", default: Some("100000"), meaning: "random outputs r in ±(a_n + 3Δf)" },
                ParamDoc { name: "random_shifts", ty: "integer ≥ 0", default: Some("16"), meaning: "random shifts v ∈ ±V beside its endpoints" },
                ParamDoc { name: "boundary_points", ty: "integer ≥ 0", default: Some("200000"), meaning: "at most this many interval endpoints of the R_i (a random subset if there are more), each checked with its neighbours ±1 unit" },
            ]),
            gather: Gather::Nothing,
            build: build::<Privacy>,
        },
        KindInfo {
            name: "near_optimal.best_delta",
            version: 1,
            random: true,
            summary: "From a `near_optimal.rate` frame gathered over V: per set and ε, the δ of the grid with the smallest rate (the paper's δ* of problem (9), on the grid), that rate, and the share of the δ grid where rate < 1.",
            params: Params::Doc(&[]),
            gather: Gather::All,
            build: build::<BestDelta>,
        },
        KindInfo {
            name: "near_optimal.trend",
            version: 1,
            random: true,
            summary: "Whether rate moves with μ(V) or Δf as the paper concludes, measured on a `near_optimal.rate` frame gathered over V: sets sharing the other quantity are ordered by the varied one, and the ordering of their rates is checked at every (δ, ε) and, per ε, for the best δ of each set.",
            params: Params::Doc(&[
                ParamDoc { name: "vary", ty: "measure | sensitivity", default: None, meaning: "the quantity that orders the sets (the other one is held fixed)" },
                ParamDoc { name: "expect", ty: "increasing | decreasing", default: None, meaning: "how rate should move as the varied quantity grows" },
                ParamDoc { name: "statement", ty: "string", default: None, meaning: "the claim being checked, in words" },
                ParamDoc { name: "tolerance", ty: "number ≥ 0", default: Some("1e-9"), meaning: "relative difference below which two rates count as equal" },
            ]),
            gather: Gather::All,
            build: build::<Trend>,
        },
    ]
}

fn max_steps() -> usize {
    100_000
}

/// A number for a message: `1e300`, not its 301 digits.
fn short(x: f64) -> String {
    if x.abs() >= 1e15 {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// ⌈x / step⌉ for step > 0 (0 for x ≤ 0); `None` when it does not fit in 64 bits.
fn steps_in(x: f64, step: f64) -> Option<u64> {
    let n = (x / step).ceil();
    if x <= 0.0 {
        Some(0)
    } else if n < u64::MAX as f64 {
        Some(n as u64)
    } else {
        None
    }
}

fn check_max_steps(n: usize) -> Result<(), ParamError> {
    if (1..=MAX_STEPS).contains(&n) {
        Ok(())
    } else {
        Err(ParamError::at(
            "max_steps",
            format!("max_steps = {n} is invalid: must be in [1, {MAX_STEPS}]"),
        ))
    }
}

fn parse_set(text: &str) -> Result<NeighbourSet, ParamError> {
    NeighbourSet::parse(text).map_err(|e| ParamError::at("neighbour_set", e.to_string()))
}

fn check_delta(key: &str, delta: f64) -> Result<(), ParamError> {
    let d = Decimal::from_f64("delta", delta).map_err(|e| ParamError::at(key, e.to_string()))?;
    if d.mantissa < 0 {
        return Err(ParamError::at(
            key,
            format!("delta = {delta} is invalid: must be ≥ 0"),
        ));
    }
    Ok(())
}

fn check_eps(key: &str, eps: f64) -> Result<(), ParamError> {
    crate::mech::check_epsilon(eps).map_err(|e| ParamError::at(key, e.to_string()))
}

/// A grid parameter: a list, a number or `{from, to, step}` / `{linspace}` / `{logspace}`.
fn grid(key: &str, v: &Value) -> Result<Vec<f64>, ParamError> {
    let vals = super::grid_param(key, v)?;
    vals.iter()
        .map(|x| match x {
            crate::axis::AxisValue::Num(t) => Ok(*t),
            _ => Err(ParamError::at(key, format!("`{key}` must be numbers"))),
        })
        .collect()
}

/// Checks a numeric grid parameter value by value, keeping none; returns its length.
fn check_grid(
    key: &str,
    v: &Value,
    check: fn(&str, f64) -> Result<(), ParamError>,
) -> Result<u64, ParamError> {
    super::check_grid_param(key, v, &mut |x| match x {
        crate::axis::AxisValue::Num(t) => check(key, t),
        _ => Err(ParamError::at(key, format!("`{key}` must be numbers"))),
    })
}

fn options(max_steps: usize, keep_sets: bool) -> Options {
    Options {
        touching: Touching::Merge,
        max_steps,
        keep_sets,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rate {
    neighbour_set: String,
    delta: Value,
    epsilon: Value,
    #[serde(default = "max_steps")]
    max_steps: usize,
}

impl Stage for Rate {
    fn validate(&self) -> Result<(), ParamError> {
        parse_set(&self.neighbour_set)?;
        let nd = check_grid("delta", &self.delta, check_delta)?;
        let ne = check_grid("epsilon", &self.epsilon, check_eps)?;
        check_size_at(
            "epsilon",
            Limit::Cells,
            &format!("δ values × ε values × {RATE_COLUMNS} columns ({nd} × {ne} × {RATE_COLUMNS})"),
            product(&[nd, ne, RATE_COLUMNS]),
        )?;
        check_max_steps(self.max_steps)
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let v = NeighbourSet::parse(&self.neighbour_set)?;
        let deltas = grid("delta", &self.delta).map_err(|e| anyhow!(e.message))?;
        let eps = grid("epsilon", &self.epsilon).map_err(|e| anyhow!(e.message))?;
        let results = sweep(&v, &deltas, options(self.max_steps, false))?;
        let (df, mu) = (v.sensitivity(), v.measure());
        let mut t = Table::default();
        for (&delta, levels) in deltas.iter().zip(results) {
            let levels = levels?;
            for &e in &eps {
                let s = levels.summary(e)?;
                t.f("delta", delta);
                t.f("epsilon", e);
                t.i("steps", levels.steps() as i64);
                t.f("a_n", levels.a_n());
                t.f("mean_abs", s.mean_abs);
                t.f("staircase_mean_abs", Staircase::optimal(e, df)?.mean_abs());
                t.f("laplace_mean_abs", Laplace::for_privacy(e, df)?.mean_abs());
                t.f("rate", s.rate);
                t.f("tail_mass", s.tail_mass);
            }
        }
        Ok(t.with_set(&v, df, mu).build()?.into())
    }
}

/// Columns filled row by row, in first-use order.
#[derive(Default)]
struct Table {
    f: IndexMap<&'static str, Vec<f64>>,
    i: IndexMap<&'static str, Vec<i64>>,
    s: IndexMap<&'static str, Vec<String>>,
    order: Vec<(&'static str, char)>,
    set: Option<(String, f64, f64)>,
}

impl Table {
    fn note(&mut self, name: &'static str, kind: char) {
        if !self.order.iter().any(|(n, _)| *n == name) {
            self.order.push((name, kind));
        }
    }
    fn f(&mut self, name: &'static str, x: f64) {
        self.note(name, 'f');
        self.f.entry(name).or_default().push(x);
    }
    fn i(&mut self, name: &'static str, x: i64) {
        self.note(name, 'i');
        self.i.entry(name).or_default().push(x);
    }
    fn s(&mut self, name: &'static str, x: impl Into<String>) {
        self.note(name, 's');
        self.s.entry(name).or_default().push(x.into());
    }
    /// Leading columns naming the set: V, Δf and μ(V).
    fn with_set(mut self, v: &NeighbourSet, df: f64, mu: f64) -> Self {
        self.set = Some((v.to_string(), df, mu));
        self
    }
    fn build(mut self) -> Result<polars::prelude::DataFrame> {
        let rows = self.order.first().map_or(0, |(n, k)| match k {
            'f' => self.f[n].len(),
            'i' => self.i[n].len(),
            _ => self.s[n].len(),
        });
        let mut fb = FrameBuilder::new();
        if let Some((v, df, mu)) = self.set.take() {
            fb = fb
                .str("V", vec![v; rows])
                .f64("sensitivity", vec![df; rows])
                .f64("measure", vec![mu; rows]);
        }
        for (name, kind) in &self.order {
            fb = match kind {
                'f' => fb.f64(name, std::mem::take(&mut self.f[name])),
                'i' => fb.i64(name, std::mem::take(&mut self.i[name])),
                _ => fb.str(name, std::mem::take(&mut self.s[name])),
            };
        }
        fb.build()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Convergence {
    neighbour_set: String,
    delta: Value,
    #[serde(default = "max_steps")]
    max_steps: usize,
}

impl Stage for Convergence {
    fn validate(&self) -> Result<(), ParamError> {
        parse_set(&self.neighbour_set)?;
        let nd = check_grid("delta", &self.delta, check_delta)?;
        check_size_at(
            "delta",
            Limit::Cells,
            &format!("δ values × {CONVERGENCE_COLUMNS} columns ({nd} × {CONVERGENCE_COLUMNS})"),
            product(&[nd, CONVERGENCE_COLUMNS]),
        )?;
        check_max_steps(self.max_steps)
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let v = NeighbourSet::parse(&self.neighbour_set)?;
        let deltas = grid("delta", &self.delta).map_err(|e| anyhow!(e.message))?;
        let merged = sweep(&v, &deltas, options(self.max_steps, false))?;
        let separate = sweep(
            &v,
            &deltas,
            Options {
                touching: Touching::Separate,
                ..options(self.max_steps, false)
            },
        )?;
        let mut t = Table::default();
        for ((&delta, m), s) in deltas.iter().zip(merged).zip(separate) {
            let m = m?;
            let s = s.with_context(|| "with touching intervals kept separate")?;
            t.f("delta", delta);
            t.i("steps", m.steps() as i64);
            t.i("steps_separate", s.steps() as i64);
            t.i(
                "steps_gap_formula",
                v.steps_by_gap_formula(delta).map_or(-1, |n| n as i64),
            );
            t.f("a_n", m.a_n());
            let per_level = m.pieces_per_level();
            t.i(
                "max_intervals",
                per_level.iter().copied().max().unwrap_or(0) as i64,
            );
            t.i("total_intervals", per_level.iter().sum::<usize>() as i64);
        }
        Ok(t.with_set(&v, v.sensitivity(), v.measure()).build()?.into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Density {
    neighbour_set: String,
    delta: f64,
    epsilon: f64,
    #[serde(default)]
    range: Option<f64>,
    #[serde(default = "thousand_and_one")]
    points: usize,
}

fn thousand_and_one() -> usize {
    1001
}

impl Stage for Density {
    fn validate(&self) -> Result<(), ParamError> {
        parse_set(&self.neighbour_set)?;
        check_delta("delta", self.delta)?;
        check_eps("epsilon", self.epsilon)?;
        if let Some(r) = self.range {
            crate::mech::check_positive("range", r).map_err(range_error)?;
            // The staircase and the tail of Algorithm 1 have a step per Δf of the range.
            let df = parse_set(&self.neighbour_set)?.sensitivity();
            check_size_at(
                "range",
                Limit::Cells,
                &format!(
                    "steps of width Δf in the range, range / Δf ({} / {df})",
                    short(r)
                ),
                steps_in(r, df),
            )?;
        }
        if self.points < 2 {
            return Err(ParamError::at(
                "points",
                format!("points = {} is invalid: must be ≥ 2", self.points),
            ));
        }
        check_size_at("points", Limit::Cells, "points", Some(self.points as u64))?;
        Ok(())
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let v = NeighbourSet::parse(&self.neighbour_set)?;
        let df = v.sensitivity();
        let levels = construct(&v, self.delta, options(MAX_STEPS, true))?;
        let m = levels.mechanism(self.epsilon)?;
        let range = self.range.unwrap_or(levels.a_n().max(0.0) + 4.0 * df);
        let mut t = Table::default();
        // `panel` names the mechanism with its E|X|, for facet titles.
        let push = |t: &mut Table, mech: &(&str, String), r: f64, p: f64, level: i64| {
            t.s("mechanism", mech.0);
            t.s("panel", mech.1.clone());
            t.f("r", r);
            t.f("density", p);
            t.i("level", level);
        };
        let lap = Laplace::for_privacy(self.epsilon, df)?;
        let name =
            |mech: &'static str, mean_abs: f64| (mech, format!("{mech} (E|X| = {mean_abs:.1})"));
        let lap_name = name("Laplace", lap.mean_abs());
        for k in 0..self.points {
            let r = -range + 2.0 * range * k as f64 / (self.points - 1) as f64;
            push(&mut t, &lap_name, r, lap.density(r), -1);
        }
        // A step density on [0, range] as (left end, right end, value, level) pieces,
        // mirrored: each piece contributes its two ends, so lines draw vertical jumps.
        let emit = |t: &mut Table, mech: &(&str, String), steps: &[(f64, f64, f64, i64)]| {
            for &(lo, hi, p, l) in steps.iter().rev() {
                push(t, mech, -hi, p, l);
                push(t, mech, -lo, p, l);
            }
            for &(lo, hi, p, l) in steps {
                push(t, mech, lo, p, l);
                push(t, mech, hi, p, l);
            }
        };
        // Rows: the Laplace grid, then 4 per piece (two ends, mirrored): two staircase pieces
        // per Δf of the range, the intervals of the R_i it covers, one tail piece per Δf.
        let sc = levels.scale();
        let parts = levels.partition()?;
        let shown = parts.partition_point(|(p, _)| sc.to_f64(p.lo) < range) as u64;
        let per_df = steps_in(range, df);
        let per_df_text = per_df.map_or_else(|| short(range / df), |n| n.to_string());
        check_size_run(
            Limit::Cells,
            &format!(
                "density rows, points + 4 × (3 × range / Δf + intervals of the R_i in the range) ({} + 4 × (3 × {per_df_text} + {shown}))",
                self.points
            ),
            per_df
                .and_then(|n| product(&[3, n]))
                .and_then(|x| x.checked_add(shown))
                .and_then(|x| x.checked_mul(4))
                .and_then(|x| x.checked_add(self.points as u64)),
        )?;
        let st = Staircase::optimal(self.epsilon, df)?;
        let mut steps = Vec::new();
        // Bounded by the count checked above (`k += 1.0` alone would stall at 2^53).
        for k in 0..=per_df.unwrap_or(0) {
            let k = k as f64;
            if k * df >= range {
                break;
            }
            for (lo, hi) in [(k, k + st.gamma()), (k + st.gamma(), k + 1.0)] {
                let (lo, hi) = (lo * df, (hi * df).min(range));
                if lo < hi {
                    let mid = (lo + hi) / 2.0;
                    steps.push((lo, hi, st.density(mid), -1));
                }
            }
        }
        emit(&mut t, &name("staircase", st.mean_abs()), &steps);
        let mut steps: Vec<(f64, f64, f64, i64)> = Vec::new();
        for &(p, level) in parts {
            let (lo, hi) = (sc.to_f64(p.lo), sc.to_f64(p.hi));
            if lo >= range {
                break;
            }
            let dens = (-(level as f64) * self.epsilon).exp() / m.alpha();
            steps.push((lo, hi.min(range), dens, level as i64));
        }
        let mut edge = levels.a_n() + df;
        let first = levels.steps() as i64 + 1;
        // The tail's steps of width Δf up to the range, bounded by their count (`edge += df`
        // alone never ends once Δf is below the spacing of doubles at `edge`).
        let tail = steps_in(range - edge, df).unwrap_or(0);
        for level in (first..).take(tail.saturating_add(1) as usize) {
            if edge >= range {
                break;
            }
            let dens = (-(level as f64) * self.epsilon).exp() / m.alpha();
            steps.push((edge, (edge + df).min(range), dens, level));
            edge += df;
        }
        emit(&mut t, &name("Algorithm 1", m.summary().mean_abs), &steps);
        Ok(t.with_set(&v, df, v.measure()).build()?.into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SampleMean {
    neighbour_set: String,
    delta: f64,
    epsilon: f64,
    #[serde(default = "two_hundred_thousand")]
    samples: u64,
    #[serde(default = "level99")]
    level: f64,
}

fn two_hundred_thousand() -> u64 {
    200_000
}
fn level99() -> f64 {
    0.99
}

impl Stage for SampleMean {
    fn validate(&self) -> Result<(), ParamError> {
        parse_set(&self.neighbour_set)?;
        check_delta("delta", self.delta)?;
        check_eps("epsilon", self.epsilon)?;
        if self.samples < 1000 {
            return Err(ParamError::at(
                "samples",
                format!("samples = {} is invalid: must be ≥ 1000", self.samples),
            ));
        }
        // Drawn once per geometric convention.
        check_size_at(
            "samples",
            Limit::Draws,
            &format!("samples × 2 geometric conventions ({} × 2)", self.samples),
            product(&[self.samples, 2]),
        )?;
        super::check_level(self.level)?;
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let v = NeighbourSet::parse(&self.neighbour_set)?;
        let levels = construct(&v, self.delta, options(MAX_STEPS, true))?;
        let m = levels.mechanism(self.epsilon)?;
        let analytic = m.summary().mean_abs;
        let z = normal_quantile(0.5 + self.level / 2.0);
        let chunks = self.samples.div_ceil(CHUNK);
        let mut t = Table::default();
        for (which, support) in [GeometricSupport::FromOne, GeometricSupport::FromZero]
            .into_iter()
            .enumerate()
        {
            // Fixed chunks, one sub-stream each, summed in chunk order: the result does
            // not depend on the number of threads.
            let sums: Vec<(f64, f64)> = (0..chunks)
                .into_par_iter()
                .map(|c| {
                    let mut rng = ctx.substream(((which as u64) << 40) | c);
                    let n = CHUNK.min(self.samples - c * CHUNK);
                    let (mut s, mut s2) = (0.0, 0.0);
                    for _ in 0..n {
                        let x = m.sample(&mut rng, support).abs();
                        s += x;
                        s2 += x * x;
                    }
                    (s, s2)
                })
                .collect();
            let n = self.samples as f64;
            let (s, s2) = sums
                .iter()
                .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
            let mean = s / n;
            let se = ((s2 / n - mean * mean).max(0.0) * n / (n - 1.0) / n).sqrt();
            t.f("delta", self.delta);
            t.f("epsilon", self.epsilon);
            t.i("steps", levels.steps() as i64);
            t.f("tail_mass", m.summary().tail_mass);
            t.s("geometric", support.name());
            t.f("mean_abs", analytic);
            t.f("mc_mean_abs", mean);
            t.f("mc_ci_lo", mean - z * se);
            t.f("mc_ci_hi", mean + z * se);
            t.f("z_score", (mean - analytic) / se);
            t.s(
                "agrees",
                if (mean - analytic).abs() <= z * se {
                    "yes"
                } else {
                    "no"
                },
            );
            t.i("samples", self.samples as i64);
        }
        Ok(t.with_set(&v, v.sensitivity(), v.measure()).build()?.into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Privacy {
    neighbour_set: String,
    delta: f64,
    epsilon: f64,
    #[serde(default = "hundred_thousand")]
    random_points: u64,
    #[serde(default = "sixteen")]
    random_shifts: u64,
    #[serde(default = "two_hundred_thousand")]
    boundary_points: u64,
}

fn hundred_thousand() -> u64 {
    100_000
}
fn sixteen() -> u64 {
    16
}

impl Privacy {
    /// 6 × boundary_points + random_points, `None` on overflow.
    fn points(&self) -> Option<u64> {
        product(&[6, self.boundary_points])?.checked_add(self.random_points)
    }
}

impl Stage for Privacy {
    fn validate(&self) -> Result<(), ParamError> {
        parse_set(&self.neighbour_set)?;
        check_delta("delta", self.delta)?;
        check_eps("epsilon", self.epsilon)?;
        // Memory: the outputs r (6 per boundary point, 1 per random point) and the shifts.
        let points = self.points();
        check_size_at(
            "random_points",
            Limit::Cells,
            &format!(
                "output points, 6 × boundary_points + random_points (6 × {} + {})",
                self.boundary_points, self.random_points
            ),
            points,
        )?;
        let shifts = self.random_shifts;
        check_size_at("random_shifts", Limit::Cells, "random_shifts", Some(shifts))?;
        // Time: every output against every shift (the endpoints of V add a few).
        check_size_at(
            "random_shifts",
            Limit::Draws,
            &format!(
                "level evaluations, output points × shifts ({} × {shifts})",
                points.unwrap_or(u64::MAX)
            ),
            points.and_then(|p| product(&[p, shifts.max(1)])),
        )?;
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let v = NeighbourSet::parse(&self.neighbour_set)?;
        let levels = construct(&v, self.delta, options(MAX_STEPS, true))?;
        let m = levels.mechanism(self.epsilon)?;
        let sc = levels.scale();
        let units = |x: f64| -> Result<Int> { Ok(sc.units(Decimal::from_f64("shift", x)?)) };
        // Shifts: 0 and every endpoint of V, both signs, and random points of ±V.
        let pieces = v.pieces();
        let mut shifts: Vec<Int> = Vec::new();
        for &(lo, hi) in &pieces {
            for x in [lo, hi] {
                shifts.extend([units(x)?, -units(x)?]);
            }
        }
        let mut rng = ctx.substream(u64::MAX);
        for _ in 0..self.random_shifts {
            let (lo, hi) = pieces[rng.random_range(0..pieces.len())];
            let s = rng.random_range(units(lo)?..=units(hi)?);
            shifts.push(if rng.random::<bool>() { s } else { -s });
        }
        shifts.sort_unstable();
        shifts.dedup();
        // Outputs: every boundary of the R_i (or a random subset) with its neighbours one
        // unit away, mirrored, and random points in ±(a_n + 3Δf).
        let partition = levels.partition()?;
        let mut ends: Vec<Int> = partition.iter().flat_map(|(p, _)| [p.lo, p.hi]).collect();
        ends.sort_unstable();
        ends.dedup();
        if ends.len() as u64 > self.boundary_points {
            for k in 0..self.boundary_points as usize {
                let j = rng.random_range(k..ends.len());
                ends.swap(k, j);
            }
            ends.truncate(self.boundary_points as usize);
        }
        let mut points: Vec<Int> = ends
            .iter()
            .flat_map(|&e| [e - 1, e, e + 1, -e - 1, -e, -e + 1])
            .collect();
        let reach = levels.a_n_units().max(0) + 3 * levels.sensitivity_units();
        points.extend((0..self.random_points).map(|_| rng.random_range(-reach..=reach)));
        let worst = points
            .par_chunks(4096)
            .map(|chunk| -> Result<(u64, u64, u64), NearOptimalError> {
                let (mut worst, mut at_bound, mut pairs) = (0u64, 0u64, 0u64);
                for &r in chunk {
                    let lr = levels.level_units(r)?;
                    for &s in &shifts {
                        let d = lr.abs_diff(levels.level_units(r - s)?);
                        worst = worst.max(d);
                        at_bound += u64::from(d == 1);
                        pairs += 1;
                    }
                }
                Ok((worst, at_bound, pairs))
            })
            .collect::<Result<Vec<_>, NearOptimalError>>()?;
        let (max_change, at_bound, pairs) = worst
            .iter()
            .fold((0, 0, 0), |(w, a, p), &(x, y, z)| (w.max(x), a + y, p + z));
        let (gaps, integral) = partition_integral(&levels, self.epsilon, m.alpha());
        let mut t = Table::default();
        t.f("delta", self.delta);
        t.f("epsilon", self.epsilon);
        t.i("steps", levels.steps() as i64);
        t.i("pairs", pairs as i64);
        t.i("max_level_change", max_change as i64);
        t.f("max_log_ratio", max_change as f64 * self.epsilon);
        t.f("share_at_bound", at_bound as f64 / pairs.max(1) as f64);
        t.s("within_epsilon", if max_change <= 1 { "yes" } else { "no" });
        t.i("partition_gaps", gaps as i64);
        t.f("integral", integral);
        Ok(t.with_set(&v, v.sensitivity(), v.measure()).build()?.into())
    }
}

/// The number of gaps or overlaps between consecutive intervals of the position-sorted
/// partition of `[0, a_n + Δf]`, and `∫p` summed over that partition plus the tail.
fn partition_integral(levels: &Levels, eps: f64, alpha: f64) -> (usize, f64) {
    let sc = levels.scale();
    let parts = levels.partition().unwrap_or(&[]);
    let mut gaps = 0;
    let mut edge = 0;
    let mut mass = 0.0;
    for &(p, l) in parts {
        if p.lo != edge {
            gaps += 1;
        }
        edge = p.hi;
        mass += 2.0 * sc.to_f64(p.length()) * (-(l as f64) * eps).exp();
    }
    if sc.to_f64(edge) != levels.a_n() + levels.sensitivity() {
        gaps += 1;
    }
    let n = levels.steps() as f64;
    let tail = 2.0 * levels.sensitivity() * (-(n + 1.0) * eps).exp() / -(-eps).exp_m1();
    (gaps, (mass + tail) / alpha)
}

/// The columns of a gathered `near_optimal.rate` frame that summaries need.
struct RateFrame {
    sets: Vec<String>,
    sensitivity: Vec<f64>,
    measure: Vec<f64>,
    delta: Vec<f64>,
    epsilon: Vec<f64>,
    rate: Vec<f64>,
}

impl RateFrame {
    fn read(df: &polars::prelude::DataFrame) -> Result<Self> {
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
    fn best_delta(&self) -> IndexMap<(String, u64), Best> {
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
struct Best {
    /// A row of the set and ε (for the set's Δf and μ(V)).
    row: usize,
    delta: f64,
    rate: f64,
    below_one: usize,
    points: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BestDelta {}

impl Stage for BestDelta {
    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let f = RateFrame::read(ctx.input()?)?;
        let mut t = Table::default();
        for ((set, _), b) in f.best_delta() {
            t.s("V", set);
            t.f("sensitivity", f.sensitivity[b.row]);
            t.f("measure", f.measure[b.row]);
            t.f("epsilon", f.epsilon[b.row]);
            t.f("best_delta", b.delta);
            t.f("best_rate", b.rate);
            t.f("share_below_one", b.below_one as f64 / b.points as f64);
        }
        Ok(t.build()?.into())
    }
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Vary {
    Measure,
    Sensitivity,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Expect {
    Increasing,
    Decreasing,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Trend {
    vary: Vary,
    expect: Expect,
    statement: String,
    #[serde(default = "tiny")]
    tolerance: f64,
}

fn tiny() -> f64 {
    1e-9
}

impl Stage for Trend {
    fn validate(&self) -> Result<(), ParamError> {
        if !(self.tolerance >= 0.0 && self.tolerance.is_finite()) {
            return Err(ParamError::at(
                "tolerance",
                format!("tolerance = {} is invalid: must be ≥ 0", self.tolerance),
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let f = RateFrame::read(ctx.input()?)?;
        let (key, fixed) = match self.vary {
            Vary::Measure => (&f.measure, &f.sensitivity),
            Vary::Sensitivity => (&f.sensitivity, &f.measure),
        };
        // The sets, ordered by the varied quantity, within groups sharing the fixed one.
        let mut by_set: IndexMap<String, (f64, f64)> = IndexMap::new();
        for r in 0..f.rate.len() {
            by_set
                .entry(f.sets[r].clone())
                .or_insert((fixed[r], key[r]));
        }
        let mut groups: IndexMap<u64, Vec<(f64, String)>> = IndexMap::new();
        for (name, &(f, k)) in &by_set {
            groups
                .entry(f.to_bits())
                .or_default()
                .push((k, name.clone()));
        }
        let groups: Vec<Vec<String>> = groups
            .into_values()
            .filter(|g| g.len() > 1)
            .map(|mut g| {
                g.sort_by(|a, b| a.0.total_cmp(&b.0));
                g.into_iter().map(|(_, n)| n).collect()
            })
            .collect();
        if groups.is_empty() {
            anyhow::bail!(
                "no two sets share the fixed quantity ({}): nothing to compare",
                match self.vary {
                    Vary::Measure => "Δf",
                    Vary::Sensitivity => "μ(V)",
                }
            );
        }
        // rate by (set, δ, ε).
        let mut grid: IndexMap<(String, u64, u64), f64> = IndexMap::new();
        for r in 0..f.rate.len() {
            grid.insert(
                (
                    f.sets[r].clone(),
                    f.delta[r].to_bits(),
                    f.epsilon[r].to_bits(),
                ),
                f.rate[r],
            );
        }
        let best = f.best_delta();
        let mut points: Vec<(u64, u64)> = grid.keys().map(|(_, d, e)| (*d, *e)).collect();
        points.sort_unstable();
        points.dedup();
        let mut eps_values: Vec<u64> = points.iter().map(|p| p.1).collect();
        eps_values.sort_unstable_by(|a, b| f64::from_bits(*a).total_cmp(&f64::from_bits(*b)));
        eps_values.dedup();
        let sign = match self.expect {
            Expect::Increasing => 1.0,
            Expect::Decreasing => -1.0,
        };
        // For an ordered list of rates: (holds non-strictly, holds strictly, worst step
        // against the expected direction, relative).
        let judge = |rs: &[f64]| -> (bool, bool, f64) {
            let mut worst: f64 = 0.0;
            let mut strict = true;
            for w in rs.windows(2) {
                let rel = sign * (w[1] - w[0]) / w[0].abs().max(f64::MIN_POSITIVE);
                worst = worst.max(-rel);
                strict &= rel > self.tolerance;
            }
            (worst <= self.tolerance, strict, worst)
        };
        let mut t = Table::default();
        for g in &groups {
            let (mut n, mut holds, mut strict, mut worst) = (0, 0, 0, 0.0f64);
            for &(d, e) in &points {
                let rs: Option<Vec<f64>> = g
                    .iter()
                    .map(|s| grid.get(&(s.clone(), d, e)).copied())
                    .collect();
                let Some(rs) = rs else { continue };
                let (h, s, w) = judge(&rs);
                n += 1;
                holds += usize::from(h);
                strict += usize::from(s);
                worst = worst.max(w);
            }
            // Per ε, each set at its best δ of the grid (the paper's δ* of problem (9)).
            let (mut best_holds, mut best_strict, mut best_worst) = (0, 0, 0.0f64);
            for &e in &eps_values {
                let rates: Option<Vec<f64>> = g
                    .iter()
                    .map(|s| best.get(&(s.clone(), e)).map(|b| b.rate))
                    .collect();
                let Some(rates) = rates else { continue };
                let (h, s, w) = judge(&rates);
                best_holds += usize::from(h);
                best_strict += usize::from(s);
                best_worst = best_worst.max(w);
            }
            t.s("statement", self.statement.clone());
            t.s("sets", g.join(" → "));
            t.i("grid_points", n as i64);
            t.i("holds_at", holds as i64);
            t.i("strictly_at", strict as i64);
            t.f("holds_share", holds as f64 / n.max(1) as f64);
            t.f("worst_violation", worst);
            t.i("epsilons", eps_values.len() as i64);
            t.i("holds_at_best_delta", best_holds as i64);
            t.i("strictly_at_best_delta", best_strict as i64);
            t.f("worst_violation_at_best_delta", best_worst);
        }
        Ok(t.build()?.into())
    }
}
