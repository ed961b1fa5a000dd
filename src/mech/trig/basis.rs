//! The trigonometric (Chebyshev) query basis of Huang 2014 §2.1, the grid A^d the data are
//! snapped to, the 1/L lattice answers are rounded to, and the parameter schedules of
//! Algorithm 4 line 1 (ε-DP) and Algorithm 5 line 1 ((ε, δ)-DP).
//!
//! A basis function is φ_r(x) = Π_j cos(r_j · arccos x_j) = Π_j T_{r_j}(x_j) for a multi-index
//! r ∈ T_t^d = {0, …, t−1}^d (T_k is the Chebyshev polynomial of the first kind). We evaluate
//! T_k by the three-term recurrence T_{k+1} = 2x·T_k − T_{k−1} instead of cos(k·arccos x): the
//! two agree to rounding on [−1, 1] and the recurrence needs no transcendental calls.
//!
//! **Order of the basis.** Algorithm 9 line 4 takes "the first R multi-indices of T_t^d in
//! ascending ‖r‖₁". The thesis does not say how ties are broken; we break them in descending
//! lexicographic order (so in d = 2 the degree-1 functions come as (1,0), (0,1)), which is also
//! the order of the peer benchmark `bench_lp.py`. With t = 2 — what the schedule gives on
//! every dataset of chapter 3 — the first 1 + d functions are the constant and the d
//! coordinates; R = 102 on CRM (d = 101) is exactly that set.
//!
//! **Two different L.** Algorithms 9 and 10 use L both for the lattice 𝓛 = {i/L} of line 1 and
//! for the iteration count of private PCA. Here the lattice is [`Schedule::lattice`]; the PCA
//! iterations live with [`super::psi`].

use crate::mech::ParamRangeError;

/// A multi-index r, stored sparsely as (coordinate, degree) for the non-zero degrees: the
/// bases of chapter 3 touch at most a few of up to 101 coordinates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiIndex {
    pub terms: Vec<(usize, u32)>,
}

impl MultiIndex {
    /// ‖r‖₁, the degree of φ_r.
    #[cfg(test)]
    pub(crate) fn degree(&self) -> u32 {
        self.terms.iter().map(|&(_, k)| k).sum()
    }

    /// The dense form (r_1, …, r_d).
    #[cfg(test)]
    pub(crate) fn dense(&self, dim: usize) -> Vec<u32> {
        let mut r = vec![0; dim];
        for &(j, k) in &self.terms {
            r[j] = k;
        }
        r
    }
}

/// The first `count` multi-indices of {0, …, t−1}^dim in ascending ‖r‖₁, ties in descending
/// lexicographic order. Fails when T_t^d has fewer than `count` elements.
pub fn lowest_order(dim: usize, t: u32, count: usize) -> Result<Vec<MultiIndex>, ParamRangeError> {
    if dim == 0 || t == 0 {
        return Err(ParamRangeError {
            name: "dimension",
            value: format!("d = {dim}, t = {t}"),
            valid: "the data need d ≥ 1 and the schedule t ≥ 1".into(),
        });
    }
    if count > MAX_BASES {
        return Err(ParamRangeError {
            name: "bases",
            value: count.to_string(),
            valid: format!("must be ≤ {MAX_BASES} (each basis function is one LP row)"),
        });
    }
    let total = (t as f64).powi(dim.min(i32::MAX as usize) as i32);
    if (count as f64) > total {
        return Err(ParamRangeError {
            name: "bases",
            value: count.to_string(),
            valid: format!("must be ≤ t^d = {t}^{dim} = {total} (the basis functions of degree < t in each coordinate)"),
        });
    }
    let mut out = Vec::with_capacity(count);
    let max_degree = (t as usize - 1) * dim;
    let mut current = Vec::new();
    for degree in 0..=max_degree {
        if out.len() == count {
            break;
        }
        compositions(dim, 0, degree as u32, t - 1, &mut current, &mut out, count);
    }
    Ok(out)
}

/// Appends, in descending lexicographic order, the ways of writing `left` as a sum over the
/// coordinates `from..dim`, each part ≤ `cap`, until `out` holds `count` indices.
fn compositions(
    dim: usize,
    from: usize,
    left: u32,
    cap: u32,
    current: &mut Vec<(usize, u32)>,
    out: &mut Vec<MultiIndex>,
    count: usize,
) {
    if out.len() == count {
        return;
    }
    if left == 0 {
        out.push(MultiIndex {
            terms: current.clone(),
        });
        return;
    }
    // Not enough coordinates left to hold the remaining degree.
    if ((dim - from) as u64) * (cap as u64) < left as u64 {
        return;
    }
    for k in (0..=left.min(cap)).rev() {
        if k > 0 {
            current.push((from, k));
        }
        compositions(dim, from + 1, left - k, cap, current, out, count);
        if k > 0 {
            current.pop();
        }
        if out.len() == count {
            return;
        }
    }
}

