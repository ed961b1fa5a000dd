//! Privacy claims and their privacy profiles: what a mechanism promises, as the curve
//! δ(ε) of the (ε, δ)-DP guarantees it implies, so that any claim — pure ε, (ε, δ), ρ-zCDP,
//! μ-GDP, Rényi DP at some orders — is held to the same kind of test: an event whose
//! probabilities under neighbouring inputs satisfy p₁ > e^ε·p₂ + δ(ε) for some ε shows the
//! claim false. One place for every conversion, used by the kinds that state their own claim
//! ([`crate::kind::Stage::privacy`]) and by the audit ([`super::audit`]).
//!
//! # The conversions
//! - (ε, δ)-DP, and pure ε-DP (δ = 0): one point, tested as written. (It implies more, at
//!   every ε' < ε, but an audit of a point claim tests the point.)
//! - μ-GDP: exact. δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Dong, Roth & Su, "Gaussian
//!   Differential Privacy", JRSS-B 2022, Corollary 2.13; for the Gaussian mechanism of
//!   μ = Δ/σ it is Balle & Wang 2018, Theorem 8). Its numerics are the analytic Gaussian
//!   calibration's ([`super::gaussian`]).
//! - Rényi DP at orders αᵢ with εᵢ: δ(ε) = minᵢ exp((αᵢ − 1)(εᵢ − ε)) / (αᵢ − 1) · (1 − 1/αᵢ)^αᵢ
//!   (Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS
//!   2020, §2.3; the conversion OpenDP's `cdp_delta` proves). Not exact: the best closed form
//!   known, tighter than Mironov's (2017, Proposition 3) δ = exp((α − 1)(εᵢ − ε)).
//! - ρ-zCDP: Rényi DP of every order α > 1 with εα = αρ, so the same conversion with the
//!   infimum over all α > 1 (the same paper and section), found numerically; and never
//!   looser than Bun & Steinke's ε = ρ + 2√(ρ ln(1/δ)) (2016, Proposition 1.3), the smaller of
//!   the two being taken. Not exact: a Gaussian of ρ = Δ²/(2σ²) is also μ-GDP with μ = √(2ρ),
//!   whose curve lies below; a ρ-zCDP claim promises only what every ρ-zCDP mechanism keeps.
//!
//! # Numerics, on the side of the claim
//! An audit must never flag a mechanism because of the conversion's rounding: the points it
//! tests are (ε, δ) with δ at least the profile at ε. [`Privacy::epsilon_at`] bisects to the
//! larger ε of its last interval (where δ(ε) is smaller), and the minimisation over α only
//! ever returns a δ that some α gives (any α gives a valid bound, so a δ found short of the
//! infimum is still true).

use super::gaussian::gdp_delta;
use super::ParamRangeError;

/// The privacy a mechanism promises, in the terms of its guarantee (each module's
/// `# Guarantee`): what a mechanism *kind* states from its own parameters, as an OpenDP
/// measurement carries its privacy map, or what an audit's `claim:` writes.
#[derive(Clone, Debug, PartialEq)]
pub enum Privacy {
    /// (ε, δ)-DP; δ = 0 is pure ε-DP.
    Approx { epsilon: f64, delta: f64 },
    /// ρ-zCDP (Bun & Steinke 2016).
    Zcdp { rho: f64 },
    /// μ-GDP (Dong, Roth & Su 2022).
    Gdp { mu: f64 },
    /// (α, εα)-Rényi DP at each of these orders (Mironov 2017).
    Renyi { orders: Vec<(f64, f64)> },
}

/// δ levels at which a curve is tested: 10^(−k/4) for k = 1 … 48 (0.56 down to 10⁻¹²).
const LEVELS: usize = 48;

