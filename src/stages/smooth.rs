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
use super::{
    build, check_size_at, check_size_run, product, Ctx, Gather, KindInfo, Limit, Output, ParamDoc,
    ParamError, Params, Stage,
};
use crate::mech::trig::kernel::{mean_answers, KernelMixtures};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "load.sample",
            version: 1,
            random: true,
            summary: "n points in [−1, 1]^d, each coordinate 2·B − 1 with B ~ Beta(a, b) independently: a smooth density for rate experiments. Columns x1 … xd.",
            params: Params::Doc(&[
                ParamDoc { name: "n", ty: "integer ≥ 1", default: None, meaning: "number of points" },
                ParamDoc { name: "dim", ty: "integer ≥ 1", default: None, meaning: "dimension d" },
                ParamDoc { name: "beta", ty: "[a, b], both > 0", default: Some("[2, 3]"), meaning: "shape of each coordinate's Beta distribution" },
            ]),
            gather: Gather::Nothing,
            build: build::<Sample>,
        },
        KindInfo {
            name: "query.smooth",
            version: 1,
            random: false,
            summary: "Answers of random Gaussian-kernel-mixture queries (Huang 2014 eq. 2.1) on a point set (weighted by `weight` when present), for every σ at once. Output: sigma, query, answer.",
            params: Params::Doc(QUERY_PARAMS),
            gather: Gather::Nothing,
            build: build::<Answers>,
        },
        KindInfo {
            name: "evaluate.smooth_queries",
            version: 1,
            random: false,
            summary: "Worst-case and mean absolute and relative error of a synthetic database (first input) on the queries, against their answers on the original data (second input: query.smooth). One row; the synthesis_* columns of the first input are carried along.",
            params: Params::Doc(&[
                ParamDoc { name: "queries", ty: "{count, per_query, seed}", default: None, meaning: "the same query family as the query.smooth stage that made the second input" },
                ParamDoc { name: "sigma", ty: "number > 0", default: None, meaning: "the kernel width σ to score (a σ the second input has)" },
            ]),
            gather: Gather::Nothing,
            build: build::<Score>,
        },
        verdict_kind(),
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
        if self.count == 0 || self.per_query == 0 {
            return Err(ParamError::at(
                "queries",
                format!(
                    "{} queries × {} kernels is invalid: both must be ≥ 1",
                    self.count, self.per_query
                ),
            ));
        }
        check_size_at(
            "queries",
            Limit::Cells,
            &format!("queries × kernels ({} × {})", self.count, self.per_query),
            product(&[self.count as u64, self.per_query as u64]),
        )
    }

    /// The family in `dim` dimensions (its size, known only now, checked first).
    fn generate(&self, dim: usize) -> Result<KernelMixtures> {
        check_size_run(
            Limit::Cells,
            &format!(
                "queries × kernels × dimensions ({} × {} × {dim}) kernel coordinates",
                self.count, self.per_query
            ),
            product(&[self.count as u64, self.per_query as u64, dim as u64]),
        )?;
        let mut rng = Pcg64Mcg::seed_from_u64(self.seed);
        Ok(KernelMixtures::random(
            self.count,
            self.per_query,
            dim,
            &mut rng,
        ))
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

impl Stage for Sample {
    fn validate(&self) -> Result<(), ParamError> {
        if self.n == 0 || self.dim == 0 {
            return Err(ParamError::at(
                "n",
                format!(
                    "n = {}, dim = {} is invalid: both must be ≥ 1",
                    self.n, self.dim
                ),
            ));
        }
        check_size_at(
            "n",
            Limit::Cells,
            &format!("n × dim ({} × {}) coordinates", self.n, self.dim),
            product(&[self.n as u64, self.dim as u64]),
        )?;
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
        super::distinct("sigmas", &self.sigmas)?;
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
        let mix = self.queries.generate(set.dim())?;
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
        let mix = self.queries.generate(set.dim())?;
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

// ---------------------------------------------------------------------------------------------
// report.verdict: the thesis's cells beside ours, with the partial-noise runs and a verdict.

/// The verdict kind, registered through [`kinds`] (this module owns the smooth-query tables).
pub fn verdict_kind() -> KindInfo {
    KindInfo {
        name: "report.verdict",
        version: 1,
        random: false,
        summary: "A paper's table cell by cell beside our private runs, partial-noise runs and a no-noise floor, with a verdict per cell by a stated rule (within our 95% interval; explained by a stated cause; unexplained). Input: aggregate.summary rows with a variant column. Output `cells` (one row per paper cell, Markdown in the paper's layout) or `long` (for plot.lines).",
        params: Params::Doc(&[
            ParamDoc { name: "title", ty: "string", default: None, meaning: "heading of the Markdown table" },
            ParamDoc { name: "paper", ty: "path", default: None, meaning: "CSV of the paper's cells: the key columns, `mean` (judged values) and `max` (side-by-side values), relative to the pipeline file" },
            ParamDoc { name: "variant", ty: "string", default: Some("variant"), meaning: "column of the input naming the run (private reading, partial-noise run, floor)" },
            ParamDoc { name: "ours", ty: "list of strings", default: None, meaning: "variants that are the private mechanism (each reading); the first is the headline" },
            ParamDoc { name: "floor", ty: "string", default: None, meaning: "the variant of the grid floor (no noise at all)" },
            ParamDoc { name: "causes", ty: "list of strings", default: Some("[]"), meaning: "variants with part of the privacy removed or changed, each a stated cause when the paper's value falls in its 95% interval" },
            ParamDoc { name: "judged", ty: "list of strings", default: None, meaning: "the `value`s that get a verdict (e.g. max_abs_error, max_rel_error)" },
            ParamDoc { name: "side_by_side", ty: "list of strings", default: Some("[]"), meaning: "`value`s shown beside the paper's `max` without a verdict (e.g. synthesis_seconds)" },
            ParamDoc { name: "grid", ty: "string", default: Some("—"), meaning: "the `value` holding the grid size N (shown with the floor)" },
            ParamDoc { name: "floor_slack", ty: "number in [0, 1)", default: Some("0.1"), meaning: "the floor is not a strict bound (an LP fit can land a little below the snapped data): a paper value counts as below it only under (1 − slack)·floor, and as at it when it meets [(1 − slack)·floor, floor]" },
            ParamDoc { name: "printed_digits", ty: "integer in [0, 12]", default: Some("3"), meaning: "decimals the paper prints: its value stands for the interval ± half a unit of the last digit" },
            ParamDoc { name: "output", ty: "cells | long", default: Some("cells"), meaning: "one row per paper cell with the verdict, or long rows (panel, sigma, series, mean, lo, hi) for a figure" },
            ParamDoc { name: "notes", ty: "string", default: Some("—"), meaning: "text printed under the table" },
        ]),
        gather: Gather::All,
        build: build::<Verdict>,
    }
}

#[derive(Deserialize, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum VerdictOutput {
    #[default]
    Cells,
    Long,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Verdict {
    title: String,
    paper: std::path::PathBuf,
    #[serde(default = "variant_col")]
    variant: String,
    ours: Vec<String>,
    floor: String,
    #[serde(default)]
    causes: Vec<String>,
    judged: Vec<String>,
    #[serde(default)]
    side_by_side: Vec<String>,
    #[serde(default)]
    grid: Option<String>,
    #[serde(default = "slack")]
    floor_slack: f64,
    #[serde(default = "three")]
    printed_digits: u32,
    #[serde(default)]
    output: VerdictOutput,
    #[serde(default)]
    notes: Option<String>,
}

fn variant_col() -> String {
    "variant".into()
}

fn three() -> u32 {
    3
}

fn slack() -> f64 {
    0.1
}

/// One summarised run of one cell: mean and 95% interval (NaN when there is one repetition).
#[derive(Clone, Copy)]
struct Cell {
    mean: f64,
    lo: f64,
    hi: f64,
    max: f64,
}

/// The verdict of one paper cell (see [`judge`]).
#[derive(Debug, PartialEq)]
struct Judgement {
    verdict: &'static str,
    cause: String,
}

/// The rule, applied to the paper's value `p` printed to `h` (half a unit of its last digit),
/// so that it stands for `T = [p − h, p + h]`:
/// 1. **within**: `T` meets the 95% interval of one of our private readings (named in order);
/// 2. **explained**, the first that applies: (a) `T` lies wholly below `(1 − slack)·floor`,
///    the floor being the error of the snapped data with no noise — the LP's target, so the
///    algorithm as printed does not get far below it (the slack allows for fits that land a
///    little below); (b) `T` meets `[(1 − slack)·floor, floor]`: the paper's value is what
///    snapping alone costs; (c) `T` meets the 95% interval of a run with part of the
///    privacy removed or changed (the cause is that run);
/// 3. **unexplained** otherwise, saying whether the paper is above or below our runs.
fn judge(
    p: f64,
    h: f64,
    ours: &[(String, Cell)],
    floor: Option<f64>,
    slack: f64,
    causes: &[(String, Cell)],
) -> Judgement {
    let meets = |c: &Cell| {
        let (lo, hi) = if c.lo.is_finite() && c.hi.is_finite() {
            (c.lo, c.hi)
        } else {
            (c.mean, c.mean)
        };
        p - h <= hi && lo <= p + h
    };
    let hits: Vec<&str> = ours
        .iter()
        .filter(|(_, c)| meets(c))
        .map(|(l, _)| l.as_str())
        .collect();
    if !hits.is_empty() {
        return Judgement {
            verdict: "within",
            cause: format!("inside the 95% interval of {}", hits.join(", ")),
        };
    }
    if let Some(f) = floor.filter(|f| f.is_finite()) {
        if p + h < (1.0 - slack) * f {
            return Judgement {
                verdict: "explained",
                cause: format!(
                    "below the grid floor {}: snapping to A^d alone costs more, so not reachable as printed",
                    short(f)
                ),
            };
        }
        if p - h <= f {
            return Judgement {
                verdict: "explained",
                cause: format!(
                    "at the grid floor {}: what snapping alone costs, with no noise and a perfect fit",
                    short(f)
                ),
            };
        }
    }
    if let Some((l, _)) = causes.iter().find(|(_, c)| meets(c)) {
        return Judgement {
            verdict: "explained",
            cause: format!("inside the 95% interval of {l}"),
        };
    }
    let all: Vec<f64> = ours
        .iter()
        .chain(causes)
        .map(|(_, c)| c.mean)
        .chain(floor)
        .filter(|v| v.is_finite())
        .collect();
    let lowest = all.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let cause = if p - h > highest {
        "above every run of ours".to_string()
    } else if p + h < lowest {
        "below every run of ours".to_string()
    } else {
        "between our runs, inside none of their intervals".to_string()
    };
    Judgement {
        verdict: "unexplained",
        cause,
    }
}

/// Three significant digits for messages.
fn short(x: f64) -> String {
    if x.is_nan() {
        return "—".into();
    }
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (2 - x.abs().log10().floor() as i32).clamp(0, 12) as usize;
    format!("{x:.decimals$}")
}

impl Stage for Verdict {
    fn files(&self) -> Vec<(&'static str, &std::path::Path)> {
        vec![("paper", self.paper.as_path())]
    }

    fn validate(&self) -> Result<(), ParamError> {
        if self.ours.is_empty() {
            return Err(ParamError::at("ours", "name at least one private variant"));
        }
        if self.judged.is_empty() {
            return Err(ParamError::at("judged", "name at least one value to judge"));
        }
        if !(0.0..1.0).contains(&self.floor_slack) {
            return Err(ParamError::at(
                "floor_slack",
                format!(
                    "floor_slack = {} is invalid: must be in [0, 1)",
                    self.floor_slack
                ),
            ));
        }
        if self.printed_digits > 12 {
            return Err(ParamError::at(
                "printed_digits",
                format!(
                    "printed_digits = {} is invalid: must be in [0, 12]",
                    self.printed_digits
                ),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, l) in self.ours.iter().chain(&self.causes).enumerate() {
            if !seen.insert(l) || *l == self.floor {
                return Err(ParamError::at(
                    if i < self.ours.len() {
                        "ours"
                    } else {
                        "causes"
                    },
                    format!("the variant `{l}` is named twice"),
                ));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        use polars::prelude::DataFrame;
        use std::collections::BTreeMap;
        let frames: Vec<&DataFrame> = ctx.inputs.iter().collect();
        let df = crate::frames::concat(&frames)?;
        let (src, var, val) = (
            super::frame::str_col(&df, "source")?,
            super::frame::str_col(&df, &self.variant)?,
            super::frame::str_col(&df, "value")?,
        );
        let sigma = f64_col(&df, "sigma")?;
        let [mean, lo, hi, max] =
            ["mean", "ci_lo", "ci_hi", "max"].map(|c| super::frame::f64_col_or_nan(&df, c));
        let (mean, lo, hi, max) = (mean?, lo?, hi?, max?);
        // (source, value, σ in thousandths, variant) → cell. σ keys are exact for the
        // printed widths, and the BTreeMap makes every output order deterministic.
        let key = |s: f64| (s * 1000.0).round() as i64;
        let mut cells: BTreeMap<(String, String, i64, String), Cell> = BTreeMap::new();
        for r in 0..df.height() {
            cells.insert(
                (
                    src[r].clone(),
                    val[r].clone(),
                    key(sigma[r]),
                    var[r].clone(),
                ),
                Cell {
                    mean: mean[r],
                    lo: lo[r],
                    hi: hi[r],
                    max: max[r],
                },
            );
        }
        let pdf = super::frame::read_csv(ctx.file(&self.paper)?).map_err(|e| {
            anyhow::anyhow!("reading the paper's table {}: {e}", self.paper.display())
        })?;
        let (psrc, pval, psig) = (
            super::frame::str_col(&pdf, "source")?,
            super::frame::str_col(&pdf, "value")?,
            f64_col(&pdf, "sigma")?,
        );
        let (pmean, pmax) = (
            super::frame::f64_col_or_nan(&pdf, "mean")?,
            super::frame::f64_col_or_nan(&pdf, "max")?,
        );
        let h = 0.5 * 10f64.powi(-(self.printed_digits as i32));
        let get = |s: &str, v: &str, sg: i64, variant: &str| {
            cells
                .get(&(s.to_string(), v.to_string(), sg, variant.to_string()))
                .copied()
        };
        let labels: Vec<&String> = self.ours.iter().chain(&self.causes).collect();
        let mut rows = VerdictRows::default();
        for pr in 0..pdf.height() {
            let (s, v, sg) = (&psrc[pr], &pval[pr], key(psig[pr]));
            let judged = self.judged.contains(v);
            if !judged && !self.side_by_side.contains(v) {
                continue;
            }
            let have = labels.iter().any(|l| get(s, v, sg, l).is_some());
            let runs: Vec<Option<Cell>> = labels.iter().map(|l| get(s, v, sg, l)).collect();
            let floor = get(s, v, sg, &self.floor).map(|c| c.mean);
            let grid = self
                .grid
                .as_ref()
                .and_then(|g| get(s, g, sg, &self.floor))
                .map(|c| c.mean);
            let paper = if judged { pmean[pr] } else { pmax[pr] };
            let (verdict, cause) = if !have {
                let any = cells.keys().any(|(cs, ..)| cs == s);
                if any {
                    ("not run", "σ not in this run's axes".to_string())
                } else {
                    ("no data", "dataset not on this machine".to_string())
                }
            } else if !judged {
                ("side by side", "not compared as a difference".to_string())
            } else if !paper.is_finite() {
                ("no paper value", String::new())
            } else {
                let named = |range: std::ops::Range<usize>| -> Vec<(String, Cell)> {
                    range
                        .filter_map(|i| runs[i].map(|c| (labels[i].clone(), c)))
                        .collect()
                };
                let j = judge(
                    paper,
                    h,
                    &named(0..self.ours.len()),
                    floor,
                    self.floor_slack,
                    &named(self.ours.len()..labels.len()),
                );
                (j.verdict, j.cause)
            };
            rows.push(
                s, v, psig[pr], paper, &runs, judged, floor, grid, verdict, cause,
            );
        }
        match self.output {
            VerdictOutput::Cells => {
                let md = verdict_markdown(&rows, &labels, h, &self.title, self.notes.as_deref());
                let frame = rows.frame(&labels)?;
                Ok(Output {
                    frame,
                    artifacts: vec![super::Artifact {
                        ext: "md",
                        bytes: md.into_bytes(),
                    }],
                })
            }
            VerdictOutput::Long => Ok(rows.long(&labels, &self.floor)?.into()),
        }
    }
}

/// The cells of a verdict table, column by column.
#[derive(Default)]
struct VerdictRows {
    source: Vec<String>,
    value: Vec<String>,
    sigma: Vec<f64>,
    paper: Vec<f64>,
    runs: Vec<Vec<Option<Cell>>>,
    judged: Vec<bool>,
    floor: Vec<f64>,
    grid: Vec<f64>,
    verdict: Vec<String>,
    cause: Vec<String>,
}

impl VerdictRows {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        s: &str,
        v: &str,
        sigma: f64,
        paper: f64,
        runs: &[Option<Cell>],
        judged: bool,
        floor: Option<f64>,
        grid: Option<f64>,
        verdict: &str,
        cause: String,
    ) {
        self.source.push(s.into());
        self.value.push(v.into());
        self.sigma.push(sigma);
        self.paper.push(paper);
        self.runs.push(runs.to_vec());
        self.judged.push(judged);
        self.floor.push(floor.unwrap_or(f64::NAN));
        self.grid.push(grid.unwrap_or(f64::NAN));
        self.verdict.push(verdict.into());
        self.cause.push(cause);
    }

    /// One row per paper cell: for a judged value each run's mean and interval, for a
    /// side-by-side value each run's worst case (`max`).
    fn frame(&self, labels: &[&String]) -> Result<polars::prelude::DataFrame> {
        let mut fb = FrameBuilder::new()
            .str("source", self.source.clone())
            .str("value", self.value.clone())
            .f64("sigma", self.sigma.clone())
            .f64("paper", self.paper.clone());
        for (i, l) in labels.iter().enumerate() {
            let pick = |f: fn(&Cell) -> f64, judged_only: bool| -> Vec<f64> {
                self.runs
                    .iter()
                    .zip(&self.judged)
                    .map(|(r, &j)| match r[i] {
                        Some(c) if j => f(&c),
                        Some(c) if !judged_only => c.max,
                        _ => f64::NAN,
                    })
                    .collect()
            };
            fb = fb
                .f64(l, pick(|c| c.mean, false))
                .f64(&format!("{l}_lo"), pick(|c| c.lo, true))
                .f64(&format!("{l}_hi"), pick(|c| c.hi, true));
        }
        fb.f64("floor", self.floor.clone())
            .f64("grid", self.grid.clone())
            .str("verdict", self.verdict.clone())
            .str("cause", self.cause.clone())
            .build()
    }

    /// Long rows for a figure: one per (panel = source · value, σ, series), the paper's value
    /// as the series `paper`, the floor as `floor`.
    fn long(&self, labels: &[&String], floor: &str) -> Result<polars::prelude::DataFrame> {
        let (mut panel, mut sigma, mut series) = (Vec::new(), Vec::new(), Vec::new());
        let (mut mean, mut lo, mut hi) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..self.source.len() {
            if !self.judged[r] {
                continue;
            }
            let p = format!("{} · {}", self.source[r], self.value[r]);
            let mut add = |s: &str, c: Cell| {
                panel.push(p.clone());
                sigma.push(self.sigma[r]);
                series.push(s.to_string());
                mean.push(c.mean);
                lo.push(c.lo);
                hi.push(c.hi);
            };
            let point = |x: f64| Cell {
                mean: x,
                lo: f64::NAN,
                hi: f64::NAN,
                max: x,
            };
            add("paper", point(self.paper[r]));
            add(floor, point(self.floor[r]));
            for (i, l) in labels.iter().enumerate() {
                if let Some(c) = self.runs[r][i] {
                    add(l, c);
                }
            }
        }
        FrameBuilder::new()
            .str("panel", panel)
            .f64("sigma", sigma)
            .str("series", series)
            .f64("mean", mean)
            .f64("ci_lo", lo)
            .f64("ci_hi", hi)
            .build()
    }
}

/// The paper's layout: per dataset and error type, one line per run with a column per σ,
/// then the floor and the verdicts; side-by-side values (times) in a last column.
fn verdict_markdown(
    rows: &VerdictRows,
    labels: &[&String],
    h: f64,
    title: &str,
    notes: Option<&str>,
) -> String {
    use std::fmt::Write as _;
    let mut sigmas: Vec<f64> = rows.sigma.clone();
    sigmas.sort_by(f64::total_cmp);
    sigmas.dedup();
    let mut s = format!("## {title}\n\n| dataset | value | row |");
    for sg in &sigmas {
        let _ = write!(s, " σ = {sg} |");
    }
    s.push_str(" worst time (s) |\n|---|---|---|");
    for _ in &sigmas {
        s.push_str("---|");
    }
    s.push_str("---|\n");
    let mut sources: Vec<&String> = Vec::new();
    for x in &rows.source {
        if !sources.contains(&x) {
            sources.push(x);
        }
    }
    let find = |src: &str, val: &str, sg: f64| {
        (0..rows.source.len())
            .find(|&r| rows.source[r] == src && rows.value[r] == val && rows.sigma[r] == sg)
    };
    for src in sources {
        // The side-by-side value (time): the paper's and our worst over σ, per run.
        let times: Vec<usize> = (0..rows.source.len())
            .filter(|&r| rows.source[r] == *src && !rows.judged[r])
            .collect();
        let time_cell = |line: &str| -> String {
            match line {
                "paper" => times
                    .first()
                    .map(|&r| short(rows.paper[r]))
                    .unwrap_or_default(),
                _ => {
                    let Some(i) = labels.iter().position(|l| l.as_str() == line) else {
                        return String::new();
                    };
                    let worst = times
                        .iter()
                        .filter_map(|&r| rows.runs[r][i].map(|c| c.max))
                        .fold(f64::NAN, f64::max);
                    if worst.is_finite() {
                        short(worst)
                    } else {
                        String::new()
                    }
                }
            }
        };
        let mut values: Vec<&String> = Vec::new();
        for r in 0..rows.source.len() {
            if rows.source[r] == *src && rows.judged[r] && !values.contains(&&rows.value[r]) {
                values.push(&rows.value[r]);
            }
        }
        for val in values {
            let mut line = |name: &str, cell: &dyn Fn(usize) -> String, time: String| {
                let _ = write!(s, "| {src} | {val} | {name} |");
                for sg in &sigmas {
                    let c = find(src, val, *sg).map(cell).unwrap_or_default();
                    let _ = write!(s, " {c} |");
                }
                let _ = writeln!(s, " {time} |");
            };
            line("paper", &|r| short(rows.paper[r]), time_cell("paper"));
            for (i, l) in labels.iter().enumerate() {
                line(
                    l,
                    &|r| match rows.runs[r][i] {
                        Some(c) if c.lo.is_finite() => {
                            format!("{} [{}, {}]", short(c.mean), short(c.lo), short(c.hi))
                        }
                        Some(c) => short(c.mean),
                        None => "—".into(),
                    },
                    time_cell(l),
                );
            }
            line(
                "grid floor (N)",
                &|r| {
                    if rows.grid[r].is_finite() {
                        format!("{} (N = {})", short(rows.floor[r]), rows.grid[r])
                    } else {
                        short(rows.floor[r])
                    }
                },
                String::new(),
            );
            line(
                "verdict",
                &|r| format!("**{}**: {}", rows.verdict[r], rows.cause[r]),
                String::new(),
            );
        }
    }
    let count = |v: &str| rows.verdict.iter().filter(|x| x.as_str() == v).count();
    let _ = writeln!(
        s,
        "\nVerdicts: {} within, {} explained, {} unexplained, {} without our data, {} not run.",
        count("within"),
        count("explained"),
        count("unexplained"),
        count("no data"),
        count("not run")
    );
    // How close each run is to the paper over all judged cells: how many of the paper's values
    // fall in its interval, and the median and range of ours/paper.
    let _ = writeln!(
        s,
        "\n| run | paper inside its 95% interval | median ours / paper | range of ours / paper |\n|---|---|---|---|"
    );
    for (i, l) in labels.iter().enumerate() {
        let mut ratios = Vec::new();
        let mut inside = 0;
        for r in 0..rows.source.len() {
            let (Some(c), true) = (rows.runs[r][i], rows.judged[r]) else {
                continue;
            };
            let p = rows.paper[r];
            if !(p.is_finite() && c.mean.is_finite()) {
                continue;
            }
            if p > 0.0 {
                ratios.push(c.mean / p);
            }
            if c.lo.is_finite() && p - h <= c.hi && c.lo <= p + h {
                inside += 1;
            }
        }
        if ratios.is_empty() {
            continue;
        }
        ratios.sort_by(f64::total_cmp);
        let median = crate::mech::stats::quantile_sorted(&ratios, 0.5);
        let _ = writeln!(
            s,
            "| {l} | {inside} of {} | {} | {} – {} |",
            ratios.len(),
            short(median),
            short(ratios[0]),
            short(ratios[ratios.len() - 1])
        );
    }
    if let Some(n) = notes {
        let _ = write!(s, "\n{}\n", n.trim());
    }
    s
}

#[cfg(test)]
mod verdict_tests {
    use super::*;

    fn cell(mean: f64, lo: f64, hi: f64) -> Cell {
        Cell {
            mean,
            lo,
            hi,
            max: hi,
        }
    }

    #[test]
    fn the_rule_in_order() {
        let ours = vec![("text".to_string(), cell(0.10, 0.09, 0.11))];
        let causes = vec![("no_noise".to_string(), cell(0.03, 0.028, 0.032))];
        // 0.1105 ± 0.0005 meets [0.09, 0.11].
        assert_eq!(
            judge(0.1105, 5e-4, &ours, Some(0.01), 0.1, &causes).verdict,
            "within"
        );
        // Below the floor, even though the cause's interval would not contain it.
        let j = judge(0.005, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert_eq!(j.verdict, "explained");
        assert!(j.cause.contains("below the grid floor"), "{}", j.cause);
        // At the floor (0.0102 ± 0.0005 meets [0.009, 0.01]), and a little under it.
        let j = judge(0.0102, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert!(j.cause.contains("at the grid floor"), "{}", j.cause);
        let j = judge(0.0093, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert!(j.cause.contains("at the grid floor"), "{}", j.cause);
        // Inside a partial-noise run's interval.
        let j = judge(0.03, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert_eq!(
            (j.verdict, j.cause.contains("no_noise")),
            ("explained", true)
        );
        // Nothing fits.
        let j = judge(0.5, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert_eq!(j.verdict, "unexplained");
        assert!(j.cause.contains("above"));
        let j = judge(0.06, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert!(j.cause.contains("between"));
        // A run with one repetition (no interval) counts by its mean.
        let single = vec![("one".to_string(), cell(0.2, f64::NAN, f64::NAN))];
        assert_eq!(
            judge(0.2004, 5e-4, &single, None, 0.1, &[]).verdict,
            "within"
        );
    }
}
