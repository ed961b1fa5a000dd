//! `mechanism.select`: private selection from a range of candidates with utilities — the
//! exponential mechanism and the noisy-arg-max family — with its exact output distribution
//! and, optionally, Monte-Carlo draws.

use anyhow::{Context, Result};
use rand::Rng;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::exponential::ExponentialMechanism;
use crate::mech::noisy_max::{Noise, ReportNoisyMax};
use crate::mech::ParamRangeError;
use crate::stages::columns::{f64_col, str_col, FrameBuilder};
use crate::stages::param::Positive;
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

/// Draws per sub-stream (see `Ctx::substream`).
const CHUNK: u64 = 1 << 16;

pub const KIND: KindInfo = KindInfo {
    name: "mechanism.select",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Private selection of a candidate by its utility: exponential mechanism, Report Noisy Max (Laplace), Report One-Sided Noisy Arg-Max (exponential noise), Gumbel-max. Outputs, per candidate: method, candidate, utility, probability (exact; empty when unknown), count and frequency of the Monte-Carlo draws.",
    params: params::<Select>,
    gather: Gather::Nothing,
    build: build::<Select>,
    verdict: None,
};

/// The selection methods, by their names in the text.
#[derive(Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Method {
    /// Pr ∝ exp(εu/2Δu) (Def. 3.4)
    Exponential,
    /// Laplace noise on each utility, report the arg-max
    ReportNoisyMax,
    /// exponential noise on each utility, report the arg-max
    OneSidedNoisyArgmax,
    /// Gumbel noise of scale 2Δu/ε, report the arg-max
    GumbelMax,
    /// Pr ∝ exp(εu/Δu), the form the text warns is only 2ε-DP
    NaiveExponential,
}

impl Method {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Method::Exponential => "exponential",
            Method::ReportNoisyMax => "report_noisy_max",
            Method::OneSidedNoisyArgmax => "one_sided_noisy_argmax",
            Method::GumbelMax => "gumbel_max",
            Method::NaiveExponential => "naive_exponential",
        }
    }
}

/// A selection mechanism over one utility vector.
pub(crate) enum Selector {
    Exponential(ExponentialMechanism),
    NoisyMax(ReportNoisyMax),
}

impl Selector {
    pub(crate) fn new(
        method: Method,
        u: &[f64],
        epsilon: f64,
        sensitivity: f64,
        monotone: bool,
    ) -> Result<Self, ParamRangeError> {
        Ok(match method {
            Method::Exponential => {
                Selector::Exponential(ExponentialMechanism::new(u, epsilon, sensitivity)?)
            }
            Method::NaiveExponential => {
                crate::mech::check_epsilon(epsilon)?;
                crate::mech::check_positive("sensitivity", sensitivity)?;
                Selector::Exponential(ExponentialMechanism::with_coefficient(
                    u,
                    epsilon / sensitivity,
                )?)
            }
            Method::ReportNoisyMax => Selector::NoisyMax(ReportNoisyMax::for_privacy(
                u,
                Noise::Laplace,
                epsilon,
                sensitivity,
                monotone,
            )?),
            Method::OneSidedNoisyArgmax => Selector::NoisyMax(ReportNoisyMax::for_privacy(
                u,
                Noise::Exponential,
                epsilon,
                sensitivity,
                monotone,
            )?),
            // Gumbel-max reproduces the exponential mechanism only at scale 2Δu/ε.
            Method::GumbelMax => Selector::NoisyMax(ReportNoisyMax::for_privacy(
                u,
                Noise::Gumbel,
                epsilon,
                sensitivity,
                false,
            )?),
        })
    }

