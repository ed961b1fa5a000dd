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
//!
//! The databases it reads are kept across instances ([`crate::mech::trig::data`] says what a
//! database keeps and why that changes no bit): a sweep's thousands of runs on a handful of
//! databases compute each database's covariance and exact basis answers once. A kept database
//! is handed to an instance whose input rows are the same bits; up to [`KEPT_DATA_BYTES`].

use crate::stages::param::yes;
use anyhow::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::mech::trig::data::Data;
use crate::mech::trig::ellipsoid::EllipsoidSampler;
use crate::mech::trig::lp::{LpMethod, LpOptions};
use crate::mech::trig::mechanism::{
    error_exponent, grid_floor, improved_trigonometric, trigonometric, Calibration, Exact,
    Improvement, Privacy, Settings, Synthetic,
};
use crate::mech::trig::psi::LaplaceScale;
use crate::stages::columns::FrameBuilder;
use crate::stages::kept::{self, Footprint, Kept};
use crate::stages::param::{Count, Level, Positive};
use crate::stages::point_set::{PointSet, DIAGNOSTIC_PREFIX, WEIGHT};
use crate::stages::{
    build, check_size_at, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "mechanism.trigonometric",
    version: 2,
    random: true,
    runs_programs: false,
    summary: "Synthetic database for smooth queries by the trigonometric mechanism (Huang 2014): mechanisms I/II on the full grid (Algorithms 4/5) or the improved I/II (Algorithms 9/10). Output: `weight` + the data columns + `synthesis_*` diagnostics.",
    params: params::<Trigonometric>,
    gather: Gather::Nothing,
    build: build::<Trigonometric>,
    verdict: None,
};

