//! The trigonometric mechanism of Huang 2014: a synthetic database for smooth queries.
//!
//! - [`trigonometric`] — mechanisms I and II (Algorithms 4 and 5): every basis function of
//!   T_t^d, every point of the grid A^d. Exact to the thesis's analysis (Theorems 2.4/2.5), but
//!   the LP has N^d columns, so it is for small d (the rates experiment uses d = 1, 2).
//! - [`improved_trigonometric`] — improved mechanisms I and II (Algorithms 9 and 10): the R
//!   lowest-order basis functions, and C candidate points drawn in a private-PCA ellipsoid
//!   around a noisy mean instead of the whole grid.
//!
//! Both: snap the data to A^d (N cells per coordinate), answer the basis functions on it,
//! add Laplace noise, round the answers (and the basis values of the candidates) to the lattice
//! 1/L, solve min ‖W′u − b̂′‖₁ over the probability simplex ([`super::lp`]), and return u* as
//! the synthetic database.
//!
//! # Guarantee
//! Neighbouring databases differ in one record, n fixed (thesis Definition 1). Only the noisy
//! basis answers (and, in the improved mechanisms, the noisy mean and private PCA) touch the
//! data; everything after them is post-processing. With [`Calibration::ReplaceOne`] (the
//! default):
//! - Mechanism I: ε-DP. Mechanism II: (ε, δ)-DP, the per-answer budget solved exactly from
//!   advanced composition ([`per_answer_epsilon`]).
//! - Improved I: ε-DP, split ε/3 (basis answers) + ε/3 (mean) + ε/3 (PCA, Algorithm 7).
//!   Improved II: (ε, δ)-DP with the same ε split, δ/2 to the basis answers and δ/2 to private
//!   PCA (Algorithm 6). The PCA's scales are derived in [`super::psi`]: Algorithm 7 prints two
//!   Laplace scales ([`Improvement::pca_noise`]); both are ε-DP when k·L ≤ 100, and the text's
//!   (the smaller) is refused beyond.
//!
//! With [`Calibration::AsPrinted`] the guarantee is weaker (see the deviations). With any step
//! of [`Exact`] set, and for [`grid_floor`], there is none (see the diagnostics below).
//!
//! # Conditions
//! - The data are n ≥ 1 rows of d ≥ 1 columns with every value in [−1, 1] (the domain is
//!   [−1, 1]^d: normalise the data first); checked.
//! - ε finite and > 0; δ ∈ (0, 1) for mechanism II and improved II; the smoothness K
//!   finite and > 0; checked.
//! - Improved mechanisms: R ≥ 1 bases, C ≥ 1 candidates, PCA dimension k ∈ [1, d], PCA
//!   iterations ≥ 1, κ finite and > 0; checked. [`super::psi`] refuses the text's Laplace scale
//!   beyond k·L = 100.
//! - Sizes: the full grid has at most [`MAX_GRID_POINTS`] points and the LP at most
//!   [`MAX_LP_ENTRIES`] entries (and [`super::basis`] bounds the number of bases); larger
//!   problems are refused with a parameter error.
//! - The guarantee needs [`Calibration::ReplaceOne`] and no step of [`Exact`] set.
//!
//! # Reference
//! Huang 2014, master's thesis, chapter 2: Definition 1 (neighbouring databases),
//! Algorithms 4 and 5 (mechanisms I and II; their analysis, Theorems 2.4/2.5), Algorithms 9
//! and 10 (improved I and II; Theorem 2.13), with private PCA by Algorithms 6 and 7
//! ([`super::psi`]) and the ellipsoid of Algorithm 8 ([`super::ellipsoid`]). Advanced
//! composition: Dwork, Rothblum & Vadhan (see [`per_answer_epsilon`]).
//!
//! # Deviations from the paper
//! **Where this deviates from the printed noise, and why.** (1) A basis answer b_r is a mean of
//! values in [−1, 1], so replacing one record moves it by up to 2/n; the printed scales
//! (t^d/(nε) in Algorithm 4, 3R/(nε) in Algorithm 9, and their δ forms) correspond to 1/n —
//! half the noise the guarantee needs (the printed mean noise 6d/(nε) does use 2/n per
//! coordinate). (2) The printed δ forms keep only the leading term √(2R ln 1/δ) of advanced
//! composition, and Algorithm 10 spends δ on the answers and δ/2 on PCA (1.5δ in all).
//! (3) Private PCA's sensitivity (Lemma 2.7) needs the true mean norm ‖D̄‖; Algorithms 9/10
//! read it off the noisy mean, which can be smaller. We use ‖D̄‖ ≤ √d instead.
//! [`Calibration::AsPrinted`] reproduces the thesis's noise exactly; improved I is then
//! 4ε/3-DP at best (2ε-DP for mechanism I), and the PCA step's guarantee is heuristic.
//!
//! δ must lie in (0, 1) for mechanism II: Theorem 2.5 states δ ∈ (0, 1], but δ = 1 is no
//! guarantee at all.
//!
//! The synthetic database is drawn as counts per support point rather than as m records, and
//! can be u* itself (see below).
//!
//! # Diagnostics that remove privacy (not private)
//! To show where a mechanism's error comes from, [`Exact`] replaces chosen noisy steps by
//! their exact values (basis answers, mean, PCA), keeping everything else — the grid, the R
//! bases, the ellipsoid, the lattice, the LP and the sampling — as it is; and [`grid_floor`]
//! returns the data snapped to A^d, weighted by counts: the error no output on A^d can beat
//! for queries the snapped data answers worse than the data itself (no noise at all). Neither is
//! differentially private.
//!
//! # The synthetic database
//! Line 21/24 draws m records from u*, m from the schedule (up to ~10^10 here). A query's
//! answer on them depends only on how many draws land on each support point, so we draw those
//! counts (a multinomial, by conditional binomials) instead of m records: exact for any m, at
//! the cost of the support size. [`Synthetic::Expectation`] instead keeps u* itself (the limit
//! m → ∞, no sampling error).

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_distr::{Binomial, Distribution};

