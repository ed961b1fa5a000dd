//! The bound an audit reports, and what a bound of 0 could have seen.
//!
//! # The bound
//! If M is (ε, δ)-DP then for neighbouring inputs x, x' and every event E,
//! Pr[M(x) ∈ E] ≤ e^ε · Pr[M(x') ∈ E] + δ, hence ε ≥ ln((p₁ − δ) / p₂) with p₁ = Pr[M(x) ∈ E]
//! and p₂ = Pr[M(x') ∈ E]. With k₁ of n draws of M(x) and k₂ of n draws of M(x') in E, the
//! one-sided Clopper–Pearson bounds LCB(p₁) and UCB(p₂), each at level 1 − α/2, hold together
//! with probability at least 1 − α (Bonferroni), so
//!
//! ε_LB = ln((LCB(p₁) − δ) / UCB(p₂))
//!
//! is below the mechanism's true ε with confidence 1 − α — provided E, x and x' were chosen
//! without looking at the draws that measure them (Bichsel et al., DP-Sniper, S&P'21, §IV–V).
//! It is reported as 0 when the fraction is not above 1 (no evidence of any privacy loss).

// The one-sided bounds are the statistics module's (its two-sided interval is built on them).
pub(crate) use crate::mech::stats::{clopper_pearson_lower, clopper_pearson_upper};

use super::Finding;

/// ε_LB = ln((LCB(p₁) − δ) / UCB(p₂)) from k₁ of n₁ and k₂ of n₂ draws in the event, both
/// bounds together at `confidence` (each at 1 − (1 − confidence)/2); 0 when the fraction is
/// not above 1.
pub(crate) fn epsilon_lower_bound(
    k1: u64,
    n1: u64,
    k2: u64,
    n2: u64,
    delta: f64,
    confidence: f64,
) -> f64 {
    let alpha = (1.0 - confidence) / 2.0;
    let lo = clopper_pearson_lower(k1, n1, alpha) - delta;
    let hi = clopper_pearson_upper(k2, n2, alpha);
    if lo > hi {
        (lo / hi).ln()
    } else {
        0.0
    }
}

/// The smallest ε at which the event measured by `f` would have been flagged (its bound above
/// `claimed`) had the mechanism's loss on it been that ε: with p₂ as the validation split
/// measured it (at least one draw in n) and p₁ = e^ε·p₂ + δ, the bound that the expected
/// counts at n draws per side give. It says what a bound of 0 means: no violation larger than
/// this was there to be seen *on this event* at this many draws — not that there is none.
/// `None` when even p₁ = 1 would not be flagged.
pub(crate) fn detectable(f: &Finding, claimed: f64, delta: f64, confidence: f64) -> Option<f64> {
    let n = f.samples;
    let p2 = (f.k2.max(1) as f64 / n as f64).min(1.0);
    let bound_at = |eps: f64| {
        let p1 = (eps.exp() * p2 + delta).min(1.0);
        let k1 = (p1 * n as f64).round() as u64;
        epsilon_lower_bound(k1, n, f.k2.max(1), n, delta, confidence)
    };
    // Where p₁ reaches 1, nothing larger is seen.
    let top = ((1.0 - delta).max(f64::MIN_POSITIVE) / p2)
        .ln()
        .max(claimed);
    if bound_at(top) <= claimed {
        return None;
    }
    let (mut lo, mut hi) = (claimed.max(0.0), top);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if bound_at(mid) > claimed {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// δ_LB = LCB(p₁) − e^ε·UCB(p₂) at least 0: the δ the event shows at ε, both bounds together
/// at `confidence` as in [`epsilon_lower_bound`] (the same test, read at ε instead of δ:
/// δ_LB > δ exactly when ε_LB at δ is above ε).
pub(crate) fn delta_lower_bound(
    k1: u64,
    n1: u64,
    k2: u64,
    n2: u64,
    epsilon: f64,
    confidence: f64,
) -> f64 {
    let alpha = (1.0 - confidence) / 2.0;
    let lo = clopper_pearson_lower(k1, n1, alpha);
    let hi = clopper_pearson_upper(k2, n2, alpha);
    (lo - epsilon.exp() * hi).max(0.0)
}

/// How much worse than claimed [`draws_to_flag`] supposes the mechanism on its event: a loss
/// of 1.1·ε at the tested δ.
pub(crate) const WORSE: f64 = 1.1;

/// Draws per side that would flag the claim at the finding's point if the mechanism's loss on
/// its event were [`WORSE`]·ε: with p₂ as the validation split measured it (at least one draw
/// in n) and p₁ = min(1, e^(1.1ε)·p₂ + δ), the fewest draws whose expected counts give a bound
/// above ε. Beside [`detectable`] it reads "not flagged" as either "fine at this power" (the
/// audit drew at least this many) or "too few draws". `None` for ε = 0 (10 % of nothing) or
/// when no number of draws up to 10¹⁵ would.
pub(crate) fn draws_to_flag(f: &Finding, confidence: f64) -> Option<u64> {
    if f.epsilon <= 0.0 {
        return None;
    }
    let p2 = (f.k2.max(1) as f64 / f.samples as f64).min(1.0);
    let p1 = ((WORSE * f.epsilon).exp() * p2 + f.delta).min(1.0);
    let flags = |n: u64| {
        let k = |p: f64| (p * n as f64).round() as u64;
        epsilon_lower_bound(k(p1), n, k(p2), n, f.delta, confidence) > f.epsilon
    };
    let mut hi: u64 = 16;
    while !flags(hi) {
        hi = hi.checked_mul(2)?;
        if hi > 1_000_000_000_000_000 {
            return None;
        }
    }
    let mut lo = hi / 2;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if flags(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}
