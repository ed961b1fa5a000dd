//! Linear mixtures of Gaussian kernels: the smooth queries of Huang (2014), §2, eq. (2.1),
//!
//! f(x) = Σ_{j=1..J} α_j exp(−‖x − x_j‖² / (2σ²)),   x ∈ [−1, 1]^d,
//!
//! with centres x_j ~ U[−1, 1]^d and weights α uniform on the simplex (α ≥ 0, Σ α_j = 1), as
//! in the thesis's experiments (§3, J = 10, σ ∈ {2, 4, 6, 8, 10}). By Proposition 2.2, ‖α‖₁ ≤ 1
//! gives ‖f‖_K ≤ 1 for every K ≤ σ², where ‖f‖_K is the largest |D^k f| over [−1, 1]^d and
//! ‖k‖₁ ≤ K: each query is (K, 1)-smooth, the class the trigonometric mechanism answers. The
//! answer of f on a dataset D is q_f(D) = (1/n) Σ_{x∈D} f(x); on a synthetic database (points
//! a_i with probabilities u_i) it is Σ_i u_i f(a_i).
//!
//! # Evaluation
//! An experiment asks 10⁴ queries (10⁵ centres) on up to 10⁵ points, for five bandwidths: up to
//! 5·10¹⁰ kernel values. [`mean_answers`] therefore
//! - writes ‖x − c‖² = ‖x‖² + ‖c‖² − 2 x·c, so the distances of a block of points to a block of
//!   centres are one small matrix product (2d flops per pair instead of 3d).
//!   The product is a small register-blocked kernel (4 points × 8 centres, one fused
//!   multiply-add per coordinate and pair) rather than a BLAS call: for d ≤ ~100 it keeps the
//!   FMA units busy, and its bits do not depend on the CPU (a fused multiply-add rounds once,
//!   in hardware or in software). The centres it reads are laid out for
//!   it once, with the family ([`KernelMixtures`] keeps them as panels of 8, doubled, with
//!   their norms), not per call: scoring a synthetic database of ten points is otherwise
//!   mostly that copy (blocks of queries therefore start on a panel);
//! - computes each block of distances once and reuses it for every σ of the sweep: the
//!   distances do not depend on σ, the exponentials do;
//! - takes an exponential only for bandwidths that are no power of another (see "Several
//!   bandwidths at once" below): for σ ∈ {2, 4, 6, 8, 10}, 3 exponentials and 4 multiplies
//!   per kernel value instead of 5 exponentials;
//! - takes the exponential with [`exp_kernel`](fastmath::exp_kernel), a branch-free polynomial
//!   with fused multiply-adds that vectorises (within 1.4·10⁻¹⁴ relative, proof in its doc:
//!   since issue #39 the answers need 10⁻¹² absolute, not the last bits, and its Taylor
//!   polynomial is of degree 11 instead of [`exp_normal`](fastmath::exp_normal)'s 13),
//!   sixteen values side by side ([`exp_kernel_lanes`]: independent chains the CPU overlaps,
//!   where one value at a time leaves it waiting on each chain's latency), and compiles the
//!   whole inner loop three times, for AVX-512, for AVX2 + FMA (chosen at run time) and for the
//!   baseline instruction set (its fused multiply-adds by the software `fma`, correctly rounded
//!   like the instruction): all give the same bits (the AVX-512 copy takes the distances 8
//!   points at a time instead of 4, which changes which are computed together, not how).
//!
//! Wide bandwidths in low dimensions do not take the direct sum at all: their answers come
//! from moments of the points by the Taylor series of the kernel (`kernel/taylor.rs`, which
//! says when, how accurately and at what cost), when a rule that reads only the sizes, norms
//! and σ finds the series cheaper (CSN's σ = 6, 8, 10 in the thesis's tables). The other
//! bandwidths of the call take the direct sum as below.
//!
//! # Several bandwidths at once
//! With s = −1/(2σ²), e^{k·s·d} = (e^{s·d})^k. `plan_steps` orders the bandwidths from the
//! widest (smallest |s|) and gives a bandwidth whose scale is exactly k times the scale of an
//! earlier one (k an integer, k·s_b == s_a in floating point, so the argument is the same as
//! the direct one's up to its own rounding) the k-th power of that one's values, by repeated
//! squaring (`pow_lanes`), as long as the power relative to the underlying exponential stays
//! ≤ [`MAX_POWER`] = 16; all other bandwidths take an exponential. The rule depends on the
//! scales only (the same plan for every block, thread and CPU). For σ ∈ {2, 4, 6, 8, 10}:
//! σ = 4 from σ = 8 (k = 4, two squarings), σ = 2 from σ = 4 (two more,
//! 16 in all relative to σ = 8's exponential); 6 and 10 take exponentials.
//!
//! Error bound: the exponential is within δ = 1.4·10⁻¹⁴ relative; its k-th power by
//! multiplies is within k·δ of the exact power of the exponential's argument, plus k − 1
//! roundings of 2⁻⁵³ each: ≤ 16δ + 15·2⁻⁵³ < 2.3·10⁻¹³ relative at k = 16, beyond the rounding
//! of the argument s·d itself (|s·d|·2⁻⁵³ relative, which the direct exponential has as well).
//! Kernel values are ≤ 1, so that is also their absolute error, and an answer (Σ|α| ≤ 1) is
//! within 2.3·10⁻¹³ + its summation's roundings of the exact one: within the 10⁻¹² absolute of
//! issue #39. Arguments below −708 give e⁻⁷⁰⁸ ≈ 3.3·10⁻³⁰⁸ from the exponential (and less or 0
//! from a power): an absolute difference under 3.4·10⁻³⁰⁸. The tests check the bound value
//! by value against f64::exp (k = 1 … 16), and whole answers against single-bandwidth calls
//! and the naive double loop (within 10⁻¹² absolute, d = 1 … 101).
//!
//! Distances from the expanded form carry an absolute rounding error of a few ulp of
//! ‖x‖² + ‖c‖² (≤ 2d), so kernel values have a relative error of about 2d·ε/(2σ²)·few,
//! below 10⁻¹³ for the sizes used here; negative rounding residues are clamped to 0.
//!
//! # Two evaluations
//! Points snapped to a grid have few distinct values per coordinate, and for them the kernel,
//! a product over the coordinates, is cheaper factored (`kernel/factored.rs`). [`mean_answers`]
//! takes the cheaper of the two by a cost rule that reads the points and the bandwidths only,
//! never the CPU or the thread count, so a call gives the same bits everywhere
//! (`kernel/choice.rs`: the rule, its constants and the times they come from).
//!
//! # Determinism
//! Threads share the work by blocks of whole queries. Every number a query's answer is made of
//! is computed the same way whichever block holds it: each distance by its own sum over the
//! coordinates in order, each centre's kernel sum over the points in order, in fixed blocks of
//! points whose partial sums are added in order. No sum crosses a block, so answers are
//! bit-identical for any number of threads and any block size (which therefore may follow the
//! thread count), and also with or without AVX2 or AVX-512. A bandwidth's values depend on which other
//! bandwidths are asked for in the same call (an exponential alone, possibly a power with a
//! wider one), by at most the bound above. Memory per block is about (3·#σ + 8)·256 values
//! besides the inputs, the points laid out in strips once per call, and the family, which holds
//! its centres once, laid out for the kernel. The factored evaluation keeps the same promises
//! (its doc says how), with 16·Σ_k |V_k| table values per block (1 MB for the CSN floor) and
//! its trie, laid out once per call.

