//! Evaluation of selection mechanisms: expected utility, utility tails (Thm 3.11),
//! total-variation distance between two mechanisms (Thm 3.13) and measured privacy loss
//! on neighbouring utility vectors (Thm 3.10). Exact values come from the mechanisms'
//! output distributions; Monte-Carlo values come with confidence intervals.

pub mod smooth_queries;

use anyhow::{anyhow, Context, Result};
use rand::Rng;
use rand_distr::{Binomial, Distribution};
use serde::Deserialize;

use super::frame::{f64_col, str_col, FrameBuilder};
use super::mechanism::select::{candidate, range_error, utility, Method, Selector};
use super::{
    build, check_level, check_size_at, check_size_run, product, Ctx, Gather, KindInfo, Limit,
    Output, ParamDoc, ParamError, Params, Stage,
};
use crate::mech::stats::{quantile_sorted, total_variation, wilson};

fn one() -> f64 {
    1.0
}

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "evaluate.selection",
            version: 1,
            random: true,
            summary: "Expected utility and Pr[not optimal] of a `mechanism.select` output: exact, and Monte-Carlo with confidence intervals.",
            params: Params::Doc(&[ParamDoc { name: "level", ty: "number in (0, 1)", default: Some("0.95"), meaning: "confidence level of the intervals" }]),
            gather: Gather::Nothing,
            build: build::<Selection>,
        },
        KindInfo {
            name: "evaluate.utility_tail",
            version: 1,
            random: true,
            summary: "Pr[u(output) ≤ c] of a `mechanism.select` output against the bound (|R|/|R_OPT|)·exp(ε(c − OPT)/2Δu) of Thm 3.11 (|R_OPT| = 1: Corollary 3.12), at c = OPT − (2Δu/ε)(ln(|R|/|R_OPT|) + t) for each t, or at given thresholds c.",
            params: Params::Doc(&[
                ParamDoc { name: "epsilon", ty: "number > 0", default: None, meaning: "the ε the selection ran with" },
                ParamDoc { name: "sensitivity", ty: "number > 0", default: Some("1"), meaning: "the Δu the selection ran with" },
                ParamDoc { name: "t", ty: "grid", default: Some("—"), meaning: "values of t (a list or a grid such as {from: 0, to: 5, step: 0.5})" },
                ParamDoc { name: "threshold", ty: "list of numbers", default: Some("—"), meaning: "utility thresholds c, instead of `t`" },
                ParamDoc { name: "bound", ty: "theorem | corollary | none", default: Some("theorem"), meaning: "use |R_OPT| (Thm 3.11) or 1 (Cor. 3.12); none: mechanisms the theorem does not cover (t and the bound are then reported for reference only)" },
                ParamDoc { name: "level", ty: "number in (0, 1)", default: Some("0.95"), meaning: "confidence level (Wilson intervals)" },
            ]),
            gather: Gather::Nothing,
            build: build::<Tail>,
        },
        KindInfo {
            name: "evaluate.tv_distance",
            version: 1,
            random: true,
            summary: "Total-variation distance between the output distributions of two `mechanism.select` stages on the same candidates: exact; the first's Monte-Carlo frequencies against the second's exact distribution, with a 95% basic-bootstrap interval (clamped at 0); and the mean and 95% quantile of that statistic when the two distributions are equal (simulated), since a Monte-Carlo TV is biased upwards.",
            params: Params::Doc(&[ParamDoc { name: "null_replicates", ty: "integer ≥ 10", default: Some("400"), meaning: "multinomial samples for the null distribution and for the bootstrap" }]),
            gather: Gather::Nothing,
            build: build::<Tv>,
        },
        KindInfo {
            name: "evaluate.privacy_loss",
            version: 1,
            random: true,
            summary: "The largest |ln Pr[M(x) = r] − ln Pr[M(y) = r]| over neighbouring utility vectors y of the input utilities x (|u(x,r) − u(y,r)| ≤ Δu): every worst-case neighbour (one candidate up by Δu, the rest down, and the reverse) and random ones.",
            params: Params::Doc(&[
                ParamDoc { name: "method", ty: "as in mechanism.select", default: None, meaning: "the selection mechanism" },
                ParamDoc { name: "epsilon", ty: "number > 0", default: None, meaning: "privacy parameter ε" },
                ParamDoc { name: "sensitivity", ty: "number > 0", default: Some("1"), meaning: "Δu" },
                ParamDoc { name: "monotone", ty: "bool", default: Some("false"), meaning: "only neighbours that move every utility in the same direction (and the matching noise scale)" },
                ParamDoc { name: "candidate", ty: "string", default: Some("candidate"), meaning: "column naming the candidates" },
                ParamDoc { name: "utility", ty: "string", default: Some("utility"), meaning: "column of utilities" },
                ParamDoc { name: "random_pairs", ty: "integer ≥ 0", default: Some("1000"), meaning: "random neighbours checked beside the worst-case ones" },
            ]),
            gather: Gather::Nothing,
            build: build::<PrivacyLoss>,
        },
    ]
}