/// Every multi-index of {0, …, t−1}^dim (Algorithm 4 uses the whole of T_t^d), in the same order.
pub(crate) fn full_grid(dim: usize, t: u32) -> Result<Vec<MultiIndex>, ParamRangeError> {
    let total = (t as f64).powi(dim as i32);
    if total > MAX_FULL_BASES as f64 {
        return Err(ParamRangeError {
            name: "t^d",
            value: format!("{t}^{dim} = {total}"),
            valid: format!("the full-grid mechanism (Algorithm 4) needs t^d ≤ {MAX_FULL_BASES}; use the improved mechanism for larger d"),
        });
    }
    lowest_order(dim, t, total as usize)
}

/// Largest number of basis functions (LP rows) any variant accepts.
pub(crate) const MAX_BASES: usize = 1_000_000;

/// Largest number of basis functions (LP rows) the full-grid mechanism accepts.
pub(crate) const MAX_FULL_BASES: usize = 20_000;

/// Values of φ_r at `points` (row-major, `dim` columns): one column of `bases.len()` values per
/// point, column-major — the layout of W in the LP (`W[r, a]` = φ_r(a)).
pub fn basis_matrix(bases: &[MultiIndex], points: &[f64], dim: usize) -> Vec<f64> {
    let max_k = bases
        .iter()
        .flat_map(|r| r.terms.iter().map(|&(_, k)| k))
        .max()
        .unwrap_or(0) as usize;
    let rows = bases.len();
    let count = points.len() / dim.max(1);
    let mut w = vec![0.0; rows * count];
    let mut cheb = vec![0.0; dim * (max_k + 1)];
    for (p, col) in points
        .chunks_exact(dim)
        .zip(w.chunks_exact_mut(rows.max(1)))
    {
        chebyshev_table(p, max_k, &mut cheb);
        for (r, out) in bases.iter().zip(col.iter_mut()) {
            *out = r
                .terms
                .iter()
                .map(|&(j, k)| cheb[j * (max_k + 1) + k as usize])
                .product();
        }
    }
    w
}

/// Σ_x φ_r(x) / n for every basis function: the answers b_r of Algorithm 4 line 8.
pub(crate) fn basis_means(bases: &[MultiIndex], points: &[f64], dim: usize) -> Vec<f64> {
    let rows = bases.len();
    let n = points.len() / dim.max(1);
    let mut sums = vec![0.0; rows];
    // Blocks of points keep the temporary matrix small; the sum order is fixed.
    for block in points.chunks(dim * 4096) {
        let w = basis_matrix(bases, block, dim);
        for col in w.chunks_exact(rows.max(1)) {
            for (s, v) in sums.iter_mut().zip(col) {
                *s += v;
            }
        }
    }
    sums.iter().map(|s| s / n as f64).collect()
}

/// T_0(x_j) … T_maxk(x_j) for each coordinate, by the Chebyshev recurrence.
fn chebyshev_table(x: &[f64], max_k: usize, out: &mut [f64]) {
    let stride = max_k + 1;
    for (j, &xj) in x.iter().enumerate() {
        let row = &mut out[j * stride..(j + 1) * stride];
        row[0] = 1.0;
        if max_k >= 1 {
            row[1] = xj;
        }
        for k in 2..=max_k {
            row[k] = 2.0 * xj * row[k - 1] - row[k - 2];
        }
    }
}

/// The grid A = {a_k = (2k + 1 − N)/N : k = 0, …, N−1}: the centres of N equal cells of [−1, 1].
pub(crate) fn grid_point(k: u64, n: u64) -> f64 {
    (2.0 * k as f64 + 1.0 - n as f64) / n as f64
}

/// argmin_{a ∈ A} |x − a| (Algorithm 4 line 4): the centre of x's cell, [`grid_point`] of
/// [`cell`].
pub(crate) fn snap(x: f64, n: u64) -> f64 {
    grid_point(cell(x, n), n)
}