use crate::mech::fastmath::{self, exp_kernel_lanes, per_isa};
#[cfg(test)]
use crate::mech::fastmath::{exp_kernel, exp_normal};
use rand::Rng;
use rand_distr::{Distribution, Exp1};
use rayon::prelude::*;

/// Invalid input to [`KernelMixtures::new`] or [`mean_answers`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    #[error("the dimension must be at least 1")]
    ZeroDimension,
    #[error("{what} has {len} values, expected {expected}")]
    Length {
        what: &'static str,
        len: usize,
        expected: usize,
    },
    #[error("{len} {what} values do not split into rows of {width}")]
    Shape {
        what: &'static str,
        len: usize,
        width: usize,
    },
    #[error("no points to average over")]
    NoPoints,
    #[error("{what} {index} is not finite (or its squared norm overflows)")]
    NonFinite { what: &'static str, index: usize },
    #[error("bandwidth σ = {0} must be positive and finite, with 1/σ² finite")]
    Bandwidth(f64),
}

/// A family of queries of the form (2.1), all with the same number of centres J (`per_query`).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelMixtures {
    dim: usize,
    per_query: usize,
    /// queries × J, row-major.
    weights: Vec<f64>,
    /// The centres (query q owns centres q·J .. (q+1)·J) as the distance micro-kernel reads
    /// them: panels of LANES consecutive centres (the last zero-padded), each dim × LANES
    /// (coordinate k of the LANES centres side by side), doubled (exact, so the product gives
    /// 2x·c); the only copy kept ([`KernelMixtures::centres`] derives the rows from it). Laid
    /// out once with the family: done per call, the copy cost more than scoring a small
    /// synthetic database on it (10⁶ centre coordinates against ten points in
    /// `evaluate.smooth_queries`).
    panels: Vec<f64>,
    /// ‖x_j‖² of every centre, computed once with the family (a dependent chain of d adds per
    /// centre, too much again to repeat per call for a small database), zero-padded like the
    /// panels so that a block reads its panels' norms in place.
    centre_norms: Vec<f64>,
}