fn level() -> f64 {
    0.95
}

/// One `mechanism.select` output: utilities, exact probabilities (if known), counts.
struct Dist {
    method: String,
    utility: Vec<f64>,
    prob: Option<Vec<f64>>,
    count: Vec<u64>,
}

impl Dist {
    fn read(df: &polars::prelude::DataFrame, what: &str) -> Result<Self> {
        let ctx = || format!("{what} must be the output of a mechanism.select stage");
        let method = str_col(df, "method").with_context(ctx)?;
        if method.iter().any(|m| m != &method[0]) {
            anyhow::bail!("{what} holds several selections (methods {:?}…); evaluate one selection per instance", &method[..method.len().min(3)]);
        }
        let utility = f64_col(df, "utility").with_context(ctx)?;
        let prob = f64_col(df, "probability").ok();
        let count = f64_col(df, "count")
            .with_context(ctx)?
            .iter()
            .map(|&c| c as u64)
            .collect();
        Ok(Dist {
            method: method.first().cloned().unwrap_or_default(),
            utility,
            prob,
            count,
        })
    }

    fn samples(&self) -> u64 {
        self.count.iter().sum()
    }

    fn opt(&self) -> f64 {
        self.utility
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

/// Slack when comparing a utility to a threshold computed in floating point.
fn below(u: f64, c: f64) -> bool {
    u <= c + 1e-12 * c.abs().max(1.0)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Selection {
    #[serde(default = "level")]
    level: f64,
}

impl Stage for Selection {
    fn validate(&self) -> Result<(), ParamError> {
        check_level(self.level)
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
            let z = crate::mech::stats::normal_quantile(0.5 + self.level / 2.0);
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
            let (a, b) = wilson(k, n, self.level);
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

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum BoundKind {
    Theorem,
    Corollary,
    /// For mechanisms the theorem does not cover: the `bound` column is left empty.
    None,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tail {
    epsilon: f64,
    #[serde(default = "one")]
    sensitivity: f64,
    #[serde(default)]
    t: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    threshold: Option<Vec<f64>>,
    #[serde(default = "theorem")]
    bound: BoundKind,
    #[serde(default = "level")]
    level: f64,
}

fn theorem() -> BoundKind {
    BoundKind::Theorem
}

impl Tail {
    fn ts(&self) -> Result<Option<Vec<f64>>, ParamError> {
        let Some(v) = &self.t else { return Ok(None) };
        let vals = super::grid_param("t", v)?;
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
            super::distinct("threshold", c)?;
        }
        crate::mech::check_epsilon(self.epsilon).map_err(range_error)?;
        crate::mech::check_positive("sensitivity", self.sensitivity).map_err(range_error)?;
        check_level(self.level)?;
        let t = match &self.t {
            None => None,
            Some(v) => Some(super::check_grid_param("t", v, &mut |x| match x {
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

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let d = Dist::read(ctx.input()?, "the input")?;
        let opt = d.opt();
        let r = d.utility.len() as f64;
        let r_opt = match self.bound {
            BoundKind::Theorem => d.utility.iter().filter(|&&u| u == opt).count() as f64,
            BoundKind::Corollary | BoundKind::None => 1.0,
        };
        let scale = 2.0 * self.sensitivity / self.epsilon;
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
                let (a, b) = wilson(k, n, self.level);
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tv {
    #[serde(default = "replicates")]
    null_replicates: usize,
}

fn replicates() -> usize {
    400
}

impl Stage for Tv {
    fn validate(&self) -> Result<(), ParamError> {
        if self.null_replicates < 10 {
            return Err(ParamError::at(
                "null_replicates",
                format!(
                    "null_replicates = {} is invalid: must be ≥ 10",
                    self.null_replicates
                ),
            ));
        }
        // Each replicate is drawn twice (null and bootstrap); both keep one statistic each.
        check_size_at(
            "null_replicates",
            Limit::Draws,
            &format!("null_replicates × 2 ({} × 2)", self.null_replicates),
            product(&[self.null_replicates as u64, 2]),
        )?;
        check_size_at(
            "null_replicates",
            Limit::Cells,
            "null_replicates",
            Some(self.null_replicates as u64),
        )?;
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let [a, b] = ctx.inputs else {
            anyhow::bail!(
                "evaluate.tv_distance takes two inputs: [mechanism, reference] (got {})",
                ctx.inputs.len()
            );
        };
        let a = Dist::read(a, &format!("input `{}`", ctx.input_names[0]))?;
        let b = Dist::read(b, &format!("input `{}`", ctx.input_names[1]))?;
        if a.utility != b.utility {
            anyhow::bail!("the two selections have different candidates or utilities");
        }
        let tv_exact = match (&a.prob, &b.prob) {
            (Some(p), Some(q)) => Some(total_variation(p, q)),
            _ => None,
        };
        // One binomial draw per candidate per replicate, twice.
        check_size_run(
            Limit::Draws,
            &format!(
                "null_replicates × 2 × candidates ({} × 2 × {}) binomial draws",
                self.null_replicates,
                a.utility.len()
            ),
            product(&[self.null_replicates as u64, 2, a.utility.len() as u64]),
        )?;
        let n = a.samples();
        let (mut tv_mc, mut q95, mut null_mean, mut boot_lo, mut boot_hi) =
            (None, None, None, None, None);
        if let (true, Some(q)) = (n > 0, &b.prob) {
            let freq: Vec<f64> = a.count.iter().map(|&c| c as f64 / n as f64).collect();
            tv_mc = Some(total_variation(&freq, q));
            // The statistic when `a` really is `q`: multinomial(n, q) samples against q.
            let mut null: Vec<f64> = (0..self.null_replicates)
                .map(|_| total_variation(&multinomial(&mut ctx.rng, n, q), q))
                .collect();
            null.sort_by(f64::total_cmp);
            q95 = Some(quantile_sorted(&null, 0.95));
            null_mean = Some(null.iter().sum::<f64>() / null.len() as f64);
            // Basic (bias-reflecting) bootstrap: resampling inflates a TV estimate the same way
            // sampling did, so the interval is [2θ − q97.5, 2θ − q2.5], clamped at 0. Near 0 it
            // degenerates; compare with the null quantile there.
            let theta = total_variation(&freq, q);
            let mut boot: Vec<f64> = (0..self.null_replicates)
                .map(|_| total_variation(&multinomial(&mut ctx.rng, n, &freq), q))
                .collect();
            boot.sort_by(f64::total_cmp);
            boot_lo = Some((2.0 * theta - quantile_sorted(&boot, 0.975)).max(0.0));
            boot_hi = Some((2.0 * theta - quantile_sorted(&boot, 0.025)).max(0.0));
        }
        Ok(FrameBuilder::new()
            .str("method", vec![a.method])
            .str("reference", vec![b.method])
            .i64("range_size", vec![a.utility.len() as i64])
            .opt_f64("tv_exact", vec![tv_exact])
            .opt_f64("tv_mc", vec![tv_mc])
            .opt_f64("tv_mc_ci_lo", vec![boot_lo])
            .opt_f64("tv_mc_ci_hi", vec![boot_hi])
            .opt_f64("tv_null_mean", vec![null_mean])
            .opt_f64("tv_null_q95", vec![q95])
            .i64("samples", vec![n as i64])
            .build()?
            .into())
    }
}

/// Frequencies of a multinomial(n, p) sample, drawn as sequential binomials.
fn multinomial<R: Rng + ?Sized>(rng: &mut R, n: u64, p: &[f64]) -> Vec<f64> {
    let mut left = n;
    let mut mass = 1.0;
    p.iter()
        .map(|&pi| {
            let k = if left == 0 || mass <= 0.0 {
                0
            } else {
                Binomial::new(left, (pi / mass).clamp(0.0, 1.0))
                    .map(|b| b.sample(rng))
                    .unwrap_or(0)
            };
            left -= k;
            mass -= pi;
            k as f64 / n as f64
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrivacyLoss {
    method: Method,
    epsilon: f64,
    #[serde(default = "one")]
    sensitivity: f64,
    #[serde(default)]
    monotone: bool,
    #[serde(default = "candidate")]
    candidate: String,
    #[serde(default = "utility")]
    utility: String,
    #[serde(default = "pairs")]
    random_pairs: usize,
}

fn pairs() -> usize {
    1000
}

impl PrivacyLoss {
    fn log_probs(&self, u: &[f64]) -> Result<Vec<f64>> {
        let sel = Selector::new(
            self.method,
            u,
            self.epsilon,
            self.sensitivity,
            self.monotone,
        )?;
        let p = sel.probabilities().ok_or_else(|| {
            anyhow!(
                "{} has no exact output distribution for |R| = {}",
                self.method.name(),
                u.len()
            )
        })?;
        Ok(p.iter().map(|x| x.ln()).collect())
    }
}

impl Stage for PrivacyLoss {
    fn validate(&self) -> Result<(), ParamError> {
        Selector::new(
            self.method,
            &[0.0],
            self.epsilon,
            self.sensitivity,
            self.monotone,
        )
        .map_err(range_error)?;
        check_size_at(
            "random_pairs",
            Limit::Draws,
            "random_pairs",
            Some(self.random_pairs as u64),
        )?;
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let x = f64_col(df, &self.utility)?;
        let names = str_col(df, &self.candidate)?;
        // Every neighbour (4 worst-case ones per candidate at most, and the random ones) takes
        // one draw and one probability per candidate.
        let r = x.len() as u64;
        check_size_run(
            Limit::Draws,
            &format!(
                "(4 × candidates + random_pairs) × candidates ((4 × {r} + {}) × {r})",
                self.random_pairs
            ),
            product(&[4, r])
                .and_then(|w| w.checked_add(self.random_pairs as u64))
                .and_then(|n| n.checked_mul(r)),
        )?;
        let lx = self.log_probs(&x)?;
        let delta = self.sensitivity;
        let mut worst = (0.0f64, String::from("none"));
        let mut checked = 0usize;
        let mut consider = |y: &[f64], what: String| -> Result<()> {
            let ly = self.log_probs(y)?;
            checked += 1;
            for (r, (a, b)) in lx.iter().zip(&ly).enumerate() {
                let loss = (a - b).abs();
                if loss > worst.0 || (loss.is_nan() && !worst.0.is_nan()) {
                    worst = (loss, format!("{what}; output {}", names[r]));
                }
            }
            Ok(())
        };
        for (r, name) in names.iter().enumerate() {
            for sign in [1.0, -1.0] {
                // Candidate r moves one way by Δu, every other candidate the other way
                // (monotone: r moves alone, as when one person joins r's count).
                let y: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(j, &u)| {
                        if j == r {
                            u + sign * delta
                        } else if self.monotone {
                            u
                        } else {
                            u - sign * delta
                        }
                    })
                    .collect();
                let dir = if sign > 0.0 { "up" } else { "down" };
                consider(&y, format!("worst-case neighbour: {name} {dir} by Δu"))?;
                if self.monotone {
                    let y: Vec<f64> = x
                        .iter()
                        .enumerate()
                        .map(|(j, &u)| if j == r { u } else { u + sign * delta })
                        .collect();
                    consider(
                        &y,
                        format!("worst-case neighbour: all but {name} {dir} by Δu"),
                    )?;
                }
            }
        }
        for i in 0..self.random_pairs {
            let y: Vec<f64> = if self.monotone {
                let sign = if ctx.rng.random::<bool>() { 1.0 } else { -1.0 };
                x.iter()
                    .map(|&u| u + sign * delta * ctx.rng.random::<f64>())
                    .collect()
            } else {
                x.iter()
                    .map(|&u| u + delta * (2.0 * ctx.rng.random::<f64>() - 1.0))
                    .collect()
            };
            consider(&y, format!("random neighbour #{i}"))?;
        }
        Ok(FrameBuilder::new()
            .str("method", vec![self.method.name().to_string()])
            .f64("max_loss", vec![worst.0])
            .f64("bound", vec![self.epsilon])
            .f64("loss_over_epsilon", vec![worst.0 / self.epsilon])
            .i64("neighbours_checked", vec![checked as i64])
            .str("worst", vec![worst.1])
            .build()?
            .into())
    }
}
