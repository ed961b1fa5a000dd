//! Smooth queries (Huang 2014, eq. 2.1): Gaussian-kernel mixtures answered on a point set, and
//! the worst-case error of a synthetic database on them; plus `load.sample`, points from a
//! smooth density on [−1, 1]^d for the convergence-rate experiment.
//!
//! The queries are regenerated from their own `seed` wherever they are needed, so the stage
//! answering them on the original data (once, for every σ of the sweep) and the stage scoring
//! each synthetic database see the same queries without passing 10^5 centres through frames.

use anyhow::{bail, Result};
use rand::SeedableRng;
use rand_distr::{Beta, Distribution};
use rand_pcg::Pcg64Mcg;
use serde::Deserialize;

use super::frame::{f64_col, FrameBuilder};
use super::trigonometric::{PointSet, DIAGNOSTIC_PREFIX};
use super::{build, Ctx, Gather, KindInfo, Output, ParamDoc, ParamError, Stage};
use crate::mech::trig::kernel::{mean_answers, KernelMixtures};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "load.sample",
            summary: "n points in [−1, 1]^d, each coordinate 2·B − 1 with B ~ Beta(a, b) independently: a smooth density for rate experiments. Columns x1 … xd.",
            params: &[
                ParamDoc { name: "n", ty: "integer ≥ 1", default: None, meaning: "number of points" },
                ParamDoc { name: "dim", ty: "integer ≥ 1", default: None, meaning: "dimension d" },
                ParamDoc { name: "beta", ty: "[a, b], both > 0", default: Some("[2, 3]"), meaning: "shape of each coordinate's Beta distribution" },
            ],
            gather: Gather::Nothing,
            build: build::<Sample>,
        },
        KindInfo {
            name: "query.smooth",
            summary: "Answers of random Gaussian-kernel-mixture queries (Huang 2014 eq. 2.1) on a point set (weighted by `weight` when present), for every σ at once. Output: sigma, query, answer.",
            params: QUERY_PARAMS,
            gather: Gather::Nothing,
            build: build::<Answers>,
        },
        KindInfo {
            name: "evaluate.smooth_queries",
            summary: "Worst-case and mean absolute and relative error of a synthetic database (first input) on the queries, against their answers on the original data (second input: query.smooth). One row; the synthesis_* columns of the first input are carried along.",
            params: &[
                ParamDoc { name: "queries", ty: "{count, per_query, seed}", default: None, meaning: "the same query family as the query.smooth stage that made the second input" },
                ParamDoc { name: "sigma", ty: "number > 0", default: None, meaning: "the kernel width σ to score (a σ the second input has)" },
            ],
            gather: Gather::Nothing,
            build: build::<Score>,
        },
    ]
}

const QUERY_PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "queries",
        ty: "{count, per_query, seed}",
        default: None,
        meaning: "how many queries, J kernels per query (thesis: 10), and the seed that fixes them",
    },
    ParamDoc {
        name: "sigmas",
        ty: "list of numbers > 0",
        default: None,
        meaning: "kernel widths σ; one pass over the data serves them all",
    },
];

/// Largest query seed: it is stored in a frame and compared as a float.
const MAX_EXACT_SEED: u64 = 1 << 53;

/// Largest number of kernel centres (queries × J) a stage generates.
const MAX_CENTRES: usize = 10_000_000;

/// The query family: `count` mixtures of `per_query` kernels, fixed by `seed`.
#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct QuerySpec {
    count: usize,
    #[serde(default = "ten")]
    per_query: usize,
    seed: u64,
}

fn ten() -> usize {
    10
}

impl QuerySpec {
    fn validate(&self) -> Result<(), ParamError> {
        // The seed is written into the answers' frame for the scoring stage to check.
        if self.seed > MAX_EXACT_SEED {
            return Err(ParamError::at(
                "queries.seed",
                format!(
                    "seed = {} is invalid: must be ≤ 2^53 = {MAX_EXACT_SEED}",
                    self.seed
                ),
            ));
        }
        if self.count == 0
            || self.per_query == 0
            || self.count.saturating_mul(self.per_query) > MAX_CENTRES
        {
            return Err(ParamError::at(
                "queries",
                format!(
                    "{} queries × {} kernels is invalid: both ≥ 1 and at most {MAX_CENTRES} kernels in all",
                    self.count, self.per_query
                ),
            ));
        }
        Ok(())
    }

    fn generate(&self, dim: usize) -> KernelMixtures {
        let mut rng = Pcg64Mcg::seed_from_u64(self.seed);
        KernelMixtures::random(self.count, self.per_query, dim, &mut rng)
    }
}

