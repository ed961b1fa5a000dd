//! The Hamming kernel of Blahut–Arimoto in O(m) per step: a full step's terms
//! ([`hamming_terms`]), the cheap step between full ones (no division or full logarithm,
//! [`hamming_terms_cheap`], its error bound in its doc), the update of r, the sums, and the
//! copies compiled for AVX2 and AVX-512 that give the same bits (chosen at run time). The
//! iteration itself, and what it computes, is the parent module's.

use super::super::fastmath::{ln_normal_finish, ln_normal_reduce, per_isa, sum4};

/// One Hamming BA step's per-x work: Z_x, w_x = p_x/Z_x and the terms of Algorithm 2's MI
/// (nats); `f` and `s` are scratch of the same length. Each element is computed on its own, so
/// every instruction set gives the same bits; the wider ones only do more elements at once.
///
/// Two loops, not one: the first holds the two divisions (1/Z and the logarithm's f/(2 + f),
/// [`ln_normal_reduce`]), the second the logarithm's polynomial ([`ln_normal_finish`]), which is
/// all multiplies and adds. In one loop each element's chain of dependent operations (two
/// divisions' latency, then a Horner polynomial) is longer than the CPU can overlap across
/// iterations, and the loop ran at about half the rate its multiplies allow; split, each loop's
/// iterations overlap: 1.27× on this function alone at M = 1000 (CPU time, this AMD EPYC with AVX2),
/// 1.2× on the one-core sweep of benches/rate_distortion.rs. The operations and their order are
/// those of the single loop, so the bits are the same
/// (`hamming_terms_equal_the_single_loop_bitwise`). Writing −λ·d_x to `ti` between the loops,
/// and the scratch, costs stores that L1 absorbs. Measured and not taken: one division for
/// both quotients (1/(Z·(2 + f)), multiplied back) is no faster here, since the first loop is
/// then bound by its stores and multiplies rather than the divider, and it changes bits.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn hamming_terms(
    c: f64,
    total: f64,
    lambda: f64,
    p: &[f64],
    s: &[f64],
    z: &mut [f64],
    w: &mut [f64],
    ti: &mut [f64],
    f: &mut [f64],
    sq: &mut [f64],
) {
    for ((((((px, sx), zx), wx), ti), fx), sqx) in p
        .iter()
        .zip(s)
        .zip(z.iter_mut())
        .zip(w.iter_mut())
        .zip(ti.iter_mut())
        .zip(f.iter_mut())
        .zip(sq.iter_mut())
    {
        let zv = c * total + (1.0 - c) * sx;
        let inv = 1.0 / zv;
        *zx = zv;
        *wx = px * inv;
        *ti = -lambda * (1.0 - sx * inv);
        (*fx, *sqx) = ln_normal_reduce(zv);
    }
    for ((((px, zx), ti), fx), sqx) in p.iter().zip(&*z).zip(ti.iter_mut()).zip(&*f).zip(&*sq) {
        *ti = px * (*ti - ln_normal_finish(*zx, *fx, *sqx));
    }
}

/// E[d(X, X̂)] of the channel a Hamming step builds from r: Σ_x p_x (1 − s_x/Z_x), from the
/// step's own Z (so with the operations of the step itself). Only the returned channel needs
/// it, so the iterations do not compute it.
pub(super) fn hamming_distortion(p: &[f64], s: &[f64], z: &[f64]) -> f64 {
    let td: Vec<f64> = p
        .iter()
        .zip(s)
        .zip(z)
        .map(|((px, sx), zx)| {
            let inv = 1.0 / zx;
            px * (1.0 - sx * inv)
        })
        .collect();
    sum4(&td)
}

per_isa! {
    /// [`hamming_terms`] for the widest instruction set this CPU has (AVX2: 4 lanes, AVX-512:
    /// 8, instead of SSE2's 2). Rust never fuses a multiply and an add on its own, so enabling
    /// FMA does not change any result.
    pub(super) fn hamming_terms_dispatch(
        c: f64,
        total: f64,
        lambda: f64,
        p: &[f64],
        s: &[f64],
        z: &mut [f64],
        w: &mut [f64],
        ti: &mut [f64],
        f: &mut [f64],
        sq: &mut [f64],
    ) {
        hamming_terms(c, total, lambda, p, s, z, w, ti, f, sq)
    }
}