impl KernelMixtures {
    /// `queries` random queries as in the thesis's experiments: centres uniform on [−1, 1]^dim,
    /// weights uniform on the simplex (normalised Exp(1) draws, i.e. Dirichlet(1, …, 1)).
    /// Deterministic given the generator's state; the draws are made query by query, so the
    /// first q queries do not depend on how many more are asked for.
    pub fn random(queries: usize, per_query: usize, dim: usize, rng: &mut impl Rng) -> Self {
        let mut centres = Vec::with_capacity(queries * per_query * dim);
        let mut weights = Vec::with_capacity(queries * per_query);
        for _ in 0..queries {
            centres.extend((0..per_query * dim).map(|_| rng.random_range(-1.0..=1.0)));
            let row: Vec<f64> = (0..per_query).map(|_| Exp1.sample(rng)).collect();
            let total: f64 = row.iter().sum();
            weights.extend(row.iter().map(|e| e / total));
        }
        let centre_norms = centres.chunks_exact(dim.max(1)).map(squared_norm).collect();
        Self::laid_out(dim, per_query, centres, weights, centre_norms)
    }

    fn laid_out(
        dim: usize,
        per_query: usize,
        centres: Vec<f64>,
        weights: Vec<f64>,
        mut centre_norms: Vec<f64>,
    ) -> Self {
        let m = centres.len() / dim.max(1);
        let mut panels = vec![0.0; m.div_ceil(LANES) * LANES * dim];
        centre_norms.resize(m.div_ceil(LANES) * LANES, 0.0);
        for (j, c) in centres.chunks_exact(dim.max(1)).enumerate() {
            let panel = &mut panels[(j / LANES) * LANES * dim..][..LANES * dim];
            for (k, &v) in c.iter().enumerate() {
                panel[k * LANES + j % LANES] = 2.0 * v;
            }
        }
        Self {
            dim,
            per_query,
            weights,
            panels,
            centre_norms,
        }
    }

    /// Queries from given centres ((queries·J) × dim, row-major) and weights (queries × J).
    /// Weights may be any finite numbers (Proposition 2.2 needs ‖α‖₁ ≤ 1; that is the
    /// caller's choice).
    pub fn new(
        dim: usize,
        per_query: usize,
        centres: Vec<f64>,
        weights: Vec<f64>,
    ) -> Result<Self, KernelError> {
        if dim == 0 {
            return Err(KernelError::ZeroDimension);
        }
        let queries = weights.len().checked_div(per_query).unwrap_or(0);
        if queries * per_query != weights.len() {
            return Err(KernelError::Shape {
                what: "weight",
                len: weights.len(),
                width: per_query,
            });
        }
        if centres.len() != weights.len() * dim {
            return Err(KernelError::Length {
                what: "centres",
                len: centres.len(),
                expected: weights.len() * dim,
            });
        }
        let centre_norms = check_rows("centre", &centres, dim)?;
        if let Some(index) = weights.iter().position(|w| !w.is_finite()) {
            return Err(KernelError::NonFinite {
                what: "weight",
                index,
            });
        }
        Ok(Self::laid_out(
            dim,
            per_query,
            centres,
            weights,
            centre_norms,
        ))
    }

    /// The memory the family holds: its centres (laid out), weights and centre norms.
    pub(crate) fn bytes(&self) -> usize {
        (self.panels.len() + self.weights.len() + self.centre_norms.len())
            * std::mem::size_of::<f64>()
    }

