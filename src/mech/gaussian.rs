//! The Gaussian mechanism with three calibrations of σ: the classic one (Dwork & Roth,
//! Theorem 3.22), the analytic one (Balle & Wang 2018, Algorithm 1) and the zCDP one (Bun &
//! Steinke 2016).
//!
//! # Guarantee
//! Releasing `f(x) + N(0, σ²)` for a query with ℓ2 sensitivity Δ₂f, with σ from
//! - [`Gaussian::classic`]: `σ = Δ₂f·sqrt(2 ln(1.25/δ))/ε`, is (ε, δ)-DP for ε ∈ (0, 1);
//! - [`Gaussian::analytic`]: the smallest σ with which the release is (ε, δ)-DP, for any
//!   ε > 0 and δ ∈ (0, 1) — Balle & Wang's Theorem 8 gives the exact δ a Gaussian of scale σ
//!   achieves at ε, and Algorithm 1 inverts it;
//! - [`Gaussian::zcdp`]: `σ = Δ₂f/√(2ρ)`, is ρ-zCDP (Bun & Steinke, Proposition 1.6), which
//!   implies (ρ + 2·sqrt(ρ·ln(1/δ)), δ)-DP for every δ > 0 (their Proposition 1.3), and
//!   composes by adding the ρ of each release (their Lemma 2.3).
//!
//! # Conditions
//! - `f`'s ℓ2 sensitivity is at most Δ₂f (the caller's promise), with independent noise on
//!   every coordinate.
//! - [`Gaussian::classic`] checks ε ∈ (0, 1), δ ∈ (0, 1) and Δ₂f finite and > 0. The theorem
//!   does not cover ε ≥ 1, so [`Gaussian::classic`] refuses it rather than give a calibration
//!   without a guarantee, and names the calibrations that cover it; δ = 0 is refused because
//!   the Gaussian mechanism needs δ > 0.
//! - [`Gaussian::analytic`] checks ε finite and > 0, δ ∈ (0, 1), Δ₂f finite and > 0.
//! - [`Gaussian::zcdp`] checks ρ and Δ₂f finite and > 0.
//! - [`Gaussian::new`] checks only σ finite and > 0 and promises only the distribution.
//!
//! # Reference
//! - Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, Theorem 3.22.
//! - Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
//!   Calibration and Optimal Denoising", ICML 2018: Theorem 8 and Algorithm 1.
//! - Bun & Steinke, "Concentrated Differential Privacy: Simplifications, Extensions, and
//!   Lower Bounds", TCC 2016: Propositions 1.3 and 1.6, Lemma 2.3.
//!
//! # Deviations from the paper
//! - [`Gaussian::classic`] takes `c² = 2 ln(1.25/δ)`, the boundary of the theorem's strict
//!   inequality `c² > 2 ln(1.25/δ)`. The δ a Gaussian of scale σ achieves at a given ε is
//!   continuous in σ, so the guarantee of every larger σ carries over to the boundary.
//! - [`Gaussian::analytic`] finds Algorithm 1's `v*` (or `u*`) by the paper's doubling and
//!   then bisection down to adjacent floating-point numbers, and keeps the end of the last
//!   interval on the private side (the larger σ), so rounding never lowers σ below the
//!   root. The paper's `B±` are evaluated as below (Numerics), not as written, so that they
//!   neither overflow (`e^ε` for ε > 709) nor lose the tail (`1 + erf` for δ < 10⁻¹²).
//!
//! # Numerics of the analytic calibration
//! `Φ(−x) = erfc(x/√2)/2` (statrs), in logarithms: `e^ε·Φ(−b)` is `exp(ε + ln Φ(−b))`, and
//! `B₋(u) = Φ(−a)·(1 − exp(ε + ln Φ(−b) − ln Φ(−a)))` is compared with δ as logarithms. Where
//! `erfc` underflows (x > 37) `ln Φ(−x)` comes from its asymptotic series, hand-written
//! because statrs has no scaled erfc (terms to x⁻¹⁴: relative error below 10⁻¹⁶ there). The
//! two terms of `B₋(u)` cancel to about `1/u` of their size, so about `log₁₀ u` digits of δ
//! are lost. statrs's `erfc` is accurate to about 10⁻¹⁰ relative (measured against mpmath
//! at 40 digits), and σ comes out within 5·10⁻¹¹ relative of a 60-digit evaluation of
//! Algorithm 1 over the tests' cases, `u = α²/2·(1 ± …)` up to 7·10⁴ (ε = 10⁻³, δ = 10⁻¹⁵). diffprivlib's `GaussianAnalytic` (0.6.6), which
//! computes `Φ` as `(1 + erf)/2`, is off by 5·10⁻⁷ relative at (ε, δ) = (1, 10⁻¹²) and by
//! 0.5% at (3, 10⁻¹⁵) and (20, 10⁻⁸), below the exact σ: the tests compare with an
//! independent 60-digit evaluation of Algorithm 1 instead.
//!
//! # Sampling
//! The ziggurat method (rand_distr's `StandardNormal`).

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use statrs::function::erf::erfc;

