//! `evaluate.selection`: expected utility and Pr[not optimal] of a `mechanism.select` output.

use crate::stages::param::level_95;
use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use super::Dist;
use crate::mech::stats::clopper_pearson;
use crate::stages::columns::FrameBuilder;
use crate::stages::param::Level;
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "evaluate.selection",
    version: 2,
    random: true,
    runs_programs: false,
    summary: "Expected utility and Pr[not optimal] of a `mechanism.select` output: exact, and Monte-Carlo with confidence intervals.",
    params: params::<Selection>,
    gather: Gather::Nothing,
    build: build::<Selection>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Selection {
    /// confidence level of the intervals
    #[serde(default = "level_95")]
    level: Level,
}

impl Stage for Selection {
    fn intervals(&self) -> Vec<[String; 3]> {
        vec![
            ["mc_mean", "mc_ci_lo", "mc_ci_hi"].map(str::to_string),
            ["mc_pr_suboptimal", "mc_pr_ci_lo", "mc_pr_ci_hi"].map(str::to_string),
        ]
    }

    /// Reads the fixed columns of a `mechanism.select` frame; its own are fixed too.
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(
            [
                "method",
                "range_size",
                "opt",
                "expected_utility",
                "mc_mean",
                "mc_ci_lo",
                "mc_ci_hi",
                "pr_suboptimal",
                "mc_pr_suboptimal",
                "mc_pr_ci_lo",
                "mc_pr_ci_hi",
                "samples",
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let d = Dist::read(ctx.input()?, "the input")?;
        let opt = d.opt();
        let is_opt: Vec<bool> = d.utility.iter().map(|&u| u == opt).collect();
        let exact_mean = d
            .prob
            .as_ref()
            .map(|p| p.iter().zip(&d.utility).map(|(p, u)| p * u).sum::<f64>());
        let exact_sub = d.prob.as_ref().map(|p| {
            p.iter()
                .zip(&is_opt)
                .filter(|(_, o)| !**o)
                .map(|(p, _)| p)
                .sum::<f64>()
        });
        let n = d.samples();
        let (mut mc_mean, mut lo, mut hi, mut sub, mut sub_lo, mut sub_hi) =
            (None, None, None, None, None, None);
        if n > 1 {
            let nf = n as f64;
            let mean = d
                .count
                .iter()
                .zip(&d.utility)
                .map(|(&c, u)| c as f64 * u)
                .sum::<f64>()
                / nf;
            let var = d
                .count
                .iter()
                .zip(&d.utility)
                .map(|(&c, u)| c as f64 * (u - mean).powi(2))
                .sum::<f64>()
                / (nf - 1.0);
            let z = crate::mech::stats::normal_quantile(0.5 + *self.level / 2.0);
            let half = z * (var / nf).sqrt();
            mc_mean = Some(mean);
            lo = Some(mean - half);
            hi = Some(mean + half);
            let k: u64 = d
                .count
                .iter()
                .zip(&is_opt)
                .filter(|(_, o)| !**o)
                .map(|(c, _)| c)
                .sum();
            let (a, b) = clopper_pearson(k, n, *self.level);
            sub = Some(k as f64 / nf);
            sub_lo = Some(a);
            sub_hi = Some(b);
        }
        Ok(FrameBuilder::new()
            .str("method", vec![d.method])
            .i64("range_size", vec![d.utility.len() as i64])
            .f64("opt", vec![opt])
            .opt_f64("expected_utility", vec![exact_mean])
            .opt_f64("mc_mean", vec![mc_mean])
            .opt_f64("mc_ci_lo", vec![lo])
            .opt_f64("mc_ci_hi", vec![hi])
            .opt_f64("pr_suboptimal", vec![exact_sub])
            .opt_f64("mc_pr_suboptimal", vec![sub])
            .opt_f64("mc_pr_ci_lo", vec![sub_lo])
            .opt_f64("mc_pr_ci_hi", vec![sub_hi])
            .i64("samples", vec![n as i64])
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, run};

    /// Of the exponential mechanism on utilities 0 and 1 at ε = 2 (Pr[1] = e/(1 + e)): the
    /// exact expected utility and Pr[not optimal] = 1/(1 + e), and Monte-Carlo estimates of
    /// both near them, each inside its interval; an input that is not a selection is named.
    #[test]
    fn expected_utility_and_the_chance_of_missing_the_best() {
        let cands = polars::df!("candidate" => ["a", "b"], "utility" => [0.0, 1.0]).unwrap();
        let select = crate::stages::mechanism::select::KIND;
        let sel = run(
            &select,
            "{method: exponential, epsilon: 2, samples: 20000}",
            &[&cands],
            5,
        )
        .unwrap()
        .frame;
        let out = run(&KIND, "{}", &[&sel], 0).unwrap().frame;
        let e = std::f64::consts::E;
        assert!((floats(&out, "expected_utility")[0] - e / (1.0 + e)).abs() < 1e-12);
        assert!((floats(&out, "pr_suboptimal")[0] - 1.0 / (1.0 + e)).abs() < 1e-12);
        let (mc, lo, hi) = (
            floats(&out, "mc_mean")[0],
            floats(&out, "mc_ci_lo")[0],
            floats(&out, "mc_ci_hi")[0],
        );
        assert!(
            lo <= mc && mc <= hi && (mc - e / (1.0 + e)).abs() < 0.015,
            "{out}"
        );
        assert!((floats(&out, "mc_pr_suboptimal")[0] + mc - 1.0).abs() < 1e-12);
        assert!(fails(&KIND, "{}", &[&cands], 0)
            .starts_with("the input must be the output of a mechanism.select stage"));
    }
}