    pub(crate) fn queries(&self) -> usize {
        self.weights.len().checked_div(self.per_query).unwrap_or(0)
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// J, the number of kernels in each query.
    #[cfg(test)]
    pub(crate) fn per_query(&self) -> usize {
        self.per_query
    }

    /// Centre x_j of query q is row q·J + j of this (queries·J) × dim row-major matrix, as
    /// drawn or given (read back from the kernel's layout: halving the doubled values is exact).
    pub(crate) fn centres(&self) -> Vec<f64> {
        let (dim, m) = (self.dim, self.weights.len());
        let mut rows = vec![0.0; m * dim];
        for (j, row) in rows.chunks_exact_mut(dim.max(1)).enumerate() {
            let panel = &self.panels[(j / LANES) * LANES * dim..][..LANES * dim];
            for (k, v) in row.iter_mut().enumerate() {
                *v = panel[k * LANES + j % LANES] / 2.0;
            }
        }
        rows
    }

    /// α_j of query q is entry (q, j) of this queries × J row-major matrix.
    #[cfg(test)]
    pub(crate) fn weights(&self) -> &[f64] {
        &self.weights
    }
}

/// Squared norms of the rows of a row-major matrix, or the first row that is not finite or
/// whose squared norm overflows (the expanded distance would then be ∞ − ∞).
fn check_rows(what: &'static str, rows: &[f64], dim: usize) -> Result<Vec<f64>, KernelError> {
    rows.chunks_exact(dim)
        .enumerate()
        .map(|(index, row)| {
            let norm = squared_norm(row);
            if norm.is_finite() {
                Ok(norm)
            } else {
                Err(KernelError::NonFinite { what, index })
            }
        })
        .collect()
}

fn squared_norm(row: &[f64]) -> f64 {
    row.iter().map(|v| v * v).sum()
}

/// Answers of every query of `mix` on a point set, for every bandwidth: `answers[s][q]` is
/// q_f for query q at σ = `sigmas[s]`.
///
/// `points` is n × dim, row-major. With `weights` = None the answer is the mean
/// (1/n) Σ_i f(x_i); with Some(u) (length n) it is Σ_i u_i f(x_i), for any finite u (a
/// synthetic database's probabilities). Bit-identical for any rayon thread count.
///
/// ```
/// use dplab::mech::trig::kernel::{mean_answers, KernelMixtures};
/// use rand::SeedableRng;
///
/// let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
/// let queries = KernelMixtures::random(100, 10, 2, &mut rng);
/// let data = [0.5, -0.25, 0.0, 1.0, -1.0, 0.75]; // three points of [−1, 1]²
/// let answers = mean_answers(&queries, &data, None, &[2.0, 4.0])?;
/// assert_eq!((answers.len(), answers[0].len()), (2, 100));
/// // Wider kernels are flatter: closer to Σα = 1 at every point.
/// assert!(answers[1][0] > answers[0][0]);
/// # Ok::<(), dplab::mech::trig::kernel::KernelError>(())
/// ```
pub fn mean_answers(
    mix: &KernelMixtures,
    points: &[f64],
    weights: Option<&[f64]>,
    sigmas: &[f64],
) -> Result<Vec<Vec<f64>>, KernelError> {
    mean_answers_by(mix, points, weights, sigmas, Evaluation::Auto)
}

/// Which evaluation [`mean_answers_by`] takes (see "Two evaluations" in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evaluation {
    /// The cheaper one by the cost rule: what [`mean_answers`] does.
    Auto,
    /// Distances and exponentials point by point.
    Direct,
    /// Tables over each coordinate's distinct values and a walk over the points' trie (direct
    /// all the same when an index of the trie would not fit in 32 bits: over 4·10⁹ values).
    Factored,
}

/// [`mean_answers`] by a chosen evaluation, for benchmarks and tests: the answers of both are
/// within their error bounds of the exact ones (not bit-identical to each other).
pub fn mean_answers_by(
    mix: &KernelMixtures,
    points: &[f64],
    weights: Option<&[f64]>,
    sigmas: &[f64],
    evaluation: Evaluation,
) -> Result<Vec<Vec<f64>>, KernelError> {
    let dim = mix.dim;
    if dim == 0 {
        return Err(KernelError::ZeroDimension);
    }
    if !points.len().is_multiple_of(dim) {
        return Err(KernelError::Shape {
            what: "point",
            len: points.len(),
            width: dim,
        });
    }
    let n = points.len() / dim;
    if n == 0 {
        return Err(KernelError::NoPoints);
    }
    if let Some(&bad) = sigmas
        .iter()
        .find(|s| !(s.is_finite() && **s > 0.0 && (0.5 / (**s * **s)).is_finite()))
    {
        return Err(KernelError::Bandwidth(bad));
    }
    if let Some(u) = weights {
        if u.len() != n {
            return Err(KernelError::Length {
                what: "weights",
                len: u.len(),
                expected: n,
            });
        }
        if let Some(index) = u.iter().position(|w| !w.is_finite()) {
            return Err(KernelError::NonFinite {
                what: "weight",
                index,
            });
        }
    }
    let point_norms = check_rows("point", points, dim)?;
    let queries = mix.queries();
    if queries == 0 || sigmas.is_empty() {
        return Ok(vec![vec![0.0; queries]; sigmas.len()]);
    }
    // Uniform weights are applied once at the end: plain sums of f, then one product.
    let final_factor = if weights.is_some() {
        1.0
    } else {
        1.0 / n as f64
    };
    // Wide bandwidths in low dimensions by their Taylor series (unless a path is forced), the
    // others by the trie or the direct sum.
    let wide = match evaluation {
        Evaluation::Auto => taylor::degrees(n, &point_norms, weights, mix, sigmas),
        Evaluation::Direct | Evaluation::Factored => vec![None; sigmas.len()],
    };
    let by_series: Vec<(f64, u32)> = sigmas
        .iter()
        .zip(&wide)
        .filter_map(|(s, p)| p.map(|p| (*s, p)))
        .collect();
    let rest: Vec<f64> = sigmas
        .iter()
        .zip(&wide)
        .filter(|(_, p)| p.is_none())
        .map(|(s, _)| *s)
        .collect();
    let mut series = if by_series.is_empty() {
        Vec::new()
    } else {
        taylor::answers(mix, points, &point_norms, weights, &by_series, final_factor)
    }
    .into_iter();
    let mut rest = if rest.is_empty() {
        Vec::new()
    } else {
        kernel_sums(
            mix,
            points,
            &point_norms,
            weights,
            &rest,
            final_factor,
            evaluation,
        )
    }
    .into_iter();
    Ok(wide
        .iter()
        .map(|p| {
            if p.is_some() {
                series.next()
            } else {
                rest.next()
            }
            .expect("one answer row per bandwidth")
        })
        .collect())
}

