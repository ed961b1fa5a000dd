//! `evaluate.tv_distance`: total-variation distance between the output distributions of two
//! `mechanism.select` stages (Thm 3.13), exact and Monte-Carlo.

use anyhow::Result;
use rand::Rng;
use rand_distr::{Binomial, Distribution};
use schemars::JsonSchema;
use serde::Deserialize;

use super::Dist;
use crate::mech::stats::{quantile_sorted, total_variation};
use crate::stages::columns::FrameBuilder;
use crate::stages::param::AtLeast;
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "evaluate.tv_distance",
    version: 2,
    random: true,
    runs_programs: false,
    summary: "Total-variation distance between the output distributions of two `mechanism.select` stages on the same candidates: exact; the first's Monte-Carlo frequencies against the second's exact distribution, with a 95% interval θ ± r, r the bootstrap 95% quantile of the sampling error TV(p̂*, p̂), at least 3/n (it always contains θ); and the mean and 95% quantile of that statistic when the two distributions are equal (simulated), since a Monte-Carlo TV is biased upwards.",
    params: params::<Tv>,
    gather: Gather::Nothing,
    build: build::<Tv>,
    verdict: None,
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

    fn intervals(&self) -> Vec<[String; 3]> {
        vec![["tv_mc", "tv_mc_ci_lo", "tv_mc_ci_hi"].map(str::to_string)]
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
            // Two formulas for one distribution (Gumbel-max and the exponential mechanism)
            // agree only to rounding: a distance within the sum's rounding error (k terms
            // of probabilities ≤ 1, each off by at most 2⁻⁵²) is 0, not 1e-17 — which a
            // logarithmic axis would draw as a real distance 15 decades down.
            (Some(p), Some(q)) => Some(total_variation(p, q)).map(|tv| {
                if tv <= p.len() as f64 * f64::EPSILON {
                    0.0
                } else {
                    tv
                }
            }),
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
            let theta = total_variation(&freq, q);
            let (lo, hi) = sampling_interval(&mut ctx.rng, theta, n, &freq, *self.null_replicates);
            boot_lo = Some(lo);
            boot_hi = Some(hi);
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

/// A 95% interval for TV(p, q) around its Monte-Carlo estimate θ = TV(p̂, q).
///
/// By the triangle inequality |TV(p̂, q) − TV(p, q)| ≤ TV(p̂, p), so θ ± r holds TV(p, q)
/// whenever the sampling error TV(p̂, p) is at most r; r is the bootstrap's 95% quantile of
/// TV(p̂*, p̂) (p̂* a multinomial resample of p̂), which stands for that error, and at least
/// 3/n (the rule of three: what the sample never showed, the bootstrap cannot). The interval
/// is conservative (the triangle inequality is rarely tight) and contains θ by construction.
/// It replaces the basic bootstrap [2θ − q97.5, 2θ − q2.5] of TV(p̂*, q): near TV = 0 every
/// resample lies above θ (a TV estimate is biased upwards), and that interval fell below its
/// own estimate, even to [0, 0] around θ = 3.2e-4 (dr-noisy-argmax, ε = 0.056).
fn sampling_interval<R: Rng + ?Sized>(
    rng: &mut R,
    theta: f64,
    n: u64,
    freq: &[f64],
    replicates: u64,
) -> (f64, f64) {
    let mut err: Vec<f64> = (0..replicates)
        .map(|_| total_variation(&multinomial(rng, n, freq), freq))
        .collect();
    err.sort_by(f64::total_cmp);
    // A resample never shows what the sample never showed: when nearly all draws fell on one
    // outcome the bootstrap's error is 0 and the interval a point. The rule of three bounds
    // the mass the sample missed (at 95%, below 3/n), and so the error it can cause.
    let r = quantile_sorted(&err, 0.95).max(3.0 / n as f64);
    ((theta - r).max(0.0), (theta + r).min(1.0))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The interval holds its estimate wherever the estimate lies, near TV = 0 above all (where
    /// the basic bootstrap gave [0, 0] around 3.2e-4), and covers the true TV: 200 repetitions
    /// of 10⁴ draws from a distribution 0.02 from q; a 95% interval (conservative) should miss
    /// at most ~5% (10 of 200); more than 20 misses is a failure at any reasonable level.
    #[test]
    fn the_interval_holds_its_estimate_and_covers_the_truth() {
        let q = vec![0.1; 10];
        let mut p = q.clone();
        p[0] += 0.02;
        p[1] -= 0.02;
        let truth = total_variation(&p, &q);
        let mut rng = crate::kind::rng_from_seed(7);
        let mut missed = 0;
        for (i, target) in [(0, &q), (1, &p)].into_iter().cycle().take(200) {
            let n = 10_000;
            let freq = multinomial(&mut rng, n, target);
            let theta = total_variation(&freq, &q);
            let (lo, hi) = sampling_interval(&mut rng, theta, n, &freq, 200);
            assert!(
                lo <= theta && theta <= hi,
                "[{lo}, {hi}] excludes θ = {theta}"
            );
            let tv = if i == 0 { 0.0 } else { truth };
            missed += usize::from(!(lo <= tv && tv <= hi));
        }
        assert!(missed <= 20, "{missed} of 200 intervals missed the true TV");
    }
}

#[cfg(test)]
mod kind_tests {
    use super::KIND;
    use crate::kind::testing::{floats, run};

    /// Two selections on the same candidates: the exact distance is half the ℓ1 distance of
    /// their distributions, and a selection against itself is at distance 0 with its Monte-
    /// Carlo estimate inside the interval the kind reports.
    #[test]
    fn the_exact_distance_and_the_monte_carlo_interval() {
        let cands = polars::df!("candidate" => ["a", "b"], "utility" => [0.0, 1.0]).unwrap();
        let select = crate::stages::mechanism::select::KIND;
        let sel = |method: &str| {
            run(
                &select,
                &format!("{{method: {method}, epsilon: 2, samples: 5000}}"),
                &[&cands],
                1,
            )
            .unwrap()
            .frame
        };
        let (exp, naive) = (sel("exponential"), sel("naive_exponential"));
        let (p, q) = (floats(&exp, "probability"), floats(&naive, "probability"));
        let out = run(&KIND, "{null_replicates: 50}", &[&exp, &naive], 2)
            .unwrap()
            .frame;
        assert!(
            (floats(&out, "tv_exact")[0] - (p[1] - q[1]).abs()).abs() < 1e-12,
            "{out}"
        );
        let out = run(&KIND, "{null_replicates: 50}", &[&exp, &exp], 2)
            .unwrap()
            .frame;
        assert_eq!(floats(&out, "tv_exact"), [0.0]);
        let (mc, lo, hi) = (
            floats(&out, "tv_mc")[0],
            floats(&out, "tv_mc_ci_lo")[0],
            floats(&out, "tv_mc_ci_hi")[0],
        );
        assert!(lo <= mc && mc <= hi && mc < 0.05, "{out}");
    }
}
