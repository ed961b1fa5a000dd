//! Wide kernels by their Taylor series: the answers of a bandwidth σ from moments of the
//! points, for low dimensions and σ wide against the data.
//!
//! With s = 1/σ², exp(−‖x − c‖²·s/2) = e^{−‖c‖²s/2} · e^{−‖x‖²s/2} · e^{s·x·c}, and
//! e^{s·x·c} = Σ_k (s·x·c)^k / k! = Σ_α s^{|α|} x^α c^α / α! over multi-indices α ∈ ℕ^d
//! (multinomial theorem). So the kernel sum of a centre c over the points is
//!
//! S(c) = Σ_i w_i e^{−‖x_i − c‖²s/2} = e^{−‖c‖²s/2} · Σ_α (c^α/α!) · M_α,
//! M_α = s^{|α|} Σ_i w_i e^{−‖x_i‖²s/2} x_i^α,
//!
//! and the moments M_α, computed once per call, serve every centre: per centre the cost is
//! the number of multi-indices of degree ≤ p, C(p + d, d), instead of n kernel values. The
//! series is cut at the degree p the bound below allows. For CSN (d = 8, n = 99 762, the
//! largest ‖x‖ 2.83, centres' about 2.7) the rule below takes σ = 10 at p = 7 (6 435
//! monomials), 8 at p = 8 (12 870) and 6 at p = 9 or 10 (24 310 or 43 758), where the direct
//! sum takes 99 762 kernel values per centre; σ = 4 would need p = 12 (125 970) and σ = 2
//! p = 21, so they stay direct. No other dataset of the thesis takes it (d ≥ 19: C(p + d, d)
//! grows too fast).
//!
//! # Which bandwidths take it ([`degrees`])
//! A bandwidth takes this route when the degree its bound needs is at most [`MAX_DEGREE`],
//! its monomials at most [`MAX_MONOMIALS`], and its estimated cost is below the direct
//! sum's: C(p + d, d)·(3n + 4m) floating-point operations (moments: one multiply and one
//! multiply-add per point and monomial; centres: two multiplies and a multiply-add per centre
//! and monomial) against 8·n·m for the direct sum of one bandwidth (m centres; the direct
//! path's exponential and sum are ≈ 14 operations a pair, a power of another bandwidth's
//! values ≈ 4, so 8 keeps this route to where it wins clearly). The rule reads n, d, m, the
//! points' and centres' largest norms, the weights' and the mixtures' ℓ₁ norms and σ: never the
//! CPU or the thread count.
//!
//! # Error bound (absolute, per answer)
//! Let z = s·max‖x_i‖·max‖c‖ ≥ |s·x·c| (Cauchy–Schwarz), W = Σ_i |w_i| (1 for a mean) and
//! A = max_q Σ_j |α_qj| (1 for the thesis's mixtures). Lagrange's remainder of e^t cut after
//! degree p is ≤ |t|^{p+1}/(p+1)!·e^{|t|}, and the prefactors e^{−‖c‖²s/2}, e^{−‖x‖²s/2} are
//! ≤ 1, so cutting moves an answer by at most A·W·z^{p+1}/(p+1)!·e^z; p is the least degree
//! that makes this ≤ [`TRUNCATION`] = 10⁻¹³ (computed with a factor 2 to spare for the bound's
//! own rounding). Rounding: each term c^α/α!·M_α carries at most (2|α| + 2) roundings from
//! its products and the point sums' (blocks of [`POINT_BLOCK`] points in eight running sums,
//! then blocks in order: ≤ (POINT_BLOCK/8 + 3 + n/POINT_BLOCK) roundings); the terms of each
//! degree k are summed apart (their magnitudes total ≤ W·(Σ_j |x_j c_j| s)^k/k!·…, so the
//! number of terms multiplies only its own degree's small total) and the degrees from the
//! highest down; over all, with u = 2⁻⁵³, the rounding error is ≤ (2p + 8 + POINT_BLOCK/8 +
//! n/POINT_BLOCK)·u·A·W·Σ_k C(k + d − 1, d − 1)·z^k/k! — for CSN at σ = 6 about 7·10⁻¹⁴.
//! The prefactors come from [`exp_normal`] (two ulp). In all within 10⁻¹² absolute, the
//! accuracy issue #39 asks of an answer; the kernel tests check it against the direct
//! definition.
//!
//! # Determinism
//! Plain multiplies and adds in a fixed order (no fused multiply-add, so the AVX2 and AVX-512
//! copies, which only widen the loops, give the baseline's bits); moments by fixed blocks of
//! points added in block order, whatever the thread count; each centre's sum on its own.

