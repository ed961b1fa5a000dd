//! The event searches of an audit, and how one event is chosen among them: each search
//! family in a file of its own ([`discrete`], [`ranges`] on a projection, the [`logistic`]
//! score it projects on, the [`support`]), scored and kept by [`super::keep`].
//!
//! # Choosing on one half, scoring on the other
//! Thousands of candidates (thresholds and intervals at every quantile, on every coordinate
//! and score, both ways, every pair) scored on one sample: the best of them is the one whose
//! noise flattered it most, and on fresh draws it measures less — or nothing (a sparse-vector
//! audit chose `143.6 ≤ q0 < 166` on 10⁵ draws, which measured 0 on the validation split). So
//! when the releases are single draws, the searches run on the first half of each side's
//! search split and keep their [`TOP`] best candidates; each is then counted on the second
//! half, which chose nothing, and scored there; the best there is the event the validation
//! split measures. Its counts on the second half and that score are what the audit reports of
//! its choice ("how sure"): honest estimates, since that half did not pick among thousands.
//! The support search ((d) below) is cross-fitted on halves of its own and joins as it is.
//! Search and validation splits stay disjoint: the validation split measures one event only.
//!
//! # Each family its own slots
//! The families (discrete, scalar, linear, bits) each keep their own [`TOP`] candidates for
//! the second half. Shared slots were filled by whichever family fits noise best: on an
//! integer release with a few hundred outcomes, the discrete search's outcome sets, each a
//! little better than the last on the half that chose them, took all 32, so no threshold was
//! ever scored on the second half, and a geometric mechanism at ε = 0.1 with a true loss of
//! 0.2 came out "no event separated the inputs" (0.193, flagged, with the scalar search
//! alone).

mod bits;
mod discrete;
mod logistic;
mod ranges;
mod support;

use rayon::prelude::*;

use super::event::{Event, Projection};
pub(crate) use super::keep::Candidate;
use super::keep::{score, Best, Claim};
use super::{Releases, Rows};

/// Candidates the first half of the search split hands to the second (see the module doc).
pub(crate) const TOP: usize = 32;

/// Draws per side and half below which the search split is not halved (too few to choose on
/// half of them): it is then searched whole, as before the halving.
const MIN_HALF: usize = 1_000;

/// Which searches an audit runs (each only where it applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Searches {
    /// Sets of exact outcomes, by likelihood ratio (at most [`MAX_OUTCOMES`] distinct ones).
    pub discrete: bool,
    /// Thresholds and intervals on each coordinate.
    pub scalar: bool,
    /// Thresholds and intervals on a learnt linear score (releases of two or more numbers).
    pub linear: bool,
    /// Sets of exact outcomes one side hits and the other never does, where the discrete
    /// search does not apply (too many distinct outcomes): a support that moves with the
    /// input, as a floating-point sampler's.
    pub support: bool,
    /// Thresholds and intervals on each coordinate's bits (its lowest set bit, its
    /// significant bits), where the discrete search does not apply: a floating-point
    /// sampler's holes ([`bits`]).
    pub bits: bool,
}

impl Searches {
    #[cfg(test)]
    pub(crate) const ALL: Searches = Searches {
        discrete: true,
        scalar: true,
        linear: true,
        support: true,
        bits: true,
    };
}

/// The best candidate event separating draws `a` (side 0) from `b` (side 1), over the
/// searches that apply, for a pure ε = 0 claim at δ (its bound is its score); `None` when none
/// gives a bound above 0.
#[cfg(test)]
pub(crate) fn best(
    a: &Releases,
    b: &Releases,
    searches: Searches,
    delta: f64,
    confidence: f64,
) -> Option<Candidate> {
    best_for(
        a,
        b,
        searches,
        Claim {
            points: &[(0.0, delta)],
            confidence,
            validation: u64::MAX,
            bounds: &super::keep::Bounds::default(),
        },
    )
}

/// [`best`], for a claim and a validation split, chosen as the module doc says: on halves of
/// the search split when its releases are single draws.
pub(crate) fn best_for(
    a: &Releases,
    b: &Releases,
    searches: Searches,
    claim: Claim,
) -> Option<Candidate> {
    let (a, b) = (a.rows(), b.rows());
    if a.is_empty() || b.is_empty() {
        return None;
    }
    // Support and bits look at what only a continuous output has: not where the discrete
    // search applies.
    let continuous = (searches.support || searches.bits) && !discrete::applies(a, b);
    let searches = Searches {
        support: searches.support && continuous,
        bits: searches.bits && continuous,
        ..searches
    };
    // The support search runs beside the others, and its best is offered after theirs.
    let (mut found, beside) = rayon::join(
        || chosen(a, b, searches, claim),
        || {
            let mut kept = Vec::new();
            if searches.support {
                support::support(a, b, &mut Best::over((a, b), claim, 1, &mut kept));
            }
            kept
        },
    );
    let mut keep = Best::over((a, b), claim, 1, &mut found);
    for c in beside {
        keep.take(c);
    }
    found.into_iter().next()
}