/// C, ellipsoid points, when `candidates` is not given.
const CANDIDATES: u64 = 10_000;
/// L, private subspace iterations, when `pca_iterations` is not given.
const PCA_ITERATIONS: u64 = 10;

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum Variant {
    /// Algorithms 4/5: every basis function, the whole grid A^d (small d)
    Full,
    /// Algorithms 9/10: R bases, C ellipsoid points
    #[default]
    Improved,
    /// the data snapped to A^d (N of the schedule) with count weights — no noise, not
    /// private: the floor the grid alone sets
    GridFloor,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum ExactStep {
    /// the basis answers
    Basis,
    /// the private mean (improved)
    Mean,
    /// the private PCA (improved)
    Pca,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum PcaNoise {
    /// 10ρ√(dkL)/ε (§3.1; ε-DP for k·L ≤ 100)
    #[default]
    Text,
    /// 10ρ√d·k·L/ε (Algorithm 7 line 1; ε-DP always)
    Algorithm,
    /// ρ√d·k·L/ε (the least the ℓ₁ sensitivity allows); see the psi module
    Derived,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum SyntheticKind {
    /// m draws from u* (as line 21)
    #[default]
    Sample,
    /// u* itself
    Expectation,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum Ellipsoid {
    /// uniform points in the ellipsoid
    #[default]
    Uniform,
    /// Algorithm 8 as printed (uniform angles: not uniform for k ≥ 3)
    Literal,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum CalibrationKind {
    /// the stated guarantee holds (basis answers at sensitivity 2/n, exact advanced
    /// composition, δ in halves, PCA sensitivity from ‖D̄‖ ≤ √d)
    #[default]
    ReplaceOne,
    /// the thesis's scales (1/n per answer, the noisy mean's norm)
    AsPrinted,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum LpKind {
    #[default]
    ColumnGeneration,
    Full,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Trigonometric {
    /// which mechanism
    #[serde(default)]
    variant: Variant,
    /// privacy parameter ε
    epsilon: Positive,
    /// given: (ε, δ)-DP, mechanism II; absent: ε-DP, mechanism I
    delta: Option<Level>,
    /// K, the smoothness order the schedule (t, N, m, L of line 1) is tuned to (give it or
    /// `sigma`)
    smoothness: Option<Positive>,
    /// instead of `smoothness`: the Gaussian-kernel width σ of the queries, K = σ²
    /// (Proposition 2.2)
    sigma: Option<Positive>,
    /// R, the lowest-order basis functions used (improved: required)
    bases: Option<Count>,
    /// C, points drawn in the ellipsoid (improved; default 10000)
    candidates: Option<Count>,
    /// k, dimension of the private PCA, at most d (improved: required)
    pca_dim: Option<Count>,
    /// iterations of private subspace iteration, the thesis's second L (improved; default 10)
    pca_iterations: Option<Count>,
    /// κ: semi-axes κ·√λ̂ of the ellipsoid (improved: required)
    kappa: Option<Positive>,
    /// improved I: private PCA's Laplace scale (default text)
    // Optional without a null in its schema, so that `dplab list` shows its choices' docs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PcaNoise")]
    pca_noise: Option<PcaNoise>,
    /// diagnostics, NOT private: run these steps without noise (the noise is still drawn, so
    /// the rest of the run is paired with the private one)
    #[serde(default)]
    exact: Vec<ExactStep>,
    /// how points are drawn in the ellipsoid (improved; default uniform)
    // Optional without a null in its schema (see `pca_noise`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Ellipsoid")]
    ellipsoid: Option<Ellipsoid>,
    /// how the noise is calibrated
    #[serde(default)]
    calibration: CalibrationKind,
    /// round answers and basis values to the lattice 1/L (lines 10, 15)
    #[serde(default = "yes")]
    lattice: bool,
    /// the synthetic database output
    #[serde(default)]
    synthetic: SyntheticKind,
    /// m, when `synthetic: sample` (default: m of line 1)
    sample_size: Option<Count>,
    /// how the LP is solved (both exact; `full` is the slow reference)
    #[serde(default)]
    lp: LpKind,
}

impl Trigonometric {
    /// K: `smoothness`, or σ² (`validate` checked that exactly one is given).
    fn smoothness(&self) -> f64 {
        match (self.smoothness, self.sigma) {
            (Some(k), _) => *k,
            (None, Some(s)) => *s * *s,
            (None, None) => unreachable!("validated: `smoothness` or `sigma`"),
        }
    }

    fn settings(&self) -> Settings {
        let privacy = match self.delta {
            None => Privacy::Pure {
                epsilon: *self.epsilon,
            },
            Some(delta) => Privacy::Approx {
                epsilon: *self.epsilon,
                delta: *delta,
            },
        };
        Settings {
            privacy,
            smoothness: self.smoothness(),
            calibration: match self.calibration {
                CalibrationKind::ReplaceOne => Calibration::ReplaceOne,
                CalibrationKind::AsPrinted => Calibration::AsPrinted,
            },
            lattice: self.lattice,
            synthetic: match self.synthetic {
                SyntheticKind::Expectation => Synthetic::Expectation,
                SyntheticKind::Sample => Synthetic::Sample {
                    size: self.sample_size.map(|m| m.get()),
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
        }
    }

    /// The improved mechanism's settings (`None` for the other variants); `validate` checked
    /// that the required ones are given.
    fn improvement(&self) -> Option<Improvement> {
        if self.variant != Variant::Improved {
            return None;
        }
        let given = |v: Option<Count>| v.expect("validated: required by `variant: improved`");
        Some(Improvement {
            bases: given(self.bases).get() as usize,
            candidates: self.candidates.map_or(CANDIDATES, |c| c.get()) as usize,
            pca_dim: given(self.pca_dim).get() as usize,
            pca_iterations: self.pca_iterations.map_or(PCA_ITERATIONS, |c| c.get()) as usize,
            kappa: *self
                .kappa
                .expect("validated: required by `variant: improved`"),
            sampler: match self.ellipsoid.unwrap_or_default() {
                Ellipsoid::Uniform => EllipsoidSampler::Uniform,
                Ellipsoid::Literal => EllipsoidSampler::Literal,
            },
            pca_noise: match self.pca_noise.unwrap_or_default() {
                PcaNoise::Text => LaplaceScale::Text,
                PcaNoise::Algorithm => LaplaceScale::Algorithm,
                PcaNoise::Derived => LaplaceScale::Derived,
            },
        })
    }

    /// The parameters that belong to `variant: improved` and their relations to the rest.
    fn validate_variant(&self) -> Result<(), ParamError> {
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
            return Ok(());
        }
        // The LP matrix is R × C doubles.
        let bases = self.bases.map_or(1, |b| b.get());
        let candidates = self.candidates.map_or(CANDIDATES, |c| c.get());
        check_size_at(
            "candidates",
            Limit::Cells,
            &format!("bases × candidates ({bases} × {candidates}), the LP matrix"),
            product(&[bases, candidates]),
        )?;
        for (name, given) in [
            ("bases", self.bases.is_some()),
            ("pca_dim", self.pca_dim.is_some()),
            ("kappa", self.kappa.is_some()),
        ] {
            if !given {
                return Err(ParamError::at(
                    name,
                    format!(
                        "`variant: improved` needs `{name}` (see `dplab list mechanism.trigonometric`)"
                    ),
                ));
            }
        }
        let kl = self
            .pca_dim
            .map_or(0, |k| k.get())
            .saturating_mul(self.pca_iterations.map_or(PCA_ITERATIONS, |l| l.get()));
        if self.delta.is_none()
            && matches!(self.pca_noise.unwrap_or_default(), PcaNoise::Text)
            && !self.exact.contains(&ExactStep::Pca)
            && kl > crate::mech::trig::psi::TEXT_MAX_KL as u64
        {
            return Err(ParamError::at(
                "pca_noise",
                format!(
                    "the text's scale 10ρ√(dkL)/ε is ε-DP only for k·L ≤ {}; here k·L = {kl}: use `pca_noise: algorithm` or `derived`",
                    crate::mech::trig::psi::TEXT_MAX_KL,
                ),
            ));
        }
        if self.delta.is_some() && self.pca_noise.is_some() {
            return Err(ParamError::at(
                "pca_noise",
                "`pca_noise` chooses Algorithm 7's Laplace scale (ε-DP); with `delta` the PCA is Algorithm 6 (Gaussian)",
            ));
        }
        Ok(())
    }
}

impl Stage for Trigonometric {
    fn validate(&self) -> Result<(), ParamError> {
        if self.smoothness.is_some() == self.sigma.is_some() {
            return Err(ParamError::at(
                "smoothness",
                "give exactly one of `smoothness` (K) or `sigma` (the query width, K = σ²)",
            ));
        }
        // σ > 0 can still square to 0 or ∞.
        crate::mech::check_positive("smoothness", self.smoothness())
            .map_err(|e| ParamError::at("sigma", e.to_string()))?;
        self.validate_variant()?;
        if self.sample_size.is_some() && matches!(self.synthetic, SyntheticKind::Expectation) {
            return Err(ParamError::at(
                "sample_size",
                "`sample_size` applies to `synthetic: sample` only",
            ));
        }
        Ok(())
    }

    // The output's data columns are the input's numeric columns, whose types planning does
    // not know: `columns_out` stays `None`. It reads no column by a parameter.

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let set = PointSet::read(ctx.input()?, ctx.axis_names, &ctx.input_names[0])?;
        if set.weights.is_some() {
            anyhow::bail!(
                "the input `{}` is a weighted point set (it has a `{WEIGHT}` column); the mechanism takes a database",
                ctx.input_names[0]
            );
        }
        let (names, dim) = (&set.names, set.dim());
        let data = kept_data(set.points, dim)?;
        let settings = self.settings();
        let db = match self.improvement() {
            None if self.variant == Variant::GridFloor => grid_floor(&data, &settings)?,
            None => trigonometric(&data, &settings, &mut ctx.rng)?,
            Some(im) => improved_trigonometric(&data, &settings, &im, &mut ctx.rng)?,
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

/// The most memory the kept databases may hold: h14-table3.2's five take 7.5 MB (CSN's
/// 99 762 × 8 values the most).
pub(crate) const KEPT_DATA_BYTES: usize = 256 << 20;

/// Databases this process has read, found by their rows (compared bit for bit), keyed by the
/// order they were read in.
static DATA: Mutex<Kept<u64, Data>> = Mutex::new(Kept::new());
static READ: AtomicU64 = AtomicU64::new(0);

impl Footprint for Data {
    fn bytes(&self) -> usize {
        Data::bytes(self)
    }
}

/// The kept database whose rows are `points`, or a new one (checked, then kept).
fn kept_data(points: Vec<f64>, dim: usize) -> Result<Arc<Data>> {
    if let Some(data) = kept::lock(&DATA).find(|_, d| d.holds(&points, dim)) {
        return Ok(data);
    }
    let data = Arc::new(Data::new(points, dim)?);
    // A key no other database has, so `keep` never mistakes this one for a kept one (two
    // instances that read the same new database at once both keep theirs: the same bits).
    let key = READ.fetch_add(1, Ordering::Relaxed);
    kept::lock(&DATA).keep(key, Arc::clone(&data), KEPT_DATA_BYTES);
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run};

    /// 30 points in [−1, 1]².
    fn data() -> polars::prelude::DataFrame {
        let x: Vec<f64> = (0..30)
            .map(|i| ((i * 7) % 30) as f64 / 15.0 - 0.97)
            .collect();
        let y: Vec<f64> = (0..30)
            .map(|i| ((i * 11) % 30) as f64 / 20.0 - 0.7)
            .collect();
        polars::df!("x" => x, "y" => y).unwrap()
    }

    fn weighted_mean(out: &polars::prelude::DataFrame, c: &str) -> f64 {
        floats(out, "weight")
            .iter()
            .zip(floats(out, c))
            .map(|(w, v)| w * v)
            .sum()
    }

    /// A synthetic database is a weighted point set in the cube: weights ≥ 0 summing to 1.
    /// The grid floor snaps each point into its cell of A^d (width 2/N), so its weighted mean
    /// is within 2/N of the data's; the improved mechanism is a function of its seed.
    #[test]
    fn synthetic_databases_are_distributions_on_the_cube() {
        let data = data();
        let floor = run(
            &KIND,
            "{variant: grid_floor, epsilon: 1, sigma: 2}",
            &[&data],
            0,
        )
        .unwrap()
        .frame;
        let cell = 2.0 / floats(&floor, "synthesis_grid")[0];
        for c in ["x", "y"] {
            let mean = floats(&data, c).iter().sum::<f64>() / 30.0;
            assert!(
                (weighted_mean(&floor, c) - mean).abs() <= cell,
                "{c}: {floor}"
            );
        }
        let with = "{epsilon: 1, sigma: 2, bases: 4, candidates: 200, pca_dim: 1, kappa: 1}";
        let out = run(&KIND, with, &[&data], 4).unwrap().frame;
        for db in [&floor, &out] {
            let w = floats(db, "weight");
            assert!(
                w.iter().all(|w| *w >= 0.0) && (w.iter().sum::<f64>() - 1.0).abs() < 1e-9,
                "{db}"
            );
            for c in ["x", "y"] {
                assert!(floats(db, c).iter().all(|v| v.abs() <= 1.0), "{db}");
            }
        }
        let again = run(&KIND, with, &[&data], 4).unwrap().frame;
        assert_eq!(floats(&again, "weight"), floats(&out, "weight"));
        assert_eq!(floats(&again, "x"), floats(&out, "x"));
        assert_eq!(
            refused(&KIND, "{variant: full, epsilon: 1, sigma: 2, kappa: 1}"),
            "kappa: `kappa` belongs to `variant: improved` (Algorithms 9/10); the full mechanism uses every basis function and grid point, and grid_floor only snaps the data"
        );
    }
}