use super::basis::{self, MultiIndex, Schedule};
use super::data::Data;
use super::ellipsoid::{sample_ellipsoid, EllipsoidSampler};
use super::lp::{l1_simplex_fit, LpError, LpOptions};
use super::psi::{private_subspace_iteration, LaplaceScale, PsiNoise};
use crate::mech::laplace::Laplace;
use crate::mech::ParamRangeError;

/// The privacy requirement: picks mechanism I or II (improved I or II).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Privacy {
    Pure { epsilon: f64 },
    Approx { epsilon: f64, delta: f64 },
}

impl Privacy {
    pub(crate) fn epsilon(&self) -> f64 {
        match *self {
            Privacy::Pure { epsilon } | Privacy::Approx { epsilon, .. } => epsilon,
        }
    }

    fn check(&self) -> Result<(), ParamRangeError> {
        crate::mech::check_epsilon(self.epsilon())?;
        if let Privacy::Approx { delta, .. } = *self {
            if !(delta > 0.0 && delta < 1.0) {
                return Err(ParamRangeError {
                    name: "delta",
                    value: delta.to_string(),
                    valid: "must be in (0, 1) for mechanism II".into(),
                });
            }
        }
        Ok(())
    }
}

/// How the noise is calibrated (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Calibration {
    /// The stated guarantee holds for replace-one neighbours: sensitivity 2/n per basis answer,
    /// exact composition, δ split in halves, PCA sensitivity from ‖D̄‖ ≤ √d.
    #[default]
    ReplaceOne,
    /// The thesis's printed scales (sensitivity 1/n per answer, the noisy mean's norm in PCA).
    AsPrinted,
}

/// What the synthetic database is (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Synthetic {
    /// u* itself: answers are Σ u*_a f(a).
    Expectation,
    /// m draws from u*; `None` takes m from the schedule of line 1.
    Sample { size: Option<u64> },
}

/// Which noisy steps are replaced by their exact values (diagnostics only: any `true`
/// voids the privacy guarantee of that step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Exact {
    /// The basis answers b_r (no Laplace noise; still rounded to the lattice).
    pub basis: bool,
    /// The mean (improved only): the ellipsoid is centred on D̄.
    pub mean: bool,
    /// The PCA (improved only): subspace iteration without noise.
    pub pca: bool,
}

