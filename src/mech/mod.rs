//! The mathematics layer: mechanisms, their exact output distributions, and the statistics
//! used to check them. Plain Rust on slices and `&mut impl Rng`: no YAML, no frames, no I/O.
//!
//! Find a mechanism by its paper name:
//! - [`laplace::Laplace`] — the Laplace mechanism (Dwork & Roth Def. 3.3)
//! - [`gaussian::Gaussian`] — the Gaussian mechanism, calibrated classically (Dwork & Roth
//!   Thm 3.22), analytically (Balle & Wang 2018, Algorithm 1) or for ρ-zCDP (Bun & Steinke 2016)
//! - [`geometric::Geometric`] — the geometric / discrete Laplace mechanism
//! - [`discrete_gaussian::DiscreteGaussian`] — the discrete Gaussian mechanism (Canonne,
//!   Kamath & Steinke 2020, Algorithms 1–3 and Theorem 4), an exact sampler
//! - [`exponential::ExponentialMechanism`] — the exponential mechanism (Def. 3.4, Thm 3.10–3.11)
//! - [`noisy_max::ReportNoisyMax`] — Report Noisy Max with Laplace noise, Report One-Sided
//!   Noisy Arg-Max with exponential noise, and Gumbel-max (Thm 3.13)
//! - [`rate_distortion::blahut_arimoto`] — the rate–distortion optimal privacy channel of
//!   Wu et al. 2020 (Algorithms 1–3), and [`rate_distortion::symmetric_channel`] (k-ary
//!   randomized response) it is compared with
//! - [`staircase::Staircase`] — the staircase mechanism (Geng & Viswanath 2016)
//! - [`near_optimal`] — the near-optimal mechanism for linear queries (Wu, He & Xia 2017:
//!   Algorithms 1 and 2), on the exact interval sets of [`interval`]
//! - [`trig`] — the trigonometric mechanism for smooth queries (Huang 2014: Algorithms 4–10):
//!   [`trig::mechanism::trigonometric`] and [`trig::mechanism::improved_trigonometric`];
//!   [`trig::psi`] — its private subspace iteration (Algorithms 6 and 7), private on its own
//!
//! # How a mechanism is documented
//! Every mechanism module (the modules of the list above; for [`trig`], [`trig::mechanism`]
//! and [`trig::psi`]) opens its `//!` documentation with a summary and then these four
//! headings, in this order, each with text under it:
//! - `# Guarantee` — the privacy guarantee, precisely: ε-DP, (ε, δ)-DP, for which
//!   neighbouring relation, or what a non-private helper in the module guarantees instead;
//! - `# Conditions` — what must hold for the guarantee: sensitivity, parameter ranges, inputs;
//!   what the constructors check and what is left to the caller;
//! - `# Reference` — the paper, with its definition, theorem and algorithm numbers;
//! - `# Deviations from the paper` — what the implementation does differently, and why
//!   (or "None.").
//!
//! Other headings (`# Sampling`, `# Conventions`, …) may follow. `tests/it/mechanism_docs.rs`
//! checks this for every mechanism module, and that every other file here is on its list
//! of helpers (numerics, statistics, and the parts of the trigonometric mechanism that carry
//! no guarantee of their own).

pub(crate) mod audit;
pub(crate) mod discrete_gaussian;
pub mod exponential;
pub mod fastmath;
pub mod gaussian;
pub mod geometric;
pub(crate) mod interval;
pub mod laplace;
pub mod near_optimal;
pub(crate) mod noisy_max;
pub(crate) mod quadrature;
pub mod rate_distortion;
pub(crate) mod staircase;
pub(crate) mod stats;
pub mod trig;

/// The privacy a mechanism promises, in the terms of its guarantee (each module's
/// `# Guarantee`): what a mechanism *kind* states from its own parameters, as an OpenDP
/// measurement carries its privacy map, so an audit holds it to that claim without the
/// pipeline writing it a second time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Privacy {
    /// (ε, δ)-DP; δ = 0 is pure ε-DP.
    Approx { epsilon: f64, delta: f64 },
    /// ρ-zCDP (Bun & Steinke 2016).
    Zcdp { rho: f64 },
}

impl Privacy {
    /// The ε of the (ε, δ)-DP this promises at `delta` (0 < δ < 1 for ρ-zCDP): its own ε when
    /// δ is at least its own δ; for ρ-zCDP, ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016,
    /// Proposition 1.3). `None` when it promises nothing at that δ (below its own δ).
    pub(crate) fn epsilon_at(self, delta: f64) -> Option<f64> {
        match self {
            Privacy::Approx { epsilon, delta: d } => (delta >= d).then_some(epsilon),
            Privacy::Zcdp { rho } => {
                (delta > 0.0 && delta < 1.0).then(|| rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt())
            }
        }
    }
}

/// A parameter outside its valid range. The message names the value and the range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name} = {value} is invalid: {valid}")]
pub struct ParamRangeError {
    pub name: &'static str,
    pub value: String,
    /// The valid range, in words (`must be > 0`, `must be in [0, 1)`).
    pub valid: String,
}

/// ε > 0 and finite.
pub(crate) fn check_epsilon(epsilon: f64) -> Result<(), ParamRangeError> {
    check_positive("epsilon", epsilon)
}

/// `value` > 0 and finite.
pub(crate) fn check_positive(name: &'static str, value: f64) -> Result<(), ParamRangeError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ParamRangeError {
            name,
            value: value.to_string(),
            valid: "must be a finite number > 0".into(),
        })
    }
}

/// A privacy δ in [0, 1).
pub(crate) fn check_delta(delta: f64) -> Result<(), ParamRangeError> {
    if (0.0..1.0).contains(&delta) {
        Ok(())
    } else {
        Err(ParamRangeError {
            name: "delta",
            value: delta.to_string(),
            valid: "must be in [0, 1)".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Privacy;

    /// ρ-zCDP at δ = 1e-5: ρ + 2√(ρ ln 1e5) (0.02 gives 0.9798, as the audit pipeline's table
    /// printed it rounded up); (ε, δ)-DP promises its ε at its δ and above, nothing below.
    #[test]
    fn a_claim_in_epsilon_at_a_delta() {
        let z = Privacy::Zcdp { rho: 0.02 }.epsilon_at(1e-5).unwrap();
        assert!((z - 0.979_706).abs() < 1e-6, "{z}");
        assert_eq!(Privacy::Zcdp { rho: 0.02 }.epsilon_at(0.0), None);
        let a = Privacy::Approx {
            epsilon: 0.5,
            delta: 1e-5,
        };
        assert_eq!(a.epsilon_at(1e-5), Some(0.5));
        assert_eq!(a.epsilon_at(1e-6), None);
        assert_eq!(
            Privacy::Approx {
                epsilon: 1.0,
                delta: 0.0
            }
            .epsilon_at(0.0),
            Some(1.0)
        );
    }
}
