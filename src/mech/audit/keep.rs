//! Scoring candidate events and keeping the best of them.
//!
//! # Scoring
//! A candidate event is scored by how far the bound it would give
//! ([`super::bound::epsilon_lower_bound`]) on the counts that score it lies above the claim:
//! its *margin* ln((LCB(p₁) − δ)/UCB(p₂)) − ε, at the claim's point (ε, δ) where that is
//! largest ([`Points`]: one for a point claim, a whole curve's for a curve). For a pure ε
//! claim the margin is the bound less ε, so events rank by their bound, the rare events of
//! large likelihood ratio first; against a curve the δ subtracted makes rare events worth
//! nothing and sends the search to the tails where p₁ − e^ε·p₂ is largest, which is where an
//! approximate-DP mechanism breaks. The margin which prefers a large likelihood ratio but penalises events too
//! rare to measure; and, when the validation split is smaller than those counts' split, by the
//! bound its expected validation counts would give (the counts scaled down) — the smaller score
//! counts: an event seen 30 times in 10⁴ draws is seen about 3 times in 10³ validation draws,
//! too few for any bound above 0. An event seen fewer than [`MIN_DRAWS`] times on its likelier
//! side is not scored at all (a tail fitted to a handful of draws).

use std::collections::HashMap;
use std::sync::Mutex;

use foldhash::fast::FixedState;

use super::bound::{clopper_pearson_lower, clopper_pearson_upper};
use super::event::Event;
use super::Rows;

/// Draws on its likelier side below which an event is not scored.
pub(crate) const MIN_DRAWS: u64 = 10;

/// The (ε, δ) points of the claim an event may be tested at, ε increasing (see
/// [`crate::mech::privacy::Privacy::points`]).
pub(crate) type Points<'p> = &'p [(f64, f64)];

/// A candidate event, its direction, and its score with the counts that gave it.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub event: Event,
    /// true: p₁ on side 0 (x), p₂ on side 1 (x').
    pub forward: bool,
    /// Its margin over the claim at [`Candidate::point`] (the module doc).
    pub score: f64,
    /// The claim's point it is tested at: an index into the audit's [`Points`].
    pub point: usize,
    /// The bound that margin came from (the margin plus the point's ε).
    pub bound: f64,
    /// The draws in the event on p₁'s side and on p₂'s, of `n` per side, that scored it (the
    /// second half of the search split when it was halved).
    pub k1: u64,
    pub k2: u64,
    pub n1: u64,
    pub n2: u64,
}

impl Candidate {
    /// A candidate with its score and the counts that gave it: k₁ of n₁ on p₁'s side, k₂ of
    /// n₂ on p₂'s.
    pub(super) fn scored(
        event: Event,
        forward: bool,
        s: Scored,
        (k1, n1, k2, n2): (u64, u64, u64, u64),
    ) -> Self {
        Candidate {
            event,
            forward,
            score: s.score,
            point: s.point,
            bound: s.bound,
            k1,
            k2,
            n1,
            n2,
        }
    }
}

/// The Clopper–Pearson bounds one audit has computed, by (k, n, α). The searches may ask for
/// the same counts more than once (the halves of every pair's search split have the same n,
/// and candidates on coordinates drawn alike have counts that cluster), and a bound costs
/// about thirteen evaluations of the incomplete beta function (LaplaceParallel at 10⁶ draws:
/// 1.87·10⁶ for 138 900 bounds). A bound is a function of (k, n, α) alone, so a remembered one
/// is the one that would be computed, bit for bit.
#[derive(Default)]
pub(crate) struct Bounds {
    lower: Mutex<HashMap<(u64, u64, u64), f64, FixedState>>,
    upper: Mutex<HashMap<(u64, u64, u64), f64, FixedState>>,
}

impl Bounds {
    /// [`clopper_pearson_lower`], remembered.
    pub(super) fn lower(&self, k: u64, n: u64, alpha: f64) -> f64 {
        Self::remembered(&self.lower, (k, n, alpha), clopper_pearson_lower)
    }