use super::{check_delta, check_epsilon, check_positive, ParamRangeError};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gaussian {
    sigma: f64,
}

impl Gaussian {
    /// `N(0, σ²)`; σ must be finite and > 0.
    pub fn new(sigma: f64) -> Result<Self, ParamRangeError> {
        check_positive("sigma", sigma)?;
        Ok(Gaussian { sigma })
    }

    /// The classic calibration `σ = Δ₂f·sqrt(2 ln(1.25/δ))/ε`, valid for ε ∈ (0, 1), δ ∈ (0, 1).
    pub(crate) fn classic(
        epsilon: f64,
        delta: f64,
        sensitivity: f64,
    ) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        if epsilon >= 1.0 {
            return Err(ParamRangeError {
                name: "epsilon",
                value: epsilon.to_string(),
                valid: "must be in (0, 1) for the classic Gaussian calibration (Dwork & Roth \
                        Thm 3.22); the analytic calibration (Balle & Wang 2018) covers any ε > 0, \
                        and the zCDP one (Bun & Steinke 2016) takes ρ instead of ε and δ"
                    .into(),
            });
        }
        check_approximate_delta(delta)?;
        check_positive("sensitivity", sensitivity)?;
        Self::new(sensitivity * (2.0 * (1.25 / delta).ln()).sqrt() / epsilon)
    }

    /// The analytic calibration (Balle & Wang 2018, Algorithm 1): the smallest σ for which
    /// `f(x) + N(0, σ²)` is (ε, δ)-DP, for any ε > 0 and δ ∈ (0, 1).
    pub(crate) fn analytic(
        epsilon: f64,
        delta: f64,
        sensitivity: f64,
    ) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        check_approximate_delta(delta)?;
        check_positive("sensitivity", sensitivity)?;
        let eps = epsilon;
        // ln Φ(−√(ε·(s+2))) + ε: the logarithm of the second term of both B±.
        let ln_second = |s: f64| eps + ln_phi_neg((eps * (s + 2.0)).sqrt());
        // δ₀ = B₊(0) = Φ(0) − e^ε·Φ(−√(2ε)), the δ of σ = Δ/√(2ε) (α = 1).
        let delta0 = 0.5 - ln_second(0.0).exp();
        let alpha = if delta == delta0 {
            1.0
        } else if delta > delta0 {
            // B₊(v) = Φ(√(εv)) − e^ε·Φ(−√(ε(v+2))) increases from δ₀; v* = sup{v : B₊(v) ≤ δ}.
            let b_plus = |v: f64| 1.0 - ln_phi_neg((eps * v).sqrt()).exp() - ln_second(v).exp();
            let v = last_true(|v| b_plus(v) <= delta);
            // √(1 + v/2) − √(v/2), written without the cancellation at large v.
            1.0 / ((1.0 + v / 2.0).sqrt() + (v / 2.0).sqrt())
        } else {
            // B₋(u) = Φ(−√(εu)) − e^ε·Φ(−√(ε(u+2))) decreases from δ₀ to 0;
            // u* = inf{u : B₋(u) ≤ δ}, compared as logarithms.
            let ln_delta = delta.ln();
            let ln_b_minus = |u: f64| {
                let first = ln_phi_neg((eps * u).sqrt());
                let ratio = ln_second(u) - first;
                // ratio < 0 in exact arithmetic; rounding at huge u may lose the sign, and
                // then B₋(u) is 0 to working precision.
                if ratio >= 0.0 {
                    f64::NEG_INFINITY
                } else {
                    first + (-ratio.exp_m1()).ln()
                }
            };
            let u = first_true(|u| ln_b_minus(u) <= ln_delta);
            (1.0 + u / 2.0).sqrt() + (u / 2.0).sqrt()
        };
        Self::new(alpha * sensitivity / (2.0 * epsilon).sqrt())
    }

    /// The zCDP calibration `σ = Δ₂f/√(2ρ)` (Bun & Steinke 2016, Proposition 1.6): ρ-zCDP,
    /// hence (ρ + 2·sqrt(ρ·ln(1/δ)), δ)-DP for every δ > 0 (their Proposition 1.3).
    pub(crate) fn zcdp(rho: f64, sensitivity: f64) -> Result<Self, ParamRangeError> {
        check_positive("rho", rho)?;
        check_positive("sensitivity", sensitivity)?;
        Self::new(sensitivity / (2.0 * rho).sqrt())
    }

    #[cfg(test)]
    pub(crate) fn sigma(&self) -> f64 {
        self.sigma
    }

    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let z: f64 = StandardNormal.sample(rng);
        self.sigma * z
    }

    pub fn fill<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut [f64]) {
        for z in out {
            let n: f64 = StandardNormal.sample(rng);
            *z = self.sigma * n;
        }
    }

    #[cfg(test)]
    pub(crate) fn cdf(&self, z: f64) -> f64 {
        super::stats::normal_cdf(z / self.sigma)
    }
}