impl Privacy {
    /// Checks the claim's numbers: ε, ρ, μ, each εα finite and > 0 (ε = 0 allowed), δ in
    /// [0, 1), each α > 1.
    pub(crate) fn check(&self) -> Result<(), ParamRangeError> {
        match self {
            Privacy::Approx { epsilon, delta } => {
                if !(epsilon.is_finite() && *epsilon >= 0.0) {
                    return Err(ParamRangeError {
                        name: "epsilon",
                        value: epsilon.to_string(),
                        valid: "must be a finite number ≥ 0".into(),
                    });
                }
                super::check_delta(*delta)
            }
            Privacy::Zcdp { rho } => super::check_positive("rho", *rho),
            Privacy::Gdp { mu } => super::check_positive("mu", *mu),
            Privacy::Renyi { orders } => {
                if orders.is_empty() {
                    return Err(ParamRangeError {
                        name: "renyi",
                        value: "no orders".into(),
                        valid: "give at least one order α with its ε".into(),
                    });
                }
                for &(alpha, eps) in orders {
                    if !(alpha.is_finite() && alpha > 1.0) {
                        return Err(ParamRangeError {
                            name: "alpha",
                            value: alpha.to_string(),
                            valid: "must be a finite order > 1".into(),
                        });
                    }
                    if !(eps.is_finite() && eps >= 0.0) {
                        return Err(ParamRangeError {
                            name: "epsilon",
                            value: eps.to_string(),
                            valid:
                                "must be a finite number ≥ 0 (the Rényi divergence at its order)"
                                    .into(),
                        });
                    }
                }
                Ok(())
            }
        }
    }