/// The best of the discrete, scalar, linear and bits searches (at most one), chosen on
/// halves when the releases are single draws (the module doc).
fn chosen(a: Rows, b: Rows, searches: Searches, claim: Claim) -> Vec<Candidate> {
    let single = |r: Rows| r.counts.iter().all(|&c| c == 1) && r.len() >= 2 * MIN_HALF;
    let mut found = Vec::new();
    if !(single(a) && single(b)) {
        let mut keep = Best::over((a, b), claim, 1, &mut found);
        for c in searched(a, b, searches, claim, 1) {
            keep.take(c);
        }
        return found;
    }
    let (a1, a2) = a.halves();
    let (b1, b2) = b.halves();
    let top = searched(a1, b1, searches, claim, TOP);
    let (na, nb) = (a2.total(), b2.total());
    // Most candidates are ranges of a few projections (the linear score's above all): each
    // projection is computed once per release of the second half, not per candidate, and
    // the release counted between the two consecutive ends of that projection's candidates
    // it falls in; a candidate's count is then a sum of those (where a pass over every draw
    // per candidate, and a vector of every draw's projection, were the cost before).
    let mut distinct: Vec<&Projection> = Vec::new();
    for c in &top {
        if let Event::Range { projection, .. } = &c.event {
            if !distinct.contains(&projection) {
                distinct.push(projection);
            }
        }
    }
    let ends: Vec<Vec<f64>> = distinct
        .iter()
        .map(|p| {
            let mut e: Vec<f64> = top
                .iter()
                .filter_map(|c| match &c.event {
                    Event::Range { projection, lo, hi } if projection == *p => Some([*lo, *hi]),
                    _ => None,
                })
                .flatten()
                .collect();
            e.sort_by(f64::total_cmp);
            // Equal as numbers (−0 and 0 are one end): the counts compare them so.
            e.dedup_by(|x, y| x == y);
            e
        })
        .collect();
    // between[i][side][m]: the draws whose projection i is at or above m of its ends (and
    // below the rest); NaN is in no range.
    let between: Vec<[Vec<u64>; 2]> = distinct
        .par_iter()
        .zip(ends.par_iter())
        .map(|(p, e)| {
            [a2, b2].map(|r| {
                let mut h = vec![0u64; e.len() + 1];
                for i in 0..r.len() {
                    let v = p.of(r.row(i));
                    if !v.is_nan() {
                        h[e.partition_point(|x| *x <= v)] += r.counts[i];
                    }
                }
                h
            })
        })
        .collect();
    let count = |event: &Event, side: usize| -> u64 {
        let r = if side == 0 { a2 } else { b2 };
        let Event::Range { projection, lo, hi } = event else {
            return r.count_in(event);
        };
        let Some(at) = distinct.iter().position(|p| *p == projection) else {
            return r.count_in(event);
        };
        // lo ≤ v < hi: v at or above lo's end and not at or above hi's.
        let end = |x: f64| ends[at].partition_point(|y| *y < x);
        let (i, j) = (end(*lo), end(*hi));
        if i >= j {
            return 0;
        }
        between[at][side][i + 1..=j].iter().sum()
    };
    let counted: Vec<(u64, u64)> = top
        .par_iter()
        .map(|c| (count(&c.event, 0), count(&c.event, 1)))
        .collect();
    let rule = Best::over((a2, b2), claim, 1, &mut Vec::new()).rule;
    for (c, (ka, kb)) in top.iter().zip(counted) {
        let (k1, n1, k2, n2) = if c.forward {
            (ka, na, kb, nb)
        } else {
            (kb, nb, ka, na)
        };
        let Some(scored) = score(k1, n1, k2, n2, &rule) else {
            continue;
        };
        if found
            .first()
            .is_none_or(|b: &Candidate| scored.score > b.score)
        {
            found = vec![Candidate::scored(
                c.event.clone(),
                c.forward,
                scored,
                (k1, n1, k2, n2),
            )];
        }
    }
    found
}

/// The discrete, scalar, linear and bits searches, each where it applies, each family keeping
/// its own `keep` best (the module doc). They run side by side, and their candidates come out
/// family after family in this fixed order: the result does not depend on the number of
/// threads.
fn searched(a: Rows, b: Rows, searches: Searches, claim: Claim, keep: usize) -> Vec<Candidate> {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Family {
        Discrete,
        Scalar,
        Linear,
        Bits,
    }
    #[derive(Clone, Copy)]
    enum Task {
        Discrete,
        Coordinate(usize),
        Linear,
        Bits(usize),
    }
    let family = |t: Task| match t {
        Task::Discrete => Family::Discrete,
        Task::Coordinate(_) => Family::Scalar,
        Task::Linear => Family::Linear,
        Task::Bits(_) => Family::Bits,
    };
    let mut tasks = Vec::new();
    if searches.discrete {
        tasks.push(Task::Discrete);
    }
    if searches.scalar {
        tasks.extend((0..a.dim).map(Task::Coordinate));
    }
    if searches.linear && a.dim >= 2 {
        tasks.push(Task::Linear);
    }
    if searches.bits {
        tasks.extend((0..a.dim).map(Task::Bits));
    }
    let found: Vec<(Family, Vec<Candidate>)> = tasks
        .into_par_iter()
        .map(|task| {
            let mut own = Vec::new();
            let mut k = Best::over((a, b), claim, keep, &mut own);
            match task {
                Task::Discrete => discrete::discrete(a, b, &mut k),
                Task::Coordinate(j) => ranges::ranges(Projection::Coordinate(j), a, b, &mut k),
                Task::Linear => {
                    if let Some(p) = logistic::logistic(a, b) {
                        ranges::ranges(p, a, b, &mut k);
                    }
                }
                Task::Bits(j) => bits::bits(j, a, b, &mut k),
            }
            (family(task), own)
        })
        .collect();
    let mut out = Vec::new();
    for f in [
        Family::Discrete,
        Family::Scalar,
        Family::Linear,
        Family::Bits,
    ] {
        let mut best = Vec::new();
        let mut k = Best::over((a, b), claim, keep, &mut best);
        for (_, cs) in found.iter().filter(|(g, _)| *g == f) {
            for c in cs {
                k.take(c.clone());
            }
        }
        out.extend(best);
    }
    out
}

#[cfg(test)]
pub(crate) use logistic::logistic_for_tests;
