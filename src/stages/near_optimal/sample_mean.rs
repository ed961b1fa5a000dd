//! `near_optimal.sample_mean`: Algorithm 2's Monte-Carlo E|X| against Algorithm 1's closed
//! form, for both readings of its geometric variable.

use anyhow::Result;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{check_decimals, column_names, options, Col, RowBuilder, Set};
use crate::mech::near_optimal::{construct, GeometricSupport, MAX_STEPS};
use crate::mech::stats::normal_quantile;
use crate::stages::param::{AtLeast, Level, NonNegative, Positive};
use crate::stages::{
    build, check_size_at, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

/// Draws per sub-stream (see `Ctx::substream`).
const CHUNK: u64 = 1 << 16;

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.sample_mean",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Algorithm 2's Monte-Carlo E|X| with a normal confidence interval against Algorithm 1's closed form, for both readings of its geometric variable (trials to the first success, j ≥ 1; failures before it, j ≥ 0).",
    params: params::<SampleMean>,
    gather: Gather::Nothing,
    build: build::<SampleMean>,
    verdict: None,
};

/// The columns after the set's, in order.
const COLUMNS: &[(&str, Col)] = &[
    ("delta", Col::F),
    ("epsilon", Col::F),
    ("steps", Col::I),
    ("tail_mass", Col::F),
    ("geometric", Col::S),
    ("mean_abs", Col::F),
    ("mc_mean_abs", Col::F),
    ("mc_ci_lo", Col::F),
    ("mc_ci_hi", Col::F),
    ("z_score", Col::F),
    ("agrees", Col::S),
    ("samples", Col::I),
];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SampleMean {
    /// V as "[0, a] ∪ [b, c]" (0 < a < b < c) or "[0, c]"; usually `$V`
    pub neighbour_set: Set,
    /// δ (at most 18 decimals)
    pub delta: NonNegative,
    /// ε
    pub epsilon: Positive,
    /// draws per geometric convention
    #[serde(default = "two_hundred_thousand")]
    pub samples: AtLeast<1000>,
    /// confidence level of the interval
    #[serde(default = "level99")]
    pub level: Level,
}

fn two_hundred_thousand() -> AtLeast<1000> {
    AtLeast::of(200_000)
}
fn level99() -> Level {
    Level::of(0.99)
}

impl Stage for SampleMean {
    fn validate(&self) -> Result<(), ParamError> {
        self.neighbour_set.check()?;
        check_decimals("delta", *self.delta)?;
        // Drawn once per geometric convention.
        let samples = self.samples.get();
        check_size_at(
            "samples",
            Limit::Draws,
            &format!("samples × 2 geometric conventions ({samples} × 2)"),
            product(&[samples, 2]),
        )
    }

    fn intervals(&self) -> Vec<[String; 3]> {
        vec![["mc_mean_abs", "mc_ci_lo", "mc_ci_hi"].map(str::to_string)]
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(column_names(true, COLUMNS))
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let v = &*self.neighbour_set;
        let (delta, eps, samples) = (*self.delta, *self.epsilon, self.samples.get());
        let levels = construct(v, delta, options(MAX_STEPS, true))?;
        let m = levels.mechanism(eps)?;
        let analytic = m.summary().mean_abs;
        let z = normal_quantile(0.5 + *self.level / 2.0);
        let chunks = samples.div_ceil(CHUNK);
        let mut t = RowBuilder::new(COLUMNS);
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
                    let n = CHUNK.min(samples - c * CHUNK);
                    let (mut s, mut s2) = (0.0, 0.0);
                    for _ in 0..n {
                        let x = m.sample(&mut rng, support).abs();
                        s += x;
                        s2 += x * x;
                    }
                    (s, s2)
                })
                .collect();
            let n = samples as f64;
            let (s, s2) = sums
                .iter()
                .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
            let mean = s / n;
            let se = ((s2 / n - mean * mean).max(0.0) * n / (n - 1.0) / n).sqrt();
            t.f("delta", delta);
            t.f("epsilon", eps);
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
            t.i("samples", samples as i64);
        }
        Ok(t.with_set(v).build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, run, strings};

    /// Algorithm 2's Monte-Carlo E|X| agrees with Algorithm 1's closed form, which is the one
    /// `near_optimal.rate` reports for the same (V, δ, ε): for both geometric conventions the
    /// interval holds the closed form and the mean.
    #[test]
    fn the_monte_carlo_mean_agrees_with_the_closed_form() {
        let v = r#"neighbour_set: "[0, 1] ∪ [100, 101]""#;
        let out = run(
            &KIND,
            &format!("{{{v}, delta: 2, epsilon: 2, samples: 20000, level: 0.999}}"),
            &[],
            9,
        )
        .unwrap()
        .frame;
        assert_eq!(strings(&out, "geometric"), ["from_one", "from_zero"]);
        let rate = run(
            &crate::stages::near_optimal::rate::KIND,
            &format!("{{{v}, delta: [2], epsilon: [2]}}"),
            &[],
            0,
        )
        .unwrap()
        .frame;
        let closed = floats(&rate, "mean_abs")[0];
        let (lo, hi, mc) = (
            floats(&out, "mc_ci_lo"),
            floats(&out, "mc_ci_hi"),
            floats(&out, "mc_mean_abs"),
        );
        for i in 0..2 {
            assert_eq!(floats(&out, "mean_abs")[i], closed);
            assert!(
                lo[i] <= closed && closed <= hi[i] && lo[i] <= mc[i] && mc[i] <= hi[i],
                "{out}"
            );
        }
        assert_eq!(strings(&out, "agrees"), ["yes", "yes"]);
    }
}
