//! `evaluate.utility_tail`: Pr[u(output) ≤ c] of a `mechanism.select` output against the
//! bound of Thm 3.11 (Corollary 3.12).

use crate::stages::param::level_95;
use anyhow::{anyhow, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Dist;
use crate::mech::stats::clopper_pearson;
use crate::stages::columns::FrameBuilder;
use crate::stages::mechanism::select::one;
use crate::stages::param::{Level, Positive};
use crate::stages::{
    build, check_grid_param, distinct, grid_param, params, Ctx, Gather, KindInfo, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "evaluate.utility_tail",
    version: 2,
    random: true,
    runs_programs: false,
    summary: "Pr[u(output) ≤ c] of a `mechanism.select` output against the bound (|R|/|R_OPT|)·exp(ε(c − OPT)/2Δu) of Thm 3.11 (|R_OPT| = 1: Corollary 3.12), at c = OPT − (2Δu/ε)(ln(|R|/|R_OPT|) + t) for each t, or at given thresholds c.",
    params: params::<Tail>,
    gather: Gather::Nothing,
    build: build::<Tail>,
    verdict: None,
};

/// Which bound the tail is compared with.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum BoundKind {
    /// |R_OPT| (Thm 3.11)
    Theorem,
    /// |R_OPT| = 1 (Cor. 3.12)
    Corollary,
    /// mechanisms the theorem does not cover: t is reported for reference only and the `bound`
    /// column is left empty
    None,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Tail {
    /// the ε the selection ran with
    epsilon: Positive,
    /// the Δu the selection ran with
    #[serde(default = "one")]
    sensitivity: Positive,
    /// values of t (a list or a grid such as {from: 0, to: 5, step: 0.5})
    // (`skip_serializing_if`: no `default: null` in the schema; absent means none.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::axis::grid_schema")]
    t: Option<serde_yaml_ng::Value>,
    /// utility thresholds c, instead of `t`
    threshold: Option<Vec<f64>>,
    /// the bound the tail is compared with
    #[serde(default = "theorem")]
    bound: BoundKind,
    /// confidence level (Clopper–Pearson intervals)
    #[serde(default = "level_95")]
    level: Level,
}

fn theorem() -> BoundKind {
    BoundKind::Theorem
}

/// Slack when comparing a utility to a threshold computed in floating point.
fn below(u: f64, c: f64) -> bool {
    u <= c + 1e-12 * c.abs().max(1.0)
}

impl Tail {
    fn ts(&self) -> Result<Option<Vec<f64>>, ParamError> {
        let Some(v) = &self.t else { return Ok(None) };
        let vals = grid_param("t", v)?;
        vals.iter()
            .map(|x| match x {
                crate::axis::AxisValue::Num(t) => Ok(*t),
                _ => Err(ParamError::at("t", "t must be numbers")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

impl Stage for Tail {
    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.threshold {
            if c.is_empty() {
                return Err(ParamError::at("threshold", "list at least one threshold"));
            }
            distinct("threshold", c)?;
        }
        let t = match &self.t {
            None => None,
            Some(v) => Some(check_grid_param("t", v, &mut |x| match x {
                crate::axis::AxisValue::Num(_) => Ok(()),
                _ => Err(ParamError::at("t", "t must be numbers")),
            })?),
        };
        match (t, &self.threshold) {
            (Some(_), Some(_)) => Err(ParamError::at(
                "threshold",
                "give `t` or `threshold`, not both",
            )),
            (None, None) => Err(ParamError {
                path: vec![],
                message: "give `t` (a grid) or `threshold` (utility values)".into(),
            }),
            _ => Ok(()),
        }
    }

    fn intervals(&self) -> Vec<[String; 3]> {
        vec![["pr_mc", "pr_ci_lo", "pr_ci_hi"].map(str::to_string)]
    }

    /// Reads the fixed columns of a `mechanism.select` frame; its own are fixed too.
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(
            [
                "method",
                "t",
                "threshold",
                "pr_exact",
                "pr_mc",
                "pr_ci_lo",
                "pr_ci_hi",
                "bound",
                "samples",
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let d = Dist::read(ctx.input()?, "the input")?;
        let opt = d.opt();
        let r = d.utility.len() as f64;
        let r_opt = match self.bound {
            BoundKind::Theorem => d.utility.iter().filter(|&&u| u == opt).count() as f64,
            BoundKind::Corollary | BoundKind::None => 1.0,
        };
        let scale = 2.0 * *self.sensitivity / *self.epsilon;
        let (ts, cs): (Vec<f64>, Vec<f64>) =
            match (self.ts().map_err(|e| anyhow!(e.message))?, &self.threshold) {
                (Some(ts), _) => ts
                    .iter()
                    .map(|&t| (t, opt - scale * ((r / r_opt).ln() + t)))
                    .unzip(),
                (None, Some(cs)) => cs
                    .iter()
                    .map(|&c| ((opt - c) / scale - (r / r_opt).ln(), c))
                    .unzip(),
                (None, None) => unreachable!("validated"),
            };
        let n = d.samples();
        let mut exact = Vec::new();
        let mut mc = Vec::new();
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        for &c in &cs {
            exact.push(d.prob.as_ref().map(|p| {
                p.iter()
                    .zip(&d.utility)
                    .filter(|(_, &u)| below(u, c))
                    .map(|(p, _)| p)
                    .sum::<f64>()
            }));
            if n > 0 {
                let k: u64 = d
                    .count
                    .iter()
                    .zip(&d.utility)
                    .filter(|(_, &u)| below(u, c))
                    .map(|(k, _)| k)
                    .sum();
                let (a, b) = clopper_pearson(k, n, *self.level);
                mc.push(Some(k as f64 / n as f64));
                lo.push(Some(a));
                hi.push(Some(b));
            } else {
                mc.push(None);
                lo.push(None);
                hi.push(None);
            }
        }
        let bound: Vec<Option<f64>> = ts
            .iter()
            .map(|t| (self.bound != BoundKind::None).then(|| (-t).exp()))
            .collect();
        let rows = ts.len();
        Ok(FrameBuilder::new()
            .str("method", vec![d.method; rows])
            .f64("t", ts)
            .f64("threshold", cs)
            .opt_f64("pr_exact", exact)
            .opt_f64("pr_mc", mc)
            .opt_f64("pr_ci_lo", lo)
            .opt_f64("pr_ci_hi", hi)
            .opt_f64("bound", bound)
            .i64("samples", vec![n as i64; rows])
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, run};

    /// Corollary 3.12 on 3 candidates (utilities 0, 0, 1; ε = 2): at t the threshold is
    /// c = OPT − (2Δu/ε)(ln 3 + t), the exact tail Pr[u ≤ c] never exceeds the bound 3e^(ε(c −
    /// OPT)/2) = e^(−t), and at a threshold below every utility the tail is 0.
    #[test]
    fn the_tail_stays_under_the_bound_of_the_theorem() {
        let cands =
            polars::df!("candidate" => ["a", "b", "c"], "utility" => [0.0, 0.0, 1.0]).unwrap();
        let select = crate::stages::mechanism::select::KIND;
        let sel = run(
            &select,
            "{method: exponential, epsilon: 2, samples: 1000}",
            &[&cands],
            5,
        )
        .unwrap()
        .frame;
        let out = run(
            &KIND,
            "{epsilon: 2, t: [-1, -0.5, 0], bound: corollary}",
            &[&sel],
            0,
        )
        .unwrap()
        .frame;
        let (t, c) = (floats(&out, "t"), floats(&out, "threshold"));
        let (exact, bound) = (floats(&out, "pr_exact"), floats(&out, "bound"));
        for i in 0..3 {
            assert!((c[i] - (1.0 - (3f64.ln() + t[i]))).abs() < 1e-12, "{out}");
            assert!((bound[i] - (-t[i]).exp()).abs() < 1e-12, "{out}");
            assert!(exact[i] <= bound[i], "{out}");
        }
        let out = run(&KIND, "{epsilon: 2, threshold: [-1]}", &[&sel], 0)
            .unwrap()
            .frame;
        assert_eq!(floats(&out, "pr_exact"), [0.0]);
    }
}
