//! Noisy arg-max selection (Dwork & Roth §3.3–3.4): add independent noise to every
//! candidate's utility and report the index of the largest noisy value.
//!
//! # Guarantee
//! - **Report Noisy Max** with Laplace noise (Claim 3.9): scale `Δu/ε` is ε-DP for
//!   monotone utilities such as counts; `2Δu/ε` in general.
//! - **Report One-Sided Noisy Arg-Max** with exponential noise (the text before Thm 3.13):
//!   noise with rate `ε/Δu` (monotone) or `ε/(2Δu)` (general), i.e. scale `Δu/ε` or `2Δu/ε`.
//!   It is ε-DP (it is the permute-and-flip mechanism, McKenna & Sheldon 2020).
//! - **Gumbel-max** with Gumbel noise of scale `2Δu/ε` outputs exactly the exponential
//!   mechanism's distribution (the Gumbel-max trick), so it is ε-DP by Thm 3.10.
//!
//! # Conditions
//! - Every utility's sensitivity is at most Δu (the caller's promise), and the range is fixed
//!   independently of the data, as for the exponential mechanism.
//! - `monotone = true` in [`ReportNoisyMax::for_privacy`] is the caller's promise that the
//!   utilities are monotone (adding a record never decreases one, as for counts); it then uses
//!   scale `Δu/ε` for all three noises, otherwise `2Δu/ε`. For Gumbel noise the monotone scale
//!   is the exponential mechanism with weights `exp(ε·u/Δu)`, a case the guarantees above do
//!   not state.
//! - [`ReportNoisyMax::for_privacy`] checks ε and Δu finite and > 0; [`ReportNoisyMax::new`]
//!   checks the scale finite and > 0, a non-empty range, finite utilities, and that the
//!   utilities' spread plus 80 × scale is finite (the integration range of the exact
//!   distribution). [`ReportNoisyMax::new`] promises only the distribution of the given scale.
//!
//! # Reference
//! Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, §3.3–3.4: Claim 3.9
//! (Report Noisy Max), the text before Theorem 3.13 (Report One-Sided Noisy Arg-Max),
//! Theorem 3.10 (the exponential mechanism); McKenna & Sheldon 2020 (permute-and-flip).
//!
//! # Deviations from the paper
//! Report One-Sided Noisy Arg-Max is implemented as the text describes it, but its output
//! distribution is *not* the exponential mechanism's, whatever Thm 3.13 says:
//! `dr-noisy-argmax` measures the gap. Gumbel-max, which does give the exponential
//! mechanism's distribution, is not in the paper; it is added for that comparison.
//!
//! # Exact output distributions
//! [`ReportNoisyMax::probabilities`] computes the exact output distribution: the softmax for
//! Gumbel noise; for exponential noise `P(i) = w_i ∫₀¹ Π_{j≠i}(1 − w_j t) dt` with
//! `w_j = exp(−(u_max − u_j)/b)` (substituting `t = exp(−(x − u_max)/b)` in
//! `∫ f_i(x) Π_{j≠i} F_j(x) dx`), a polynomial that Gauss–Legendre integrates exactly; for
//! Laplace noise the same integral by piecewise Gauss–Legendre between the utilities
//! (the integrand is smooth there), accurate to ~1e−12.

use rand::Rng;
use rand_distr::{Distribution, Exp1};

use super::exponential::gibbs_probabilities;
use super::laplace::Laplace;
use super::quadrature::{gauss_legendre, on_interval};
use super::{check_epsilon, check_positive, ParamRangeError};

/// The noise a noisy-max mechanism adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Noise {
    /// Two-sided Laplace noise: Report Noisy Max.
    Laplace,
    /// One-sided exponential noise: Report One-Sided Noisy Arg-Max.
    Exponential,
    /// Gumbel noise: the Gumbel-max form of the exponential mechanism.
    Gumbel,
}

/// Largest range for which the exact Laplace output distribution is computed (the cost is
/// quadratic in |R|).
pub(crate) const EXACT_LAPLACE_MAX_RANGE: usize = 5000;