/// Where the cheap Hamming step applies: |e_x| ≤ 2⁻⁷ for every x ([`hamming_terms_cheap`]).
pub(super) const CHEAP_BOUND: f64 = 1.0 / 128.0;
/// The degree K of the logarithm's series (|e|⁸ ≤ 2⁻⁵⁶ at the bound). Measured at M = 1000
/// (one-core sweep, loaded machine, when 1/Z too was a series of degree K): 2⁻⁷ with K = 7
/// 0.63 s, 2⁻¹⁰ with K = 5 0.70 s, 2⁻¹² with K = 4 0.82 s: the shorter series are outweighed
/// by the full steps a tighter bound sends Z back to.
pub(super) const SERIES_DEGREE: usize = 7;

/// A Hamming BA step's per-x terms (as [`hamming_terms`]: Z_x, w_x = p_x/Z_x, the MI terms)
/// without a division or a full logarithm, from a reference: y_x = 1/Z′_x and l_x = ln Z′_x
/// of an earlier step's Z′ (`y_ref`, `l_ref`). With e = 1 − Z·y (one fused multiply-add),
/// Z·y = 1 − e, so
///
///   1/Z: three Newton steps from y (y₁ = y(1 + e), then yₖ₊₁ = yₖ + yₖ(1 − Z·yₖ)),
///   ln Z = l + ln(Z·y) − ln(Z′·y) = l − (e + e²/2 + … + e⁷/7) − R₈ − ln(Z′·y),
///
/// in fused multiply-adds (the series by Horner's rule). The MI term of x is written as
/// λ·s_x·w_x − p_x ln Z_x, which is p_x(−λd_x − ln Z_x) + λp_x (d_x = 1 − s_x/Z_x); the step
/// adds −λ·Σp once. Returns how many x have |e| > 2⁻⁷
/// ([`CHEAP_BOUND`]; the caller then discards the outputs and takes the full step, whose Z
/// becomes the next reference), and Σ of the MI terms and of w ([`sum_lanes`]), which the
/// full step and the update otherwise sum with `sum4`.
///
/// Why: the full step takes two divisions per x (1/Z and the logarithm's f/(2 + f)), and the
/// divider, not the multiplies, bounded it (≈ 7 cycles per x at M = 1000). Near convergence Z
/// moves little between steps, so all but ~1 % of the steps of the benchmark's sweeps are
/// cheap. Measured (one-core 200-λ sweep, M = 1000, loaded machine): 1.44 s → 0.79 s with the
/// cheap terms (1/Z then by the series y(1 + e + … + e⁷)), → 0.63–0.70 s with the sums in 32
/// running sums instead of `sum4`'s 4, → 0.58–0.59 s (0.63–0.67 s side by side) with Newton's
/// 5 operations for 1/Z instead of the series' 8 and the MI term in 3 operations instead of 5,
/// → 0.52–0.56 s (0.58–0.61 s side by side) with Σr taken by the update as it writes r. Σw and
/// the MI terms taken the same way in this pass measured slower (0.59–0.68 s against
/// 0.53–0.54 s): the compiler's code for the heavier loop got worse, so they are summed after.
///
/// # Error bound (|e| ≤ 2⁻⁷, u = 2⁻⁵³)
/// - 1/Z: Z·y₁ = 1 − e² exactly before y₁'s rounding, so y₁ is within e² + u of 1/Z, y₂
///   within (e² + u)² + u, y₃ within ((e² + u)² + u)² + u < 2⁻⁵⁶ + 1.01u relative (e is
///   1 − Z·yₖ rounded once, which changes the next error by u·|e| only): 1/Z within 1.2u
///   (the full step's division: 0.5u).
/// - ln Z: y = (1 + η)/Z′ with |η| ≤ u (a correctly rounded division), so ln(Z′·y) = ln(1 + η)
///   is at most u; R₈ ≤ |e|⁸/(8(1 − |e|)) < 2⁻⁵⁹; the series' roundings are ≤ u·|e| ≤ 2⁻⁶⁰;
///   the sum with l (|l| ≤ λ + ln m) rounds once, ½ ulp of |ln Z| (as the full logarithm's
///   last operation does), and l itself is within 1 ulp ([`ln_normal`]). So ln Z is within
///   1.5 ulp(|ln Z|) + 1.3u absolute, under 4·10⁻¹⁵ for Z ≥ e⁻¹⁰ (λ ≤ 10).
/// - the MI term: λ·s·w within 3.2u relative (≤ λ·p·3.2u), p·ln Z within u of its value; the
///   fused multiply-add rounds once, and −λΣp adds one rounding of λ to the step's sum.
///
/// The MI of a step is Σ p_x(−λd_x − ln Z_x) with Σ p = 1, so it moves by at most the error of
/// ln Z plus λ times that of d_x = 1 − s_x/Z_x (≤ 3u), plus the sums' roundings (~m·u·Σ|terms|
/// at worst, as before): below 10⁻¹⁴ nats for λ ≤ 10 on the tests. R(D) and D are therefore
/// today's within far less than the 10⁻⁹ that issue #39 allows; the stopping rule |I₀ − I| < T
/// can change only where |I₀ − I| lies within 10⁻¹⁴ of T (one iteration earlier or later).
/// `cheap_steps_keep_rd_within_1e_9` compares whole sweeps with the full steps.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn hamming_terms_cheap(
    c: f64,
    total: f64,
    lambda: f64,
    p: &[f64],
    s: &[f64],
    z: &mut [f64],
    w: &mut [f64],
    ti: &mut [f64],
    y_ref: &[f64],
    l_ref: &[f64],
) -> CheapSums {
    let mut over = 0;
    for ((((((px, sx), zx), wx), tx), y), l) in p
        .iter()
        .zip(s)
        .zip(z.iter_mut())
        .zip(w.iter_mut())
        .zip(ti.iter_mut())
        .zip(y_ref)
        .zip(l_ref)
    {
        let o;
        (*zx, *wx, *tx, o) = cheap_term(c, total, lambda, *px, *sx, *y, *l);
        over += usize::from(o);
    }
    CheapSums {
        over,
        mi_terms: sum_lanes(ti),
        w: sum_lanes(w),
    }
}

