//! The exponential mechanism (Dwork & Roth, Definition 3.4, Theorems 3.10 and 3.11).
//!
//! Given utilities `u(x, r)` over a finite range R, with sensitivity
//! `Δu = max_r max_{x~y} |u(x,r) − u(y,r)|`, output `r` with probability
//!
//! ```text
//!     Pr[r] = exp(ε·u(x,r) / (2Δu)) / Σ_{r'} exp(ε·u(x,r') / (2Δu))
//! ```
//!
//! # Guarantee
//! ε-differential privacy (Thm 3.10), for any utility whose sensitivity is at most Δu and a
//! range R fixed independently of the data. Half of the budget pays for the change of the
//! normalising sum; the "intuitive" weights `exp(ε·u/Δu)` give only 2ε-DP, which
//! [`gibbs_probabilities`] lets experiments show.
//!
//! Utility (Thm 3.11): `Pr[u(output) ≤ OPT − (2Δu/ε)(ln(|R|/|R_OPT|) + t)] ≤ e^(−t)`.
//!
//! # Conditions
//! - The utility's sensitivity is at most Δu (the caller's promise).
//! - The range R is fixed independently of the data: a range that depends on the data, such
//!   as "the prices that equal some bid", breaks the guarantee.
//! - [`ExponentialMechanism::new`] checks ε and Δu finite and > 0, a non-empty range and
//!   finite utilities. [`ExponentialMechanism::with_coefficient`] and [`gibbs_probabilities`]
//!   take the coefficient of `u` as given and promise only the distribution (ε-DP when the
//!   coefficient is at most ε/(2Δu)).
//!
//! # Reference
//! Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, §3.4: Definition 3.4
//! (the mechanism), Theorem 3.10 (privacy), Theorem 3.11 (utility).
//!
//! # Deviations from the paper
//! None. The weights are computed by [`exp_nonpositive`] (within 2 ulp of `f64::exp`), after
//! subtracting the largest utility, which leaves the distribution unchanged.
//!
//! # Sampling
//! By inverse CDF over the cumulative probabilities. One draw is a binary search; a batch
//! ([`ExponentialMechanism::sample_into`]) sorts its uniforms and sweeps the table once,
//! which avoids a cache miss per step of every search when R is large: k draws cost
//! `O(|R| + k log k)`.

use rand::Rng;

use super::{check_epsilon, check_positive, ParamRangeError};

/// `p_r ∝ exp(coef · u_r)`, computed stably (the maximum is subtracted before `exp`).
/// The exponential mechanism is `coef = ε/(2Δu)`.
pub(crate) fn gibbs_probabilities(utilities: &[f64], coef: f64) -> Vec<f64> {
    let max = utilities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut p: Vec<f64> = utilities
        .iter()
        .map(|&u| (coef * (u - max)).exp())
        .collect();
    let total: f64 = p.iter().sum();
    for x in &mut p {
        *x /= total;
    }
    p
}

/// `x ← exp(x)` for `x ≤ 0`, within 2 ulp of `f64::exp`.
///
/// The Gibbs weights are one `exp` per candidate; libm's scalar `exp` dominated the cost of
/// a large range. This branch-free form (Cody–Waite reduction `x = k ln2 + r`, |r| ≤ ln2/2,
/// a degree-13 Taylor polynomial whose truncation error is below 5e−18, and `2^k` built in
/// the exponent bits) vectorises with plain SSE2. Arguments below −708, where `2^k` would
/// leave the normal range, fall back to `f64::exp`.
pub(crate) fn exp_nonpositive(xs: &mut [f64]) {
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = 0.693_147_180_369_123_8;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    // 1.5·2^52: adding it rounds to an integer held in the low mantissa bits.
    const SHIFTER: f64 = 6_755_399_441_055_744.0;
    const C: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    // Rare: remember the arguments the fast path must clamp, to recompute them exactly.
    let tiny: Vec<(usize, f64)> = if xs.iter().any(|&x| x < -708.0) {
        xs.iter()
            .enumerate()
            .filter(|(_, &x)| x < -708.0)
            .map(|(i, &x)| (i, x))
            .collect()
    } else {
        Vec::new()
    };
    for x in xs.iter_mut() {
        let v = x.max(-708.0);
        let kf = (v * LOG2E + SHIFTER) - SHIFTER;
        let r = (v - kf * LN2_HI) - kf * LN2_LO;
        let mut p = C[13];
        for c in C[..13].iter().rev() {
            p = p * r + c;
        }
        let k = (kf + SHIFTER).to_bits().wrapping_sub(SHIFTER.to_bits());
        let scale = f64::from_bits(k.wrapping_add(1023) << 52);
        *x = p * scale;
    }
    for (i, x) in tiny {
        xs[i] = x.exp();
    }
}