/// The index k of x's cell among N equal cells of [−1, 1]: ⌊(x + 1)·N/2⌋, clamped to
/// 0 ..= N − 1, so values outside [−1, 1] (e.g. points drawn in an ellipsoid) go to the end
/// cells, NaN to the first; on a cell boundary the upper cell is taken (both centres are
/// equally near). The floor is the conversion to an integer, which truncates: equal to
/// `f64::floor` for the non-negative values it is applied to (negative ones clamp to 0
/// anyway), and an instruction where baseline x86-64 calls libm's `floor` (no rounding
/// instruction before SSE4.1); out-of-range values saturate, then clamp.
pub(crate) fn cell(x: f64, n: u64) -> u64 {
    let v = (x + 1.0) * n as f64 / 2.0;
    if v >= 0.0 {
        (v as u64).min(n.saturating_sub(1))
    } else {
        0
    }
}

/// argmin_{l ∈ 𝓛} |x − l| for 𝓛 = {i/L : i = −L, …, L} (Algorithm 4 lines 10 and 15): values
/// beyond ±1 (a noisy answer can be) go to ±1; halves round away from zero.
pub(crate) fn to_lattice(x: f64, lattice: u64) -> f64 {
    let l = lattice as f64;
    (round_half_away(x * l) / l).clamp(-1.0, 1.0)
}

/// `f64::round` (halves away from zero, the sign of zero kept) through the conversion to an
/// integer, which truncates: an instruction where baseline x86-64 calls libm's `round` (no
/// rounding instruction before SSE4.1; 4 % of an improved synthesis went to those calls, one
/// per LP entry). For |y| < 2⁵² the fraction y − trunc(y) is exact, so comparing it with ½
/// decides as `round` does; larger magnitudes are integers already, and NaN and ±∞ are
/// returned as they are, as `round` returns them.
fn round_half_away(y: f64) -> f64 {
    const EXACT: f64 = 4_503_599_627_370_496.0; // 2⁵²
    let a = y.abs();
    if a.is_nan() || a >= EXACT {
        return y;
    }
    let whole = a as u64 as f64;
    let up = if a - whole >= 0.5 { whole + 1.0 } else { whole };
    up.copysign(y)
}

/// The sizes of Algorithm 4/5 line 1, from n, d, K (and δ).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// Basis functions have degree < t in each coordinate.
    pub t: u32,
    /// Grid cells per coordinate (N).
    pub grid: u64,
    /// Size m of the sampled synthetic database (may be astronomically large).
    pub sample_size: f64,
    /// Lattice 1/L for rounding answers and basis values.
    pub lattice: u64,
}

/// Algorithm 4 line 1: t = ⌈n^{1/(2d+K)}⌉, N = ⌈n^{K/(2d+K)}⌉, m = ⌈n^{1+(K+1)/(2d+K)}⌉,
/// L = ⌈n^{(d+K)/(2d+K)}⌉.
pub(crate) fn schedule_pure(
    n: usize,
    dim: usize,
    smoothness: f64,
) -> Result<Schedule, ParamRangeError> {
    check_schedule(n, dim, smoothness)?;
    let (n, d, k) = (n as f64, dim as f64, smoothness);
    let e = 2.0 * d + k;
    Ok(Schedule {
        t: ceil_u32(n.powf(1.0 / e)),
        grid: ceil_u64(n.powf(k / e)),
        sample_size: ceil_power(n.powf(1.0 + (k + 1.0) / e)),
        lattice: ceil_u64(n.powf((d + k) / e)),
    })
}

/// Algorithm 5 line 1, with ℓ = ln(1/δ) and e = 3d + 2K: t = ⌈n^{2/e} ℓ^{−1/e}⌉,
/// N = ⌈n^{2K/e} ℓ^{−K/e}⌉, m = ⌈n^{(4d+4K+2)/e} ℓ^{−(2d+2K+1)/e}⌉, L = ⌈n^{(2d+2K)/e} ℓ^{−(d+K)/e}⌉.
pub(crate) fn schedule_approx(
    n: usize,
    dim: usize,
    smoothness: f64,
    delta: f64,
) -> Result<Schedule, ParamRangeError> {
    check_schedule(n, dim, smoothness)?;
    if !(delta > 0.0 && delta < 1.0) {
        return Err(ParamRangeError {
            name: "delta",
            value: delta.to_string(),
            valid: "must be in (0, 1) for the (ε, δ) mechanism".into(),
        });
    }
    let (n, d, k, l) = (n as f64, dim as f64, smoothness, (1.0 / delta).ln());
    let e = 3.0 * d + 2.0 * k;
    Ok(Schedule {
        t: ceil_u32(n.powf(2.0 / e) * l.powf(-1.0 / e)),
        grid: ceil_u64(n.powf(2.0 * k / e) * l.powf(-k / e)),
        sample_size: ceil_power(
            n.powf((4.0 * d + 4.0 * k + 2.0) / e) * l.powf(-(2.0 * d + 2.0 * k + 1.0) / e),
        ),
        lattice: ceil_u64(n.powf((2.0 * d + 2.0 * k) / e) * l.powf(-(d + k) / e)),
    })
}