#[derive(Clone, Debug)]
pub(crate) struct ReportNoisyMax {
    utilities: Vec<f64>,
    noise: Noise,
    scale: f64,
}

impl ReportNoisyMax {
    /// Noise of the given scale (Laplace `b`, exponential mean, Gumbel β).
    pub fn new(utilities: &[f64], noise: Noise, scale: f64) -> Result<Self, ParamRangeError> {
        check_positive("scale", scale)?;
        if utilities.is_empty() {
            return Err(ParamRangeError {
                name: "utilities",
                value: "[]".into(),
                valid: "the range R must have at least one element".into(),
            });
        }
        if let Some(bad) = utilities.iter().find(|u| !u.is_finite()) {
            return Err(ParamRangeError {
                name: "utility",
                value: bad.to_string(),
                valid: "utilities must be finite".into(),
            });
        }
        // The exact distribution integrates from min − 40·scale to max + 40·scale.
        let lo = utilities.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = utilities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !((hi + 40.0 * scale) - (lo - 40.0 * scale)).is_finite() {
            return Err(ParamRangeError {
                name: "scale",
                value: format!("{scale} (utilities from {lo} to {hi})"),
                valid: "the utilities' spread plus 80 × scale must be a finite number".into(),
            });
        }
        Ok(ReportNoisyMax {
            utilities: utilities.to_vec(),
            noise,
            scale,
        })
    }

    /// The ε-DP calibration: scale `Δu/ε` for monotone utilities, `2Δu/ε` otherwise.
    pub fn for_privacy(
        utilities: &[f64],
        noise: Noise,
        epsilon: f64,
        sensitivity: f64,
        monotone: bool,
    ) -> Result<Self, ParamRangeError> {
        check_epsilon(epsilon)?;
        check_positive("sensitivity", sensitivity)?;
        let factor = if monotone { 1.0 } else { 2.0 };
        Self::new(utilities, noise, factor * sensitivity / epsilon)
    }