fn check_sigma(path: &str, s: f64) -> Result<(), ParamError> {
    if s.is_finite() && s > 0.0 {
        Ok(())
    } else {
        Err(ParamError::at(
            path,
            format!("σ = {s} is invalid: must be a finite number > 0"),
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    n: usize,
    dim: usize,
    #[serde(default = "beta")]
    beta: [f64; 2],
}

fn beta() -> [f64; 2] {
    [2.0, 3.0]
}

/// Largest n × d drawn by `load.sample`.
const MAX_SAMPLE: usize = 50_000_000;

impl Stage for Sample {
    fn validate(&self) -> Result<(), ParamError> {
        if self.n == 0 || self.dim == 0 || self.n.saturating_mul(self.dim) > MAX_SAMPLE {
            return Err(ParamError::at(
                "n",
                format!(
                    "n = {}, dim = {} is invalid: both ≥ 1 and n·d ≤ {MAX_SAMPLE}",
                    self.n, self.dim
                ),
            ));
        }
        if !self.beta.iter().all(|v| v.is_finite() && *v > 0.0) {
            return Err(ParamError::at(
                "beta",
                format!("beta = {:?} is invalid: both shapes must be > 0", self.beta),
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let dist = Beta::new(self.beta[0], self.beta[1])?;
        let mut cols = vec![Vec::with_capacity(self.n); self.dim];
        for _ in 0..self.n {
            for c in &mut cols {
                c.push(2.0 * dist.sample(&mut ctx.rng) - 1.0);
            }
        }
        let mut fb = FrameBuilder::new();
        for (j, c) in cols.into_iter().enumerate() {
            fb = fb.f64(&format!("x{}", j + 1), c);
        }
        Ok(fb.build()?.into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answers {
    queries: QuerySpec,
    sigmas: Vec<f64>,
}

impl Stage for Answers {
    fn validate(&self) -> Result<(), ParamError> {
        self.queries.validate()?;
        if self.sigmas.is_empty() {
            return Err(ParamError::at("sigmas", "list at least one σ"));
        }
        for (i, s) in self.sigmas.iter().enumerate() {
            check_sigma(&format!("sigmas.{i}"), *s)?;
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let set = PointSet::read(ctx.input()?, ctx.axis_names, &ctx.input_names[0])?;
        let mix = self.queries.generate(set.dim());
        let answers = mean_answers(&mix, &set.points, set.weights.as_deref(), &self.sigmas)?;
        let q = self.queries.count;
        let mut sigma = Vec::with_capacity(q * self.sigmas.len());
        let mut query = Vec::with_capacity(sigma.capacity());
        let mut answer = Vec::with_capacity(sigma.capacity());
        for (s, a) in self.sigmas.iter().zip(answers) {
            sigma.extend(std::iter::repeat_n(*s, q));
            query.extend(0..q as i64);
            answer.extend(a);
        }
        // The query family's identity, so the scoring stage can check it uses the same one.
        let rows = sigma.len();
        Ok(FrameBuilder::new()
            .f64("sigma", sigma)
            .i64("query", query)
            .f64("answer", answer)
            .i64("query_dim", vec![set.dim() as i64; rows])
            .i64("query_per_query", vec![self.queries.per_query as i64; rows])
            .i64("query_seed", vec![self.queries.seed as i64; rows])
            .build()?
            .into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Score {
    queries: QuerySpec,
    sigma: f64,
}

impl Stage for Score {
    fn validate(&self) -> Result<(), ParamError> {
        self.queries.validate()?;
        check_sigma("sigma", self.sigma)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let [synthetic, truth] = ctx.inputs else {
            bail!(
                "evaluate.smooth_queries takes two inputs, [synthetic database, query.smooth answers on the original data]; got {}",
                ctx.inputs.len()
            );
        };
        let truth_sigma = f64_col(truth, "sigma")?;
        let truth_query = f64_col(truth, "query")?;
        let truth_answer = f64_col(truth, "answer")?;
        let q = self.queries.count;
        let mut reference = vec![f64::NAN; q];
        let mut found = 0;
        for ((s, i), a) in truth_sigma.iter().zip(&truth_query).zip(&truth_answer) {
            if (s - self.sigma).abs() <= 1e-12 * self.sigma && *i >= 0.0 && (*i as usize) < q {
                reference[*i as usize] = *a;
                found += 1;
            }
        }
        if found != q {
            let mut have: Vec<f64> = truth_sigma.clone();
            have.sort_by(f64::total_cmp);
            have.dedup();
            bail!(
                "the answers `{}` hold {found} of the {q} queries at σ = {} (σ there: {have:?}); give both stages the same `queries` and list this σ in its `sigmas`",
                ctx.input_names[1],
                self.sigma
            );
        }
        let set = PointSet::read(synthetic, ctx.axis_names, &ctx.input_names[0])?;
        let identity = [
            ("query_dim", set.dim() as f64, "data columns"),
            (
                "query_per_query",
                self.queries.per_query as f64,
                "kernels per query",
            ),
            ("query_seed", self.queries.seed as f64, "seed"),
        ];
        for (column, ours, what) in identity {
            let theirs = f64_col(truth, column)?;
            if let Some(t) = theirs.iter().find(|t| **t != ours) {
                bail!(
                    "the answers `{}` were made with {what} = {t}, this stage has {ours}: the two stages must answer the same queries on data of the same dimension",
                    ctx.input_names[1]
                );
            }
        }
        let mix = self.queries.generate(set.dim());
        let ours = mean_answers(&mix, &set.points, set.weights.as_deref(), &[self.sigma])?
            .pop()
            .unwrap_or_default();
        let (mut max_abs, mut max_rel, mut sum_abs) = (0.0f64, 0.0f64, 0.0);
        for (o, t) in ours.iter().zip(&reference) {
            let e = (o - t).abs();
            max_abs = max_abs.max(e);
            max_rel = max_rel.max(e / t.abs());
            sum_abs += e;
        }
        let mut fb = FrameBuilder::new()
            .f64("sigma", vec![self.sigma])
            .i64("queries", vec![q as i64])
            .f64("max_abs_error", vec![max_abs])
            .f64("max_rel_error", vec![max_rel])
            .f64("mean_abs_error", vec![sum_abs / q as f64]);
        for c in synthetic.columns() {
            let name = c.name().as_str();
            if name.starts_with(DIAGNOSTIC_PREFIX) {
                fb = fb.f64(
                    name,
                    vec![f64_col(synthetic, name)?
                        .first()
                        .copied()
                        .unwrap_or(f64::NAN)],
                );
            }
        }
        Ok(fb.build()?.into())
    }
}