/// The answers by kernel values: the factored walk over the points' trie where it is cheaper
/// (or forced), else the direct sum (see the module doc).
fn kernel_sums(
    mix: &KernelMixtures,
    points: &[f64],
    point_norms: &[f64],
    weights: Option<&[f64]>,
    sigmas: &[f64],
    final_factor: f64,
    evaluation: Evaluation,
) -> Vec<Vec<f64>> {
    let (dim, queries) = (mix.dim, mix.queries());
    let scales: Vec<f64> = sigmas.iter().map(|s| -0.5 / (s * s)).collect();
    let plan = plan_steps(&scales);
    let trie = match evaluation {
        Evaluation::Auto => choice::cheaper_trie(points, weights, dim, &plan),
        Evaluation::Direct => None,
        Evaluation::Factored => factored::Trie::new(
            points,
            weights,
            dim,
            &factored::distinct_values(points, dim),
        ),
    };
    let blocks = match trie {
        Some(trie) => {
            let f = factored::Factored {
                mix,
                trie,
                scales,
                final_factor,
            };
            in_blocks(mix, |first, last| factored::block_answers(&f, first, last))
        }
        None => {
            let ctx = Context {
                mix,
                strips: point_strips(points, dim),
                point_norms,
                weights,
                plan,
                final_factor,
            };
            in_blocks(mix, |first, last| block_answers(&ctx, first, last))
        }
    };
    let mut answers = vec![Vec::with_capacity(queries); sigmas.len()];
    for block in &blocks {
        let block_queries = block.len() / sigmas.len();
        for (s, row) in answers.iter_mut().enumerate() {
            row.extend_from_slice(&block[s * block_queries..(s + 1) * block_queries]);
        }
    }
    answers
}

/// The answers of every block of whole queries, each laid out [σ][query], in query order.
/// Small query sets still get several blocks per thread; see "Determinism" for why the block
/// size may depend on the thread count. Blocks start on a panel: their centres, a multiple of
/// LANES.
fn in_blocks(
    mix: &KernelMixtures,
    block: impl Fn(usize, usize) -> Vec<f64> + Sync,
) -> Vec<Vec<f64>> {
    let queries = mix.queries();
    let whole_panels = LANES / gcd(LANES, mix.per_query);
    let per_block = (TARGET_CENTRES / mix.per_query)
        .min(queries.div_ceil(4 * rayon::current_num_threads()))
        .max(1)
        .next_multiple_of(whole_panels);
    (0..queries.div_ceil(per_block))
        .into_par_iter()
        .map(|b| {
            let first = b * per_block;
            block(first, (first + per_block).min(queries))
        })
        .collect()
}