use rayon::prelude::*;

use super::KernelMixtures;
use crate::mech::fastmath::{exp_normal, per_isa};

/// The most an answer may move by cutting the series.
pub(crate) const TRUNCATION: f64 = 1e-13;
/// The highest degree of the series this route takes.
pub(crate) const MAX_DEGREE: u32 = 40;
/// The most monomials (multi-indices of degree ≤ p) this route takes, C(p + d, d).
pub(crate) const MAX_MONOMIALS: f64 = (1u64 << 20) as f64;
/// Points per block of moments (their sums are then added in block order).
const POINT_BLOCK: usize = 256;
/// Blocks of points whose moments are computed side by side before they are added in.
const WAVE: usize = 8;
/// Centres per block, side by side in the evaluation loops.
const CENTRE_BLOCK: usize = 64;

/// For every σ of `sigmas`, the degree this route answers it at, or None for the direct sum
/// (see the module doc). `point_norms` are the points' squared norms.
pub(super) fn degrees(
    n: usize,
    point_norms: &[f64],
    weights: Option<&[f64]>,
    mix: &KernelMixtures,
    sigmas: &[f64],
) -> Vec<Option<u32>> {
    let dim = mix.dim;
    let m = mix.weights.len();
    let largest = |v: &[f64]| v.iter().fold(0.0f64, |a, &b| a.max(b)).sqrt();
    let (x_max, c_max) = (largest(point_norms), largest(&mix.centre_norms));
    let w = weights.map_or(1.0, |u| u.iter().map(|v| v.abs()).sum());
    let a = mix
        .weights
        .chunks_exact(mix.per_query.max(1))
        .map(|q| q.iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0f64, f64::max);
    let (n, m) = (n as f64, m as f64);
    sigmas
        .iter()
        .map(|&sigma| {
            let z = x_max * c_max / (sigma * sigma);
            let p = degree(z, 2.0 * w * a)?;
            let monomials = monomial_count(p, dim)?;
            (monomials * (3.0 * n + 4.0 * m) < 8.0 * n * m).then_some(p)
        })
        .collect()
}

/// The least p ≤ MAX_DEGREE with factor·z^{p+1}/(p+1)!·e^z ≤ TRUNCATION.
pub(super) fn degree(z: f64, factor: f64) -> Option<u32> {
    if !(z.is_finite() && z < 700.0 && factor.is_finite()) {
        return None;
    }
    let scale = factor * exp_normal(z);
    let mut term = z; // z^{p+1}/(p+1)! at p = 0
    for p in 0..=MAX_DEGREE {
        if scale * term <= TRUNCATION {
            return Some(p);
        }
        term *= z / f64::from(p + 2);
    }
    None
}

/// C(p + d, d), the multi-indices of ℕ^d of degree ≤ p, if at most MAX_MONOMIALS.
fn monomial_count(p: u32, dim: usize) -> Option<f64> {
    let mut count = 1.0f64;
    for k in 1..=p as usize {
        count = count * (dim + k) as f64 / k as f64;
        if count > MAX_MONOMIALS {
            return None;
        }
    }
    Some(count.round())
}

/// One multi-index α ≠ 0, in the depth-first order of [`monomials`]: its degree, the
/// coordinate j its parent (α − e_j) was raised in, and 1/α_j (c^α/α! = c^{α−e_j}/(α−e_j)! ·
/// c_j/α_j).
#[derive(Clone, Copy)]
struct Monomial {
    degree: usize,
    var: usize,
    inv: f64,
}

/// Every α of degree 1 ..= p, depth first: the children of α are α + e_j for j ≥ the last
/// coordinate raised, so each α comes once, right after its parent's subtree began — a walk
/// keeps the products of the current path on a stack of p + 1 rows.
fn monomials(dim: usize, p: usize) -> Vec<Monomial> {
    fn visit(dim: usize, p: usize, first: usize, alpha: &mut [u32], out: &mut Vec<Monomial>) {
        let degree: u32 = alpha.iter().sum();
        if degree as usize == p {
            return;
        }
        for var in first..dim {
            alpha[var] += 1;
            out.push(Monomial {
                degree: degree as usize + 1,
                var,
                inv: 1.0 / f64::from(alpha[var]),
            });
            visit(dim, p, var, alpha, out);
            alpha[var] -= 1;
        }
    }
    let mut out = Vec::new();
    visit(dim, p, 0, &mut vec![0; dim], &mut out);
    out
}

