//! Elementary functions written so that loops over slices vectorise (branch-free, no libm
//! calls), for inner loops that would otherwise spend most of their time in `f64::ln`.

/// Natural logarithm of a positive, normal, finite `x`, to within 1 ulp: fdlibm's `__ieee754_log`
/// without its special-case branches (zero, negative, subnormal, ∞ and NaN are the caller's to
/// exclude). The mantissa is scaled into [√2/2, √2) by integer operations on the bits, then
/// ln(1 + f) = 2 atanh(f/(2 + f)) by fdlibm's minimax polynomial.
#[inline(always)]
pub fn ln_normal(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const LG1: f64 = 6.666_666_666_666_735e-1;
    const LG2: f64 = 3.999_999_999_940_942e-1;
    const LG3: f64 = 2.857_142_874_366_239e-1;
    const LG4: f64 = 2.222_219_843_214_978_4e-1;
    const LG5: f64 = 1.818_357_216_161_805e-1;
    const LG6: f64 = 1.531_383_769_920_937_3e-1;
    const LG7: f64 = 1.479_819_860_511_658_6e-1;
    // Unsigned arithmetic only: for positive x the high word stays positive, and SSE2/AVX2
    // have logical but no arithmetic 64-bit shifts.
    let u = x.to_bits();
    let hx = (u >> 32) + (0x3ff0_0000 - 0x3fe6_a09e);
    let kb = hx >> 20; // k + 0x3ff
    let m = f64::from_bits((((hx & 0x000f_ffff) + 0x3fe6_a09e) << 32) | (u & 0xffff_ffff));
    // k as f64 through the exponent bits (SSE2 has no packed integer → f64 conversion).
    let kf = f64::from_bits(0x4330_0000_0000_0000 | kb) - (4_503_599_627_370_496.0 + 1023.0);
    let f = m - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
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
pub fn sum4(v: &[f64]) -> f64 {
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

    #[test]
    fn sum4_sums() {
        let v: Vec<f64> = (1..=11).map(f64::from).collect();
        assert_eq!(sum4(&v), 66.0);
        assert_eq!(sum4(&[]), 0.0);
    }
}
