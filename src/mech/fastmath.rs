//! Elementary functions written so that loops over slices vectorise (branch-free, no libm
//! calls), for inner loops that would otherwise spend most of their time in `f64::ln`.

/// Natural logarithm of a positive, normal, finite `x`, to within 1 ulp: fdlibm's `__ieee754_log`
/// without its special-case branches (zero, negative, subnormal, ∞ and NaN are the caller's to
/// exclude). The mantissa is scaled into [√2/2, √2) by integer operations on the bits, then
/// ln(1 + f) = 2 atanh(f/(2 + f)) by fdlibm's minimax polynomial.
///
/// It is [`ln_normal_reduce`] followed by [`ln_normal_finish`]: a loop over many values can run
/// the two halves as two loops (see `rate_distortion::hamming_terms`) and get the same bits.
#[inline(always)]
pub(crate) fn ln_normal(x: f64) -> f64 {
    let (f, s) = ln_normal_reduce(x);
    ln_normal_finish(x, f, s)
}

/// fdlibm's high word of x, offset so that its exponent field holds k + 0x3ff where
/// x = 2ᵏ·m, m ∈ [√2/2, √2). Unsigned arithmetic only: for positive x the high word stays
/// positive, and SSE2/AVX2 have logical but no arithmetic 64-bit shifts.
#[inline(always)]
fn ln_high_word(x: f64) -> u64 {
    (x.to_bits() >> 32) + (0x3ff0_0000 - 0x3fe6_a09e)
}

/// The first half of [`ln_normal`]: f = m − 1 and s = f/(2 + f), where x = 2ᵏ·m with
/// m ∈ [√2/2, √2) (f is exact; s is the one division of the logarithm).
#[inline(always)]
pub(crate) fn ln_normal_reduce(x: f64) -> (f64, f64) {
    let u = x.to_bits();
    let hx = ln_high_word(x);
    let m = f64::from_bits((((hx & 0x000f_ffff) + 0x3fe6_a09e) << 32) | (u & 0xffff_ffff));
    let f = m - 1.0;
    (f, f / (2.0 + f))
}

/// The second half of [`ln_normal`]: k·ln 2 + ln(1 + f) from x (for k, re-read from its bits)
/// and [`ln_normal_reduce`]'s (f, s): multiplies and adds only.
#[inline(always)]
pub(crate) fn ln_normal_finish(x: f64, f: f64, s: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const LG1: f64 = 6.666_666_666_666_735e-1;
    const LG2: f64 = 3.999_999_999_940_942e-1;
    const LG3: f64 = 2.857_142_874_366_239e-1;
    const LG4: f64 = 2.222_219_843_214_978_4e-1;
    const LG5: f64 = 1.818_357_216_161_805e-1;
    const LG6: f64 = 1.531_383_769_920_937_3e-1;
    const LG7: f64 = 1.479_819_860_511_658_6e-1;
    let kb = ln_high_word(x) >> 20; // k + 0x3ff
                                    // k as f64 through the exponent bits (SSE2 has no packed integer → f64 conversion).
    let kf = f64::from_bits(0x4330_0000_0000_0000 | kb) - (4_503_599_627_370_496.0 + 1023.0);
    let hfsq = 0.5 * f * f;
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    kf * LN2_HI - ((hfsq - (s * (hfsq + r) + kf * LN2_LO)) - f)
}