/// Answers of every query for each (σ, degree) of `wide`, laid out [σ][query]: the direct
/// path's `final_factor` (1/n for a mean) applied as it does.
pub(super) fn answers(
    mix: &KernelMixtures,
    points: &[f64],
    point_norms: &[f64],
    weights: Option<&[f64]>,
    wide: &[(f64, u32)],
    final_factor: f64,
) -> Vec<Vec<f64>> {
    let dim = mix.dim;
    let p = wide.iter().map(|w| w.1 as usize).max().unwrap_or(0);
    let monos = monomials(dim, p);
    let scales: Vec<f64> = wide.iter().map(|(s, _)| 1.0 / (s * s)).collect();
    let limits: Vec<usize> = wide.iter().map(|w| w.1 as usize).collect();
    let moments = moments(points, point_norms, weights, dim, &monos, &scales, &limits);
    let centres = mix.centres();
    let m = centres.len() / dim;
    let sums: Vec<Vec<f64>> = (0..m.div_ceil(CENTRE_BLOCK))
        .into_par_iter()
        .map(|b| {
            let first = b * CENTRE_BLOCK;
            let last = (first + CENTRE_BLOCK).min(m);
            centre_sums(
                &centres[first * dim..last * dim],
                &mix.centre_norms[first..last],
                &monos,
                &moments,
                &scales,
                &limits,
            )
        })
        .collect();
    let per_query = mix.per_query;
    (0..wide.len())
        .map(|s| {
            let kernel: Vec<f64> = sums
                .iter()
                .flat_map(|block| {
                    let width = block.len() / wide.len();
                    block[s * width..(s + 1) * width].iter().copied()
                })
                .collect();
            mix.weights
                .chunks_exact(per_query)
                .zip(kernel.chunks_exact(per_query))
                .map(|(alpha, sum)| {
                    let dot: f64 = alpha.iter().zip(sum).map(|(a, s)| a * s).sum();
                    dot * final_factor
                })
                .collect()
        })
        .collect()
}

/// M_α for every σ (rows of 1 + monos.len(): α = 0 first, then `monos`' order), zero beyond
/// σ's degree.
fn moments(
    points: &[f64],
    point_norms: &[f64],
    weights: Option<&[f64]>,
    dim: usize,
    monos: &[Monomial],
    scales: &[f64],
    limits: &[usize],
) -> Vec<f64> {
    let n = point_norms.len();
    let row = monos.len() + 1;
    let blocks = n.div_ceil(POINT_BLOCK);
    let mut total = vec![0.0; scales.len() * row];
    for wave in (0..blocks).collect::<Vec<_>>().chunks(WAVE) {
        let sums: Vec<Vec<f64>> = wave
            .par_iter()
            .map(|&b| {
                let first = b * POINT_BLOCK;
                let last = (first + POINT_BLOCK).min(n);
                block_moments(
                    &points[first * dim..last * dim],
                    &point_norms[first..last],
                    weights.map(|u| &u[first..last]),
                    dim,
                    monos,
                    scales,
                    limits,
                )
            })
            .collect();
        for s in &sums {
            for (t, v) in total.iter_mut().zip(s) {
                *t += v;
            }
        }
    }
    // s^{|α|}, the powers by repeated products in a fixed order.
    for (s, scale) in scales.iter().enumerate() {
        let mut power = vec![1.0; limits[s] + 1];
        for k in 1..power.len() {
            power[k] = power[k - 1] * scale;
        }
        let out = &mut total[s * row..(s + 1) * row];
        for (v, mono) in out[1..].iter_mut().zip(monos) {
            *v = if mono.degree <= limits[s] {
                *v * power[mono.degree]
            } else {
                0.0
            };
        }
    }
    total
}

