//! `evaluate.tv_distance`: total-variation distance between the output distributions of two
//! `mechanism.select` stages (Thm 3.13), exact and Monte-Carlo.

use anyhow::Result;
use rand::Rng;
use rand_distr::{Binomial, Distribution};
use schemars::JsonSchema;
use serde::Deserialize;

use super::Dist;
use crate::mech::stats::{quantile_sorted, total_variation};
use crate::stages::frame::FrameBuilder;
use crate::stages::param::AtLeast;
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "evaluate.tv_distance",
    version: 1,
    random: true,
    summary: "Total-variation distance between the output distributions of two `mechanism.select` stages on the same candidates: exact; the first's Monte-Carlo frequencies against the second's exact distribution, with a 95% basic-bootstrap interval (clamped at 0); and the mean and 95% quantile of that statistic when the two distributions are equal (simulated), since a Monte-Carlo TV is biased upwards.",
    params: params::<Tv>,
    gather: Gather::Nothing,
    build: build::<Tv>,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Tv {
    /// multinomial samples for the null distribution and for the bootstrap
    #[serde(default = "replicates")]
    null_replicates: AtLeast<10>,
}

fn replicates() -> AtLeast<10> {
    AtLeast::of(400)
}

impl Stage for Tv {
    fn validate(&self) -> Result<(), ParamError> {
        // Each replicate is drawn twice (null and bootstrap); both keep one statistic each.
        check_size_at(
            "null_replicates",
            Limit::Draws,
            &format!("null_replicates × 2 ({} × 2)", self.null_replicates),
            product(&[self.null_replicates.get(), 2]),
        )?;
        check_size_at(
            "null_replicates",
            Limit::Cells,
            "null_replicates",
            Some(self.null_replicates.get()),
        )?;
        Ok(())
    }

    /// Reads the fixed columns of two `mechanism.select` frames; its own are fixed too.
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(
            [
                "method",
                "reference",
                "range_size",
                "tv_exact",
                "tv_mc",
                "tv_mc_ci_lo",
                "tv_mc_ci_hi",
                "tv_null_mean",
                "tv_null_q95",
                "samples",
            ]
            .map(String::from)
            .to_vec(),
        )
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
            product(&[self.null_replicates.get(), 2, a.utility.len() as u64]),
        )?;
        let n = a.samples();
        let (mut tv_mc, mut q95, mut null_mean, mut boot_lo, mut boot_hi) =
            (None, None, None, None, None);
        if let (true, Some(q)) = (n > 0, &b.prob) {
            let freq: Vec<f64> = a.count.iter().map(|&c| c as f64 / n as f64).collect();
            tv_mc = Some(total_variation(&freq, q));
            // The statistic when `a` really is `q`: multinomial(n, q) samples against q.
            let mut null: Vec<f64> = (0..*self.null_replicates)
                .map(|_| total_variation(&multinomial(&mut ctx.rng, n, q), q))
                .collect();
            null.sort_by(f64::total_cmp);
            q95 = Some(quantile_sorted(&null, 0.95));
            null_mean = Some(null.iter().sum::<f64>() / null.len() as f64);
            // Basic (bias-reflecting) bootstrap: resampling inflates a TV estimate the same way
            // sampling did, so the interval is [2θ − q97.5, 2θ − q2.5], clamped at 0. Near 0 it
            // degenerates; compare with the null quantile there.
            let theta = total_variation(&freq, q);
            let mut boot: Vec<f64> = (0..*self.null_replicates)
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
