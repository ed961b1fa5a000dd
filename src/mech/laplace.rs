//! The Laplace mechanism (Dwork & Roth, Definition 3.3 and Theorem 3.6).
//!
//! Density `p(z) = exp(−|z|/b) / (2b)`.
//!
//! # Guarantee
//! Releasing `f(x) + Z` with `Z ~ Lap(b)`, `b = Δf/ε`, is ε-differentially private for any `f`
//! whose ℓ1 sensitivity is at most Δf.
//!
//! # Conditions
//! - `f`'s ℓ1 sensitivity is at most Δf (the caller's promise; nothing here can check it), and
//!   each coordinate of a vector-valued `f` gets its own independent draw at scale `b`.
//! - [`Laplace::for_privacy`] checks ε and Δf finite and > 0; [`Laplace::new`] checks the scale
//!   `b` finite and > 0 and promises only the distribution: the guarantee is that of whatever
//!   `Δf/b` the caller's scale amounts to.
//!
//! # Reference
//! Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*: Definition 3.3 (the
//! Laplace mechanism) and Theorem 3.6 (it is ε-DP).
//!
//! # Deviations from the paper
//! None.
//!
//! # Sampling
//! `Z = b·S·E` with `S` a uniform sign and `E ~ Exp(1)` drawn by the ziggurat method, which
//! costs one 64-bit draw and rarely a logarithm — much cheaper than the inverse CDF (one
//! logarithm per sample).

use rand::Rng;
use rand_distr::{Distribution, Exp1};

use super::{check_epsilon, check_positive, ParamRangeError};

/// The Laplace distribution `Lap(b)` centred at 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Laplace {
    scale: f64,
}

impl Laplace {
    /// `Lap(scale)`; `scale` must be finite and > 0.
    pub fn new(scale: f64) -> Result<Self, ParamRangeError> {
        check_positive("scale", scale)?;
        Ok(Laplace { scale })
    }

    /// The ε-DP calibration `b = Δf/ε` for a query with ℓ1 sensitivity Δf.
    pub fn for_privacy(epsilon: f64, sensitivity: f64) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        check_positive("sensitivity", sensitivity)?;
        Self::new(sensitivity / epsilon)
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let e: f64 = Exp1.sample(rng);
        if rng.next_u32() & 1 == 0 {
            self.scale * e
        } else {
            -self.scale * e
        }
    }

    /// Fills `out` with independent draws; one 64-bit word supplies 64 signs.
    pub fn fill<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut [f64]) {
        for chunk in out.chunks_mut(64) {
            let mut signs = rng.next_u64();
            for z in chunk {
                let e: f64 = Exp1.sample(rng);
                let magnitude = self.scale * e;
                *z = f64::from_bits(magnitude.to_bits() | ((signs & 1) << 63));
                signs >>= 1;
            }
        }
    }

    pub(crate) fn density(&self, z: f64) -> f64 {
        (-z.abs() / self.scale).exp() / (2.0 * self.scale)
    }

    #[cfg(test)]
    pub(crate) fn cdf(&self, z: f64) -> f64 {
        if z < 0.0 {
            0.5 * (z / self.scale).exp()
        } else {
            1.0 - 0.5 * (-z / self.scale).exp()
        }
    }

    /// `ln cdf(z)`, accurate far in the left tail where `cdf` underflows.
    pub(crate) fn ln_cdf(&self, z: f64) -> f64 {
        if z < 0.0 {
            z / self.scale - std::f64::consts::LN_2
        } else {
            (-0.5 * (-z / self.scale).exp()).ln_1p()
        }
    }

    /// `E|Z| = b`.
    pub(crate) fn mean_abs(&self) -> f64 {
        self.scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mech::stats::ks_statistic;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn rejects_bad_parameters() {
        assert!(Laplace::new(0.0).is_err());
        assert!(Laplace::new(f64::NAN).is_err());
        let e = Laplace::for_privacy(-1.0, 1.0).unwrap_err();
        assert!(e.to_string().contains("epsilon = -1"), "{e}");
    }

    /// KS test on 2·10^5 draws: the 0.1% critical value is 1.95/sqrt(n) ≈ 0.0044.
    #[test]
    fn fill_and_sample_follow_the_laplace_cdf() {
        let lap = Laplace::new(2.5).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let mut xs = vec![0.0; 200_000];
        lap.fill(&mut rng, &mut xs);
        let d = ks_statistic(&mut xs, |z| lap.cdf(z));
        assert!(d < 1.95 / (xs.len() as f64).sqrt(), "KS D = {d}");
        let mut ys: Vec<f64> = (0..200_000).map(|_| lap.sample(&mut rng)).collect();
        let d = ks_statistic(&mut ys, |z| lap.cdf(z));
        assert!(d < 1.95 / (ys.len() as f64).sqrt(), "KS D = {d}");
    }

    #[test]
    fn ln_cdf_matches_cdf() {
        let lap = Laplace::new(0.7).unwrap();
        for z in [-30.0, -2.0, -0.1, 0.0, 0.3, 5.0] {
            assert!((lap.ln_cdf(z).exp() - lap.cdf(z)).abs() < 1e-15);
        }
    }
}
