//! The discrete Gaussian mechanism (Canonne, Kamath & Steinke 2020).
//!
//! `P(Y = y) = exp(−y²/(2σ²)) / Σ_{z∈ℤ} exp(−z²/(2σ²))` on the integers: `N_ℤ(0, σ²)`.
//!
//! # Guarantee
//! Adding `Y ~ N_ℤ(0, σ²)` to an integer-valued query `q` with `|q(x) − q(x')| ≤ Δ` for
//! neighbouring `x, x'` is ρ-zCDP with `ρ = Δ²/(2σ²)` (the paper's Theorem 4: with
//! `σ = Δ/ε`, ½ε²-concentrated DP). Hence, as for any ρ-zCDP release,
//! (ρ + 2·sqrt(ρ·ln(1/δ)), δ)-DP for every δ > 0 (Bun & Steinke 2016, Proposition 1.3), and
//! the ρ of independent releases add up. [`DiscreteGaussian::for_zcdp`] takes ρ and Δ and
//! sets `σ² = Δ²/(2ρ)`.
//!
//! # Conditions
//! - `q` is integer-valued with sensitivity at most Δ (the caller's promise): integer noise on
//!   a value with a fractional part leaves the fractional part in the clear.
//! - [`DiscreteGaussian::for_zcdp`] checks ρ and Δ finite and > 0 and `σ² ≤ 10²⁴`, so that
//!   every draw fits in an `i64` (beyond `5·10¹³ = 50σ` only with probability below `e⁻¹²⁵⁰`).
//! - [`DiscreteGaussian::with_variance`] checks σ² finite, > 0 and ≤ 10²⁴, and promises only
//!   the distribution.
//! - The sampler is exact given uniform random bits; dplab's bits come from PCG (seeded for
//!   reproducibility), not from a cryptographic source, as everywhere in dplab.
//!
//! # Reference
//! Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020:
//! Theorem 4 (the guarantee); Algorithm 1 (Bernoulli(exp(−γ))), Algorithm 2 (the discrete
//! Laplace) and Algorithm 3 (the discrete Gaussian) for sampling.
//!
//! # Deviations from the paper
//! None in the distribution. Every probability the algorithms compare with is an exact ratio
//! of integers, as in the paper: σ² is the exact rational value of `Δ²/(2ρ)` for the binary
//! numbers Δ and ρ (no rounding), `γ = (|y|·t·den − num)²/(2·num·den·t²)` for `σ² = num/den`
//! in arbitrary precision (num-bigint), and `t = ⌊σ⌋ + 1` by an integer square root. No
//! floating-point number enters a draw. The discrete Laplace's `X = U + t·V` saturates at
//! `i64::MAX`, which needs `V > 9·10⁶` consecutive Bernoulli(e⁻¹) successes.
//!
//! # Sampling
//! Algorithm 3: draw `Y` from the discrete Laplace of scale `t = ⌊σ⌋ + 1` (Algorithm 2) and
//! accept it with probability `exp(−(|Y| − σ²/t)²/(2σ²))` (Algorithm 1); fewer than two
//! rounds on average. Uniform integers below a bound are drawn by rejection from masked
//! random words (below), not with rand's `random_range`, whose single-draw method is not
//! exactly uniform.

use num_bigint::BigUint;
use rand::Rng;

use super::{check_positive, ParamRangeError};

/// The largest σ² accepted: draws of 50σ = 5·10¹³ stay far inside `i64`.
const MAX_VARIANCE: u64 = 1_000_000_000_000;

#[derive(Clone, Debug)]
pub(crate) struct DiscreteGaussian {
    /// σ² = num/den, exactly (den only the tests read: the sampler needs den·t).
    num: BigUint,
    #[cfg(test)]
    den: BigUint,
    /// The discrete Laplace scale `⌊σ⌋ + 1`.
    t: u64,
    /// `den·t` and `2·num·den·t²`: `γ(y) = (|y|·den·t − num)² / (2·num·den·t²)`.
    den_t: BigUint,
    gamma_den: BigUint,
}