/// δ ∈ (0, 1): a Gaussian mechanism needs δ > 0 under (ε, δ)-DP.
fn check_approximate_delta(delta: f64) -> Result<(), ParamRangeError> {
    check_delta(delta)?;
    if delta == 0.0 {
        return Err(ParamRangeError {
            name: "delta",
            value: "0".into(),
            valid: "must be in (0, 1): the Gaussian mechanism needs δ > 0".into(),
        });
    }
    Ok(())
}

/// `ln Φ(−x)` for x ≥ 0: from statrs's `erfc` while it is a normal number (x ≤ 37), then from
/// the asymptotic series `Φ(−x) = φ(x)/x·(1 − 1/x² + 3/x⁴ − …)`, whose terms to x⁻¹⁴ leave a
/// relative error below 10⁻¹⁶ for x > 37.
/// The privacy profile of μ-GDP, which the Gaussian of σ = Δ/μ achieves exactly (Balle &
/// Wang 2018, Theorem 8; Dong, Roth & Su 2022, Corollary 2.13): δ(ε) = Φ(−ε/μ + μ/2) −
/// e^ε·Φ(−ε/μ − μ/2), with the numerics of [`Gaussian::analytic`] (the module doc).
pub(crate) fn gdp_delta(mu: f64, epsilon: f64) -> f64 {
    let first = ln_phi_neg(epsilon / mu - mu / 2.0);
    let ratio = epsilon + ln_phi_neg(epsilon / mu + mu / 2.0) - first;
    if ratio >= 0.0 {
        return 0.0;
    }
    (first + (-ratio.exp_m1()).ln()).exp()
}

fn ln_phi_neg(x: f64) -> f64 {
    if x <= 37.0 {
        return (0.5 * erfc(x / std::f64::consts::SQRT_2)).ln();
    }
    let y = 1.0 / (x * x);
    // 1 − y + 3y² − 15y³ + 105y⁴ − 945y⁵ + 10395y⁶ − 135135y⁷, by Horner.
    let series = [-135_135.0, 10_395.0, -945.0, 105.0, -15.0, 3.0, -1.0, 1.0]
        .iter()
        .fold(0.0, |acc, c| acc * y + c);
    -0.5 * x * x - x.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() + series.ln()
}

