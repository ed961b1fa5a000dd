//! `mechanism.trigonometric`: a synthetic database from the trigonometric mechanism of
//! Huang 2014 ([`crate::mech::trig`]), its input a point set in [−1, 1]^d (e.g. `normalise`).
//!
//! The output frame is the synthetic database: `weight` (its probabilities) and the data
//! columns, plus one `synthesis_*` column per diagnostic (repeated on every row, so a later
//! stage can carry them along): the schedule, noise scales, the share of ellipsoid points
//! outside the cube (`synthesis_outside`), LP objective and rounds, support,
//! and the wall time of the synthesis (`synthesis_seconds`, a measurement that `dplab compare`
//! does not compare).
//!
//! Two diagnostics remove privacy to show where the error comes from (never private):
//! `exact` runs chosen steps without noise, and `variant: grid_floor` outputs the data snapped
//! to A^d — the floor the grid alone sets.

use anyhow::Result;
use serde::Deserialize;

use super::frame::{f64_col, has_col, numeric_matrix, FrameBuilder};
use super::{build, Ctx, Gather, KindInfo, Output, ParamDoc, ParamError, Params, Stage};
use crate::mech::trig::ellipsoid::EllipsoidSampler;
use crate::mech::trig::lp::{LpMethod, LpOptions};
use crate::mech::trig::mechanism::{
    error_exponent, grid_floor, improved_trigonometric, trigonometric, Calibration, Exact,
    Improvement, Privacy, Settings, Synthetic,
};
use crate::mech::trig::psi::LaplaceScale;

/// Columns that describe a synthesis rather than hold data.
pub const DIAGNOSTIC_PREFIX: &str = "synthesis_";

/// The weights of a weighted point set.
pub const WEIGHT: &str = "weight";

/// A point set read from a frame: every numeric column except the axis columns, `weight`
/// and the `synthesis_*` diagnostics, as row-major values; with the column names and the
/// weights (when the frame has a `weight` column).
pub struct PointSet {
    pub points: Vec<f64>,
    pub names: Vec<String>,
    pub weights: Option<Vec<f64>>,
}

impl PointSet {
    pub fn read(
        df: &polars::prelude::DataFrame,
        axis_names: &[String],
        input: &str,
    ) -> Result<Self> {
        let (points, names) = numeric_matrix(df, |c| {
            c == WEIGHT || c.starts_with(DIAGNOSTIC_PREFIX) || axis_names.iter().any(|a| a == c)
        })?;
        if names.is_empty() || df.height() == 0 {
            anyhow::bail!("the input `{input}` has no numeric data columns or no rows");
        }
        let weights = if has_col(df, WEIGHT) {
            Some(f64_col(df, WEIGHT)?)
        } else {
            None
        };
        Ok(PointSet {
            points,
            names,
            weights,
        })
    }

    pub fn dim(&self) -> usize {
        self.names.len()
    }
}