/// Σ v with four running sums, so the loop vectorises (a single running sum may not be
/// reordered by the compiler). The result differs from the sequential sum by rounding only.
#[inline]
pub(crate) fn sum4(v: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let chunks = v.chunks_exact(4);
    let rest: f64 = chunks.remainder().iter().sum();
    for c in chunks {
        for i in 0..4 {
            acc[i] += c[i];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + rest
}

/// exp(x) for x ∈ [−708, 709], where the result is a normal number; below −708 it returns 0
/// (the true value is under 3.3e-308); above 709 and NaN are the caller's to exclude.
/// Branch-free so that loops over slices vectorise. x = n ln 2 + r with n = round(x / ln 2) (by
/// adding 1.5·2⁵², which rounds to an integer in the low mantissa bits), |r| ≤ ln(2)/2 from
/// fdlibm's two-part ln 2; e^r ≈ 1 + r + r²·p(r), its Taylor polynomial of degree 13
/// (coefficients 1/k! rounded once, no minimax fit to trust; Estrin's scheme, dependency chains
/// of depth 5 instead of Horner's 11); 2ⁿ from the bits of n.
///
/// Fused multiply-adds (`f64::mul_add`, one rounding each) wherever a product is added: 20
/// floating-point operations where the unfused form took 35. IEEE 754 defines a fused
/// multiply-add (the exact x·y + z, rounded once), so the FMA instructions of the AVX2 + FMA
/// code and the software `fma` that baseline x86-64 code calls give the same bits (tested: the
/// baseline path is slow, but only CPUs without FMA, older than 2013, take it).
///
/// # Error bound (relative, against the exact e^x)
/// With u = 2⁻⁵³ (half an ulp at 1):
/// - reduction: n·LN2_HI is exact (LN2_HI has 32 significant bits, |n| ≤ 1022), and so is
///   x − n·LN2_HI (n = 0: r = x; otherwise Sterbenz, the two are within a factor 2), so the
///   first fma is exact; the second rounds once: r = r*(1 + δ), |δ| ≤ u, with
///   r* = x − n·(LN2_HI + LN2_LO), and |LN2_HI + LN2_LO − ln 2| < 2⁻⁸⁵ moves the argument by
///   under 1022·2⁻⁸⁵ < 10⁻²². So e^r is e^{x − n ln 2} within 0.35·u relative (|r| ≤ 0.3466);
/// - truncation: the Taylor remainder is ≤ |r|¹⁴/14! ≤ 4.1·10⁻¹⁸ < 0.04·u;
/// - polynomial: |r²·p(r)| ≤ 0.121·0.56 < 0.068, and its roundings (r², the Estrin terms, each
///   ≤ u relative) cost it at most 4u relative, ≤ 0.28·u absolute; the fma r + r²p rounds
///   once (|·| < 0.42: ≤ 0.5·u absolute), 1 + (…) once (≤ u absolute, the sum lies in
///   [0.70, 1.42]); over e^r ≥ 0.70 these are ≤ (0.28 + 0.5 + 1)·u / 0.70 < 2.6·u relative;
/// - the product with the exact 2ⁿ rounds once: ≤ u.
///
/// In all < (0.35 + 0.04 + 2.6 + 1)·u < 4·u = 2⁻⁵¹ ≈ 4.4·10⁻¹⁶ relative (two ulp).
/// `exp_normal_within_its_bound` (kernel tests) checks it against libm, itself within one ulp,
/// on 6·10⁵ values; the worst measured is one ulp.
#[inline(always)]
pub(crate) fn exp_normal(x: f64) -> f64 {
    let (t, r) = exp_reduce(x);
    let r2 = r * r;
    let e = exp_terms(r, r2);
    exp_finish(x, t, r, r2, r2 * r2, e)
}

const LOWEST_EXP: f64 = -708.0;

/// The reduction of [`exp_normal`]: t = 1.5·2⁵² + n (n in its low bits) and r.
#[inline(always)]
fn exp_reduce(x: f64) -> (f64, f64) {
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5·2⁵²
    let xc = if x < LOWEST_EXP { LOWEST_EXP } else { x };
    let t = xc.mul_add(LOG2_E, SHIFT);
    let n = t - SHIFT;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, xc));
    (t, r)
}

/// Estrin pair j of [`exp_normal`]'s p: (C₄ⱼ + C₄ⱼ₊₁r) + (C₄ⱼ₊₂ + C₄ⱼ₊₃r)r².
#[inline(always)]
fn exp_pair(r: f64, r2: f64, j: usize) -> f64 {
    const C: [f64; 12] = EXP_C;
    let c = &C[4 * j..][..4];
    c[3].mul_add(r, c[2]).mul_add(r2, c[1].mul_add(r, c[0]))
}

/// [`exp_normal`]'s three Estrin pairs.
#[inline(always)]
fn exp_terms(r: f64, r2: f64) -> [f64; 3] {
    [exp_pair(r, r2, 0), exp_pair(r, r2, 1), exp_pair(r, r2, 2)]
}