impl Exact {}

/// Settings shared by every variant.
#[derive(Clone, Debug)]
pub struct Settings {
    pub privacy: Privacy,
    /// K, the smoothness order the schedule is tuned to (for the Gaussian-kernel queries of
    /// chapter 3, K = σ² by Proposition 2.2).
    pub smoothness: f64,
    pub calibration: Calibration,
    /// Round answers and basis values to the lattice 1/L (lines 10 and 15). The thesis notes the
    /// rounding exists for the complexity analysis; turning it off shows its cost.
    pub lattice: bool,
    pub synthetic: Synthetic,
    pub lp: LpOptions,
    /// Steps run without noise (diagnostics; the default runs every step private).
    pub exact: Exact,
}

/// The extra inputs of Algorithms 9 and 10.
#[derive(Clone, Debug)]
pub struct Improvement {
    /// R: how many lowest-order basis functions.
    pub bases: usize,
    /// C: candidate points drawn in the ellipsoid.
    pub candidates: usize,
    /// k: dimension of the private PCA.
    pub pca_dim: usize,
    /// Iterations of private subspace iteration (the thesis's second "L").
    pub pca_iterations: usize,
    /// κ: the ellipsoid's semi-axes are κ·√λ̂_s.
    pub kappa: f64,
    pub sampler: EllipsoidSampler,
    /// Which printed Laplace scale of Algorithm 7 (improved I only; see [`super::psi`]).
    pub pca_noise: LaplaceScale,
}

/// A synthetic database: weighted points of A^d, weights summing to 1.
#[derive(Clone, Debug)]
pub struct SyntheticDatabase {
    pub dim: usize,
    /// Row-major, `dim` columns.
    pub points: Vec<f64>,
    pub weights: Vec<f64>,
    pub report: Report,
}

/// How the database was made: the sizes and noise the run used.
#[derive(Clone, Debug)]
pub struct Report {
    pub schedule: Schedule,
    /// LP rows (basis functions) and columns (candidate points: all of A^d, or the distinct
    /// points among the improved mechanisms' C draws).
    pub bases: usize,
    pub candidates: usize,
    /// Laplace scale on each basis answer.
    pub basis_noise: f64,
    /// Laplace scale on each mean coordinate, and the PCA noise scale (improved only; the
    /// private run's scales also when [`Exact`] removed the noise).
    pub mean_noise: Option<f64>,
    pub pca_noise: Option<f64>,
    /// Share of the C ellipsoid points with a coordinate outside [−1, 1]^d before snapping
    /// (improved only): those are clipped onto the cube's faces by the snap.
    pub outside: Option<f64>,
    /// ‖W′u* − b̂′‖₁ and the column-generation rounds.
    pub lp_objective: f64,
    pub lp_rounds: usize,
    /// Support of u*, and m when the database was sampled.
    pub support: usize,
    pub sample_size: Option<f64>,
    /// Wall time of the whole synthesis, and of the LP alone.
    pub seconds: f64,
    pub lp_seconds: f64,
}