    /// [`clopper_pearson_upper`], remembered.
    pub(super) fn upper(&self, k: u64, n: u64, alpha: f64) -> f64 {
        Self::remembered(&self.upper, (k, n, alpha), clopper_pearson_upper)
    }

    fn remembered(
        memo: &Mutex<HashMap<(u64, u64, u64), f64, FixedState>>,
        (k, n, alpha): (u64, u64, f64),
        bound: fn(u64, u64, f64) -> f64,
    ) -> f64 {
        let key = (k, n, alpha.to_bits());
        if let Some(v) = memo.lock().ok().and_then(|m| m.get(&key).copied()) {
            return v;
        }
        // Computed without the lock: the searches beside this one go on meanwhile (two that
        // ask at once compute the same bits twice).
        let v = bound(k, n, alpha);
        if let Ok(mut m) = memo.lock() {
            m.insert(key, v);
        }
        v
    }
}

/// How a candidate with k₁ of n₁ draws on p₁'s side and k₂ of n₂ on p₂'s scores (see the
/// module doc): its margin at its best point, on those counts and on their expectation at
/// `validation` draws per side when that is fewer (the smaller of the two at each point);
/// `None` below [`MIN_DRAWS`] or where no point has a bound above 0.
pub(super) fn score(k1: u64, n1: u64, k2: u64, n2: u64, rule: &Rule) -> Option<Scored> {
    if k1 < MIN_DRAWS {
        return None;
    }
    let alpha = rule.alpha();
    let bounds = |k1: u64, n1: u64, k2: u64, n2: u64| {
        (
            rule.bounds.lower(k1, n1, alpha),
            rule.bounds.upper(k2, n2, alpha),
        )
    };
    let here = bounds(k1, n1, k2, n2);
    let v = rule.validation;
    let expected = (v < n1 || v < n2).then(|| {
        let e = |k: u64, n: u64| (k as f64 * v as f64 / n as f64).round() as u64;
        bounds(e(k1, n1), v, e(k2, n2), v)
    });
    // The bound, ε_LB at the point's δ (the smaller of the two counts').
    let bound = |delta: f64| {
        let b = lb(here, delta);
        expected.map_or(b, |x| b.min(lb(x, delta)))
    };
    let (score, point) = best_point(rule.points, |eps, delta| bound(delta) - eps)?;
    Some(Scored {
        score,
        point,
        bound: bound(rule.points[point].1),
    })
}

/// A candidate's score, the point it is tested at, and the bound it has there (see
/// [`Candidate`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Scored {
    pub score: f64,
    pub point: usize,
    pub bound: f64,
}

/// ln((lo − δ)/hi), or −∞ when lo − δ is not above hi (no evidence of any loss).
fn lb((lo, hi): (f64, f64), delta: f64) -> f64 {
    let lo = lo - delta;
    if lo > hi {
        (lo / hi).ln()
    } else {
        f64::NEG_INFINITY
    }
}

/// The point where `m` is largest (the first on a tie) and that margin; `None` when it is −∞
/// everywhere.
fn best_point(points: Points, m: impl Fn(f64, f64) -> f64) -> Option<(f64, usize)> {
    let mut best: Option<(f64, usize)> = None;
    for (i, &(eps, delta)) in points.iter().enumerate() {
        let v = m(eps, delta);
        if v > f64::NEG_INFINITY && best.is_none_or(|(b, _)| v > b) {
            best = Some((v, i));
        }
    }
    best
}

/// Keeps the `keep` best-scoring candidates, best first; ties keep the earlier (the searches
/// run in a fixed order).
pub(super) struct Best<'a, 'p> {
    pub(super) rule: Rule<'p>,
    pub(super) best: &'a mut Vec<Candidate>,
}