/// The end of [`exp_normal`]: p from its pairs, 1 + r + r²p, times 2ⁿ (0 below −708).
#[inline(always)]
fn exp_finish(x: f64, t: f64, r: f64, r2: f64, r4: f64, e: [f64; 3]) -> f64 {
    let p = e[2].mul_add(r4 * r4, e[1].mul_add(r4, e[0]));
    let er = 1.0 + r2.mul_add(p, r);
    // The low bits of t hold n (two's complement); shifting n + 1023 into the exponent field
    // leaves 2ⁿ, for −1022 ≤ n ≤ 1023.
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    if x < LOWEST_EXP {
        0.0
    } else {
        er * scale
    }
}

/// [`exp_normal`] of N values at once, each stage a loop over the N lanes: the N evaluations
/// are independent chains that the compiler lays side by side (N/4 AVX2 vectors per step), so
/// the CPU overlaps their latencies instead of waiting on one chain (a loop of single
/// `exp_normal` calls keeps only a few iterations in flight). The polynomial too is written
/// stage by stage over all lanes: written value by value, the instructions of one value's
/// chain come one after another in program order and fill the CPU's floating-point scheduler
/// with operations that wait on each other (measured without fused multiply-adds: 0.57·10⁹
/// values/s value by value, 0.67·10⁹ stage by stage). Sixteen lanes was the best count
/// measured (8: 3× slower, 24 and 32: 10–30 % slower: the compiler's register allocation
/// decides). Every lane goes through [`exp_normal`]'s own stages, so each result has its bits.
#[inline(always)]
pub(crate) fn exp_normal_lanes<const N: usize>(x: &[f64; N]) -> [f64; N] {
    // One array per quantity (an array of triples would make the compiler shuffle lanes).
    let mut t = [0.0; N];
    let mut r = [0.0; N];
    for i in 0..N {
        (t[i], r[i]) = exp_reduce(x[i]);
    }
    let mut r2 = [0.0; N];
    for i in 0..N {
        r2[i] = r[i] * r[i];
    }
    let mut e0 = [0.0; N];
    let mut e1 = [0.0; N];
    let mut e2 = [0.0; N];
    for i in 0..N {
        e0[i] = exp_pair(r[i], r2[i], 0);
    }
    for i in 0..N {
        e1[i] = exp_pair(r[i], r2[i], 1);
    }
    for i in 0..N {
        e2[i] = exp_pair(r[i], r2[i], 2);
    }
    let mut out = [0.0; N];
    for i in 0..N {
        let e = [e0[i], e1[i], e2[i]];
        out[i] = exp_finish(x[i], t[i], r[i], r2[i], r2[i] * r2[i], e);
    }
    out
}

/// Values taken side by side by [`exp_normal_slice`] (four AVX2 vectors).
pub(crate) const EXP_LANES: usize = 16;

/// The widest instruction set of this CPU among those the hot loops are compiled for: AVX-512
/// (F and DQ, with AVX2 and FMA), AVX2 with FMA, or the x86-64 baseline. Every copy of a loop
/// gives the same bits as the baseline's (tested), so this decides speed only; one rule, read
/// once, for every dispatcher (the kernel's block, the exponentials, Blahut–Arimoto's steps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Avx2,
    Baseline,
}

/// This CPU's [`Isa`], detected once.
pub(crate) fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                return if has!("avx512f") && has!("avx512dq") {
                    Isa::Avx512
                } else {
                    Isa::Avx2
                };
            }
        }
        Isa::Baseline
    })
}

/// Whether this CPU runs code compiled for `isa` (every CPU runs the baseline).
#[cfg(test)]
pub(crate) fn has(isa: Isa) -> bool {
    matches!(
        (isa, self::isa()),
        (Isa::Baseline, _) | (_, Isa::Avx512) | (Isa::Avx2, Isa::Avx2)
    )
}

