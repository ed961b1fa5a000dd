//! The staircase mechanism (Geng & Viswanath, "The optimal noise-adding mechanism in
//! differential privacy", IEEE Trans. IT 62(2), 2016, Theorem 4 and Algorithm 1).
//!
//! For a real query with ℓ1 sensitivity Δ, privacy ε and a step parameter γ ∈ [0, 1], the
//! noise density is symmetric and, for `x ≥ 0`,
//! ```text
//! p(x) = a(γ)·e^(−kε)       for x ∈ [kΔ, (k+γ)Δ)
//! p(x) = a(γ)·e^(−(k+1)ε)   for x ∈ [(k+γ)Δ, (k+1)Δ),      k = 0, 1, 2, …
//! a(γ) = (1 − b) / (2Δ(γ + (1 − γ)b)),   b = e^(−ε).
//! ```
//!
//! # Guarantee
//! Releasing `f(x) + X` is ε-differentially private for any `f` with sensitivity at most Δ —
//! a shift by at most Δ moves a point by at most one step, and neighbouring steps differ by
//! the factor e^ε. This holds for every γ ∈ [0, 1].
//!
//! # Conditions
//! - `f` is real-valued with sensitivity at most Δ (the caller's promise).
//! - [`Staircase::new`] checks ε and Δ finite and > 0 and γ ∈ [0, 1];
//!   [`Staircase::optimal`] takes the E|X|-optimal γ* below.
//!
//! # Reference
//! Geng & Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE
//! Trans. IT 62(2), 2016: Theorem 4 (the optimal staircase) and Algorithm 1 (the sampler).
//!
//! # Deviations from the paper
//! None.
//!
//! # The optimal step
//! For the cost E|X| the optimal step is `γ* = 1/(1 + e^(ε/2))`, where
//! `E|X| = Δ·e^(ε/2)/(e^ε − 1)` (always below the Laplace mechanism's Δ/ε); this is the
//! baseline of Wu–He–Xia's `rate`.
//!
//! With γ = δ/Δ, the staircase is exactly Algorithm 1 of Wu–He–Xia 2017 for the neighbour
//! set V = [0, Δ] (see [`super::near_optimal`]), which the tests use as a cross-check.

use rand::Rng;
use rand_distr::{Distribution, Exp1};

use super::{check_epsilon, check_positive, ParamRangeError};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Staircase {
    epsilon: f64,
    sensitivity: f64,
    gamma: f64,
    /// `b = e^(−ε)`.
    b: f64,
    /// The density on the first step, `a(γ)`.
    height: f64,
}

