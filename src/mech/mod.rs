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
pub(crate) mod privacy;
pub(crate) mod quadrature;
pub mod rate_distortion;
pub(crate) mod staircase;
pub(crate) mod stats;
pub mod trig;

pub use privacy::Privacy;

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