/// Ranges at least this large are sampled in batches by a sorted sweep.
const SWEEP_MIN_RANGE: usize = 1 << 16;

/// The exponential mechanism over a fixed utility vector, ready to sample.
#[derive(Clone, Debug)]
pub struct ExponentialMechanism {
    /// Unnormalised weights `exp(coef·(u − max u))`.
    weights: Vec<f64>,
    /// Their sum, accumulated left to right (the last running sum).
    total: f64,
    /// Running sums, built on the first single draw: batch draws over large ranges sweep the
    /// weights instead, which spares allocating (and page-faulting) a second |R|-sized table.
    cumulative: std::sync::OnceLock<Vec<f64>>,
}

impl ExponentialMechanism {
    /// `utilities[r] = u(x, r)`; ε > 0; Δu > 0. The range must be non-empty and the
    /// utilities finite.
    pub fn new(utilities: &[f64], epsilon: f64, sensitivity: f64) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        check_positive("sensitivity", sensitivity)?;
        Self::with_coefficient(utilities, epsilon / (2.0 * sensitivity))
    }

    /// Weights `exp(coef·u)`: [`ExponentialMechanism::new`] with `coef = ε/(2Δu)`.
    pub(crate) fn with_coefficient(utilities: &[f64], coef: f64) -> Result<Self, ParamRangeError> {
        if utilities.is_empty() {
            return Err(ParamRangeError {
                name: "utilities",
                value: "[]".into(),
                valid: "the range R must have at least one element".into(),
            });
        }
        let mut max = f64::NEG_INFINITY;
        let mut finite = true;
        for &u in utilities {
            finite &= u.is_finite();
            max = max.max(u);
        }
        if !finite {
            let bad = utilities
                .iter()
                .find(|u| !u.is_finite())
                .copied()
                .unwrap_or(f64::NAN);
            return Err(ParamRangeError {
                name: "utility",
                value: bad.to_string(),
                valid: "utilities must be finite".into(),
            });
        }
        let mut weights: Vec<f64> = utilities.iter().map(|&u| coef * (u - max)).collect();
        exp_nonpositive(&mut weights);
        let total = weights.iter().fold(0.0, |acc, w| acc + w);
        Ok(ExponentialMechanism {
            weights,
            total,
            cumulative: std::sync::OnceLock::new(),
        })
    }

    fn cumulative(&self) -> &[f64] {
        self.cumulative.get_or_init(|| {
            let mut acc = 0.0;
            self.weights
                .iter()
                .map(|w| {
                    acc += w;
                    acc
                })
                .collect()
        })
    }

    /// The exact output distribution.
    pub(crate) fn probabilities(&self) -> Vec<f64> {
        self.weights.iter().map(|w| w / self.total).collect()
    }

    /// One output (an index into the range).
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        // Scaling by the total of the same running sum absorbs its rounding.
        let target = rng.random::<f64>() * self.total;
        let cumulative = self.cumulative();
        cumulative
            .partition_point(|&c| c <= target)
            .min(cumulative.len() - 1)
    }

    /// Fills `out` with independent draws — the same draws, in the same order, as calling
    /// [`ExponentialMechanism::sample`] once per element.
    pub fn sample_into<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut [usize]) {
        // Small tables stay in cache: plain binary searches beat sorting the uniforms.
        if self.weights.len() < SWEEP_MIN_RANGE {
            out.iter_mut().for_each(|o| *o = self.sample(rng));
            return;
        }
        let mut targets: Vec<(f64, usize)> = (0..out.len())
            .map(|i| (rng.random::<f64>() * self.total, i))
            .collect();
        targets.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let end = self.weights.len() - 1;
        let mut j = 0;
        let mut acc = self.weights[0];
        for (t, i) in targets {
            while j < end && acc <= t {
                j += 1;
                acc += self.weights[j];
            }
            out[i] = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mech::stats::chi_square_statistic;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn probabilities_match_the_definition() {
        let u = [0.0, 1.0, 2.0, 5.0];
        let em = ExponentialMechanism::new(&u, 1.0, 1.0).unwrap();
        let w: Vec<f64> = u.iter().map(|x| (x / 2.0f64).exp()).collect();
        let s: f64 = w.iter().sum();
        for (p, w) in em.probabilities().iter().zip(&w) {
            assert!((p - w / s).abs() < 1e-15);
        }
    }

    #[test]
    fn huge_utilities_do_not_overflow() {
        let em = ExponentialMechanism::new(&[1e6, 1e6 - 1.0], 2.0, 1.0).unwrap();
        let p = em.probabilities();
        assert!((p[0] - 1.0 / (1.0 + (-1.0f64).exp())).abs() < 1e-12);
    }

    /// Chi-square over 10 outputs with 10^5 draws (9 dof, 0.1% critical value 27.88).
    #[test]
    fn sampler_follows_its_probabilities() {
        let u: Vec<f64> = (0..10).map(|i| i as f64 * 0.4).collect();
        let em = ExponentialMechanism::new(&u, 1.0, 1.0).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let mut counts = vec![0u64; 10];
        for _ in 0..100_000 {
            counts[em.sample(&mut rng)] += 1;
        }
        let stat = chi_square_statistic(&counts, &em.probabilities());
        assert!(stat < 27.88, "chi2 = {stat}");
    }

    #[test]
    fn fast_exp_matches_libm() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let xs: Vec<f64> = (0..200_000)
            .map(|i| {
                if i % 2 == 0 {
                    -rng.random::<f64>() * 708.0
                } else {
                    -rng.random::<f64>() * 2.0
                }
            })
            .chain([
                0.0,
                -0.0,
                -1e-300,
                -708.0,
                -720.0,
                -745.0,
                -800.0,
                f64::NEG_INFINITY,
            ])
            .collect();
        let mut ys = xs.clone();
        exp_nonpositive(&mut ys);
        for (x, y) in xs.iter().zip(&ys) {
            let e = x.exp();
            assert!(
                (y - e).abs() <= 2.5 * f64::EPSILON * e,
                "exp({x}) = {y}, libm {e}"
            );
        }
    }

    #[test]
    fn batch_draws_equal_single_draws() {
        let u: Vec<f64> = (0..100_000)
            .map(|i| ((i * 7919) % 1000) as f64 / 100.0)
            .collect();
        let em = ExponentialMechanism::new(&u, 1.0, 1.0).unwrap();
        let mut a = Pcg64Mcg::seed_from_u64(9);
        let mut b = a.clone();
        let single: Vec<usize> = (0..5000).map(|_| em.sample(&mut a)).collect();
        assert!(
            u.len() >= SWEEP_MIN_RANGE,
            "the test must exercise the sweep"
        );
        let mut batch = vec![0; 5000];
        em.sample_into(&mut b, &mut batch);
        assert_eq!(single, batch);
    }

    #[test]
    fn rejects_empty_and_non_finite_ranges() {
        assert!(ExponentialMechanism::new(&[], 1.0, 1.0).is_err());
        assert!(ExponentialMechanism::new(&[f64::NAN], 1.0, 1.0).is_err());
        assert!(ExponentialMechanism::new(&[1.0], 0.0, 1.0).is_err());
    }
}