/// One function compiled three times — for AVX-512 (F and DQ, with AVX2 and FMA), for AVX2
/// with FMA, and for the x86-64 baseline — and a dispatcher of that name that runs the widest
/// copy this CPU has ([`isa`]). The copies are the same source: each ISA's body is written in
/// the call (usually one `#[inline(always)]` function, the AVX-512 copy sometimes with wider
/// tiles), and Rust never fuses a multiply and an add on its own while a fused multiply-add
/// rounds once wherever it is computed, so every copy gives the baseline's bits (each use has
/// a test that says so). The copies are also reachable for those tests as `NAME::avx512`,
/// `NAME::avx2` (unsafe: call them only when [`has`] says the CPU can) and `NAME::baseline`.
///
/// Written once here because the hot loops of the kernel, its factored and Taylor forms,
/// the exponentials and Blahut–Arimoto's steps each had a hand copy of this dispatch.
macro_rules! per_isa {
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? {
            avx512: $avx512:expr,
            avx2: $avx2:expr,
            baseline: $baseline:expr $(,)?
        }
    ) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            match $crate::mech::fastmath::isa() {
                // SAFETY: the CPU has AVX-512 F and DQ, and with them AVX2 and FMA.
                $crate::mech::fastmath::Isa::Avx512 => return unsafe { $name::avx512($($arg),*) },
                // SAFETY: the CPU has AVX2 and FMA.
                $crate::mech::fastmath::Isa::Avx2 => return unsafe { $name::avx2($($arg),*) },
                $crate::mech::fastmath::Isa::Baseline => {}
            }
            $name::baseline($($arg),*)
        }

        /// The copies behind the dispatcher of the same name (see `fastmath::per_isa!`),
        /// as visible as it is.
        #[allow(clippy::too_many_arguments)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
            pub(crate) unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                $avx512
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            pub(crate) unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                $avx2
            }

            pub(crate) fn baseline($($arg: $ty),*) $(-> $ret)? {
                $baseline
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $crate::mech::fastmath::per_isa! {
            $(#[$meta])*
            $vis fn $name($($arg: $ty),*) $(-> $ret)? {
                avx512: $body,
                avx2: $body,
                baseline: $body,
            }
        }
    };
}
pub(crate) use per_isa;

// Only the tests take `exp_normal` a slice at a time now (the kernel's loops call the
// lanes directly); they hold the lanes to `exp_normal`'s bits through it.
#[cfg(test)]
per_isa! {
    /// Replaces every value by [`exp_normal`] of it (same range conditions), [`EXP_LANES`] at
    /// a time through [`exp_normal_lanes`], compiled for each instruction set (`per_isa!`),
    /// all with [`exp_normal`]'s bits.
    pub(crate) fn exp_normal_slice(xs: &mut [f64]) {
        exp_normal_slice_portable(xs)
    }
}

#[cfg(test)]
#[inline(always)]
fn exp_normal_slice_portable(xs: &mut [f64]) {
    let mut chunks = xs.chunks_exact_mut(EXP_LANES);
    for c in &mut chunks {
        let x: &mut [f64; EXP_LANES] = c.try_into().expect("a chunk of EXP_LANES");
        *x = exp_normal_lanes(x);
    }
    for x in chunks.into_remainder() {
        *x = exp_normal(*x);
    }
}

per_isa! {
    /// Replaces every value by [`exp_kernel`] of it, [`EXP_LANES`] at a time through
    /// [`exp_kernel_lanes`], compiled for each instruction set (`per_isa!`), all with
    /// [`exp_kernel`]'s bits: the throughput of the exponential the kernel queries use, as
    /// they use it (benches/kernel_queries.rs measures it).
    pub fn exp_kernel_slice(xs: &mut [f64]) {
        exp_kernel_slice_portable(xs)
    }
}

#[inline(always)]
fn exp_kernel_slice_portable(xs: &mut [f64]) {
    let mut chunks = xs.chunks_exact_mut(EXP_LANES);
    for c in &mut chunks {
        let x: &mut [f64; EXP_LANES] = c.try_into().expect("a chunk of EXP_LANES");
        *x = exp_kernel_lanes(x);
    }
    for x in chunks.into_remainder() {
        *x = exp_kernel(*x);
    }
}