/// Bisection to adjacent floating-point numbers on `[lo, hi]`, where `lo` satisfies the
/// monotone predicate's "before" state and `hi` its "after" state: returns `(lo, hi)`.
fn bisect(mut lo: f64, mut hi: f64, after: impl Fn(f64) -> bool) -> (f64, f64) {
    loop {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            return (lo, hi);
        }
        if after(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
}

/// Algorithm 1's doubling: the first power of 2 (from 1) where `pred` holds, with the last
/// where it did not (or 0).
fn doubling(pred: &impl Fn(f64) -> bool) -> (f64, f64) {
    let (mut lo, mut hi) = (0.0, 1.0);
    // At ε so small that no finite s satisfies it, hi overflows to ∞ and so does σ, which
    // `Gaussian::new` then refuses.
    while !pred(hi) && hi.is_finite() {
        lo = hi;
        hi *= 2.0;
    }
    (lo, hi)
}

/// `inf{s ≥ 0 : pred(s)}` for a predicate that turns from false to true as s grows (B₋ ≤ δ),
/// rounded up: `pred` holds at the value returned.
fn first_true(pred: impl Fn(f64) -> bool) -> f64 {
    let (lo, hi) = doubling(&pred);
    bisect(lo, hi, pred).1
}

/// `sup{s ≥ 0 : pred(s)}` for a predicate that turns from true to false as s grows (B₊ ≤ δ),
/// rounded down: `pred` holds at the value returned.
fn last_true(pred: impl Fn(f64) -> bool) -> f64 {
    let not = |s: f64| !pred(s);
    let (lo, hi) = doubling(&not);
    bisect(lo, hi, not).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mech::stats::ks_statistic;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn classic_calibration_and_its_range() {
        let g = Gaussian::classic(0.5, 1e-5, 1.0).unwrap();
        let expect = (2.0 * (1.25f64 / 1e-5).ln()).sqrt() / 0.5;
        assert!((g.sigma() - expect).abs() < 1e-12);
        assert!(Gaussian::classic(0.5, 0.0, 1.0).is_err());
        assert!(Gaussian::classic(0.5, 1.0, 1.0).is_err());
        // The refusal at ε ≥ 1 names the calibrations that cover it.
        let e = Gaussian::classic(1.0, 1e-5, 1.0).unwrap_err().to_string();
        assert!(
            e.starts_with("epsilon = 1 is invalid: must be in (0, 1)"),
            "{e}"
        );
        assert!(e.contains("analytic") && e.contains("zCDP"), "{e}");
    }

    /// σ of the analytic calibration against Algorithm 1 evaluated independently at 60
    /// significant digits (mpmath's `ncdf`, bisection to 2⁻⁴⁰⁰ of the doubling interval), to
    /// 10⁻⁹ relative. Computed by `tests/reference/analytic_gaussian.py` (its docstring says
    /// how to install diffprivlib and mpmath), called with one `ε,δ,Δ` per row below:
    /// `python tests/reference/analytic_gaussian.py 0.1,1e-5,1 0.5,1e-5,1 …`. diffprivlib
    /// 0.6.6's `GaussianAnalytic` gives the same σ to ≤ 1.4·10⁻¹¹ in the rows marked `dpl`; in
    /// the others its `(1 + erf)/2` loses the tail (5·10⁻⁷ relative at (1, 10⁻¹²), 0.5% at
    /// (3, 10⁻¹⁵) and (20, 10⁻⁸), 1% at ε = 50, 47% at ε = 1000 where `e^ε` overflows).
    /// Rows cover both branches of Algorithm 1 (δ ≥ δ₀: (0.5, 0.3), (1, 0.2), (0.7, 0.4999),
    /// (8, 0.9)), ε ≥ 1, ε up to 1000 and δ down to 10⁻¹⁵.
    // The reference's 17 digits as printed, beyond what an f64 holds.
    #[allow(clippy::excessive_precision)]
    const ANALYTIC: [(f64, f64, f64, f64); 18] = [
        (0.1, 1e-5, 1.0, 30.749566131977448),    // dpl
        (0.5, 1e-5, 1.0, 7.0318266755824914),    // dpl
        (1.0, 1e-5, 1.0, 3.7306316348159418),    // dpl
        (2.0, 1e-5, 1.0, 1.9938124456435367),    // dpl
        (5.0, 1e-6, 1.0, 0.98004900030920991),   // dpl
        (10.0, 1e-3, 3.0, 1.2181786740724156),   // dpl
        (0.5, 0.3, 1.0, 0.86586881694617936),    // dpl
        (1.0, 0.2, 1.0, 0.83599871093220614),    // dpl
        (0.7, 0.4999, 1.0, 0.55262930938301869), // dpl
        (8.0, 0.9, 2.5, 0.43559623746280244),    // dpl
        (0.01, 1e-6, 1.0, 306.35037615381768),   // dpl
        (1.0, 1e-12, 1.0, 6.5578220674588501),
        (0.05, 1e-10, 2.0, 211.94634102613101),
        (3.0, 1e-15, 0.5, 1.2912281729387216),
        (20.0, 1e-8, 1.0, 0.34377666700530828),
        (50.0, 1e-5, 1.0, 0.14976060756083602),
        (1000.0, 1e-5, 1.0, 0.024581783351654279),
        (0.001, 1e-15, 1.0, 6486.4906383204431),
    ];

    #[test]
    fn analytic_sigma_matches_an_independent_evaluation_of_algorithm_1() {
        for (eps, delta, sens, sigma) in ANALYTIC {
            let got = Gaussian::analytic(eps, delta, sens).unwrap().sigma();
            let rel = (got - sigma).abs() / sigma;
            assert!(
                rel < 1e-9,
                "ε = {eps}, δ = {delta}, Δ = {sens}: σ = {got}, expected {sigma} (rel {rel:e})"
            );
        }
    }

    /// The analytic σ is optimal, so never above the classic one where that applies, and it
    /// is defined at every ε > 0; the parameters are checked as the classic ones are.
    #[test]
    fn analytic_is_below_classic_and_defined_beyond_one() {
        for eps in [0.01, 0.1, 0.5, 0.99] {
            for delta in [1e-3, 1e-6, 1e-9] {
                let a = Gaussian::analytic(eps, delta, 2.0).unwrap().sigma();
                let c = Gaussian::classic(eps, delta, 2.0).unwrap().sigma();
                assert!(a < c, "ε = {eps}, δ = {delta}: analytic {a} ≥ classic {c}");
            }
        }
        assert!(Gaussian::analytic(1e4, 1e-9, 1.0).is_ok());
        assert_eq!(Gaussian::analytic(2.0, 0.0, 1.0).unwrap_err().name, "delta");
        assert_eq!(
            Gaussian::analytic(0.0, 0.1, 1.0).unwrap_err().name,
            "epsilon"
        );
        assert_eq!(
            Gaussian::analytic(1.0, 0.1, -1.0).unwrap_err().name,
            "sensitivity"
        );
    }

    /// `ln Φ(−x)` is continuous where it changes method (x = 37) and matches 60-digit values
    /// (mpmath `log(ncdf(-x))`) on both sides, within what statrs's `erfc` allows (about
    /// 10⁻¹⁰ relative in `Φ`, so 10⁻¹⁰ absolute in its logarithm).
    #[test]
    #[allow(clippy::excessive_precision)]
    fn log_normal_tail_across_the_switch() {
        for (x, expect) in [
            (3.0, -6.6077262215103495),
            (30.0, -454.3212439563432),
            (37.5, -707.66898931750719),
            (100.0, -5005.5242086942051),
        ] {
            let got = ln_phi_neg(x);
            assert!((got - expect).abs() < 1e-10, "x = {x}: {got} vs {expect}");
        }
        let (below, above) = (ln_phi_neg(37.0), ln_phi_neg(37.0 + 1e-9));
        assert!((below - above).abs() < 1e-6, "{below} vs {above}");
    }

    /// σ = Δ/√(2ρ): ρ = 0.5, Δ = 3 gives σ = 3; ρ and Δ must be > 0.
    #[test]
    fn zcdp_calibration() {
        assert_eq!(Gaussian::zcdp(0.5, 3.0).unwrap().sigma(), 3.0);
        let g = Gaussian::zcdp(0.02, 1.0).unwrap().sigma();
        assert!((g - 5.0).abs() < 1e-12, "{g}");
        assert_eq!(Gaussian::zcdp(0.0, 1.0).unwrap_err().name, "rho");
        assert_eq!(Gaussian::zcdp(0.1, 0.0).unwrap_err().name, "sensitivity");
    }

    /// KS test on 2·10^5 draws at the 0.1% level (critical value 1.95/sqrt(n)).
    #[test]
    fn fill_follows_the_normal_cdf() {
        let g = Gaussian::new(3.0).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let mut xs = vec![0.0; 200_000];
        g.fill(&mut rng, &mut xs);
        let d = ks_statistic(&mut xs, |z| g.cdf(z));
        assert!(d < 1.95 / (xs.len() as f64).sqrt(), "KS D = {d}");
    }
}
