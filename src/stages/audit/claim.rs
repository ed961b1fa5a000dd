//! The claim an audit holds its mechanism to: written in `claim:` (ε, (ε, δ), ρ, μ, Rényi,
//! or a column of the mechanism's output) or stated by the mechanism's kind, as a
//! [`Privacy`] whose (ε, δ) points the audit tests ([`crate::mech::privacy`]).

use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::Privacy;
use crate::stages::param::{Fraction, Positive};
use crate::stages::ParamError;

#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct Claim {
    /// the ε the mechanism claims ((ε, δ)-DP with `delta`, else pure ε-DP): a number, or {column: c}, the value of the mechanism's output column c on every row (a mechanism that computes its ε, as Wu et al.'s Algorithm 3 for a channel). Give one of epsilon, rho, mu, renyi; default: the claim the mechanism's kind states from its own parameters (mechanism.noise, mechanism.select, near_optimal.noise) — an external program must be given one
    #[serde(default, skip_serializing_if = "Option::is_none")]
    epsilon: Option<Claimed>,
    /// with `epsilon`: the δ of an (ε, δ)-DP claim (default 0, pure ε-DP). With `rho`, `mu` or `renyi` (or a mechanism that states ρ-zCDP): test that one point (ε(δ), δ) of the claim's curve instead of the whole curve
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delta: Option<Fraction>,
    /// ρ of a ρ-zCDP claim (Bun & Steinke 2016), audited along its whole (ε, δ) curve (Canonne, Kamath & Steinke 2020's conversion)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rho: Option<Positive>,
    /// μ of a μ-GDP claim (Dong, Roth & Su 2022; a Gaussian of σ at sensitivity Δ is μ = Δ/σ), audited along its exact (ε, δ) curve
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mu: Option<Positive>,
    /// a Rényi DP claim, {alpha: [orders > 1], epsilon: [the ε at each]}, audited along the (ε, δ) curve it implies (Canonne, Kamath & Steinke 2020's conversion)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    renyi: Option<RenyiClaim>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RenyiClaim {
    /// the orders α, each > 1
    alpha: Vec<f64>,
    /// the Rényi ε at each order, as many as `alpha`
    epsilon: Vec<f64>,
}

/// The claim an audit holds its mechanism to: written in `claim:` or stated by the mechanism
/// kind ([`crate::kind::Stage::privacy`]), and the one δ of its curve to test, if any.
pub(super) struct Held {
    pub(super) claim: HeldClaim,
    /// The δ of the one point of a curve to test (`claim.delta` beside a curve).
    pub(super) at: Option<f64>,
}

pub(super) enum HeldClaim {
    Stated(Privacy),
    /// (ε, δ)-DP with ε the value of this output column of the mechanism, the same on every
    /// row and run.
    Column {
        column: String,
        delta: f64,
    },
}

impl Held {
    /// The claim, given the ε the mechanism reported (a column claim).
    pub(super) fn privacy(&self, reported: Option<f64>) -> Option<Privacy> {
        match &self.claim {
            HeldClaim::Stated(p) => Some(p.clone()),
            HeldClaim::Column { delta, .. } => reported.map(|epsilon| Privacy::Approx {
                epsilon,
                delta: *delta,
            }),
        }
    }
}

/// The claim to hold `kind` to: what `claim` writes, else the mechanism's own (`own`).
pub(super) fn held(claim: &Claim, own: Option<Privacy>, kind: &str) -> Result<Held, ParamError> {
    let written = claim.delta.map(|d| *d);
    let given: Vec<&str> = [
        ("epsilon", claim.epsilon.is_some()),
        ("rho", claim.rho.is_some()),
        ("mu", claim.mu.is_some()),
        ("renyi", claim.renyi.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect();
    if given.len() > 1 {
        return Err(ParamError::at(
            "claim",
            format!(
                "it gives {}: a claim is one of epsilon (with delta: (ε, δ)-DP), rho (zCDP), mu (GDP) or renyi",
                given.join(" and ")
            ),
        ));
    }
    let range = |key: &str, e: crate::mech::ParamRangeError| {
        ParamError::at(&format!("claim.{key}"), e.to_string())
    };
    let curve = |p: Privacy, key: &str| -> Result<Held, ParamError> {
        p.check().map_err(|e| range(key, e))?;
        if let Some(d) = written {
            if !(d > 0.0 && d < 1.0) {
                return Err(ParamError::at(
                    "claim.delta",
                    format!("δ = {d}: the point of a curve to test needs δ in (0, 1)"),
                ));
            }
        }
        Ok(Held {
            claim: HeldClaim::Stated(p),
            at: written,
        })
    };
    if let Some(r) = &claim.renyi {
        if r.alpha.len() != r.epsilon.len() {
            return Err(ParamError::at(
                "claim.renyi",
                format!(
                    "{} orders (alpha) but {} values (epsilon): give one ε per order",
                    r.alpha.len(),
                    r.epsilon.len()
                ),
            ));
        }
        let orders = r
            .alpha
            .iter()
            .copied()
            .zip(r.epsilon.iter().copied())
            .collect();
        return curve(Privacy::Renyi { orders }, "renyi");
    }
    if let Some(rho) = claim.rho {
        return curve(Privacy::Zcdp { rho: *rho }, "rho");
    }
    if let Some(mu) = claim.mu {
        return curve(Privacy::Gdp { mu: *mu }, "mu");
    }
    match (&claim.epsilon, own) {
        (Some(Claimed::Value(v)), _) => Ok(Held {
            claim: HeldClaim::Stated(Privacy::Approx {
                epsilon: **v,
                delta: written.unwrap_or(0.0),
            }),
            at: None,
        }),
        (Some(Claimed::Column(c)), _) => Ok(Held {
            claim: HeldClaim::Column {
                column: c.column.clone(),
                delta: written.unwrap_or(0.0),
            },
            at: None,
        }),
        (None, None) => Err(ParamError::at(
            "claim",
            if written.is_some() {
                format!("kind `{kind}` states no privacy claim of its own, so a δ alone says nothing: give the claim it goes with, `claim: {{epsilon: …, delta: …}}`, or a curve's `rho`, `mu` or `renyi` with the δ of the one point to test")
            } else {
                format!("kind `{kind}` states no privacy claim of its own: give the one to audit, `claim: {{epsilon: …}}` (pure ε), `{{epsilon: …, delta: …}}`, `{{rho: …}}` (zCDP), `{{mu: …}}` (GDP) or `{{renyi: {{alpha: […], epsilon: […]}}}}`")
            },
        )),
        (None, Some(Privacy::Approx { epsilon, delta })) => {
            if let Some(d) = written.filter(|d| *d != delta) {
                return Err(ParamError::at(
                    "claim.delta",
                    format!("δ = {d}, but the mechanism claims δ = {delta} from its own parameters: audit another claim by giving `claim.epsilon` too"),
                ));
            }
            Ok(Held {
                claim: HeldClaim::Stated(Privacy::Approx { epsilon, delta }),
                at: None,
            })
        }
        (None, Some(p)) => curve(p, "delta"),
    }
}

/// The claimed ε: written, or reported by the mechanism itself.
#[derive(Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a positive number (the ε claimed) or `{column: NAME}` (the mechanism's column that states it)"
)]
enum Claimed {
    Value(Positive),
    Column(ClaimColumn),
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClaimColumn {
    /// the mechanism's output column holding the ε it claims (the same on every row and run)
    column: String,
}
