//! `near_optimal.trend`: whether the rate moves with μ(V) or Δf as Wu–He–Xia 2017 conclude,
//! measured on a gathered `near_optimal.rate` frame.

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{column_names, Col, RateFrame, RowBuilder};
use crate::stages::param::NonNegative;
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.trend",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Whether rate moves with μ(V) or Δf as the paper concludes, measured on a `near_optimal.rate` frame gathered over V: sets sharing the other quantity are ordered by the varied one, and the ordering of their rates is checked at every (δ, ε) and, per ε, for the best δ of each set.",
    params: params::<Trend>,
    gather: Gather::All,
    build: build::<Trend>,
    verdict: None,
};

/// The columns, in order.
const COLUMNS: &[(&str, Col)] = &[
    ("statement", Col::S),
    ("sets", Col::S),
    ("grid_points", Col::I),
    ("holds_at", Col::I),
    ("strictly_at", Col::I),
    ("holds_share", Col::F),
    ("worst_violation", Col::F),
    ("epsilons", Col::I),
    ("holds_at_best_delta", Col::I),
    ("strictly_at_best_delta", Col::I),
    ("worst_violation_at_best_delta", Col::F),
];

/// The quantity that orders the sets.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Vary {
    /// μ(V), the total length of the set, with Δf fixed
    Measure,
    /// Δf = max V, with μ(V) fixed
    Sensitivity,
}

/// The direction the rate should move in.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Expect {
    Increasing,
    Decreasing,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Trend {
    /// the quantity that orders the sets (the other one is held fixed)
    pub vary: Vary,
    /// how rate should move as the varied quantity grows
    pub expect: Expect,
    /// the claim being checked, in words
    pub statement: String,
    /// relative difference below which two rates count as equal
    #[serde(default = "tiny")]
    pub tolerance: NonNegative,
}

fn tiny() -> NonNegative {
    NonNegative::of(1e-9)
}

impl Stage for Trend {
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(column_names(false, COLUMNS))
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let f = RateFrame::read(ctx.input()?)?;
        let tolerance = *self.tolerance;
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
                strict &= rel > tolerance;
            }
            (worst <= tolerance, strict, worst)
        };
        let mut t = RowBuilder::new(COLUMNS);
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

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, run, strings};

    /// Sets sharing Δf, ordered by μ(V), against the claim "rate grows with μ(V)": it holds
    /// (strictly) at (δ = 1, ε = 1), fails by 20% at δ = 2, and fails at each set's best δ; a
    /// set with no partner of equal Δf is left out.
    #[test]
    fn the_claim_is_counted_where_it_holds_and_where_it_fails() {
        let rates = polars::df!(
            "V" => ["A", "A", "B", "B", "C", "C"],
            "sensitivity" => [3.0, 3.0, 3.0, 3.0, 5.0, 5.0],
            "measure" => [1.0, 1.0, 2.0, 2.0, 1.0, 1.0],
            "delta" => [1.0, 2.0, 1.0, 2.0, 1.0, 2.0],
            "epsilon" => [1.0; 6],
            "rate" => [0.5, 0.5, 0.6, 0.4, 0.1, 0.1]
        )
        .unwrap();
        let with = "{vary: measure, expect: increasing, statement: grows}";
        let out = run(&KIND, with, &[&rates], 0).unwrap().frame;
        assert_eq!(strings(&out, "sets"), ["A → B"]);
        let col = |c: &str| floats(&out, c)[0];
        assert_eq!(
            [
                col("grid_points"),
                col("holds_at"),
                col("strictly_at"),
                col("holds_share")
            ],
            [2.0, 1.0, 1.0, 0.5]
        );
        assert!((col("worst_violation") - 0.2).abs() < 1e-12, "{out}");
        // Best δ: A's rate 0.5, B's 0.4.
        assert_eq!([col("epsilons"), col("holds_at_best_delta")], [1.0, 0.0]);
        assert!(
            (col("worst_violation_at_best_delta") - 0.2).abs() < 1e-12,
            "{out}"
        );
    }
}