impl DiscreteGaussian {
    /// The ρ-zCDP calibration `σ² = Δ²/(2ρ)` for an integer query with sensitivity Δ, with σ²
    /// the exact rational value of the expression for the binary numbers given.
    pub(crate) fn for_zcdp(rho: f64, sensitivity: f64) -> Result<Self, ParamRangeError> {
        check_positive("rho", rho)?;
        check_positive("sensitivity", sensitivity)?;
        // Δ = a·2^p and ρ = b·2^q, so σ² = a²·2^(2p − q − 1) / b.
        let ((a, p), (b, q)) = (dyadic(sensitivity), dyadic(rho));
        let a2 = BigUint::from(a) * a;
        let shift = 2 * p - q - 1;
        let (num, den) = if shift >= 0 {
            (a2 << shift as u32, BigUint::from(b))
        } else {
            (a2, BigUint::from(b) << shift.unsigned_abs())
        };
        Self::from_ratio(num, den).map_err(|valid| ParamRangeError {
            name: "rho",
            value: rho.to_string(),
            valid: format!("{valid} (σ² = Δ²/(2ρ) with Δ = {sensitivity})"),
        })
    }

    /// `N_ℤ(0, σ²)` with σ² the exact value of `variance`; σ² must be finite, > 0, ≤ 10²⁴.
    #[cfg(test)]
    pub(crate) fn with_variance(variance: f64) -> Result<Self, ParamRangeError> {
        check_positive("variance", variance)?;
        let (m, e) = dyadic(variance);
        let (num, den) = if e >= 0 {
            (BigUint::from(m) << e as u32, BigUint::from(1u32))
        } else {
            (BigUint::from(m), BigUint::from(1u32) << e.unsigned_abs())
        };
        Self::from_ratio(num, den).map_err(|valid| ParamRangeError {
            name: "variance",
            value: variance.to_string(),
            valid,
        })
    }

    fn from_ratio(num: BigUint, den: BigUint) -> Result<Self, String> {
        let max = BigUint::from(MAX_VARIANCE) * MAX_VARIANCE;
        if num > &den * &max {
            return Err("must give σ² ≤ 10²⁴, so that draws fit in 64-bit integers".into());
        }
        // ⌊σ⌋ = ⌊√⌊σ²⌋⌋, and ⌊σ⌋ ≤ 10¹² fits.
        let floor_sigma = u64::try_from((&num / &den).sqrt()).expect("σ ≤ 10¹²");
        let t = floor_sigma + 1;
        let den_t = &den * t;
        let gamma_den = (&num << 1u32) * &den * t * t;
        Ok(DiscreteGaussian {
            num,
            #[cfg(test)]
            den,
            t,
            den_t,
            gamma_den,
        })
    }

    /// σ², rounded to the nearest `f64` (for messages and tests; draws use the exact value).
    #[cfg(test)]
    pub(crate) fn variance(&self) -> f64 {
        ratio_f64(&self.num, &self.den)
    }

    /// One draw (Algorithm 3).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        loop {
            let y = discrete_laplace(self.t, rng);
            let a = BigUint::from(y.unsigned_abs()) * &self.den_t;
            let diff = if a >= self.num {
                a - &self.num
            } else {
                &self.num - a
            };
            if bernoulli_exp(&(&diff * &diff), &self.gamma_den, rng) {
                return y;
            }
        }
    }

    /// `P(Y = k)`, with the normalising sum taken over |z| ≤ 40σ + 40 in floating point (the
    /// terms beyond are below e⁻⁸⁰⁰ of the largest): for tests and plots, not for sampling.
    #[cfg(test)]
    pub(crate) fn pmf(&self, k: i64) -> f64 {
        let v = self.variance();
        let w = |z: f64| (-z * z / (2.0 * v)).exp();
        let reach = (40.0 * v.sqrt() + 40.0) as i64;
        let total: f64 = (-reach..=reach).map(|z| w(z as f64)).sum();
        w(k as f64) / total
    }
}

/// `x = m·2^e` exactly, for a finite `x > 0`, with `m` odd.
fn dyadic(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1 << 52), exp - 1075)
    };
    let z = m.trailing_zeros();
    (m >> z, e + z as i32)
}

#[cfg(test)]
fn ratio_f64(num: &BigUint, den: &BigUint) -> f64 {
    // Scale both to 64 significant bits: the quotient of two such floats is correctly rounded
    // to well within what a message or a test's tolerance needs.
    let to_f64 = |x: &BigUint| -> (f64, i64) {
        let shift = x.bits().saturating_sub(64);
        let top = u64::try_from(x >> shift).expect("64 bits");
        (top as f64, shift as i64)
    };
    let ((n, sn), (d, sd)) = (to_f64(num), to_f64(den));
    n / d * 2f64.powi((sn - sd) as i32)
}

