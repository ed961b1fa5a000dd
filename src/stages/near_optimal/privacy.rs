//! `near_optimal.privacy`: the measured privacy loss of Algorithm 1 for one (V, δ, ε), in
//! exact arithmetic, and ∫p through the partition by the R_i.

use anyhow::Result;
use rand::Rng;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{check_decimals, column_names, options, Col, RowBuilder, Set};
use crate::mech::interval::{Decimal, Int};
use crate::mech::near_optimal::{construct, Levels, NearOptimalError, MAX_STEPS};
use crate::stages::param::{NonNegative, Positive};
use crate::stages::{
    build, check_size_at, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.privacy",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Measured privacy loss of Algorithm 1 for one (V, δ, ε), in exact arithmetic: the largest |level(r) − level(r − v)| over outputs r (random, and every boundary of the R_i with its neighbours) and shifts v ∈ ±V (its endpoints and random points), i.e. max |ln p(r)/p(r − v)|/ε; and ∫p through the partition of [0, a_n + Δf] by the R_i (checked for gaps and overlaps).",
    params: params::<Privacy>,
    gather: Gather::Nothing,
    build: build::<Privacy>,
    verdict: None,
};

/// The columns after the set's, in order.
const COLUMNS: &[(&str, Col)] = &[
    ("delta", Col::F),
    ("epsilon", Col::F),
    ("steps", Col::I),
    ("pairs", Col::I),
    ("max_level_change", Col::I),
    ("max_log_ratio", Col::F),
    ("share_at_bound", Col::F),
    ("within_epsilon", Col::S),
    ("partition_gaps", Col::I),
    ("integral", Col::F),
];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Privacy {
    /// V as "[0, a] ∪ [b, c]" (0 < a < b < c) or "[0, c]"; usually `$V`
    pub neighbour_set: Set,
    /// δ (at most 18 decimals)
    pub delta: NonNegative,
    /// ε
    pub epsilon: Positive,
    /// random outputs r in ±(a_n + 3Δf)
    #[serde(default = "crate::stages::param::integer::<100_000>")]
    pub random_points: u64,
    /// random shifts v ∈ ±V beside its endpoints
    #[serde(default = "crate::stages::param::integer::<16>")]
    pub random_shifts: u64,
    /// at most this many interval endpoints of the R_i (a random subset if there are more),
    /// each checked with its neighbours ±1 unit
    #[serde(default = "crate::stages::param::integer::<200_000>")]
    pub boundary_points: u64,
}

impl Privacy {
    /// 6 × boundary_points + random_points, `None` on overflow.
    fn points(&self) -> Option<u64> {
        product(&[6, self.boundary_points])?.checked_add(self.random_points)
    }
}

impl Stage for Privacy {
    fn validate(&self) -> Result<(), ParamError> {
        self.neighbour_set.check()?;
        check_decimals("delta", *self.delta)?;
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

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(column_names(true, COLUMNS))
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let v = &*self.neighbour_set;
        let (delta, eps) = (*self.delta, *self.epsilon);
        let levels = construct(v, delta, options(MAX_STEPS, true))?;
        let m = levels.mechanism(eps)?;
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
        let (gaps, integral) = partition_integral(&levels, eps, m.alpha());
        let mut t = RowBuilder::new(COLUMNS);
        t.f("delta", delta);
        t.f("epsilon", eps);
        t.i("steps", levels.steps() as i64);
        t.i("pairs", pairs as i64);
        t.i("max_level_change", max_change as i64);
        t.f("max_log_ratio", max_change as f64 * eps);
        t.f("share_at_bound", at_bound as f64 / pairs.max(1) as f64);
        t.s("within_epsilon", if max_change <= 1 { "yes" } else { "no" });
        t.i("partition_gaps", gaps as i64);
        t.f("integral", integral);
        Ok(t.with_set(v).build()?.into())
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

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, run, strings};

    /// Algorithm 1 is ε-DP, measured exactly: no output's level changes by more than 1 under
    /// any shift checked (|ln p(r)/p(r − v)| ≤ ε), the R_i partition the line without gaps,
    /// and the density integrates to 1.
    #[test]
    fn the_measured_loss_stays_within_epsilon() {
        let with = r#"{neighbour_set: "[0, 1] ∪ [100, 101]", delta: 2, epsilon: 1, random_points: 2000, random_shifts: 4, boundary_points: 2000}"#;
        let out = run(&KIND, with, &[], 5).unwrap().frame;
        assert_eq!(floats(&out, "max_level_change"), [1.0]);
        assert!(floats(&out, "max_log_ratio")[0] <= 1.0 + 1e-12, "{out}");
        assert_eq!(strings(&out, "within_epsilon"), ["yes"]);
        assert_eq!(floats(&out, "partition_gaps"), [0.0]);
        assert!((floats(&out, "integral")[0] - 1.0).abs() < 1e-9, "{out}");
    }
}