/// Answers of queries `first..last` from their centres' kernel sums, laid out [σ][query]:
/// Σ_j α_j S_j in order, times the final factor (1/n for a mean). `totals` holds one row of
/// `width` sums per bandwidth, the block's centres first.
fn answers_from_sums(
    mix: &KernelMixtures,
    first: usize,
    last: usize,
    totals: &[f64],
    width: usize,
    final_factor: f64,
) -> Vec<f64> {
    let per_query = mix.per_query;
    let alphas = &mix.weights[first * per_query..last * per_query];
    let mut answers = Vec::with_capacity(totals.len() / width * (last - first));
    for sums in totals.chunks_exact(width) {
        for (alpha, sum) in alphas
            .chunks_exact(per_query)
            .zip(sums.chunks_exact(per_query))
        {
            let dot: f64 = alpha.iter().zip(sum).map(|(a, s)| a * s).sum();
            answers.push(dot * final_factor);
        }
    }
    answers
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The points in strips of ROWS, each dim × ROWS (coordinate k of the strip's points side by
/// side; the last strip zero-padded): what the distance micro-kernel reads, laid out once per
/// call rather than again in every block of queries.
fn point_strips(points: &[f64], dim: usize) -> Vec<f64> {
    let n = points.len() / dim;
    let mut strips = vec![0.0; n.div_ceil(ROWS) * ROWS * dim];
    for (i, x) in points.chunks_exact(dim).enumerate() {
        let strip = &mut strips[(i / ROWS) * ROWS * dim..][..ROWS * dim];
        for (k, &v) in x.iter().enumerate() {
            strip[k * ROWS + i % ROWS] = v;
        }
    }
    strips
}

/// Centres per block, about: enough to amortise a block's buffers and parallel task, few
/// enough that the distances of a strip's points and the partial sums for five σ stay in L1
/// (≈ 256·8 B per row).
const TARGET_CENTRES: usize = 256;
/// Columns of the distance micro-kernel (two AVX2 vectors, one AVX-512 vector) and rows
/// (points) per strip: 8, so that the AVX-512 copy takes a strip as one 8 × 8 tile and the
/// others as two 4 × 8 tiles ([`distances`]).
const LANES: usize = 8;
const ROWS: usize = 8;
/// Exponentials taken side by side (a multiple of LANES; see [`exp_kernel_lanes`]).
const EXP_LANES: usize = fastmath::EXP_LANES;
/// Points per partial sum; partial sums are then added in order, so the rounding error grows
/// with POINT_BLOCK + n/POINT_BLOCK instead of n. A multiple of ROWS.
const POINT_BLOCK: usize = 256;

struct Context<'a> {
    mix: &'a KernelMixtures,
    /// The points in strips of ROWS ([`point_strips`]), laid out once for every block.
    strips: Vec<f64>,
    point_norms: &'a [f64],
    weights: Option<&'a [f64]>,
    /// How each bandwidth's kernel values are obtained, in evaluation order.
    plan: Vec<Step>,
    final_factor: f64,
}

/// The largest power a bandwidth's kernel values are taken to from another's (see "Several
/// bandwidths at once": the relative error grows about linearly with it).
pub(crate) const MAX_POWER: u32 = 16;

/// One step of a [`Plan`](plan_steps): the kernel values of bandwidth `target` (its index in
/// the caller's list), either by the exponential or as an integer power of an earlier step's
/// values.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Source {
    /// exp(scale·d), scale = −1/(2σ²).
    Exp(f64),
    /// (values of step `from`)^k, k ≥ 1, by repeated squaring.
    Power { from: usize, k: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Step {
    target: usize,
    source: Source,
    /// The power of an exponential these values are (1 for an exponential): the error bound.
    total: u32,
    /// Whether a later step takes a power of these values (they are then kept for the row).
    kept: bool,
}

/// Multiplies that [`pow_lanes`] takes for x^k.
fn power_cost(k: u32) -> u32 {
    (31 - k.leading_zeros()) + k.count_ones() - 1
}

/// The order in which to obtain the kernel values of every bandwidth: widest first (smallest
/// |scale|); a bandwidth whose scale is an exact integer multiple k·s of an earlier step's scale
/// s takes that step's values to the power k, e^{k s d} = (e^{s d})^k, if the power relative to
/// the underlying exponential stays ≤ [`MAX_POWER`]; among several such steps the one with the
/// fewest multiplies (then the lowest power) is taken. Otherwise an exponential. Depends only
/// on the scales, so every block and thread follows the same plan.
fn plan_steps(scales: &[f64]) -> Vec<Step> {
    let mut order: Vec<usize> = (0..scales.len()).collect();
    // Stable: equal scales keep the caller's order.
    order.sort_by(|&a, &b| scales[a].abs().total_cmp(&scales[b].abs()));
    let mut steps: Vec<Step> = Vec::with_capacity(scales.len());
    for target in order {
        let s = scales[target];
        let mut best: Option<(u32, u32, usize, u32)> = None; // (multiplies, total, from, k)
        for (from, step) in steps.iter().enumerate() {
            let base = scales[step.target];
            let ratio = (s / base).round();
            if !(1.0..=f64::from(MAX_POWER)).contains(&ratio) {
                continue;
            }
            let k = ratio as u32;
            let total = k * step.total;
            if total > MAX_POWER || f64::from(k) * base != s {
                continue;
            }
            let candidate = (power_cost(k), total, from, k);
            if best.is_none_or(|b| (candidate.0, candidate.1) < (b.0, b.1)) {
                best = Some(candidate);
            }
        }
        let step = match best {
            Some((_, total, from, k)) => {
                steps[from].kept = true;
                Step {
                    target,
                    source: Source::Power { from, k },
                    total,
                    kept: false,
                }
            }
            None => Step {
                target,
                source: Source::Exp(s),
                total: 1,
                kept: false,
            },
        };
        steps.push(step);
    }
    steps
}

/// x^k for every lane by binary exponentiation (squarings from the lowest bit up, the set
/// bits' squares multiplied in order), k ≥ 1: the same operations in the same order for every
/// lane, block and CPU.
#[inline(always)]
fn pow_lanes<const N: usize>(x: &[f64; N], k: u32) -> [f64; N] {
    let mut base = *x;
    let mut k = k;
    // The lowest set bit starts the product (no multiply by 1).
    while k & 1 == 0 {
        for b in base.iter_mut() {
            *b *= *b;
        }
        k >>= 1;
    }
    let mut out = base;
    k >>= 1;
    while k != 0 {
        for b in base.iter_mut() {
            *b *= *b;
        }
        if k & 1 == 1 {
            for (o, b) in out.iter_mut().zip(&base) {
                *o *= b;
            }
        }
        k >>= 1;
    }
    out
}

per_isa! {
    /// Answers of queries `first..last` for every σ, laid out [σ][query]. The AVX-512 copy
    /// takes the distances 8 points at a time instead of 4: which distances are computed
    /// together, not how, so the same bits.
    fn block_answers(ctx: &Context, first: usize, last: usize) -> Vec<f64> {
        avx512: block_answers_portable::<8>(ctx, first, last),
        avx2: block_answers_portable::<4>(ctx, first, last),
        baseline: block_answers_portable::<4>(ctx, first, last),
    }
}

/// `TILE` is the number of points the distance micro-kernel takes at once ([`distances`]):
/// it changes which distances are computed together, not how any one is computed.
#[inline(always)]
fn block_answers_portable<const TILE: usize>(ctx: &Context, first: usize, last: usize) -> Vec<f64> {
    let mix = ctx.mix;
    let (dim, per_query) = (mix.dim, mix.per_query);
    let m = (last - first) * per_query;
    let width = m.div_ceil(EXP_LANES) * EXP_LANES;
    let sigmas = ctx.plan.len();

    debug_assert!((first * per_query).is_multiple_of(LANES));
    // The block's panels (it starts on one: see `per_block`); distances past the last centre
    // are those of zero padding or stay 0, finite values whose sums are never read.
    let laid_out = m.div_ceil(LANES) * LANES;
    let panels = &mix.panels[first * per_query * dim..][..laid_out * dim];
    let centre_norms = &mix.centre_norms[first * per_query..][..laid_out];

    let mut totals = vec![0.0; sigmas * width];
    let mut partial = vec![0.0; sigmas * width];
    let mut dist = vec![0.0; ROWS * width];
    let mut values = vec![0.0; sigmas * width];
    let n = ctx.point_norms.len();
    for (start, strip) in (0..n)
        .step_by(ROWS)
        .zip(ctx.strips.chunks_exact(dim * ROWS))
    {
        let rows = ROWS.min(n - start);
        let mut norms = [0.0; ROWS];
        norms[..rows].copy_from_slice(&ctx.point_norms[start..start + rows]);
        distances::<TILE>(strip, panels, &norms, centre_norms, &mut dist);

        for (r, d_row) in dist.chunks_exact(width).take(rows).enumerate() {
            match ctx.weights.map(|u| u[start + r]) {
                Some(w) => add_kernels::<true>(&mut partial, d_row, &ctx.plan, &mut values, w),
                None => add_kernels::<false>(&mut partial, d_row, &ctx.plan, &mut values, 1.0),
            }
        }
        if (start + ROWS).is_multiple_of(POINT_BLOCK) || start + ROWS >= n {
            for (t, p) in totals.iter_mut().zip(partial.iter_mut()) {
                *t += *p;
                *p = 0.0;
            }
        }
    }

    answers_from_sums(mix, first, last, &totals, width, ctx.final_factor)
}

/// partial[σ][j] += w·k_σ(d[j]) for every bandwidth σ and every j, where k_σ(d) =
/// exp(scale_σ·d), step by step of the plan, each step a pass over the row: an exponential
/// (EXP_LANES side by side) or a power of an earlier step's values. `values` keeps each step's
/// values of the row (steps × d.len()). Unweighted sums skip the product (the weight is then 1,
/// and 1·e = e exactly, so the bits are those of the weighted form). `d.len()` is a multiple
/// of EXP_LANES; `partial` holds one row of d.len() sums per bandwidth.
#[inline(always)]
fn add_kernels<const WEIGHTED: bool>(
    partial: &mut [f64],
    d: &[f64],
    plan: &[Step],
    values: &mut [f64],
    w: f64,
) {
    let width = d.len();
    for (i, step) in plan.iter().enumerate() {
        let (done, rest) = values.split_at_mut(i * width);
        let out = &mut rest[..width];
        let acc = &mut partial[step.target * width..][..width];
        match step.source {
            Source::Exp(scale) => {
                // `kept` as a constant: a run-time test per chunk showed in the profile.
                if step.kept {
                    exps_into::<WEIGHTED, true>(acc, out, d, scale, w);
                } else {
                    exps_into::<WEIGHTED, false>(acc, out, d, scale, w);
                }
            }
            Source::Power { from, k } => {
                let base = &done[from * width..][..width];
                for ((a, o), b) in acc
                    .chunks_exact_mut(EXP_LANES)
                    .zip(out.chunks_exact_mut(EXP_LANES))
                    .zip(base.chunks_exact(EXP_LANES))
                {
                    let b: &[f64; EXP_LANES] = b.try_into().expect("a chunk of EXP_LANES");
                    accumulate::<WEIGHTED>(a, o, &pow_lanes(b, k), w, step.kept);
                }
            }
        }
    }
}

/// acc[j] += w·exp(scale·d[j]) (and out[j] = exp(scale·d[j]) if KEEP), EXP_LANES
/// exponentials side by side. (No closure builds the arguments: a closure may be compiled as a
/// function of its own, without the AVX2 + FMA of its caller, and the exponential's fused
/// multiply-adds would then be calls of the software `fma`.)
#[inline(always)]
fn exps_into<const WEIGHTED: bool, const KEEP: bool>(
    acc: &mut [f64],
    out: &mut [f64],
    d: &[f64],
    scale: f64,
    w: f64,
) {
    for ((a, o), d) in acc
        .chunks_exact_mut(EXP_LANES)
        .zip(out.chunks_exact_mut(EXP_LANES))
        .zip(d.chunks_exact(EXP_LANES))
    {
        let mut x = [0.0; EXP_LANES];
        for l in 0..EXP_LANES {
            x[l] = d[l] * scale;
        }
        accumulate::<WEIGHTED>(a, o, &exp_kernel_lanes(&x), w, KEEP);
    }
}

/// acc[l] += w·e[l] (e[l] unweighted: 1·e = e exactly), and out = e if `keep`.
#[inline(always)]
fn accumulate<const WEIGHTED: bool>(
    acc: &mut [f64],
    out: &mut [f64],
    e: &[f64; EXP_LANES],
    w: f64,
    keep: bool,
) {
    if keep {
        out.copy_from_slice(e);
    }
    for (a, e) in acc.iter_mut().zip(e) {
        *a += if WEIGHTED { w * e } else { *e };
    }
}

/// Squared distances of ROWS points (`strip`, dim × ROWS) to every centre of `panels` (with
/// their `centre_norms`), written row by row into `dist` (ROWS × width, width ≥ the panels'
/// centres; columns past them are left as they are): ‖x‖² + ‖c‖² − 2x·c, clamped at 0.
/// Register-blocked TILE × LANES (TILE dividing ROWS: the strip is taken TILE points at a
/// time) so that each loaded panel value serves TILE points; one fused multiply-add per
/// coordinate and pair, in coordinate order whatever TILE is. The TILE × LANES accumulators:
/// 4 × 8 are eight AVX2 vectors (of 16 registers, which also hold a panel row and a
/// broadcast), 8 × 8 are eight AVX-512 vectors, enough to cover the fused multiply-add's
/// latency on two ports (4 × 8 there are four vectors). Measured at AVX-512 (one core, loaded
/// machine, 10³ queries, d = 101 / 19): 4 × 8 0.115 / 0.093 s, 8 × 8 0.105–0.114 / 0.078–0.087 s,
/// two panels of 4 × 8 side by side the same as 8 × 8; 8 × 16 (two panels) made the compiler
/// keep its 16 vectors in memory (7× slower).
#[inline(always)]
fn distances<const TILE: usize>(
    strip: &[f64],
    panels: &[f64],
    point_norms: &[f64; ROWS],
    centre_norms: &[f64],
    dist: &mut [f64],
) {
    let width = dist.len() / ROWS;
    let dim = strip.len() / ROWS;
    for t in (0..ROWS).step_by(TILE) {
        for (p, panel) in panels.chunks_exact(dim * LANES).enumerate() {
            let mut acc = [[0.0f64; LANES]; TILE];
            for (c, x) in panel.chunks_exact(LANES).zip(strip.chunks_exact(ROWS)) {
                let x = &x[t..t + TILE];
                for r in 0..TILE {
                    for l in 0..LANES {
                        acc[r][l] = x[r].mul_add(c[l], acc[r][l]);
                    }
                }
            }
            let cn = &centre_norms[p * LANES..][..LANES];
            for (r, acc_row) in acc.iter().enumerate() {
                let out = &mut dist[(t + r) * width + p * LANES..][..LANES];
                for l in 0..LANES {
                    out[l] = (point_norms[t + r] + cn[l] - acc_row[l]).max(0.0);
                }
            }
        }
    }
}

mod choice;
mod factored;
mod taylor;
#[cfg(test)]
mod tests;