/// What a [`Best`] scores and keeps by: the claim's points, the confidence, the draws per
/// side, and how many candidates it keeps. Searches run side by side each keep by a copy of
/// one rule.
#[derive(Clone, Copy)]
pub(super) struct Rule<'p> {
    pub(super) points: Points<'p>,
    pub(super) confidence: f64,
    pub(super) na: u64,
    pub(super) nb: u64,
    /// Validation draws per side (events are scored for it too when it is below na or nb).
    pub(super) validation: u64,
    pub(super) keep: usize,
    pub(super) bounds: &'p Bounds,
}

impl Rule<'_> {
    /// The level of each of the two one-sided bounds.
    fn alpha(&self) -> f64 {
        (1.0 - self.confidence) / 2.0
    }
}

/// What every search of one audit scores by: the claim's points, the confidence, and the
/// validation draws per side.
#[derive(Clone, Copy)]
pub(crate) struct Claim<'p> {
    pub points: Points<'p>,
    pub confidence: f64,
    pub validation: u64,
    /// The bounds computed so far in this audit.
    pub bounds: &'p Bounds,
}

impl<'a, 'p> Best<'a, 'p> {
    /// Keeps `keep` candidates separating `a` from `b` in `best`.
    pub(super) fn over(
        (a, b): (Rows, Rows),
        claim: Claim<'p>,
        keep: usize,
        best: &'a mut Vec<Candidate>,
    ) -> Self {
        Best {
            rule: Rule {
                points: claim.points,
                confidence: claim.confidence,
                na: a.total(),
                nb: b.total(),
                validation: claim.validation,
                keep,
                bounds: claim.bounds,
            },
            best,
        }
    }

    /// The score a candidate must beat to be kept.
    fn floor(&self) -> f64 {
        if self.best.len() < self.rule.keep {
            f64::NEG_INFINITY
        } else {
            self.best.last().map_or(f64::NEG_INFINITY, |c| c.score)
        }
    }

    /// Scores the event with `ka` of side 0's and `kb` of side 1's draws in it, both ways
    /// (forward first on a tie); `event` is built only when it is kept.
    pub(super) fn offer(&mut self, ka: u64, kb: u64, event: impl FnOnce() -> Event) {
        let floor = self.floor();
        let rule = self.rule;
        let rate = |k1: u64, n1: u64, k2: u64, n2: u64| {
            // The bound never exceeds the plug-in estimate: skip what cannot be kept. Nor the
            // estimate with LCB(p₁) in place of p₁, since UCB(p₂) ≥ p₂ as well (what the
            // plug-in test already relies on): a candidate that fails it stops before its
            // second bound is computed.
            let (p1, p2) = (k1 as f64 / n1 as f64, k2 as f64 / n2 as f64);
            let above = |p1: f64| {
                best_point(rule.points, |eps, delta| lb((p1, p2), delta) - eps)
                    .is_some_and(|(m, _)| m > floor)
            };
            if !above(p1) || k1 < MIN_DRAWS || !above(rule.bounds.lower(k1, n1, rule.alpha())) {
                return None;
            }
            score(k1, n1, k2, n2, &rule)
        };
        let forward = rate(ka, rule.na, kb, rule.nb);
        let backward = rate(kb, rule.nb, ka, rule.na);
        let (forward, scored) = match (forward, backward) {
            (Some(f), Some(b)) if b.score > f.score => (false, b),
            (Some(f), _) => (true, f),
            (None, Some(b)) => (false, b),
            (None, None) => return,
        };
        if scored.score > floor {
            let counts = if forward {
                (ka, rule.na, kb, rule.nb)
            } else {
                (kb, rule.nb, ka, rule.na)
            };
            self.take(Candidate::scored(event(), forward, scored, counts));
        }
    }

    /// Keeps a candidate scored elsewhere if it beats the floor (after those of equal score).
    pub(super) fn take(&mut self, c: Candidate) {
        if c.score > self.floor() {
            let at = self.best.partition_point(|b| b.score >= c.score);
            self.best.insert(at, c);
            self.best.truncate(self.rule.keep);
        }
    }
}