/// Bernoulli(exp(−n/d)) for integers `n ≥ 0`, `d > 0` (Algorithm 1): ⌊γ⌋ draws of
/// Bernoulli(e⁻¹), all of which must succeed, then Bernoulli(exp(−(γ − ⌊γ⌋))).
pub(crate) fn bernoulli_exp<R: Rng + ?Sized>(n: &BigUint, d: &BigUint, rng: &mut R) -> bool {
    let whole = n / d;
    let mut k = BigUint::from(0u32);
    while k < whole {
        if !bernoulli_exp_unit(1, 1, rng) {
            return false;
        }
        k += 1u32;
    }
    // γ − ⌊γ⌋ = (n mod d)/d ∈ [0, 1): K is the first k with a failed Bernoulli(γ/k).
    let frac = n % d;
    let mut k = 1u64;
    while uniform_below_big(&(d * k), rng) < frac {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(exp(−n/d)) for `0 ≤ n ≤ d` in 64 bits (Algorithm 1 for γ ∈ [0, 1]).
fn bernoulli_exp_unit<R: Rng + ?Sized>(n: u64, d: u64, rng: &mut R) -> bool {
    let mut k = 1u128;
    while uniform_below(u128::from(d) * k, rng) < u128::from(n) {
        k += 1;
    }
    k % 2 == 1
}

/// The discrete Laplace `P(Y = y) ∝ exp(−|y|/t)` on the integers (Algorithm 2).
pub(crate) fn discrete_laplace<R: Rng + ?Sized>(t: u64, rng: &mut R) -> i64 {
    loop {
        let u = uniform_below(u128::from(t), rng) as u64;
        if !bernoulli_exp_unit(u, t, rng) {
            continue;
        }
        let mut v = 0u64;
        while bernoulli_exp_unit(1, 1, rng) {
            v += 1;
        }
        let x = t.saturating_mul(v).saturating_add(u).min(i64::MAX as u64) as i64;
        let negative = rng.next_u32() & 1 == 1;
        if negative && x == 0 {
            continue;
        }
        return if negative { -x } else { x };
    }
}

/// A uniform integer in `[0, m)`, `m ≥ 1`: masked random words, rejected until below `m`
/// (fewer than two rounds on average).
fn uniform_below<R: Rng + ?Sized>(m: u128, rng: &mut R) -> u128 {
    let mask = u128::MAX >> (m - 1).leading_zeros().min(127);
    loop {
        // One word when the bound needs no more.
        let high = if mask >> 64 == 0 { 0 } else { rng.next_u64() };
        let x = ((u128::from(high) << 64) | u128::from(rng.next_u64())) & mask;
        if x < m {
            return x;
        }
    }
}

/// [`uniform_below`] for a bound of any size.
fn uniform_below_big<R: Rng + ?Sized>(m: &BigUint, rng: &mut R) -> BigUint {
    let bits = (m - 1u32).bits();
    let words = bits.div_ceil(32).max(1) as usize;
    let top_mask = if bits.is_multiple_of(32) {
        u32::MAX
    } else {
        (1u32 << (bits % 32)) - 1
    };
    loop {
        let mut digits: Vec<u32> = (0..words).map(|_| rng.next_u32()).collect();
        digits[words - 1] &= if bits == 0 { 0 } else { top_mask };
        let x = BigUint::new(digits);
        if &x < m {
            return x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mech::stats::chi_square_statistic;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;
    use statrs::distribution::{ChiSquared, ContinuousCDF};

    /// The 0.1% critical value of a chi-square test with `cells − 1` degrees of freedom.
    fn critical(cells: usize) -> f64 {
        ChiSquared::new((cells - 1) as f64)
            .unwrap()
            .inverse_cdf(0.999)
    }

    /// Counts of `draw` in cells `lo..=hi` plus one cell for each tail, against `pmf`:
    /// the chi-square statistic and its critical value.
    fn chi_square(
        n: usize,
        lo: i64,
        hi: i64,
        mut draw: impl FnMut() -> i64,
        pmf: impl Fn(i64) -> f64,
    ) -> (f64, f64) {
        let cells = (hi - lo + 3) as usize;
        let mut counts = vec![0u64; cells];
        for _ in 0..n {
            let k = draw().clamp(lo - 1, hi + 1);
            counts[(k - lo + 1) as usize] += 1;
        }
        let mut p: Vec<f64> = (lo - 1..=hi + 1).map(&pmf).collect();
        let inner: f64 = p[1..cells - 1].iter().sum();
        // The tails of a symmetric pmf on a symmetric range of cells.
        p[0] = (1.0 - inner) / 2.0;
        p[cells - 1] = (1.0 - inner) / 2.0;
        (chi_square_statistic(&counts, &p), critical(cells))
    }

    /// Algorithm 1 at γ = 0, 1/3, 1, 5/2 and 7 (both of its parts): 2·10⁵ draws each, within
    /// 4.5 standard errors of exp(−γ) (a false alarm below 10⁻⁵ per γ).
    #[test]
    fn bernoulli_exp_has_probability_exp_minus_gamma() {
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let n = 200_000;
        for (num, den) in [(0u32, 1u32), (1, 3), (3, 3), (5, 2), (7, 1)] {
            let (bn, bd) = (BigUint::from(num), BigUint::from(den));
            let hits = (0..n).filter(|_| bernoulli_exp(&bn, &bd, &mut rng)).count();
            let p = (-(num as f64) / den as f64).exp();
            let se = (p * (1.0 - p) / n as f64).sqrt().max(1e-9);
            let got = hits as f64 / n as f64;
            assert!((got - p).abs() <= 4.5 * se, "γ = {num}/{den}: {got} vs {p}");
        }
    }

    /// Algorithm 2 at t = 3: chi-square over y ∈ [−12, 12] and the tails, 10⁵ draws.
    #[test]
    fn discrete_laplace_follows_its_pmf() {
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let t = 3.0f64;
        let a = (-1.0 / t).exp();
        let pmf = |y: i64| (1.0 - a) / (1.0 + a) * a.powi(y.unsigned_abs() as i32);
        let (stat, crit) = chi_square(100_000, -12, 12, || discrete_laplace(3, &mut rng), pmf);
        assert!(stat < crit, "chi2 = {stat} ≥ {crit}");
    }

    /// Algorithm 3 at σ² = 0.3 (t = 1), 2.5 (t = 2) and 40.5 (t = 7): chi-square against the
    /// exact pmf over the cells with an expected count ≥ 5 and the two tails, 10⁵ draws each
    /// at fixed seeds, at the 0.1% level.
    #[test]
    fn discrete_gaussian_follows_its_pmf() {
        for (seed, variance) in [(1u64, 0.3), (2, 2.5), (3, 40.5)] {
            let g = DiscreteGaussian::with_variance(variance).unwrap();
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            let n = 100_000;
            let reach = (0..).find(|&k| n as f64 * g.pmf(k + 1) < 5.0).unwrap();
            let (stat, crit) = chi_square(n, -reach, reach, || g.sample(&mut rng), |k| g.pmf(k));
            assert!(stat < crit, "σ² = {variance}: chi2 = {stat} ≥ {crit}");
        }
    }

    /// σ² = Δ²/(2ρ) exactly: ρ = 1/2, Δ = 1 gives 1; ρ = 0.1 (not a binary fraction), Δ = 3
    /// gives 45 to rounding; a σ² beyond 10²⁴ is refused at ρ, naming the bound.
    #[test]
    fn zcdp_calibration_is_exact() {
        let g = DiscreteGaussian::for_zcdp(0.5, 1.0).unwrap();
        let one = BigUint::from(1u32);
        assert_eq!((&g.num, &g.den, g.t), (&one, &one, 2));
        let g = DiscreteGaussian::for_zcdp(0.1, 3.0).unwrap();
        assert!((g.variance() - 45.0).abs() < 1e-12, "{}", g.variance());
        assert_eq!(g.t, 7);
        // The exact rational: σ²·2ρ = Δ², with ρ's binary value.
        let (b, q) = dyadic(0.1);
        assert_eq!(b as f64 * 2f64.powi(q), 0.1);
        assert_eq!(
            &g.num * 2u32 * b,
            (BigUint::from(9u32) * &g.den) << q.unsigned_abs()
        );
        let e = DiscreteGaussian::for_zcdp(1e-30, 1.0).unwrap_err();
        assert_eq!(e.name, "rho");
        assert!(e.to_string().contains("σ² ≤ 10²⁴"), "{e}");
        assert_eq!(
            DiscreteGaussian::for_zcdp(0.1, f64::NAN).unwrap_err().name,
            "sensitivity"
        );
    }
}