    /// The claim in words: `ε = 1`, `(ε, δ) = (1, 1e-05)`, `ρ = 0.02 (zCDP)`, `μ = 1 (GDP)`,
    /// `Rényi ε(2) = 0.5, ε(8) = 2`.
    pub(crate) fn describe(&self) -> String {
        use crate::text::significant as s;
        match self {
            Privacy::Approx { epsilon, delta } if *delta == 0.0 => {
                format!("ε = {}", s(*epsilon, 4))
            }
            Privacy::Approx { epsilon, delta } => {
                format!("(ε, δ) = ({}, {})", s(*epsilon, 4), s(*delta, 3))
            }
            Privacy::Zcdp { rho } => format!("ρ = {} (zCDP)", s(*rho, 4)),
            Privacy::Gdp { mu } => format!("μ = {} (GDP)", s(*mu, 4)),
            Privacy::Renyi { orders } => format!(
                "Rényi {}",
                orders
                    .iter()
                    .map(|(a, e)| format!("ε({}) = {}", s(*a, 4), s(*e, 4)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The conversion to (ε, δ) points used for this claim (the module doc).
    pub(crate) fn conversion(&self) -> &'static str {
        match self {
            Privacy::Approx { .. } => "as claimed",
            Privacy::Gdp { .. } => "exact (Dong, Roth & Su 2022, Cor. 2.13)",
            Privacy::Zcdp { .. } => {
                "zCDP to (ε, δ): Canonne, Kamath & Steinke 2020, §2.3 (not exact)"
            }
            Privacy::Renyi { .. } => {
                "Rényi to (ε, δ): Canonne, Kamath & Steinke 2020, §2.3 (not exact)"
            }
        }
    }

    /// The profile: the δ the claim promises at `epsilon` (≤ 1). `None` where it promises
    /// nothing (a point claim below its ε).
    pub(crate) fn delta_at(&self, epsilon: f64) -> Option<f64> {
        match self {
            Privacy::Approx { epsilon: e, delta } => (epsilon >= *e).then_some(*delta),
            Privacy::Gdp { mu } => Some(gdp_delta(*mu, epsilon).clamp(0.0, 1.0)),
            Privacy::Renyi { orders } => Some(
                orders
                    .iter()
                    .map(|&(a, t)| renyi_delta(a, t, epsilon))
                    .fold(1.0, f64::min),
            ),
            Privacy::Zcdp { rho } => {
                let ln_delta = min_over_orders(|a| ln_renyi_delta(a, a * rho, epsilon));
                Some(ln_delta.exp().min(1.0))
            }
        }
    }

    /// The ε of the (ε, δ)-DP this promises at `delta`: the smallest ε whose profile is at
    /// most δ (on the side of the claim, the module doc). `None` when it promises nothing at
    /// that δ (a point claim below its δ; δ outside (0, 1) for a curve).
    pub(crate) fn epsilon_at(&self, delta: f64) -> Option<f64> {
        match self {
            Privacy::Approx { epsilon, delta: d } => (delta >= *d).then_some(*epsilon),
            _ if !(delta > 0.0 && delta < 1.0) => None,
            Privacy::Renyi { orders } => orders
                .iter()
                .map(|&(a, t)| renyi_epsilon(a, t, delta))
                .reduce(f64::min)
                .map(|e| e.max(0.0)),
            Privacy::Zcdp { rho } => {
                let cks = min_over_orders(|a| renyi_epsilon(a, a * rho, delta));
                let bun_steinke = rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt();
                Some(cks.min(bun_steinke).max(0.0))
            }
            Privacy::Gdp { mu } => {
                if gdp_delta(*mu, 0.0) <= delta {
                    return Some(0.0);
                }
                // δ(ε) decreases in ε: double to an ε past δ, then bisect, keeping the end
                // where the profile is at most δ.
                let mut hi = 1.0;
                while gdp_delta(*mu, hi) > delta {
                    hi *= 2.0;
                    if hi > 1e6 {
                        return None;
                    }
                }
                let mut lo = 0.0;
                for _ in 0..200 {
                    let mid = 0.5 * (lo + hi);
                    if mid <= lo || mid >= hi {
                        break;
                    }
                    if gdp_delta(*mu, mid) > delta {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                Some(hi)
            }
        }
    }

    /// The (ε, δ) points an audit may test, ε increasing: the point of a point claim, or for
    /// a curve (ε(δ), δ) at δ = 10^(−k/4), k = 1 … 48, and at `delta` alone when one is
    /// given. Each is a point the claim promises (δ at least the profile at ε).
    pub(crate) fn points(&self, delta: Option<f64>) -> Vec<(f64, f64)> {
        if let Privacy::Approx { epsilon, delta: d } = self {
            return vec![(*epsilon, *d)];
        }
        let levels: Vec<f64> = match delta {
            Some(d) => vec![d],
            None => (1..=LEVELS)
                .map(|k| 10f64.powf(-(k as f64) / 4.0))
                .collect(),
        };
        let mut out: Vec<(f64, f64)> = levels
            .into_iter()
            // ε(δ) is a bound the conversion proves at δ (the module doc); the profile at it,
            // minimised over a grid of orders, agrees to rounding.
            .filter_map(|d| {
                let e = self.epsilon_at(d)?;
                debug_assert!(self.delta_at(e).is_none_or(|p| p <= d * (1.0 + 1e-6)));
                Some((e, d))
            })
            .filter(|(e, _)| e.is_finite())
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }
}

/// ln δ of the Rényi-to-(ε, δ) conversion at order α with Rényi ε τ (the module doc):
/// (α − 1)(τ − ε) + α·ln(1 − 1/α) − ln(α − 1).
fn ln_renyi_delta(alpha: f64, tau: f64, epsilon: f64) -> f64 {
    (alpha - 1.0) * (tau - epsilon) + alpha * (-1.0 / alpha).ln_1p() - (alpha - 1.0).ln()
}

fn renyi_delta(alpha: f64, tau: f64, epsilon: f64) -> f64 {
    ln_renyi_delta(alpha, tau, epsilon).exp().min(1.0)
}

/// The same conversion solved for ε at δ: τ + ln(1 − 1/α) − (ln α + ln δ)/(α − 1).
fn renyi_epsilon(alpha: f64, tau: f64, delta: f64) -> f64 {
    tau + (-1.0 / alpha).ln_1p() - (alpha.ln() + delta.ln()) / (alpha - 1.0)
}

/// The smallest value of `f` over orders α > 1: a scan of ln(α − 1) over [−12, 14] in steps of
/// 0.1, then golden-section search around the best point. Every value it returns is `f` at
/// some α, so a bound found short of the infimum still holds.
fn min_over_orders(f: impl Fn(f64) -> f64) -> f64 {
    let at = |t: f64| f(1.0 + t.exp());
    let steps = 260;
    let mut best = (f64::INFINITY, -12.0);
    for i in 0..=steps {
        let t = -12.0 + 0.1 * i as f64;
        let v = at(t);
        if v < best.0 {
            best = (v, t);
        }
    }
    let (mut lo, mut hi) = (best.1 - 0.1, best.1 + 0.1);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let (c, d) = (hi - g * (hi - lo), lo + g * (hi - lo));
        let (fc, fd) = (at(c), at(d));
        best.0 = best.0.min(fc).min(fd);
        if fc < fd {
            hi = d;
        } else {
            lo = c;
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::Privacy;

    /// ρ-zCDP at δ = 1e-5 by Canonne, Kamath & Steinke's conversion: 0.794315 for ρ = 0.02
    /// (the minimum over a grid of 10⁵ orders in Python, at α = 21.54), below Bun & Steinke's
    /// 0.9797; (ε, δ)-DP promises its ε at its δ and above, nothing below.
    #[test]
    fn a_claim_in_epsilon_at_a_delta() {
        let z = Privacy::Zcdp { rho: 0.02 }.epsilon_at(1e-5).unwrap();
        assert!((z - 0.794_315).abs() < 1e-6, "{z}");
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

    /// The profile and its inverse agree, on the side of the claim: δ(ε(δ)) ≤ δ.
    #[test]
    fn epsilon_at_and_delta_at_are_inverse() {
        let claims = [
            Privacy::Zcdp { rho: 0.1 },
            Privacy::Gdp { mu: 1.0 },
            Privacy::Gdp { mu: 0.2 },
            Privacy::Renyi {
                orders: vec![(2.0, 0.3), (8.0, 1.2), (32.0, 4.0)],
            },
        ];
        for c in &claims {
            for d in [0.3, 1e-2, 1e-5, 1e-9] {
                let e = c.epsilon_at(d).unwrap();
                let back = c.delta_at(e).unwrap();
                assert!(back <= d * (1.0 + 1e-9), "{c:?} δ {d}: ε {e}, δ(ε) {back}");
                if e > 1e-3 {
                    let below = c.delta_at(e * 0.999).unwrap();
                    assert!(
                        below > d * 0.999,
                        "{c:?} δ {d}: ε {e} not the smallest ({below})"
                    );
                }
            }
        }
    }

    /// The Gaussian of σ = 1 at sensitivity 1 is 1-GDP: at ε = 1 its δ is
    /// Φ(−0.5) − e·Φ(−1.5) = 0.308538 − 2.718282·0.066807 = 0.126936 (scipy).
    #[test]
    fn gdp_profile_is_the_gaussian_s() {
        let d = Privacy::Gdp { mu: 1.0 }.delta_at(1.0).unwrap();
        assert!((d - 0.126_936).abs() < 1e-5, "{d}");
        // ρ = μ²/2: zCDP's curve lies above the Gaussian's exact one.
        let z = Privacy::Zcdp { rho: 0.5 }.delta_at(1.0).unwrap();
        assert!(z > d, "{z} {d}");
    }

    #[test]
    fn points_of_a_curve_are_promised_and_increase() {
        let c = Privacy::Gdp { mu: 0.5 };
        let p = c.points(None);
        assert!(p.len() > 30, "{p:?}");
        for w in p.windows(2) {
            assert!(w[0].0 < w[1].0);
        }
        for (e, d) in &p {
            assert!(c.delta_at(*e).unwrap() <= d * (1.0 + 1e-9));
        }
        assert_eq!(c.points(Some(1e-5)).len(), 1);
    }
}