per_isa! {
    /// Σ_i w_i e^{−‖x_i‖²s/2} x_i^α over one block of points, for every σ and α (without
    /// s^{|α|}). Plain multiplies and adds, which Rust never fuses: every copy has the
    /// baseline's bits.
    fn block_moments(
        points: &[f64],
        norms: &[f64],
        weights: Option<&[f64]>,
        dim: usize,
        monos: &[Monomial],
        scales: &[f64],
        limits: &[usize],
    ) -> Vec<f64> {
        block_moments_portable(points, norms, weights, dim, monos, scales, limits)
    }
}

#[inline(always)]
fn block_moments_portable(
    points: &[f64],
    norms: &[f64],
    weights: Option<&[f64]>,
    dim: usize,
    monos: &[Monomial],
    scales: &[f64],
    limits: &[usize],
) -> Vec<f64> {
    const B: usize = POINT_BLOCK;
    let rows = norms.len();
    let p = limits.iter().copied().max().unwrap_or(0);
    // Coordinates by column, zero-padded; padded points weigh 0, so they add exact zeros.
    let mut columns = vec![0.0; dim * B];
    for (i, x) in points.chunks_exact(dim).enumerate() {
        for (j, &v) in x.iter().enumerate() {
            columns[j * B + i] = v;
        }
    }
    let mut weighted = vec![0.0; scales.len() * B];
    for (s, &scale) in scales.iter().enumerate() {
        for i in 0..rows {
            let w = weights.map_or(1.0, |u| u[i]);
            weighted[s * B + i] = w * exp_normal(-0.5 * scale * norms[i]);
        }
    }
    let row = monos.len() + 1;
    let mut out = vec![0.0; scales.len() * row];
    for s in 0..scales.len() {
        out[s * row] = sum8(&weighted[s * B..(s + 1) * B], &[1.0; B]);
    }
    let mut stack = vec![1.0; (p + 1) * B];
    for (index, mono) in monos.iter().enumerate() {
        let (below, here) = stack.split_at_mut(mono.degree * B);
        let parent = &below[(mono.degree - 1) * B..];
        let here = &mut here[..B];
        let x = &columns[mono.var * B..(mono.var + 1) * B];
        for i in 0..B {
            here[i] = parent[i] * x[i];
        }
        for s in 0..scales.len() {
            if mono.degree <= limits[s] {
                out[s * row + 1 + index] = sum8(here, &weighted[s * B..(s + 1) * B]);
            }
        }
    }
    out
}