pub fn kinds() -> Vec<KindInfo> {
    vec![KindInfo {
        name: "mechanism.trigonometric",
        version: 1,
        random: true,
        summary: "Synthetic database for smooth queries by the trigonometric mechanism (Huang 2014): mechanisms I/II on the full grid (Algorithms 4/5) or the improved I/II (Algorithms 9/10). Output: `weight` + the data columns + `synthesis_*` diagnostics.",
        params: Params::Doc(&[
            ParamDoc { name: "variant", ty: "full | improved | grid_floor", default: Some("improved"), meaning: "Algorithms 4/5 (every basis function, the whole grid A^d; small d) or 9/10 (R bases, C ellipsoid points); grid_floor: the data snapped to A^d (N of the schedule) with count weights — no noise, not private: the floor the grid alone sets" },
            ParamDoc { name: "epsilon", ty: "number > 0", default: None, meaning: "privacy parameter ε" },
            ParamDoc { name: "delta", ty: "number in (0, 1)", default: Some("— (ε-DP: mechanism I)"), meaning: "given: (ε, δ)-DP, mechanism II" },
            ParamDoc { name: "smoothness", ty: "number > 0", default: Some("—"), meaning: "K, the smoothness order the schedule (t, N, m, L of line 1) is tuned to" },
            ParamDoc { name: "sigma", ty: "number > 0", default: Some("—"), meaning: "instead of `smoothness`: the Gaussian-kernel width σ of the queries, K = σ² (Proposition 2.2)" },
            ParamDoc { name: "bases", ty: "integer ≥ 1", default: Some("— (improved: required)"), meaning: "R, the lowest-order basis functions used" },
            ParamDoc { name: "candidates", ty: "integer ≥ 1", default: Some("10000"), meaning: "C, points drawn in the ellipsoid (improved)" },
            ParamDoc { name: "pca_dim", ty: "integer in [1, d]", default: Some("— (improved: required)"), meaning: "k, dimension of the private PCA" },
            ParamDoc { name: "pca_iterations", ty: "integer ≥ 1", default: Some("10"), meaning: "iterations of private subspace iteration (the thesis's second L)" },
            ParamDoc { name: "kappa", ty: "number > 0", default: Some("— (improved: required)"), meaning: "κ: semi-axes κ·√λ̂ of the ellipsoid" },
            ParamDoc { name: "pca_noise", ty: "text | algorithm | derived", default: Some("text"), meaning: "improved I: private PCA's Laplace scale — text: 10ρ√(dkL)/ε (§3.1; ε-DP for k·L ≤ 100), algorithm: 10ρ√d·k·L/ε (Algorithm 7 line 1; ε-DP always), derived: ρ√d·k·L/ε (the least the ℓ₁ sensitivity allows); see the psi module" },
            ParamDoc { name: "exact", ty: "list of basis | mean | pca", default: Some("[]"), meaning: "diagnostics, NOT private: run these steps without noise (the noise is still drawn, so the rest of the run is paired with the private one)" },
            ParamDoc { name: "ellipsoid", ty: "uniform | literal", default: Some("uniform"), meaning: "uniform points in the ellipsoid, or Algorithm 8 as printed (uniform angles: not uniform for k ≥ 3)" },
            ParamDoc { name: "calibration", ty: "replace_one | as_printed", default: Some("replace_one"), meaning: "replace_one: the stated guarantee holds (basis answers at sensitivity 2/n, exact advanced composition, δ in halves, PCA sensitivity from ‖D̄‖ ≤ √d); as_printed: the thesis's scales (1/n per answer, the noisy mean's norm)" },
            ParamDoc { name: "lattice", ty: "bool", default: Some("true"), meaning: "round answers and basis values to the lattice 1/L (lines 10, 15)" },
            ParamDoc { name: "synthetic", ty: "sample | expectation", default: Some("sample"), meaning: "m draws from u* (as line 21) or u* itself" },
            ParamDoc { name: "sample_size", ty: "integer ≥ 1", default: Some("m of line 1"), meaning: "m, when `synthetic: sample`" },
            ParamDoc { name: "lp", ty: "column_generation | full", default: Some("column_generation"), meaning: "how the LP is solved (both exact; `full` is the slow reference)" },
        ]),
        gather: Gather::Nothing,
        build: build::<Trigonometric>,
    }]
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum Variant {
    Full,
    #[default]
    Improved,
    GridFloor,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum ExactStep {
    Basis,
    Mean,
    Pca,
}

#[derive(Deserialize, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum PcaNoise {
    #[default]
    Text,
    Algorithm,
    Derived,
}

#[derive(Deserialize, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum SyntheticKind {
    #[default]
    Sample,
    Expectation,
}

#[derive(Deserialize, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum Ellipsoid {
    #[default]
    Uniform,
    Literal,
}

#[derive(Deserialize, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum CalibrationKind {
    #[default]
    ReplaceOne,
    AsPrinted,
}

#[derive(Deserialize, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum LpKind {
    #[default]
    ColumnGeneration,
    Full,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Trigonometric {
    #[serde(default)]
    variant: Variant,
    epsilon: f64,
    #[serde(default)]
    delta: Option<f64>,
    #[serde(default)]
    smoothness: Option<f64>,
    #[serde(default)]
    sigma: Option<f64>,
    #[serde(default)]
    bases: Option<usize>,
    #[serde(default)]
    candidates: Option<usize>,
    #[serde(default)]
    pca_dim: Option<usize>,
    #[serde(default)]
    pca_iterations: Option<usize>,
    #[serde(default)]
    kappa: Option<f64>,
    #[serde(default)]
    ellipsoid: Option<Ellipsoid>,
    #[serde(default)]
    pca_noise: Option<PcaNoise>,
    #[serde(default)]
    exact: Vec<ExactStep>,
    #[serde(default)]
    calibration: CalibrationKind,
    #[serde(default = "yes")]
    lattice: bool,
    #[serde(default)]
    synthetic: SyntheticKind,
    #[serde(default)]
    sample_size: Option<u64>,
    #[serde(default)]
    lp: LpKind,
}

fn yes() -> bool {
    true
}