impl Staircase {
    /// The staircase with step parameter `gamma ∈ [0, 1]`.
    pub fn new(epsilon: f64, sensitivity: f64, gamma: f64) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        check_positive("sensitivity", sensitivity)?;
        if !(0.0..=1.0).contains(&gamma) {
            return Err(ParamRangeError {
                name: "gamma",
                value: gamma.to_string(),
                valid: "must be in [0, 1]".into(),
            });
        }
        let b = (-epsilon).exp();
        // 1 − b as −expm1(−ε): exact to the last bit for small ε.
        let height = -(-epsilon).exp_m1() / (2.0 * sensitivity * (gamma + (1.0 - gamma) * b));
        Ok(Staircase {
            epsilon,
            sensitivity,
            gamma,
            b,
            height,
        })
    }

    /// The staircase with the E|X|-optimal step `γ* = 1/(1 + e^(ε/2))`.
    pub(crate) fn optimal(epsilon: f64, sensitivity: f64) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        Self::new(epsilon, sensitivity, 1.0 / (1.0 + (epsilon / 2.0).exp()))
    }

    pub(crate) fn gamma(&self) -> f64 {
        self.gamma
    }

    /// The step index of `|x|` counted in half-steps: `2k` on `[kΔ, (k+γ)Δ)`, `2k+1` on
    /// `[(k+γ)Δ, (k+1)Δ)`; the density is `a·e^(−ε·⌈m/2⌉)` for half-step `m`.
    fn exponent(&self, x: f64) -> f64 {
        let t = x.abs() / self.sensitivity;
        let k = t.floor();
        if t - k < self.gamma {
            k
        } else {
            k + 1.0
        }
    }

    pub(crate) fn density(&self, x: f64) -> f64 {
        self.height * (-self.epsilon * self.exponent(x)).exp()
    }

    /// `E|X|` in closed form: the two geometric series over k of the step integrals.
    pub(crate) fn mean_abs(&self) -> f64 {
        let (g, b, d) = (self.gamma, self.b, self.sensitivity);
        let one_minus_b = -(-self.epsilon).exp_m1();
        let s0 = 1.0 / one_minus_b;
        let s1 = b / (one_minus_b * one_minus_b);
        // ∫ x over [kΔ, (k+γ)Δ) = Δ²(γk + γ²/2); over [(k+γ)Δ, (k+1)Δ) = Δ²((1−γ)k + (1−γ²)/2).
        let first = g * s1 + g * g / 2.0 * s0;
        let second = b * ((1.0 - g) * s1 + (1.0 - g * g) / 2.0 * s0);
        2.0 * self.height * d * d * (first + second)
    }

    /// One draw (Geng & Viswanath, Algorithm 1): a sign, a geometric step index G with
    /// `P(G = k) = (1 − b)b^k`, a Bernoulli choice between the high and the low part of the
    /// step with `P(low) = (1 − γ)b/(γ + (1 − γ)b)`, and a uniform position within it.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let e: f64 = Exp1.sample(rng);
        // ⌊E/ε⌋ is geometric on {0, 1, …} with P(≥ k) = e^(−εk) = b^k.
        let g = (e / self.epsilon).floor();
        let low = (1.0 - self.gamma) * self.b;
        let in_low = rng.random::<f64>() * (self.gamma + low) < low;
        let u: f64 = rng.random();
        let magnitude = if in_low {
            (g + self.gamma + (1.0 - self.gamma) * u) * self.sensitivity
        } else {
            (g + self.gamma * u) * self.sensitivity
        };
        if rng.random::<bool>() {
            magnitude
        } else {
            -magnitude
        }
    }

    /// The CDF, for goodness-of-fit tests: whole steps below |x| plus the part of its step.
    #[cfg(test)]
    pub(crate) fn cdf(&self, x: f64) -> f64 {
        let t = x.abs() / self.sensitivity;
        let k = t.floor();
        let frac = t - k;
        let (g, b, d) = (self.gamma, self.b, self.sensitivity);
        // Mass of [0, kΔ) on one side: a·Δ(γ + (1−γ)b)·(1 − b^k)/(1 − b).
        let per_step = self.height * d * (g + (1.0 - g) * b);
        let whole = per_step * (1.0 - b.powf(k)) / (1.0 - b);
        let within = if frac < g {
            self.height * d * frac
        } else {
            self.height * d * (g + (frac - g) * b)
        } * b.powf(k);
        let half = whole + within;
        if x >= 0.0 {
            0.5 + half
        } else {
            0.5 - half
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mech::stats::ks_statistic;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn optimal_cost_matches_the_closed_form() {
        for eps in [0.05, 0.5, 1.0, 3.0, 8.0] {
            for delta in [1.0, 7.5, 1001.0] {
                let s = Staircase::optimal(eps, delta).unwrap();
                let expected = delta * (eps / 2.0).exp() / eps.exp_m1();
                assert!(
                    (s.mean_abs() / expected - 1.0).abs() < 1e-12,
                    "ε = {eps}: {} vs {expected}",
                    s.mean_abs()
                );
                // γ* minimises E|X| over γ.
                for g in [0.0, 0.1, 0.3, 0.6, 1.0] {
                    let other = Staircase::new(eps, delta, g).unwrap();
                    assert!(other.mean_abs() >= s.mean_abs() * (1.0 - 1e-12));
                }
            }
        }
    }

    /// Midpoint sums over a fine grid: the density integrates to 1 and its first absolute
    /// moment is `mean_abs`; neighbouring points Δ apart differ by at most e^ε.
    #[test]
    fn density_normalises_and_respects_privacy() {
        let s = Staircase::new(0.7, 2.0, 0.3).unwrap();
        let h = 1e-3;
        let (mut mass, mut moment) = (0.0, 0.0);
        for i in 0..200_000 {
            let x = (i as f64 + 0.5) * h;
            mass += 2.0 * s.density(x) * h;
            moment += 2.0 * x * s.density(x) * h;
        }
        assert!((mass - 1.0).abs() < 1e-6, "{mass}");
        assert!((moment / s.mean_abs() - 1.0).abs() < 1e-5);
        // Points halfway between multiples of 0.004, so never within rounding of a step
        // boundary (2k or 2k + 0.6), where a float comparison could pick either side.
        for i in 0..10_000 {
            let x = -20.0 + (i as f64 + 0.5) * 0.004;
            for v in [-2.0, -1.3, 0.5, 2.0] {
                let r = s.density(x) / s.density(x - v);
                assert!(r <= 0.7f64.exp() * (1.0 + 1e-12), "x = {x}, v = {v}: {r}");
            }
        }
        assert!((s.cdf(1e9) - 1.0).abs() < 1e-12 && s.cdf(-1e9).abs() < 1e-12);
    }

    /// KS test on 2·10^5 draws: the 0.1% critical value is 1.95/sqrt(n) ≈ 0.0044.
    #[test]
    fn sampler_follows_the_cdf() {
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        for (eps, g) in [(0.5, 0.3), (2.0, 1.0 / (1.0 + 1f64.exp())), (1.0, 0.0)] {
            let s = Staircase::new(eps, 3.0, g).unwrap();
            let mut xs: Vec<f64> = (0..200_000).map(|_| s.sample(&mut rng)).collect();
            let d = ks_statistic(&mut xs, |x| s.cdf(x));
            assert!(
                d < 1.95 / (xs.len() as f64).sqrt(),
                "ε = {eps}, γ = {g}: D = {d}"
            );
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        let e = Staircase::new(1.0, 1.0, 1.5).unwrap_err();
        assert!(e.to_string().contains("gamma = 1.5"), "{e}");
        assert!(Staircase::optimal(0.0, 1.0).is_err());
        assert!(Staircase::optimal(1.0, -1.0).is_err());
    }
}