/// Σ a_i·b_i in eight running sums (lane i mod 8), then a fixed tree: the same bits for any
/// vector width.
#[inline(always)]
fn sum8(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

per_isa! {
    /// S_σ(c) for a block of centres (row-major) and every σ, laid out [σ][centre] (plain
    /// multiplies and adds: the baseline's bits on every copy).
    fn centre_sums(
        centres: &[f64],
        norms: &[f64],
        monos: &[Monomial],
        moments: &[f64],
        scales: &[f64],
        limits: &[usize],
    ) -> Vec<f64> {
        centre_sums_portable(centres, norms, monos, moments, scales, limits)
    }
}

#[inline(always)]
fn centre_sums_portable(
    centres: &[f64],
    norms: &[f64],
    monos: &[Monomial],
    moments: &[f64],
    scales: &[f64],
    limits: &[usize],
) -> Vec<f64> {
    const B: usize = CENTRE_BLOCK;
    let count = norms.len();
    let dim = centres.len() / count.max(1);
    let p = limits.iter().copied().max().unwrap_or(0);
    let row = monos.len() + 1;
    let mut columns = vec![0.0; dim * B];
    for (i, c) in centres.chunks_exact(dim).enumerate() {
        for (j, &v) in c.iter().enumerate() {
            columns[j * B + i] = v;
        }
    }
    // acc[σ][degree][centre]: each degree summed apart (see the error bound).
    let mut acc = vec![0.0; scales.len() * (p + 1) * B];
    for s in 0..scales.len() {
        acc[s * (p + 1) * B..][..B].fill(moments[s * row]);
    }
    let mut stack = vec![1.0; (p + 1) * B];
    let mut factor = [0.0; B];
    for (index, mono) in monos.iter().enumerate() {
        let (below, here) = stack.split_at_mut(mono.degree * B);
        let parent = &below[(mono.degree - 1) * B..];
        let here = &mut here[..B];
        let c = &columns[mono.var * B..(mono.var + 1) * B];
        for i in 0..B {
            factor[i] = c[i] * mono.inv;
        }
        for i in 0..B {
            here[i] = parent[i] * factor[i];
        }
        for s in 0..scales.len() {
            if mono.degree <= limits[s] {
                let moment = moments[s * row + 1 + index];
                let a = &mut acc[(s * (p + 1) + mono.degree) * B..][..B];
                for i in 0..B {
                    a[i] += here[i] * moment;
                }
            }
        }
    }
    let mut out = Vec::with_capacity(scales.len() * count);
    for (s, &scale) in scales.iter().enumerate() {
        for i in 0..count {
            let mut series = 0.0;
            for k in (0..=limits[s]).rev() {
                series += acc[(s * (p + 1) + k) * B + i];
            }
            out.push(exp_normal(-0.5 * scale * norms[i]) * series);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The multi-indices come once each, depth first: C(p + d, d) − 1 of them, every one's
    /// parent the last shallower one before it.
    #[test]
    fn monomials_are_each_multi_index_once() {
        for (dim, p) in [(1, 5), (3, 4), (8, 3)] {
            let monos = monomials(dim, p);
            assert_eq!(
                monos.len() as f64 + 1.0,
                monomial_count(p as u32, dim).unwrap()
            );
            let mut path = vec![vec![0u32; dim]];
            let mut seen = std::collections::HashSet::new();
            for m in &monos {
                path.truncate(m.degree);
                let mut alpha = path[m.degree - 1].clone();
                alpha[m.var] += 1;
                assert_eq!(m.inv, 1.0 / f64::from(alpha[m.var]));
                assert!(seen.insert(alpha.clone()), "{alpha:?} twice");
                path.push(alpha);
            }
        }
    }

    /// The AVX2 and AVX-512 copies the CPU has give the baseline's bits (moments and centre
    /// sums, weighted or not, blocks that are not full).
    #[test]
    fn wider_copies_give_the_baseline_bits() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let (dim, n, m) = (5, 201, 45);
        let points: Vec<f64> = (0..n * dim).map(|_| rng.random_range(-1.0..1.0)).collect();
        let norms: Vec<f64> = points
            .chunks(dim)
            .map(|x| x.iter().map(|v| v * v).sum())
            .collect();
        let centres: Vec<f64> = (0..m * dim).map(|_| rng.random_range(-1.0..1.0)).collect();
        let cnorms: Vec<f64> = centres
            .chunks(dim)
            .map(|x| x.iter().map(|v| v * v).sum())
            .collect();
        let weights: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let monos = monomials(dim, 6);
        let (scales, limits) = ([0.01, 0.09], [4, 6]);
        let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
        for w in [None, Some(weights.as_slice())] {
            let base = block_moments_portable(&points, &norms, w, dim, &monos, &scales, &limits);
            let sums = centre_sums_portable(&centres, &cnorms, &monos, &base, &scales, &limits);
            assert_eq!(
                bits(&base),
                bits(&block_moments(
                    &points, &norms, w, dim, &monos, &scales, &limits
                ))
            );
            assert_eq!(
                bits(&sums),
                bits(&centre_sums(
                    &centres, &cnorms, &monos, &base, &scales, &limits
                ))
            );
            #[cfg(target_arch = "x86_64")]
            {
                use crate::mech::fastmath::{has, Isa};
                if has(Isa::Avx2) {
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    let (a, b) = unsafe {
                        (
                            block_moments::avx2(&points, &norms, w, dim, &monos, &scales, &limits),
                            centre_sums::avx2(&centres, &cnorms, &monos, &base, &scales, &limits),
                        )
                    };
                    assert_eq!((bits(&base), bits(&sums)), (bits(&a), bits(&b)));
                }
                if has(Isa::Avx512) {
                    // SAFETY: the CPU has AVX-512 F and DQ (checked just above).
                    let (a, b) = unsafe {
                        (
                            block_moments::avx512(
                                &points, &norms, w, dim, &monos, &scales, &limits,
                            ),
                            centre_sums::avx512(&centres, &cnorms, &monos, &base, &scales, &limits),
                        )
                    };
                    assert_eq!((bits(&base), bits(&sums)), (bits(&a), bits(&b)));
                }
            }
        }
    }
}