impl Trigonometric {
    fn settings(&self) -> Result<Settings, ParamError> {
        let smoothness = match (self.smoothness, self.sigma) {
            (Some(k), None) => k,
            (None, Some(s)) => s * s,
            _ => {
                return Err(ParamError::at(
                    "smoothness",
                    "give exactly one of `smoothness` (K) or `sigma` (the query width, K = σ²)",
                ))
            }
        };
        let privacy = match self.delta {
            None => Privacy::Pure {
                epsilon: self.epsilon,
            },
            Some(delta) => Privacy::Approx {
                epsilon: self.epsilon,
                delta,
            },
        };
        Ok(Settings {
            privacy,
            smoothness,
            calibration: match self.calibration {
                CalibrationKind::ReplaceOne => Calibration::ReplaceOne,
                CalibrationKind::AsPrinted => Calibration::AsPrinted,
            },
            lattice: self.lattice,
            synthetic: match self.synthetic {
                SyntheticKind::Expectation => Synthetic::Expectation,
                SyntheticKind::Sample => Synthetic::Sample {
                    size: self.sample_size,
                },
            },
            lp: LpOptions {
                method: match self.lp {
                    LpKind::ColumnGeneration => LpMethod::ColumnGeneration,
                    LpKind::Full => LpMethod::Full,
                },
                ..LpOptions::default()
            },
            exact: Exact {
                basis: self.exact.contains(&ExactStep::Basis),
                mean: self.exact.contains(&ExactStep::Mean),
                pca: self.exact.contains(&ExactStep::Pca),
            },
        })
    }

    fn improvement(&self) -> Result<Option<Improvement>, ParamError> {
        let improved_only = [
            ("bases", self.bases.is_some()),
            ("candidates", self.candidates.is_some()),
            ("pca_dim", self.pca_dim.is_some()),
            ("pca_iterations", self.pca_iterations.is_some()),
            ("kappa", self.kappa.is_some()),
            ("ellipsoid", self.ellipsoid.is_some()),
            ("pca_noise", self.pca_noise.is_some()),
        ];
        if self.variant != Variant::Improved {
            if let Some((name, _)) = improved_only.iter().find(|(_, set)| *set) {
                return Err(ParamError::at(
                    name,
                    format!("`{name}` belongs to `variant: improved` (Algorithms 9/10); the full mechanism uses every basis function and grid point, and grid_floor only snaps the data"),
                ));
            }
            if self.variant == Variant::GridFloor && !self.exact.is_empty() {
                return Err(ParamError::at(
                    "exact",
                    "`variant: grid_floor` has no noise to remove",
                ));
            }
            if self.variant == Variant::Full && self.exact.iter().any(|e| *e != ExactStep::Basis) {
                return Err(ParamError::at(
                    "exact",
                    "`exact` can only name `basis` here: the full mechanism has no mean or PCA step",
                ));
            }
            return Ok(None);
        }
        let need = |name: &str| {
            ParamError::at(
                name,
                format!(
                    "`variant: improved` needs `{name}` (see `dplab list mechanism.trigonometric`)"
                ),
            )
        };
        let candidates = self.candidates.unwrap_or(10_000);
        if candidates == 0 {
            return Err(ParamError::at(
                "candidates",
                "candidates = 0 is invalid: must be ≥ 1",
            ));
        }
        // The LP matrix is R × C doubles.
        let bases = self.bases.unwrap_or(1).max(1) as u64;
        super::check_size_at(
            "candidates",
            super::Limit::Cells,
            &format!("bases × candidates ({bases} × {candidates}), the LP matrix"),
            super::product(&[bases, candidates as u64]),
        )?;
        Ok(Some(Improvement {
            bases: self.bases.ok_or_else(|| need("bases"))?,
            candidates,
            pca_dim: self.pca_dim.ok_or_else(|| need("pca_dim"))?,
            pca_iterations: self.pca_iterations.unwrap_or(10),
            kappa: self.kappa.ok_or_else(|| need("kappa"))?,
            sampler: match self.ellipsoid.unwrap_or_default() {
                Ellipsoid::Uniform => EllipsoidSampler::Uniform,
                Ellipsoid::Literal => EllipsoidSampler::Literal,
            },
            pca_noise: match self.pca_noise.unwrap_or_default() {
                PcaNoise::Text => LaplaceScale::Text,
                PcaNoise::Algorithm => LaplaceScale::Algorithm,
                PcaNoise::Derived => LaplaceScale::Derived,
            },
        }))
    }
}