    /// One output: the index of the largest noisy utility (ties go to the lower index,
    /// which happens with probability 0 for continuous noise).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let mut best = f64::NEG_INFINITY;
        let mut arg = 0;
        for (i, &u) in self.utilities.iter().enumerate() {
            let z = match self.noise {
                Noise::Laplace => {
                    let e: f64 = Exp1.sample(rng);
                    if rng.next_u32() & 1 == 0 {
                        e
                    } else {
                        -e
                    }
                }
                Noise::Exponential => Exp1.sample(rng),
                // −ln(E) with E ~ Exp(1) is standard Gumbel.
                Noise::Gumbel => {
                    let e: f64 = Exp1.sample(rng);
                    -e.ln()
                }
            };
            let v = u + self.scale * z;
            if v > best {
                best = v;
                arg = i;
            }
        }
        arg
    }

    /// The exact output distribution, or `None` for Laplace noise over a range larger than
    /// [`EXACT_LAPLACE_MAX_RANGE`].
    pub(crate) fn probabilities(&self) -> Option<Vec<f64>> {
        match self.noise {
            Noise::Gumbel => Some(gibbs_probabilities(&self.utilities, 1.0 / self.scale)),
            Noise::Exponential => Some(self.exponential_probabilities()),
            Noise::Laplace if self.utilities.len() <= EXACT_LAPLACE_MAX_RANGE => {
                Some(self.laplace_probabilities())
            }
            Noise::Laplace => None,
        }
    }

    fn exponential_probabilities(&self) -> Vec<f64> {
        let u = &self.utilities;
        let umax = u.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = u
            .iter()
            .map(|&x| (-(umax - x) / self.scale).exp())
            .collect();
        // Degree |R| − 1 polynomial: ⌈|R|/2⌉ nodes are exact; a few more cost nothing.
        let (x, wt) = gauss_legendre(u.len().div_ceil(2) + 2);
        let mut p = vec![0.0; u.len()];
        for (t, weight) in on_interval(&x, &wt, 0.0, 1.0) {
            let logs: Vec<f64> = w.iter().map(|&wj| (-wj * t).ln_1p()).collect();
            let total: f64 = logs.iter().sum();
            for i in 0..u.len() {
                p[i] += weight * (total - logs[i]).exp();
            }
        }
        for (pi, wi) in p.iter_mut().zip(&w) {
            *pi *= wi;
        }
        p
    }

    fn laplace_probabilities(&self) -> Vec<f64> {
        let u = &self.utilities;
        let b = self.scale;
        let lap = Laplace::new(b).expect("scale validated in the constructor");
        let mut knots: Vec<f64> = u.clone();
        knots.sort_by(f64::total_cmp);
        knots.dedup();
        let lo = knots[0] - 40.0 * b;
        let hi = knots[knots.len() - 1] + 40.0 * b;
        let mut edges = vec![lo];
        edges.extend(&knots);
        edges.push(hi);
        let (x, wt) = gauss_legendre(24);
        let mut p = vec![0.0; u.len()];
        let mut logs = vec![0.0; u.len()];
        // Between two knots further apart than 80b, only the 40b next to each knot carry
        // mass: every density factor is below e^-40 of its peak beyond, and what lies there
        // (at most e^-40/2 per candidate) is dropped. Without this a scale tiny next to the
        // utilities' spread (sensitivity 1e-20) would ask for 10^20 pieces.
        //
        // A span is (anchor, from, to): x = anchor + t for t in [from, to], and x − u_j is
        // formed as t + (anchor − u_j). With anchor 0 that is x − u_j, bit for bit. When the
        // scale is too small to resolve next to the utilities (40b below their last bits:
        // 5 − 4e-19 == 5), each span is anchored at its knot instead, so t keeps its
        // precision and the mass at each knot is not lost to rounding.
        let reach = 40.0 * b;
        let magnitude = knots.iter().fold(0.0f64, |m, k| m.max(k.abs()));
        let resolvable = b >= magnitude * 2f64.powi(-30);
        let mut spans: Vec<(f64, f64, f64)> = Vec::with_capacity(edges.len() * 2);
        if resolvable {
            for seg in edges.windows(2) {
                let (a, c) = (seg[0], seg[1]);
                if c - a > 2.0 * reach {
                    spans.push((0.0, a, a + reach));
                    spans.push((0.0, c - reach, c));
                } else {
                    spans.push((0.0, a, c));
                }
            }
        } else {
            spans.push((knots[0], -reach, 0.0));
            for pair in knots.windows(2) {
                let gap = pair[1] - pair[0];
                if gap > 2.0 * reach {
                    spans.push((pair[0], 0.0, reach));
                    spans.push((pair[1], -reach, 0.0));
                } else {
                    spans.push((pair[0], 0.0, gap));
                }
            }
            spans.push((knots[knots.len() - 1], 0.0, reach));
        }
        let mut shifted = vec![0.0; u.len()];
        for (anchor, a, c) in spans {
            if c <= a {
                continue;
            }
            for (sj, &uj) in shifted.iter_mut().zip(u) {
                *sj = anchor - uj;
            }
            // Pieces no wider than 2b keep the exponential factors well resolved.
            let pieces = ((c - a) / (2.0 * b)).ceil().max(1.0) as usize;
            let width = (c - a) / pieces as f64;
            for k in 0..pieces {
                let (s, e) = (a + k as f64 * width, a + (k + 1) as f64 * width);
                for (xn, weight) in on_interval(&x, &wt, s, e) {
                    let mut total = 0.0;
                    for (l, &sj) in logs.iter_mut().zip(&shifted) {
                        *l = lap.ln_cdf(xn + sj);
                        total += *l;
                    }
                    if total < -745.0 {
                        // Every term underflows: the max of the others is above xn for sure.
                        let all_small = logs.iter().all(|l| total - l < -745.0);
                        if all_small {
                            continue;
                        }
                    }
                    for i in 0..u.len() {
                        p[i] += weight * lap.density(xn + shifted[i]) * (total - logs[i]).exp();
                    }
                }
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mech::exponential::ExponentialMechanism;
    use crate::mech::stats::chi_square_statistic;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    /// A scale tiny next to the utilities' spread (sensitivity 1e-20, or ε = 1e300) is
    /// computed in bounded time: the argmax is certain.
    #[test]
    fn a_tiny_scale_next_to_a_wide_spread() {
        for b in [1e-20, 1e-300] {
            let m = ReportNoisyMax::new(&[0.0, 5.0, 1.0], Noise::Laplace, b).unwrap();
            let p = m.probabilities().unwrap();
            assert!(
                (p[1] - 1.0).abs() < 1e-12 && p[0] < 1e-12 && p[2] < 1e-12,
                "{p:?}"
            );
        }
        assert!(ReportNoisyMax::new(&[-1e308, 1e308], Noise::Laplace, 1.0).is_err());
        assert!(ReportNoisyMax::new(&[0.0, 1.0], Noise::Laplace, 1e307).is_err());
    }

    /// Two candidates with utilities 0 and c: closed forms.
    #[test]
    fn two_candidate_closed_forms() {
        for c in [0.0, 0.5, 3.0, 10.0] {
            let b = 1.3;
            let lap = ReportNoisyMax::new(&[0.0, c], Noise::Laplace, b).unwrap();
            let p = lap.probabilities().unwrap();
            // L_A − L_B is a difference of Laplaces: P(D > c) = e^(−c/b)(2 + c/b)/4.
            let expect = (-c / b).exp() * (2.0 + c / b) / 4.0;
            assert!((p[0] - expect).abs() < 1e-10, "c={c}: {} vs {expect}", p[0]);
            assert!((p[0] + p[1] - 1.0).abs() < 1e-10);
            let exp = ReportNoisyMax::new(&[0.0, c], Noise::Exponential, b).unwrap();
            let p = exp.probabilities().unwrap();
            assert!((p[0] - 0.5 * (-c / b).exp()).abs() < 1e-13);
        }
    }

    #[test]
    fn gumbel_equals_the_exponential_mechanism() {
        let u = [1.0, 2.0, 0.5, 4.0];
        let g = ReportNoisyMax::for_privacy(&u, Noise::Gumbel, 0.7, 1.0, false).unwrap();
        let em = ExponentialMechanism::new(&u, 0.7, 1.0).unwrap();
        for (a, b) in g.probabilities().unwrap().iter().zip(&em.probabilities()) {
            assert!((a - b).abs() < 1e-14);
        }
    }

    /// Every sampler against its exact distribution: chi-square over 6 outputs with
    /// 10^5 draws (5 dof, 0.1% critical value 20.52).
    #[test]
    fn samplers_follow_exact_distributions() {
        let u = [0.0, 0.3, 1.0, 1.1, 2.0, -1.0];
        for noise in [Noise::Laplace, Noise::Exponential, Noise::Gumbel] {
            let m = ReportNoisyMax::new(&u, noise, 0.8).unwrap();
            let p = m.probabilities().unwrap();
            assert!(
                (p.iter().sum::<f64>() - 1.0).abs() < 1e-10,
                "{noise:?}: {p:?}"
            );
            let mut rng = Pcg64Mcg::seed_from_u64(17);
            let mut counts = vec![0u64; u.len()];
            for _ in 0..100_000 {
                counts[m.sample(&mut rng)] += 1;
            }
            let stat = chi_square_statistic(&counts, &p);
            assert!(stat < 20.52, "{noise:?}: chi2 = {stat}");
        }
    }

    #[test]
    fn exact_distributions_sum_to_one_on_large_ranges() {
        let u: Vec<f64> = (0..500).map(|i| ((i * 37) % 101) as f64 * 0.1).collect();
        for noise in [Noise::Laplace, Noise::Exponential] {
            let p = ReportNoisyMax::new(&u, noise, 2.0)
                .unwrap()
                .probabilities()
                .unwrap();
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{noise:?}");
            assert!(p.iter().all(|&x| x >= 0.0));
        }
    }
}
