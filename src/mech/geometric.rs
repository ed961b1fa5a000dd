//! The geometric mechanism (discrete Laplace; Ghosh, Roughgarden & Sundararajan 2009).
//!
//! `P(Z = k) = (1−α)/(1+α) · α^|k|`, `α = exp(−ε/Δf)`, on the integers.
//!
//! # Guarantee
//! Adding `Z` to an integer-valued query with sensitivity Δf is ε-DP.
//!
//! # Conditions
//! - The query is integer-valued and its sensitivity is at most Δf (the caller's promise).
//! - [`Geometric::for_privacy`] checks ε and Δf finite and > 0, and then α ∈ (0, 1): it
//!   returns an error when `exp(−ε/Δf)` rounds to 0 or to 1 in floating point (ε/Δf above
//!   about 745 or below about 6·10⁻¹⁷).
//! - [`Geometric::with_alpha`] checks only α ∈ (0, 1) and promises only the distribution.
//!
//! # Reference
//! Ghosh, Roughgarden & Sundararajan, "Universally utility-maximizing privacy mechanisms",
//! STOC 2009 (the geometric mechanism).
//!
//! # Deviations from the paper
//! None.
//!
//! # Sampling
//! A draw is the difference of two independent geometric variables on {0, 1, …} with
//! success probability `1 − α`, each drawn as `⌊E/λ⌋` with `E ~ Exp(1)` (ziggurat) and
//! `λ = −ln α`, since `P(⌊E/λ⌋ ≥ k) = e^(−λk) = α^k`.

use rand::Rng;
use rand_distr::{Distribution, Exp1};

use super::{check_epsilon, check_positive, ParamRangeError};

#[derive(Clone, Debug)]
pub struct Geometric {
    /// α (the tests' probability mass function reads it; sampling needs only 1/λ).
    #[cfg(test)]
    alpha: f64,
    /// `1/λ = −1/ln α`.
    inv_lambda: f64,
}

impl Geometric {
    /// The ε-DP calibration `α = exp(−ε/Δf)`.
    pub fn for_privacy(epsilon: f64, sensitivity: f64) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        check_positive("sensitivity", sensitivity)?;
        Self::with_alpha((-epsilon / sensitivity).exp())
    }

    /// `α ∈ (0, 1)`.
    pub(crate) fn with_alpha(alpha: f64) -> Result<Self, ParamRangeError> {
        let bad = || ParamRangeError {
            name: "alpha",
            value: alpha.to_string(),
            valid: "must be in (0, 1)".into(),
        };
        if !(alpha > 0.0 && alpha < 1.0) {
            return Err(bad());
        }
        Ok(Geometric {
            #[cfg(test)]
            alpha,
            inv_lambda: -1.0 / alpha.ln(),
        })
    }

    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        let a: f64 = Exp1.sample(rng);
        let b: f64 = Exp1.sample(rng);
        // Both products are ≥ 0, so truncation is ⌊·⌋ (and avoids a libm call).
        (a * self.inv_lambda) as i64 - (b * self.inv_lambda) as i64
    }

    #[cfg(test)]
    pub(crate) fn pmf(&self, k: i64) -> f64 {
        (1.0 - self.alpha) / (1.0 + self.alpha)
            * self
                .alpha
                .powi(k.unsigned_abs().min(i32::MAX as u64) as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mech::stats::chi_square_statistic;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    /// Chi-square over k ∈ [−6, 6] plus two tail cells, 10^5 draws, 14 dof:
    /// the 0.1% critical value is 36.12.
    #[test]
    fn follows_the_two_sided_geometric_pmf() {
        let g = Geometric::for_privacy(0.8, 1.0).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let n = 100_000;
        let mut counts = vec![0u64; 15];
        for _ in 0..n {
            let k = g.sample(&mut rng);
            let cell = (k.clamp(-7, 7) + 7) as usize;
            counts[cell] += 1;
        }
        let mut p: Vec<f64> = (-7..=7).map(|k| g.pmf(k)).collect();
        let inner: f64 = p[1..14].iter().sum();
        let tail = (1.0 - inner) / 2.0;
        p[0] = tail;
        p[14] = tail;
        let stat = chi_square_statistic(&counts, &p);
        assert!(stat < 36.12, "chi2 = {stat}");
        assert!(Geometric::for_privacy(0.0, 1.0).is_err());
    }
}