/// e^x for the kernel queries (src/mech/trig/kernel.rs), whose values are ≤ 1 and whose
/// answers need 10⁻¹² absolute (issue #39): [`exp_normal`] with a Taylor polynomial of degree
/// 11 instead of 13 (its coefficients and Estrin's scheme, the last pair C₈ + C₉r), one
/// constant for ln 2 instead of two, and no branch for tiny results: x below −707 is taken as −707, whose e^x ≈ 9·10⁻³⁰⁸ stands
/// for the true value (an absolute error under 10⁻³⁰⁷). For x ≤ 709, NaN excluded.
///
/// # Error bound (relative, x ∈ [−707, 709]; u = 2⁻⁵³)
/// - reduction: n = round(x/ln 2) as in [`exp_normal`]; r = x − n·LN2 by one fused
///   multiply-add (exact product, one rounding: 0.35u of e^r as there), where LN2 is ln 2
///   rounded, |LN2 − ln 2| < 2.4·10⁻¹⁷: e^r is e^{x − n ln 2} within 0.35u + |n|·2.4·10⁻¹⁷
///   relative. The last term is at most 2.5·10⁻¹⁴ (n = −1020) but only 2ⁿ·|n|·2.4·10⁻¹⁷ ≤
///   1.2·10⁻¹⁷ absolute, and for a k-th power k·|n|·2.4·10⁻¹⁷·2^{kn} ≤ 1.2·10⁻¹⁷ absolute
///   (the largest of m·2⁻ᵐ is ½): below, "relative" leaves it out and "absolute" includes it;
/// - truncation: the Lagrange remainder e^ξ·r¹²/12! with |ξ| ≤ |r| ≤ 0.3466, over e^r ≥
///   e^{−|r|}: ≤ e^{0.694}·0.3466¹²/12! < 1.3·10⁻¹⁴ relative;
/// - polynomial, as in [`exp_normal`]: |r²q(r)| < 0.068 and its roundings cost ≤ 4u relative
///   of it (≤ 0.28u absolute), the fma r + r²q and the 1 + (…) round once each (≤ 0.5u and
///   ≤ u absolute), over e^r ≥ 0.70: < 2.6u relative; the product with 2ⁿ is exact.
///
/// In all < 1.3·10⁻¹⁴ + 3u < 1.4·10⁻¹⁴ relative, so for values ≤ 1 at most 1.4·10⁻¹⁴
/// absolute, and the k-th power of one (k ≤ 16, see the kernel's "Several bandwidths at once")
/// within 16·1.4·10⁻¹⁴ + 15u < 2.3·10⁻¹³: a kernel answer (Σ|α| ≤ 1) moves by less than
/// 2.3·10⁻¹³ from the exact exponentials, within the 10⁻¹² absolute of issue #39.
/// `exp_kernel_within_its_bound` checks it against libm.
///
/// Why: the kernel queries at d = 8 spend most of their time in the exponential; the two
/// degrees, the second constant and the branch [`exp_normal`] spends on the last ulp are ~15 %
/// of its operations (measured at d = 8, one σ, AVX-512: ~2 % for the degree and the branch,
/// ~7 % more for the constant, loaded machine).
#[inline(always)]
pub(crate) fn exp_kernel(x: f64) -> f64 {
    let [y] = exp_kernel_lanes(&[x]);
    y
}

/// [`exp_kernel`] of N values at once, stage by stage over the lanes as
/// [`exp_normal_lanes`] (every lane has [`exp_kernel`]'s bits).
#[inline(always)]
pub(crate) fn exp_kernel_lanes<const N: usize>(x: &[f64; N]) -> [f64; N] {
    // The stages of exp_normal_lanes (the same shape: written otherwise, the compiler once
    // vectorised the kernel's loop over these chunks instead, with gathers and scatters).
    let mut t = [0.0; N];
    let mut r = [0.0; N];
    for i in 0..N {
        (t[i], r[i]) = exp_kernel_reduce(x[i]);
    }
    let mut r2 = [0.0; N];
    for i in 0..N {
        r2[i] = r[i] * r[i];
    }
    let mut e0 = [0.0; N];
    let mut e1 = [0.0; N];
    let mut e2 = [0.0; N];
    for i in 0..N {
        e0[i] = exp_pair(r[i], r2[i], 0);
    }
    for i in 0..N {
        e1[i] = exp_pair(r[i], r2[i], 1);
    }
    for i in 0..N {
        // The last pair of the degree-11 polynomial is C₈ + C₉r.
        e2[i] = EXP_C[9].mul_add(r[i], EXP_C[8]);
    }
    let mut out = [0.0; N];
    for i in 0..N {
        let r4 = r2[i] * r2[i];
        let p = e2[i].mul_add(r4 * r4, e1[i].mul_add(r4, e0[i]));
        let er = 1.0 + r2[i].mul_add(p, r[i]);
        // 2ⁿ from the low bits of t, as in exp_normal; the product is exact (a normal result:
        // e^r ≥ 0.7 and n ≥ −1020 above the clamp). Adding n to e^r's exponent bits instead,
        // one operation fewer, made the compiler vectorise the kernel's loop over chunks with
        // gathers and scatters again (1.7× slower).
        let scale = f64::from_bits(t[i].to_bits().wrapping_add(1023) << 52);
        out[i] = er * scale;
    }
    out
}