/// What [`hamming_terms_cheap`] returns besides its slices: how many x had |e| > 2⁻⁷ (the
/// outputs are then to be discarded), Σ of the MI terms and Σ w ([`sum_lanes`]).
pub(super) struct CheapSums {
    pub(super) over: usize,
    pub(super) mi_terms: f64,
    pub(super) w: f64,
}

/// Σ v in [`SUM_LANES`] running sums: element i goes to sum i mod SUM_LANES, in order, and the
/// sums are added pairwise in a fixed tree, then the tail in order: the same bits on every CPU.
/// (`sum4`'s four sums are one AVX2 vector whose adds wait on each other: at M = 1000 three
/// such sums per step took as long as the rest of it.)
#[inline(always)]
pub(super) fn sum_lanes(v: &[f64]) -> f64 {
    let mut acc = [0.0; SUM_LANES];
    let chunks = v.chunks_exact(SUM_LANES);
    let tail: f64 = chunks.remainder().iter().sum();
    for c in chunks {
        for l in 0..SUM_LANES {
            acc[l] += c[l];
        }
    }
    lanes_tree(acc) + tail
}

/// [`sum_lanes`]' running sums added pairwise in a fixed order.
#[inline(always)]
pub(super) fn lanes_tree(mut acc: [f64; SUM_LANES]) -> f64 {
    let mut width = SUM_LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] += acc[i + width];
        }
    }
    acc[0]
}

/// Running sums of [`sum_lanes`]: four AVX-512 vectors, eight AVX2 ones.
pub(super) const SUM_LANES: usize = 32;