    pub(crate) fn probabilities(&self) -> Option<Vec<f64>> {
        match self {
            Selector::Exponential(m) => Some(m.probabilities()),
            Selector::NoisyMax(m) => m.probabilities(),
        }
    }

    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        match self {
            Selector::Exponential(m) => m.sample(rng),
            Selector::NoisyMax(m) => m.sample(rng),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Select {
    /// the selection method
    pub method: Method,
    /// privacy parameter ε
    pub epsilon: Positive,
    /// Δu, the utility's sensitivity
    #[serde(default = "one")]
    pub sensitivity: Positive,
    /// noisy-arg-max methods: the utility is monotone (noise scale Δu/ε instead of 2Δu/ε)
    #[serde(default)]
    pub monotone: bool,
    /// column naming the candidates
    #[serde(default = "candidate")]
    pub candidate: String,
    /// column of utilities u(x, r)
    #[serde(default = "utility")]
    pub utility: String,
    /// Monte-Carlo draws (0: exact distribution only)
    #[serde(default)]
    pub samples: u64,
}

pub(crate) fn one() -> Positive {
    Positive::of(1.0)
}
pub(crate) fn candidate() -> String {
    "candidate".into()
}
pub(crate) fn utility() -> String {
    "utility".into()
}

pub(crate) fn range_error(e: ParamRangeError) -> ParamError {
    ParamError::at(e.name, e.to_string())
}

impl Stage for Select {
    /// ε-DP for utilities of sensitivity `sensitivity` (with `monotone`: for monotone
    /// utilities only). `naive_exponential` states ε as the naive analysis does, and does
    /// not keep it (it is 2ε-DP): that is what an audit of it shows.
    fn privacy(&self) -> Option<crate::mech::Privacy> {
        Some(crate::mech::Privacy::Approx {
            epsilon: *self.epsilon,
            delta: 0.0,
        })
    }

    fn validate(&self) -> Result<(), ParamError> {
        check_size_at("samples", Limit::Draws, "samples", Some(self.samples))?;
        if self.monotone
            && matches!(
                self.method,
                Method::Exponential | Method::NaiveExponential | Method::GumbelMax
            )
        {
            return Err(ParamError::at(
                "monotone",
                format!(
                    "`monotone` applies to report_noisy_max and one_sided_noisy_argmax, not {}",
                    self.method.name()
                ),
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let u = f64_col(df, &self.utility)?;
        let names = str_col(df, &self.candidate)?;
        let sel = Selector::new(
            self.method,
            &u,
            *self.epsilon,
            *self.sensitivity,
            self.monotone,
        )?;
        // Noisy-arg-max methods draw one noise value per candidate per sample.
        if let Selector::NoisyMax(_) = sel {
            check_size_run(
                Limit::Draws,
                &format!(
                    "samples × candidates ({} × {}) noise values",
                    self.samples,
                    u.len()
                ),
                product(&[self.samples, u.len() as u64]),
            )?;
        }
        let probs = sel.probabilities();
        let chunks = self.samples.div_ceil(CHUNK);
        let counts = (0..chunks)
            .into_par_iter()
            .map(|c| {
                let mut rng = ctx.substream(c);
                let n = CHUNK.min(self.samples - c * CHUNK);
                let mut counts = vec![0u64; u.len()];
                match &sel {
                    Selector::Exponential(m) => {
                        let mut draws = vec![0usize; n as usize];
                        m.sample_into(&mut rng, &mut draws);
                        draws.iter().for_each(|&d| counts[d] += 1);
                    }
                    Selector::NoisyMax(_) => (0..n).for_each(|_| counts[sel.sample(&mut rng)] += 1),
                }
                counts
            })
            .reduce(
                || vec![0u64; u.len()],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            );
        let n = self.samples.max(1) as f64;
        let mut fb = FrameBuilder::new()
            .str(
                column::METHOD,
                vec![self.method.name().to_string(); u.len()],
            )
            .str(column::CANDIDATE, names)
            .f64(column::UTILITY, u.clone());
        fb = fb.opt_f64(
            column::PROBABILITY,
            match &probs {
                Some(p) => p.iter().map(|&x| Some(x)).collect(),
                None => vec![None; u.len()],
            },
        );
        fb = fb
            .i64(column::COUNT, counts.iter().map(|&c| c as i64).collect())
            .f64(
                column::FREQUENCY,
                counts
                    .iter()
                    .map(|&c| {
                        if self.samples == 0 {
                            f64::NAN
                        } else {
                            c as f64 / n
                        }
                    })
                    .collect(),
            );
        Ok(fb.build()?.into())
    }
}

/// The frame a selection writes, one row per candidate, and what the `evaluate.*` kinds read
/// of it ([`Dist`]): its column names, written once for both sides.
pub(crate) mod column {
    /// The method's name (one per frame).
    pub(crate) const METHOD: &str = "method";
    pub(crate) const CANDIDATE: &str = "candidate";
    pub(crate) const UTILITY: &str = "utility";
    /// The exact probability of the candidate, where the method has one in closed form.
    pub(crate) const PROBABILITY: &str = "probability";
    /// How many of the `samples` draws chose it, and their share.
    pub(crate) const COUNT: &str = "count";
    pub(crate) const FREQUENCY: &str = "frequency";
}

/// One `mechanism.select` output: utilities, exact probabilities (if known), counts.
pub(crate) struct Dist {
    pub(crate) method: String,
    pub(crate) utility: Vec<f64>,
    pub(crate) prob: Option<Vec<f64>>,
    pub(crate) count: Vec<u64>,
}

impl Dist {
    pub(crate) fn read(df: &polars::prelude::DataFrame, what: &str) -> Result<Self> {
        let ctx = || format!("{what} must be the output of a mechanism.select stage");
        let method = str_col(df, column::METHOD).with_context(ctx)?;
        if method.iter().any(|m| m != &method[0]) {
            anyhow::bail!("{what} holds several selections (methods {:?}…); evaluate one selection per instance", &method[..method.len().min(3)]);
        }
        let utility = f64_col(df, column::UTILITY).with_context(ctx)?;
        let prob = f64_col(df, column::PROBABILITY).ok();
        let count = f64_col(df, column::COUNT)
            .with_context(ctx)?
            .iter()
            .map(|&c| c as u64)
            .collect();
        Ok(Dist {
            method: method.first().cloned().unwrap_or_default(),
            utility,
            prob,
            count,
        })
    }

    pub(crate) fn samples(&self) -> u64 {
        self.count.iter().sum()
    }

    pub(crate) fn opt(&self) -> f64 {
        self.utility
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run};

    /// The exponential mechanism's exact distribution is Pr ∝ exp(εu/2Δu) (utilities 0 and 1
    /// at ε = 2: 1/(1+e) and e/(1+e)), and its Monte-Carlo frequencies come near it; Gumbel-max
    /// has the same distribution, and without `samples` no frequency; `monotone` is refused
    /// where it means nothing.
    #[test]
    fn the_exponential_mechanism_draws_its_exact_distribution() {
        let input = polars::df!("candidate" => ["a", "b"], "utility" => [0.0, 1.0]).unwrap();
        let out = run(
            &KIND,
            "{method: exponential, epsilon: 2, samples: 20000}",
            &[&input],
            5,
        )
        .unwrap()
        .frame;
        let e = std::f64::consts::E;
        let p = floats(&out, "probability");
        assert!(
            (p[0] - 1.0 / (1.0 + e)).abs() < 1e-12 && (p[1] - e / (1.0 + e)).abs() < 1e-12,
            "{p:?}"
        );
        let f = floats(&out, "frequency");
        assert!((f[0] + f[1] - 1.0).abs() < 1e-12);
        assert!((f[1] - p[1]).abs() < 0.015, "{f:?} vs {p:?}");
        assert_eq!(floats(&out, "count").iter().sum::<f64>(), 20000.0);
        // Gumbel noise of scale 2Δu/ε is the exponential mechanism, exactly.
        let gumbel = run(&KIND, "{method: gumbel_max, epsilon: 2}", &[&input], 5)
            .unwrap()
            .frame;
        for (g, p) in floats(&gumbel, "probability").iter().zip(&p) {
            assert!((g - p).abs() < 1e-12, "{g} vs {p}");
        }
        assert!(floats(&gumbel, "frequency").iter().all(|f| f.is_nan()));
        assert_eq!(
            refused(&KIND, "{method: exponential, epsilon: 1, monotone: true}"),
            "monotone: `monotone` applies to report_noisy_max and one_sided_noisy_argmax, not exponential"
        );
    }
}