/// The reduction of [`exp_kernel`]: t = 1.5·2⁵² + n (n in its low bits) and r = x − n·LN2.
#[inline(always)]
fn exp_kernel_reduce(x: f64) -> (f64, f64) {
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    const LN2: f64 = std::f64::consts::LN_2;
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5·2⁵²
    let xc = if x < EXP_KERNEL_LOWEST {
        EXP_KERNEL_LOWEST
    } else {
        x
    };
    let t = xc.mul_add(LOG2_E, SHIFT);
    let n = t - SHIFT;
    (t, (-n).mul_add(LN2, xc))
}

/// Where [`exp_kernel`] clamps its argument: e⁻⁷⁰⁷ = 2ⁿ·e^r with n = −1020, so 2ⁿ·e^r is a
/// normal number and its product exact.
const EXP_KERNEL_LOWEST: f64 = -707.0;

/// C[i] = 1/(i + 2)!, the coefficient of r^i in [`exp_normal`]'s p.
const EXP_C: [f64; 12] = [
    0.5,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5_040.0,
    1.0 / 40_320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn ln_matches_libm_within_one_ulp() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let ulp = |x: f64| f64::from_bits(x.abs().to_bits() + 1) - x.abs();
        let mut xs: Vec<f64> = (0..200_000)
            .map(|_| 10f64.powf(rng.random_range(-300.0..300.0)))
            .collect();
        xs.extend([
            1.0,
            2.0,
            0.5,
            std::f64::consts::E,
            1.0 + 1e-12,
            1.0 - 1e-12,
            f64::MIN_POSITIVE,
            f64::MAX,
        ]);
        for x in xs {
            let (a, b) = (ln_normal(x), x.ln());
            assert!(
                (a - b).abs() <= ulp(b).max(f64::MIN_POSITIVE),
                "ln({x}) = {a}, libm {b}"
            );
        }
    }

    /// ln_normal as it was written before its split into two halves (one function, the same
    /// operations): the split must not change a bit.
    fn ln_normal_unsplit(x: f64) -> f64 {
        const LN2_HI: f64 = 6.931_471_803_691_238e-1;
        const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
        const LG: [f64; 7] = [
            6.666_666_666_666_735e-1,
            3.999_999_999_940_942e-1,
            2.857_142_874_366_239e-1,
            2.222_219_843_214_978_4e-1,
            1.818_357_216_161_805e-1,
            1.531_383_769_920_937_3e-1,
            1.479_819_860_511_658_6e-1,
        ];
        let u = x.to_bits();
        let hx = (u >> 32) + (0x3ff0_0000 - 0x3fe6_a09e);
        let kb = hx >> 20;
        let m = f64::from_bits((((hx & 0x000f_ffff) + 0x3fe6_a09e) << 32) | (u & 0xffff_ffff));
        let kf = f64::from_bits(0x4330_0000_0000_0000 | kb) - (4_503_599_627_370_496.0 + 1023.0);
        let f = m - 1.0;
        let hfsq = 0.5 * f * f;
        let s = f / (2.0 + f);
        let z = s * s;
        let w = z * z;
        let t1 = w * (LG[1] + w * (LG[3] + w * LG[5]));
        let t2 = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6])));
        let r = t2 + t1;
        kf * LN2_HI - ((hfsq - (s * (hfsq + r) + kf * LN2_LO)) - f)
    }

    /// The two halves give ln_normal's bits, which are the unsplit function's, over the normal
    /// range and over Z ∈ (0, 1] (where Blahut–Arimoto uses it), powers of two included.
    #[test]
    fn ln_halves_equal_the_unsplit_ln_bitwise() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(28);
        let mut xs: Vec<f64> = (0..100_000)
            .map(|_| 10f64.powf(rng.random_range(-307.0..308.0)))
            .collect();
        xs.extend((0..100_000).map(|_| rng.random_range(f64::MIN_POSITIVE..=1.0)));
        xs.extend((-1022..1024).map(|e| 2f64.powi(e)));
        xs.extend([1.0 - 1e-16, 1.0 + 1e-15, f64::MAX, std::f64::consts::SQRT_2]);
        for x in xs {
            let (f, s) = ln_normal_reduce(x);
            let split = ln_normal_finish(x, f, s);
            assert_eq!(split.to_bits(), ln_normal_unsplit(x).to_bits(), "ln({x})");
            assert_eq!(ln_normal(x).to_bits(), split.to_bits(), "ln({x})");
        }
    }

    /// The side-by-side exponentials are exp_normal's, bit for bit, on the kernel's range,
    /// the whole normal range, the clamp below −708 and the edges, whatever the lane count,
    /// through the slice function (AVX2 where the CPU has it) and inlined for the baseline.
    #[test]
    fn exp_lanes_and_slices_equal_exp_normal_bitwise() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(12);
        let mut xs: Vec<f64> = (0..50_000).map(|_| rng.random_range(-60.0..=0.0)).collect();
        xs.extend((0..50_000).map(|_| rng.random_range(-750.0..=709.0)));
        xs.extend([
            0.0,
            -0.0,
            -708.0,
            -708.0000001,
            -1e300,
            f64::NEG_INFINITY,
            709.0,
            -1e-300,
        ]);
        xs.push(-3.0); // the length is now not a multiple of EXP_LANES
        let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
        let reference: Vec<f64> = xs.iter().map(|&x| exp_normal(x)).collect();
        let mut slice = xs.clone();
        exp_normal_slice(&mut slice);
        assert_eq!(bits(&slice), bits(&reference));
        let mut baseline = xs.clone();
        exp_normal_slice_portable(&mut baseline);
        assert_eq!(bits(&baseline), bits(&reference));
        for (chunk, want) in xs.chunks_exact(5).zip(reference.chunks_exact(5)) {
            let x: &[f64; 5] = chunk.try_into().unwrap();
            assert_eq!(bits(&exp_normal_lanes(x)), bits(want));
        }
    }

    /// exp_kernel's slices (dispatched, baseline) and lanes give its bits.
    #[test]
    fn exp_kernel_slices_equal_exp_kernel_bitwise() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(13);
        let mut xs: Vec<f64> = (0..50_000).map(|_| rng.random_range(-60.0..=0.0)).collect();
        xs.extend((0..50_000).map(|_| rng.random_range(-750.0..=709.0)));
        xs.extend([
            0.0,
            -0.0,
            -707.0,
            -707.5,
            -1e300,
            f64::NEG_INFINITY,
            709.0,
            -3.0,
        ]);
        let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
        let reference: Vec<f64> = xs.iter().map(|&x| exp_kernel(x)).collect();
        let mut slice = xs.clone();
        exp_kernel_slice(&mut slice);
        assert_eq!(bits(&slice), bits(&reference));
        let mut baseline = xs.clone();
        exp_kernel_slice_portable(&mut baseline);
        assert_eq!(bits(&baseline), bits(&reference));
        for (chunk, want) in xs.chunks_exact(7).zip(reference.chunks_exact(7)) {
            let x: &[f64; 7] = chunk.try_into().unwrap();
            assert_eq!(bits(&exp_kernel_lanes(x)), bits(want));
        }
    }

    #[test]
    fn sum4_sums() {
        let v: Vec<f64> = (1..=11).map(f64::from).collect();
        assert_eq!(sum4(&v), 66.0);
        assert_eq!(sum4(&[]), 0.0);
    }
}