/// One x of [`hamming_terms_cheap`]: (Z, w, MI term, |e| > 2⁻⁷).
#[inline(always)]
pub(super) fn cheap_term(
    c: f64,
    total: f64,
    lambda: f64,
    px: f64,
    sx: f64,
    y: f64,
    l: f64,
) -> (f64, f64, f64, bool) {
    // 1/k for the logarithm's series (k = 1 … SERIES_DEGREE).
    const INV: [f64; SERIES_DEGREE] = {
        let mut v = [0.0; SERIES_DEGREE];
        let mut k = 0;
        while k < SERIES_DEGREE {
            v[k] = 1.0 / (k + 1) as f64;
            k += 1;
        }
        v
    };
    let zv = c * total + (1.0 - c) * sx;
    let e = (-zv).mul_add(y, 1.0);
    // 1/Z by three Newton steps from y: y₁ = y(1 + e) has Z·y₁ = 1 − e², and each step squares
    // the relative error again (e⁸ ≤ 2⁻⁵⁶ after the third).
    let y1 = y.mul_add(e, y);
    let e1 = (-zv).mul_add(y1, 1.0);
    let y2 = y1.mul_add(e1, y1);
    let e2 = (-zv).mul_add(y2, 1.0);
    let inv = y2.mul_add(e2, y2);
    // ln(1 − e) = −e·(1 + e/2 + … + e^(K−1)/K), K = SERIES_DEGREE.
    let mut h = INV[SERIES_DEGREE - 1];
    for k in (0..SERIES_DEGREE - 1).rev() {
        h = h.mul_add(e, INV[k]);
    }
    let ln_z = (-e).mul_add(h, l);
    let wv = px * inv;
    // p(−λd − ln Z) + λp = λ·s·w − p·ln Z, d = 1 − s/Z: the −λp are added once per step.
    (
        zv,
        wv,
        (lambda * sx).mul_add(wv, -(px * ln_z)),
        e.abs() > CHEAP_BOUND,
    )
}

/// The Hamming update for nz = 1, fused with the sum the next step needs: r_j ← r_j·(c·Σw +
/// (1 − c)·w_j) (the operations of [`Kernel::update`]), and returns Σ r (in [`SUM_LANES`]
/// running sums).
#[inline(always)]
pub(super) fn hamming_update_sum(c: f64, sw: f64, w: &[f64], r: &mut [f64]) -> f64 {
    // One pass: the running sums of sum_lanes taken as r is written (the same additions in the
    // same order, so sum_lanes' bits).
    let mut acc = [0.0; SUM_LANES];
    let mut rc = r.chunks_exact_mut(SUM_LANES);
    let mut wc = w.chunks_exact(SUM_LANES);
    for (rr, ww) in (&mut rc).zip(&mut wc) {
        for l in 0..SUM_LANES {
            rr[l] *= c * sw + (1.0 - c) * ww[l];
            acc[l] += rr[l];
        }
    }
    let mut tail = 0.0;
    for (rj, wj) in rc.into_remainder().iter_mut().zip(wc.remainder()) {
        *rj *= c * sw + (1.0 - c) * wj;
        tail += *rj;
    }
    lanes_tree(acc) + tail
}

per_isa! {
    /// [`hamming_update_sum`] for the widest instruction set this CPU has (multiplies and adds
    /// only: the same bits on each).
    pub(super) fn hamming_update_sum_dispatch(c: f64, sw: f64, w: &[f64], r: &mut [f64]) -> f64 {
        hamming_update_sum(c, sw, w, r)
    }
}

per_isa! {
    /// [`hamming_terms_cheap`] for the widest instruction set this CPU has. Its fused
    /// multiply-adds are instructions there and calls of the software `fma` (correctly rounded
    /// too: the same bits, tested) on the baseline.
    pub(super) fn hamming_terms_cheap_dispatch(
        c: f64,
        total: f64,
        lambda: f64,
        p: &[f64],
        s: &[f64],
        z: &mut [f64],
        w: &mut [f64],
        ti: &mut [f64],
        y_ref: &[f64],
        l_ref: &[f64],
    ) -> CheapSums {
        hamming_terms_cheap(c, total, lambda, p, s, z, w, ti, y_ref, l_ref)
    }
}