impl Stage for Trigonometric {
    fn validate(&self) -> Result<(), ParamError> {
        let range = |e: crate::mech::ParamRangeError| ParamError::at(e.name, e.to_string());
        crate::mech::check_epsilon(self.epsilon).map_err(range)?;
        if let Some(s) = self.sigma {
            if !(s.is_finite() && s > 0.0) {
                return Err(ParamError::at(
                    "sigma",
                    format!("σ = {s} is invalid: must be a finite number > 0"),
                ));
            }
        }
        if let Some(d) = self.delta {
            if !(d > 0.0 && d < 1.0) {
                return Err(ParamError::at(
                    "delta",
                    format!("δ = {d} is invalid: must be in (0, 1)"),
                ));
            }
        }
        let s = self.settings()?;
        crate::mech::check_positive("smoothness", s.smoothness).map_err(|e| {
            ParamError::at(
                if self.sigma.is_some() {
                    "sigma"
                } else {
                    "smoothness"
                },
                e.to_string(),
            )
        })?;
        if let Some(im) = self.improvement()? {
            for (name, v) in [
                ("bases", im.bases),
                ("pca_dim", im.pca_dim),
                ("pca_iterations", im.pca_iterations),
            ] {
                if v == 0 {
                    return Err(ParamError::at(
                        name,
                        format!("{name} = 0 is invalid: must be ≥ 1"),
                    ));
                }
            }
            crate::mech::check_positive("kappa", im.kappa).map_err(range)?;
            if self.delta.is_none()
                && im.pca_noise == LaplaceScale::Text
                && !self.exact.contains(&ExactStep::Pca)
                && im.pca_dim * im.pca_iterations > crate::mech::trig::psi::TEXT_MAX_KL
            {
                return Err(ParamError::at(
                    "pca_noise",
                    format!(
                        "the text's scale 10ρ√(dkL)/ε is ε-DP only for k·L ≤ {}; here k·L = {}: use `pca_noise: algorithm` or `derived`",
                        crate::mech::trig::psi::TEXT_MAX_KL,
                        im.pca_dim * im.pca_iterations
                    ),
                ));
            }
            if self.delta.is_some() && self.pca_noise.is_some() {
                return Err(ParamError::at(
                    "pca_noise",
                    "`pca_noise` chooses Algorithm 7's Laplace scale (ε-DP); with `delta` the PCA is Algorithm 6 (Gaussian)",
                ));
            }
        }
        if self.sample_size == Some(0) {
            return Err(ParamError::at(
                "sample_size",
                "sample_size = 0 is invalid: must be ≥ 1",
            ));
        }
        if self.sample_size.is_some() && matches!(self.synthetic, SyntheticKind::Expectation) {
            return Err(ParamError::at(
                "sample_size",
                "`sample_size` applies to `synthetic: sample` only",
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let set = PointSet::read(ctx.input()?, ctx.axis_names, &ctx.input_names[0])?;
        if set.weights.is_some() {
            anyhow::bail!(
                "the input `{}` is a weighted point set (it has a `{WEIGHT}` column); the mechanism takes a database",
                ctx.input_names[0]
            );
        }
        let (points, names, dim) = (&set.points, &set.names, set.dim());
        let settings = self.settings().map_err(|e| anyhow::anyhow!(e.message))?;
        let db = match self.improvement().map_err(|e| anyhow::anyhow!(e.message))? {
            None if self.variant == Variant::GridFloor => grid_floor(points, dim, &settings)?,
            None => trigonometric(points, dim, &settings, &mut ctx.rng)?,
            Some(im) => improved_trigonometric(points, dim, &settings, &im, &mut ctx.rng)?,
        };
        let rows = db.weights.len();
        let r = &db.report;
        let mut fb = FrameBuilder::new().f64(WEIGHT, db.weights.clone());
        for (j, name) in names.iter().enumerate() {
            fb = fb.f64(
                name,
                db.points.iter().skip(j).step_by(dim).copied().collect(),
            );
        }
        let rep_f = |name: &str, v: f64| (format!("{DIAGNOSTIC_PREFIX}{name}"), vec![v; rows]);
        let opt = |v: Option<f64>| v.unwrap_or(f64::NAN);
        for (name, col) in [
            rep_f("smoothness", settings.smoothness),
            rep_f(
                "rate",
                error_exponent(settings.privacy, dim, settings.smoothness),
            ),
            rep_f("t", r.schedule.t as f64),
            rep_f("grid", r.schedule.grid as f64),
            rep_f("lattice", r.schedule.lattice as f64),
            rep_f("bases", r.bases as f64),
            rep_f("candidates", r.candidates as f64),
            rep_f("basis_noise", r.basis_noise),
            rep_f("mean_noise", opt(r.mean_noise)),
            rep_f("pca_noise", opt(r.pca_noise)),
            rep_f("outside", opt(r.outside)),
            rep_f("lp_objective", r.lp_objective),
            rep_f("lp_rounds", r.lp_rounds as f64),
            rep_f("support", r.support as f64),
            rep_f("sample_size", opt(r.sample_size)),
            rep_f("lp_seconds", r.lp_seconds),
            rep_f("seconds", r.seconds),
        ] {
            fb = fb.f64(&name, col);
        }
        Ok(fb.build()?.into())
    }
}