/// Anything that stops a synthesis: a parameter out of range or an LP the solver did not solve.
#[derive(Debug, thiserror::Error)]
pub enum TrigError {
    #[error(transparent)]
    Param(#[from] ParamRangeError),
    #[error("the LP of the trigonometric mechanism failed: {0}")]
    Lp(#[from] LpError),
}

/// Largest grid A^d the full mechanism enumerates as LP columns.
pub(crate) const MAX_GRID_POINTS: u64 = 4_000_000;

/// Largest LP matrix (rows × columns, 8 bytes each) a synthesis builds.
pub(crate) const MAX_LP_ENTRIES: f64 = 2.5e8;

fn check_lp_size(rows: f64, cols: f64) -> Result<(), ParamRangeError> {
    if rows * cols > MAX_LP_ENTRIES {
        return Err(ParamRangeError {
            name: "LP size",
            value: format!(
                "{rows} basis functions × {cols} points = {:e} entries",
                rows * cols
            ),
            valid: format!("must be ≤ {MAX_LP_ENTRIES:e} (fewer bases or candidate points)"),
        });
    }
    Ok(())
}

/// Mechanism I (Algorithm 4, [`Privacy::Pure`]) or II (Algorithm 5, [`Privacy::Approx`]) on
/// `points` (row-major, `dim` columns, values in [−1, 1]).
///
/// Guarantee: ε-DP (I) or (ε, δ)-DP (II) for replace-one neighbours with
/// [`Calibration::ReplaceOne`]; see the module docs for [`Calibration::AsPrinted`].
pub(crate) fn trigonometric<R: Rng + ?Sized>(
    data: &Data,
    settings: &Settings,
    rng: &mut R,
) -> Result<SyntheticDatabase, TrigError> {
    let started = Instant::now();
    let (n, dim) = (data.rows(), data.dim());
    settings.privacy.check()?;
    let schedule = schedule(n, dim, settings)?;
    let cells = (schedule.grid as f64).powi(dim as i32);
    if cells > MAX_GRID_POINTS as f64 {
        return Err(ParamRangeError {
            name: "N^d",
            value: format!("{}^{dim} = {cells:e}", schedule.grid),
            valid: format!("the full grid must have ≤ {MAX_GRID_POINTS} points (lower K or n, or use the improved mechanism)"),
        }
        .into());
    }
    check_lp_size((schedule.t as f64).powi(dim as i32), cells)?;
    let bases = basis::full_grid(dim, schedule.t)?;
    let b = noisy_answers(data, &bases, &schedule, settings, settings.privacy, rng)?;
    let grid = grid_points(schedule.grid, dim);
    finish(
        grid, dim, &bases, b.0, b.1, schedule, None, None, None, settings, started, rng,
    )
}

/// Improved mechanism I (Algorithm 9, [`Privacy::Pure`]) or II (Algorithm 10,
/// [`Privacy::Approx`]).
///
/// Guarantee (Theorem 2.13): ε-DP (I) or (ε, δ)-DP (II) with [`Calibration::ReplaceOne`], the
/// budget split in thirds between basis answers, mean and private PCA; see the module docs
/// for what [`Calibration::AsPrinted`] gives.
pub fn improved_trigonometric<R: Rng + ?Sized>(
    data: &Data,
    settings: &Settings,
    improvement: &Improvement,
    rng: &mut R,
) -> Result<SyntheticDatabase, TrigError> {
    let started = Instant::now();
    let (n, dim) = (data.rows(), data.dim());
    settings.privacy.check()?;
    check_improvement(improvement, dim)?;
    check_lp_size(improvement.bases as f64, improvement.candidates as f64)?;
    let schedule = schedule(n, dim, settings)?;
    let bases = basis::lowest_order(dim, schedule.t, improvement.bases)?;
    let third = settings.privacy.epsilon() / 3.0;
    // δ: as printed, the basis answers take δ and private PCA δ/2 (1.5δ in all); calibrated
    // for the guarantee, each takes δ/2.
    let basis_delta = match settings.calibration {
        Calibration::ReplaceOne => 0.5,
        Calibration::AsPrinted => 1.0,
    };
    let basis_privacy = match settings.privacy {
        Privacy::Pure { .. } => Privacy::Pure { epsilon: third },
        Privacy::Approx { delta, .. } => Privacy::Approx {
            epsilon: third,
            delta: basis_delta * delta,
        },
    };
    let (b, basis_noise) = noisy_answers(data, &bases, &schedule, settings, basis_privacy, rng)?;

    // Line 10: the mean, Lap(6d/(nε)) per coordinate = sensitivity 2d/n at ε/3.
    let (mean, cov) = data.moments();
    let mean_noise = 2.0 * dim as f64 / (n as f64 * third);
    let lap = Laplace::new(mean_noise)?;
    let noisy_mean: Vec<f64> = mean
        .iter()
        .map(|m| {
            let noise = lap.sample(rng);
            if settings.exact.mean {
                *m
            } else {
                m + noise
            }
        })
        .collect();
    // Lemma 2.7's sensitivity needs the true ‖D̄‖. As printed it is read off the noisy mean,
    // which may be smaller; for the guarantee we use ‖D̄‖ ≤ √d, true on [−1, 1]^d.
    let mean_norm = match settings.calibration {
        Calibration::ReplaceOne => (dim as f64).sqrt(),
        Calibration::AsPrinted => noisy_mean.iter().map(|v| v * v).sum::<f64>().sqrt(),
    };

    // Line 11: private PCA at ε/3 (and δ/2 for Algorithm 10).
    let noise = match settings.privacy {
        Privacy::Pure { .. } => PsiNoise::Laplace {
            epsilon: third,
            scale: improvement.pca_noise,
        },
        Privacy::Approx { delta, .. } => PsiNoise::Gaussian {
            epsilon: third,
            delta: delta / 2.0,
        },
    };
    let mut eigen = private_subspace_iteration(
        cov,
        n,
        mean_norm,
        improvement.pca_dim,
        improvement.pca_iterations,
        noise,
        rng,
    )?;
    if settings.exact.pca {
        // The private iteration above still ran, so the ellipsoid's draws below come from the
        // same stream as in the private run; the exact one starts from a fixed generator.
        let mut fixed = rand_pcg::Pcg64Mcg::seed_from_u64(0);
        let noise_scale = eigen.noise_scale;
        eigen = private_subspace_iteration(
            cov,
            n,
            mean_norm,
            improvement.pca_dim,
            improvement.pca_iterations,
            PsiNoise::None,
            &mut fixed,
        )?;
        eigen.noise_scale = noise_scale;
    }

    // Lines 12–14: C points in the ellipsoid with semi-axes κ√λ̂ along the private directions,
    // centred at the noisy mean, snapped to A^d.
    let axes: Vec<f64> = eigen
        .values
        .iter()
        .map(|l| improvement.kappa * l.max(0.0).sqrt())
        .collect();
    let z = sample_ellipsoid(improvement.candidates, &axes, improvement.sampler, rng)?;
    let k = improvement.pca_dim;
    let mut candidates = vec![0.0; improvement.candidates * dim];
    let mut outside = 0usize;
    // The directions row by row, and A's points once (`snap` is `grid_point` of `cell`, whose
    // division dominated this loop): the bits of `snap`, read from a table of N values when
    // that is fewer than the C·d snaps.
    let directions: Vec<f64> = (0..dim)
        .flat_map(|j| (0..k).map(move |s| (j, s)))
        .map(|(j, s)| eigen.vectors[(j, s)])
        .collect();
    let grid = schedule.grid;
    let table: Vec<f64> = if grid as usize <= candidates.len() {
        (0..grid).map(|c| basis::grid_point(c, grid)).collect()
    } else {
        Vec::new()
    };
    for (zc, g) in z.chunks_exact(k).zip(candidates.chunks_exact_mut(dim)) {
        let mut out = false;
        for ((gj, m), v) in g
            .iter_mut()
            .zip(&noisy_mean)
            .zip(directions.chunks_exact(k))
        {
            let x = m + zc.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
            out |= !(-1.0..=1.0).contains(&x);
            let cell = basis::cell(x, grid);
            *gj = match table.get(cell as usize) {
                Some(&point) => point,
                None => basis::grid_point(cell, grid),
            };
        }
        outside += usize::from(out);
    }
    let outside = outside as f64 / improvement.candidates as f64;
    finish(
        distinct_rows(&candidates, dim),
        dim,
        &bases,
        b,
        basis_noise,
        schedule,
        Some(mean_noise),
        Some(eigen.noise_scale),
        Some(outside),
        settings,
        started,
        rng,
    )
}

/// The floor of the grid: the data snapped to A^d (N from the schedule of `settings`), each
/// distinct grid point weighted by its share of the records. No noise, no LP: the error of
/// this database is what snapping alone costs, and a mechanism whose output lives on A^d
/// cannot be expected below it on queries the snap distorts. Not private.
pub(crate) fn grid_floor(data: &Data, settings: &Settings) -> Result<SyntheticDatabase, TrigError> {
    let started = Instant::now();
    let (n, dim) = (data.rows(), data.dim());
    settings.privacy.check()?;
    let schedule = schedule(n, dim, settings)?;
    let mut cells: std::collections::BTreeMap<Vec<u64>, u64> = std::collections::BTreeMap::new();
    for row in data.points().chunks_exact(dim) {
        // The grid index of each coordinate; a BTreeMap keeps the output order deterministic.
        let key = row.iter().map(|&x| basis::cell(x, schedule.grid)).collect();
        *cells.entry(key).or_default() += 1;
    }
    let mut out = Vec::with_capacity(cells.len() * dim);
    let mut weights = Vec::with_capacity(cells.len());
    for (key, count) in &cells {
        out.extend(key.iter().map(|&k| basis::grid_point(k, schedule.grid)));
        weights.push(*count as f64 / n as f64);
    }
    Ok(SyntheticDatabase {
        dim,
        points: out,
        report: Report {
            schedule,
            bases: 0,
            candidates: 0,
            basis_noise: 0.0,
            mean_noise: None,
            pca_noise: None,
            outside: None,
            lp_objective: f64::NAN,
            lp_rounds: 0,
            support: weights.len(),
            sample_size: None,
            seconds: started.elapsed().as_secs_f64(),
            lp_seconds: 0.0,
        },
        weights,
    })
}

/// The exponent a of the accuracy bound α = O(n^a) for fixed d, K: −K/(2d+K) for mechanism I
/// (Theorem 2.4) and −2K/(3d+2K) for mechanism II (Theorem 2.5, δ fixed).
pub(crate) fn error_exponent(privacy: Privacy, dim: usize, smoothness: f64) -> f64 {
    let (d, k) = (dim as f64, smoothness);
    match privacy {
        Privacy::Pure { .. } => -k / (2.0 * d + k),
        Privacy::Approx { .. } => -2.0 * k / (3.0 * d + 2.0 * k),
    }
}

fn schedule(n: usize, dim: usize, settings: &Settings) -> Result<Schedule, ParamRangeError> {
    match settings.privacy {
        Privacy::Pure { .. } => basis::schedule_pure(n, dim, settings.smoothness),
        Privacy::Approx { delta, .. } => basis::schedule_approx(n, dim, settings.smoothness, delta),
    }
}

/// Lines 3–10 (Algorithm 4) / 3–8 (Algorithm 9): snap, answer (both kept with the data),
/// add noise, round. Returns the rounded noisy answers and the Laplace scale used.
fn noisy_answers<R: Rng + ?Sized>(
    data: &Data,
    bases: &[MultiIndex],
    schedule: &Schedule,
    settings: &Settings,
    privacy: Privacy,
    rng: &mut R,
) -> Result<(Vec<f64>, f64), ParamRangeError> {
    let b = data.basis_answers(bases, schedule.grid);
    let count = bases.len() as f64;
    let n = data.rows() as f64;
    let scale = match (settings.calibration, privacy) {
        // Printed: sensitivity 1/n per answer; ε-DP by basic composition over the R answers,
        // (ε, δ) by the leading term of advanced composition.
        (Calibration::AsPrinted, Privacy::Pure { epsilon }) => count / (n * epsilon),
        (Calibration::AsPrinted, Privacy::Approx { epsilon, delta }) => {
            (2.0 * count * (1.0 / delta).ln()).sqrt() / (n * epsilon)
        }
        // Sensitivity 2/n per answer, and a per-answer ε₀ that composes to exactly ε.
        (Calibration::ReplaceOne, Privacy::Pure { epsilon }) => 2.0 * count / (n * epsilon),
        (Calibration::ReplaceOne, Privacy::Approx { epsilon, delta }) => {
            2.0 / (n * per_answer_epsilon(epsilon, count, delta))
        }
    };
    let lap = Laplace::new(scale)?;
    let noisy = b
        .iter()
        .map(|v| {
            // Exact answers still draw the noise, so that the later steps see the same
            // random stream as the private run: the difference is the noise alone.
            let noise = lap.sample(rng);
            let x = if settings.exact.basis { *v } else { v + noise };
            if settings.lattice {
                basis::to_lattice(x, schedule.lattice)
            } else {
                x
            }
        })
        .collect();
    Ok((noisy, scale))
}

/// The ε₀ with which each of `count` answers may be released so that together they are
/// (ε, δ)-DP: the larger of basic composition (ε/count) and advanced composition (Dwork,
/// Rothblum & Vadhan: ε₀·√(2·count·ln(1/δ)) + count·ε₀·(e^ε₀ − 1) = ε, solved by bisection).
pub(crate) fn per_answer_epsilon(epsilon: f64, count: f64, delta: f64) -> f64 {
    let composed =
        |e0: f64| e0 * (2.0 * count * (1.0 / delta).ln()).sqrt() + count * e0 * e0.exp_m1();
    let (mut lo, mut hi) = (0.0, epsilon);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if composed(mid) <= epsilon {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo.max(epsilon / count)
}

/// Lines 12–21 (Algorithm 4) / 15–24 (Algorithm 9): basis values of the candidates, the LP,
/// and the synthetic database.
#[allow(clippy::too_many_arguments)]
fn finish<R: Rng + ?Sized>(
    candidates: Vec<f64>,
    dim: usize,
    bases: &[MultiIndex],
    b: Vec<f64>,
    basis_noise: f64,
    schedule: Schedule,
    mean_noise: Option<f64>,
    pca_noise: Option<f64>,
    outside: Option<f64>,
    settings: &Settings,
    started: Instant,
    rng: &mut R,
) -> Result<SyntheticDatabase, TrigError> {
    let count = candidates.len() / dim;
    let mut w = basis::basis_matrix(bases, &candidates, dim);
    if settings.lattice {
        for v in &mut w {
            *v = basis::to_lattice(*v, schedule.lattice);
        }
    }
    let lp_started = Instant::now();
    let fit = l1_simplex_fit(&w, bases.len(), &b, &settings.lp)?;
    let lp_seconds = lp_started.elapsed().as_secs_f64();
    let (support, weights, sample_size) = match settings.synthetic {
        Synthetic::Expectation => {
            let (idx, wts): (Vec<usize>, Vec<f64>) = fit.support.iter().copied().unzip();
            (idx, wts, None)
        }
        Synthetic::Sample { size } => {
            let m = size.map_or(schedule.sample_size, |s| s as f64);
            let counts = multinomial(m, &fit.support, rng);
            // m beyond u64 is drawn as u64::MAX draws: divide by the draws actually made.
            let drawn = counts.iter().map(|&(_, c)| c as f64).sum::<f64>();
            let (idx, wts) = counts
                .into_iter()
                .filter(|&(_, c)| c > 0)
                .map(|(i, c)| (i, c as f64 / drawn))
                .unzip();
            (idx, wts, Some(m))
        }
    };
    let mut points = Vec::with_capacity(support.len() * dim);
    for &i in &support {
        points.extend_from_slice(&candidates[i * dim..(i + 1) * dim]);
    }
    Ok(SyntheticDatabase {
        dim,
        points,
        report: Report {
            schedule,
            bases: bases.len(),
            candidates: count,
            basis_noise,
            mean_noise,
            pca_noise,
            outside,
            lp_objective: fit.objective,
            lp_rounds: fit.rounds,
            support: weights.len(),
            sample_size,
            seconds: started.elapsed().as_secs_f64(),
            lp_seconds,
        },
        weights,
    })
}

/// The rows of `points` (`dim` values each) with repeats left out, each kept where it first
/// occurs.
///
/// Snapped candidates repeat: most ellipsoid points fall outside the cube and are clipped onto
/// its faces, and a coarse grid has few cells (over the runs of h14-table3.2, 1–8 % of the
/// C = 10⁴ draws are distinct at σ = 2, 23–96 % at σ ≥ 6). A repeated point is a repeated
/// column of W, which changes neither the set of W u over the simplex nor the LP's optimum,
/// only the time spent building and pricing it, so the LP gets each point once. The
/// synthetic database is then a distribution over distinct points; which of several optimal
/// vertices the simplex reaches may differ from the LP with repeats (post-processing, so the
/// guarantee is untouched).
///
/// Rows are compared by their bits, after a sort of (a hash of the row, its index): equal
/// rows have equal hashes, so each run of equal hashes holds every copy of its rows, and
/// the rows of a run are compared in full (a collision costs a comparison, not a wrong
/// answer). A sort of the indices by whole rows instead cost more than the LP saved (its
/// comparisons read rows scattered over the matrix); a hash map would need a hasher chosen
/// for speed, and its result is the same either way: the first copy of each row, in order.
fn distinct_rows(points: &[f64], dim: usize) -> Vec<f64> {
    let row = |i: usize| &points[i * dim..(i + 1) * dim];
    let same = |a: usize, b: usize| {
        row(a)
            .iter()
            .zip(row(b))
            .all(|(x, y)| x.to_bits() == y.to_bits())
    };
    let mut keyed: Vec<(u64, usize)> = points
        .chunks_exact(dim)
        .map(|r| {
            // Multiply–rotate over the rows' bits (FxHash's step): cheap and well spread.
            r.iter().fold(0u64, |h, v| {
                (h.rotate_left(5) ^ v.to_bits()).wrapping_mul(0x517c_c1b7_2722_0a95)
            })
        })
        .enumerate()
        .map(|(i, h)| (h, i))
        .collect();
    keyed.sort_unstable();
    let mut keep = vec![false; keyed.len()];
    let mut run = 0;
    while run < keyed.len() {
        let end = run + keyed[run..].partition_point(|&(h, _)| h == keyed[run].0);
        // Indices ascend within a run: the first copy of each row is met first.
        let mut kept: Vec<usize> = Vec::new();
        for &(_, i) in &keyed[run..end] {
            if !kept.iter().any(|&k| same(k, i)) {
                kept.push(i);
                keep[i] = true;
            }
        }
        run = end;
    }
    points
        .chunks_exact(dim)
        .zip(&keep)
        .filter(|(_, &k)| k)
        .flat_map(|(r, _)| r.iter().copied())
        .collect()
}

/// Counts of m draws from the distribution `support` (index, probability), by conditional
/// binomials: count_i ~ Bin(m − Σ_{j<i} count_j, p_i / (1 − Σ_{j<i} p_j)).
fn multinomial<R: Rng + ?Sized>(
    m: f64,
    support: &[(usize, f64)],
    rng: &mut R,
) -> Vec<(usize, u64)> {
    let mut left = m.min(u64::MAX as f64) as u64;
    let mut mass = 1.0f64;
    let mut out = Vec::with_capacity(support.len());
    for (pos, &(i, p)) in support.iter().enumerate() {
        let c = if pos + 1 == support.len() || mass <= p {
            left
        } else {
            Binomial::new(left, (p / mass).clamp(0.0, 1.0))
                .map(|bin| bin.sample(rng))
                .unwrap_or(0)
        };
        out.push((i, c));
        left -= c;
        mass -= p;
    }
    out
}

/// Every point of A^d, the first coordinate varying slowest.
fn grid_points(n: u64, dim: usize) -> Vec<f64> {
    let total = (n as usize).pow(dim as u32);
    let mut out = Vec::with_capacity(total * dim);
    let mut idx = vec![0u64; dim];
    for _ in 0..total {
        out.extend(idx.iter().map(|&k| basis::grid_point(k, n)));
        for j in (0..dim).rev() {
            idx[j] += 1;
            if idx[j] < n {
                break;
            }
            idx[j] = 0;
        }
    }
    out
}

fn check_improvement(im: &Improvement, dim: usize) -> Result<(), ParamRangeError> {
    let bad = |name, value: String, valid: String| ParamRangeError { name, value, valid };
    if im.bases == 0 {
        return Err(bad("bases", "0".into(), "R must be ≥ 1".into()));
    }
    if im.candidates == 0 {
        return Err(bad("candidates", "0".into(), "C must be ≥ 1".into()));
    }
    if im.pca_dim == 0 || im.pca_dim > dim {
        return Err(bad(
            "pca_dim",
            im.pca_dim.to_string(),
            format!("k must be in [1, d] = [1, {dim}]"),
        ));
    }
    if im.pca_iterations == 0 {
        return Err(bad("pca_iterations", "0".into(), "must be ≥ 1".into()));
    }
    crate::mech::check_positive("kappa", im.kappa)
}

#[cfg(test)]
mod tests;
