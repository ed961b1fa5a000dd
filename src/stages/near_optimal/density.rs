//! `near_optimal.density`: the noise densities of the Laplace mechanism, the optimal staircase
//! mechanism and Algorithm 1 for one (V, δ, ε).

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{check_decimals, column_names, options, steps_in, Col, RowBuilder, Set};
use crate::mech::laplace::Laplace;
use crate::mech::near_optimal::{construct, MAX_STEPS};
use crate::mech::staircase::Staircase;
use crate::stages::param::{AtLeast, NonNegative, Positive};
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.density",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "The noise densities of the Laplace mechanism (b = Δf/ε), the optimal staircase mechanism and Algorithm 1 for one (V, δ, ε) on [−range, range]; step densities are given at their breakpoints (left and right values), so lines draw them exactly. Columns: mechanism, panel (the mechanism and its E|X|), r, density, level (Algorithm 1; −1 otherwise).",
    params: params::<Density>,
    gather: Gather::Nothing,
    build: build::<Density>,
    verdict: None,
};

/// The columns after the set's, in order.
const COLUMNS: &[(&str, Col)] = &[
    ("mechanism", Col::S),
    ("panel", Col::S),
    ("r", Col::F),
    ("density", Col::F),
    ("level", Col::I),
];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Density {
    /// V as "[0, a] ∪ [b, c]" (0 < a < b < c) or "[0, c]"; usually `$V`
    pub neighbour_set: Set,
    /// δ (at most 18 decimals)
    pub delta: NonNegative,
    /// ε
    pub epsilon: Positive,
    /// half-width of the plotted interval (default: a_n + 4Δf)
    pub range: Option<Positive>,
    /// grid points for the (smooth) Laplace density
    #[serde(default = "thousand_and_one")]
    pub points: AtLeast<2>,
}

fn thousand_and_one() -> AtLeast<2> {
    AtLeast::of(1001)
}

impl Stage for Density {
    fn validate(&self) -> Result<(), ParamError> {
        self.neighbour_set.check()?;
        check_decimals("delta", *self.delta)?;
        if let Some(r) = self.range {
            // The staircase and the tail of Algorithm 1 have a step per Δf of the range.
            let df = self.neighbour_set.sensitivity();
            check_size_at(
                "range",
                Limit::Cells,
                &format!(
                    "steps of width Δf in the range, range / Δf ({} / {df})",
                    crate::text::number_text(*r)
                ),
                steps_in(*r, df),
            )?;
        }
        check_size_at("points", Limit::Cells, "points", Some(self.points.get()))?;
        Ok(())
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(column_names(true, COLUMNS))
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let v = &*self.neighbour_set;
        let (eps, points) = (*self.epsilon, self.points.get() as usize);
        let df = v.sensitivity();
        let levels = construct(v, *self.delta, options(MAX_STEPS, true))?;
        let m = levels.mechanism(eps)?;
        let range = self.range.map_or(levels.a_n().max(0.0) + 4.0 * df, |r| *r);
        let mut t = RowBuilder::new(COLUMNS);
        // `panel` names the mechanism with its E|X|, for facet titles.
        let push = |t: &mut RowBuilder, mech: &(&str, String), r: f64, p: f64, level: i64| {
            t.s("mechanism", mech.0);
            t.s("panel", mech.1.clone());
            t.f("r", r);
            t.f("density", p);
            t.i("level", level);
        };
        let lap = Laplace::for_privacy(eps, df)?;
        let name =
            |mech: &'static str, mean_abs: f64| (mech, format!("{mech} (E|X| = {mean_abs:.1})"));
        let lap_name = name("Laplace", lap.mean_abs());
        for k in 0..points {
            let r = -range + 2.0 * range * k as f64 / (points - 1) as f64;
            push(&mut t, &lap_name, r, lap.density(r), -1);
        }
        // A step density on [0, range] as (left end, right end, value, level) pieces,
        // mirrored: each piece contributes its two ends, so lines draw vertical jumps.
        let emit = |t: &mut RowBuilder, mech: &(&str, String), steps: &[(f64, f64, f64, i64)]| {
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
        let per_df_text =
            per_df.map_or_else(|| crate::text::number_text(range / df), |n| n.to_string());
        check_size_run(
            Limit::Cells,
            &format!(
                "density rows, points + 4 × (3 × range / Δf + intervals of the R_i in the range) ({points} + 4 × (3 × {per_df_text} + {shown}))",
            ),
            per_df
                .and_then(|n| product(&[3, n]))
                .and_then(|x| x.checked_add(shown))
                .and_then(|x| x.checked_mul(4))
                .and_then(|x| x.checked_add(points as u64)),
        )?;
        let st = Staircase::optimal(eps, df)?;
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
            let dens = (-(level as f64) * eps).exp() / m.alpha();
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
            let dens = (-(level as f64) * eps).exp() / m.alpha();
            steps.push((edge, (edge + df).min(range), dens, level));
            edge += df;
        }
        emit(&mut t, &name("Algorithm 1", m.summary().mean_abs), &steps);
        Ok(t.with_set(v).build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, run, strings};

    /// Each of the three densities (Laplace, staircase, Algorithm 1) integrates to 1 over a
    /// range wide enough for its tail, by the trapezoid rule over the rows (exact for the step
    /// densities, whose jumps are given at both ends), and each is symmetric.
    #[test]
    fn every_density_integrates_to_one_and_is_symmetric() {
        let with = r#"{neighbour_set: "[0, 1] ∪ [100, 101]", delta: 15, epsilon: 1, range: 3000, points: 3001}"#;
        let out = run(&KIND, with, &[], 0).unwrap().frame;
        let (mech, r, p) = (
            strings(&out, "mechanism"),
            floats(&out, "r"),
            floats(&out, "density"),
        );
        let mut names = mech.clone();
        names.dedup();
        assert_eq!(names.len(), 3, "{names:?}");
        for m in &names {
            let rows: Vec<usize> = (0..mech.len()).filter(|&i| &mech[i] == m).collect();
            let integral: f64 = rows
                .windows(2)
                .map(|w| (r[w[1]] - r[w[0]]) * (p[w[0]] + p[w[1]]) / 2.0)
                .sum();
            assert!((integral - 1.0).abs() < 1e-3, "{m}: ∫ = {integral}");
            let (first, last) = (rows[0], rows[rows.len() - 1]);
            assert_eq!((r[first], p[first]), (-r[last], p[last]), "{m}");
        }
    }
}
