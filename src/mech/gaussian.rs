//! The Gaussian mechanism (Dwork & Roth, Theorem 3.22).
//!
//! # Guarantee
//! Releasing `f(x) + N(0, σ²)` with `σ ≥ c·Δ₂f/ε`, `c² > 2 ln(1.25/δ)`, is (ε, δ)-DP for
//! ε ∈ (0, 1) and a query with ℓ2 sensitivity Δ₂f.
//!
//! # Conditions
//! - `f`'s ℓ2 sensitivity is at most Δ₂f (the caller's promise), with independent noise on
//!   every coordinate.
//! - [`Gaussian::classic`] checks ε ∈ (0, 1), δ ∈ (0, 1) and Δ₂f finite and > 0. The theorem
//!   does not cover ε ≥ 1, so [`Gaussian::classic`] refuses it rather than give a calibration
//!   without a guarantee; δ = 0 is refused because the Gaussian mechanism needs δ > 0.
//! - [`Gaussian::new`] checks only σ finite and > 0 and promises only the distribution.
//!
//! # Reference
//! Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, Theorem 3.22.
//!
//! # Deviations from the paper
//! [`Gaussian::classic`] takes `c² = 2 ln(1.25/δ)`, the boundary of the theorem's strict
//! inequality `c² > 2 ln(1.25/δ)`. The δ a Gaussian of scale σ achieves at a given ε is
//! continuous in σ, so the guarantee of every larger σ carries over to the boundary.
//!
//! # Sampling
//! The ziggurat method (rand_distr's `StandardNormal`).

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

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
    pub fn classic(epsilon: f64, delta: f64, sensitivity: f64) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        if epsilon >= 1.0 {
            return Err(ParamRangeError {
                name: "epsilon",
                value: epsilon.to_string(),
                valid:
                    "must be in (0, 1) for the classic Gaussian calibration (Dwork & Roth Thm 3.22)"
                        .into(),
            });
        }
        check_delta(delta)?;
        if delta == 0.0 {
            return Err(ParamRangeError {
                name: "delta",
                value: "0".into(),
                valid: "must be in (0, 1): the Gaussian mechanism needs δ > 0".into(),
            });
        }
        check_positive("sensitivity", sensitivity)?;
        Self::new(sensitivity * (2.0 * (1.25 / delta).ln()).sqrt() / epsilon)
    }

    pub fn sigma(&self) -> f64 {
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

    pub fn cdf(&self, z: f64) -> f64 {
        super::stats::normal_cdf(z / self.sigma)
    }
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
        assert!(Gaussian::classic(1.0, 1e-5, 1.0).is_err());
        assert!(Gaussian::classic(0.5, 0.0, 1.0).is_err());
        assert!(Gaussian::classic(0.5, 1.0, 1.0).is_err());
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