fn check_schedule(n: usize, dim: usize, smoothness: f64) -> Result<(), ParamRangeError> {
    if n == 0 || dim == 0 {
        return Err(ParamRangeError {
            name: "data",
            value: format!("{n} × {dim}"),
            valid: "needs at least one row and one column".into(),
        });
    }
    crate::mech::check_positive("smoothness K", smoothness)
}

/// ⌈x⌉ for a power computed in floating point: n^{K/(2d+K)} can land an ulp above an exact
/// integer (10^5^0.2 = 10.000000000000002), so values within 1e-12 (relative) of an integer
/// count as that integer.
fn ceil_power(x: f64) -> f64 {
    (x * (1.0 - 1e-12)).ceil()
}

fn ceil_u32(x: f64) -> u32 {
    ceil_power(x).clamp(1.0, u32::MAX as f64) as u32
}

fn ceil_u64(x: f64) -> u64 {
    ceil_power(x).clamp(1.0, u64::MAX as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(v: &[MultiIndex], d: usize) -> Vec<Vec<u32>> {
        v.iter().map(|r| r.dense(d)).collect()
    }

    #[test]
    fn order_is_degree_then_descending_lex() {
        let got = dense(&lowest_order(2, 3, 9).unwrap(), 2);
        let want: Vec<Vec<u32>> = vec![
            vec![0, 0],
            vec![1, 0],
            vec![0, 1],
            vec![2, 0],
            vec![1, 1],
            vec![0, 2],
            vec![2, 1],
            vec![1, 2],
            vec![2, 2],
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn order_matches_a_brute_force_sort() {
        for (d, t) in [(1, 5), (3, 3), (4, 2), (2, 6)] {
            let total = (t as usize).pow(d as u32);
            let mut all: Vec<Vec<u32>> = (0..total)
                .map(|mut i| {
                    (0..d)
                        .map(|_| {
                            let k = (i % t as usize) as u32;
                            i /= t as usize;
                            k
                        })
                        .collect()
                })
                .collect();
            all.sort_by(|a, b| {
                let (sa, sb): (u32, u32) = (a.iter().sum(), b.iter().sum());
                sa.cmp(&sb).then(b.cmp(a))
            });
            assert_eq!(dense(&full_grid(d, t).unwrap(), d), all, "d={d} t={t}");
        }
    }

    #[test]
    fn large_dimension_prefix_is_constant_then_coordinates() {
        let v = lowest_order(101, 2, 102).unwrap();
        assert_eq!(v[0].terms, vec![]);
        for (j, r) in v[1..].iter().enumerate() {
            assert_eq!(r.terms, vec![(j, 1)]);
        }
        let v = lowest_order(8, 2, 50).unwrap();
        assert_eq!(v.iter().filter(|r| r.degree() == 2).count(), 28);
        assert_eq!(v.iter().filter(|r| r.degree() == 3).count(), 13);
    }

    #[test]
    fn too_many_bases_is_an_error() {
        let e = lowest_order(2, 2, 5).unwrap_err();
        assert!(e.to_string().contains("t^d = 2^2 = 4"), "{e}");
        assert!(full_grid(20, 3).is_err());
        assert!(lowest_order(101, 2, 1_000_000_000_000).is_err());
    }

    #[test]
    fn basis_values_equal_cos_of_arccos() {
        let bases = lowest_order(3, 5, 60).unwrap();
        let pts = [0.3, -0.9, 0.99, -1.0, 1.0, 0.0, 0.123, -0.456, 0.789];
        let w = basis_matrix(&bases, &pts, 3);
        for (p, col) in pts.chunks(3).zip(w.chunks(bases.len())) {
            for (r, v) in bases.iter().zip(col) {
                let want: f64 = r
                    .dense(3)
                    .iter()
                    .zip(p)
                    .map(|(&k, &x)| (k as f64 * x.acos()).cos())
                    .product();
                assert!((v - want).abs() < 1e-12, "{r:?} at {p:?}: {v} vs {want}");
            }
        }
        let means = basis_means(&bases, &pts, 3);
        for (i, m) in means.iter().enumerate() {
            let want = (w[i] + w[bases.len() + i] + w[2 * bases.len() + i]) / 3.0;
            assert!((m - want).abs() < 1e-15);
        }
    }

    #[test]
    fn snapping_and_lattice() {
        // N = 4: A = {−0.75, −0.25, 0.25, 0.75}.
        assert_eq!(snap(-1.0, 4), -0.75);
        assert_eq!(snap(-0.6, 4), -0.75);
        assert_eq!(snap(-0.4, 4), -0.25);
        assert_eq!(snap(0.0, 4), 0.25); // a boundary: the upper cell
        assert_eq!(snap(1.0, 4), 0.75);
        assert_eq!(snap(7.0, 4), 0.75);
        assert_eq!(snap(-7.0, 4), -0.75);
        // The integer conversion against the floor it replaces, on cell boundaries, their
        // neighbours, far outside the cube, ±∞, NaN and −0.
        let reference = |x: f64, n: u64| -> u64 {
            let k = ((x + 1.0) * n as f64 / 2.0).floor();
            if k.is_nan() {
                0
            } else {
                k.clamp(0.0, n as f64 - 1.0) as u64
            }
        };
        for n in [1, 2, 3, 10, 316, 20_392] {
            let mut xs = vec![
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                -0.0,
                1e300,
                -1e300,
            ];
            for k in 0..=n.min(400) {
                let b = -1.0 + 2.0 * k as f64 / n as f64;
                xs.extend([b, b.next_up(), b.next_down(), b + 0.5 / n as f64]);
            }
            for x in xs {
                assert_eq!(cell(x, n), reference(x, n), "x = {x}, N = {n}");
            }
        }
        for n in [1, 2, 3, 10, 101] {
            for i in 0..=200 {
                let x = -1.0 + i as f64 / 100.0;
                let s = snap(x, n);
                let best = (0..n)
                    .map(|k| (grid_point(k, n) - x).abs())
                    .fold(f64::INFINITY, f64::min);
                assert!((s - x).abs() <= best + 1e-12, "x={x} N={n}");
            }
        }
        // The conversion against the `round` it replaces: halves, their neighbours, ±0, small
        // and large magnitudes, 2⁵² and beyond, ±∞ and NaN; the same bits.
        let mut ys = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e300,
            -1e300,
        ];
        for k in 0..2000 {
            let h = k as f64 * 0.5;
            for y in [
                h,
                h.next_up(),
                h.next_down(),
                0.49999999999999994,
                4_503_599_627_370_495.5,
            ] {
                ys.extend([y, -y]);
            }
        }
        for e in 40..60 {
            let big = 2f64.powi(e);
            ys.extend([big + 0.5, big - 0.5, (big + 0.5).next_up(), -(big + 0.5)]);
        }
        for y in ys {
            assert_eq!(round_half_away(y).to_bits(), y.round().to_bits(), "y = {y}");
        }
        assert_eq!(to_lattice(0.26, 4), 0.25);
        assert_eq!(to_lattice(1.7, 4), 1.0);
        assert_eq!(to_lattice(-3.0, 4), -1.0);
        assert_eq!(to_lattice(0.125, 4), 0.25);
    }

    #[test]
    fn schedules_follow_line_one() {
        // CSN at σ = 2 (K = 4): t = ⌈10^(5/20)⌉ = 2, N = ⌈10^(20/20)⌉ = 10,
        // m = ⌈10^(5·(1 + 5/20))⌉, L = ⌈10^(5·12/20)⌉ = 1000.
        let s = schedule_pure(100_000, 8, 4.0).unwrap();
        assert_eq!((s.t, s.grid, s.lattice), (2, 10, 1000));
        assert_eq!(s.sample_size, 10f64.powf(6.25).ceil());
        let a = schedule_approx(100_000, 8, 4.0, 1e-3).unwrap();
        let l = 1000f64.ln();
        assert_eq!(
            a.t,
            (10f64.powf(10.0 / 32.0) * l.powf(-1.0 / 32.0)).ceil() as u32
        );
        assert_eq!(
            a.grid,
            (10f64.powf(40.0 / 32.0) * l.powf(-4.0 / 32.0)).ceil() as u64
        );
        assert!(schedule_pure(0, 3, 1.0).is_err());
        assert!(schedule_pure(10, 3, 0.0).is_err());
        assert!(schedule_approx(10, 3, 1.0, 1.0).is_err());
    }
}
