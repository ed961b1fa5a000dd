//! (d) The support search: outcomes one side draws and the other never does.

use std::collections::HashSet;

use foldhash::fast::FixedState;

use super::super::event::{fingerprint, Event};
use super::super::keep::{Best, Rule};
use super::Rows;

/// (d) The support: outcomes seen on one side and never on the other, bit for bit. A sampler
/// whose outputs form a sparse set that moves with the input (a floating-point Laplace drawn
/// from a coarse uniform; Mironov, CCS'12) has outputs under x that x' never produces: their
/// probability ratio is infinite, and no threshold or interval sees it.
///
/// Every draw of a continuous output is its own outcome, so a set taken from the search split
/// and scored on it would look perfect and measure nothing. The score is therefore
/// cross-fitted: the set is taken from the first half of each side's search draws and scored
/// on the second halves (an honest estimate, since the halves are independent). The event
/// then measured on the validation split is the set from the whole search split.
pub(super) fn support(a: Rows, b: Rows, keep: &mut Best) {
    let halves = |r: Rows| {
        let mid = r.len() / 2;
        let first: HashSet<u128, FixedState> = (0..mid).map(|i| fingerprint(r.row(i))).collect();
        (first, mid..r.len())
    };
    let ((a1, a2), (b1, b2)) = (halves(a), halves(b));
    let count = |r: Rows,
                 rows: &std::ops::Range<usize>,
                 only: &HashSet<u128, FixedState>,
                 not: &HashSet<u128, FixedState>| {
        rows.clone()
            .filter(|&i| {
                let k = fingerprint(r.row(i));
                only.contains(&k) && !not.contains(&k)
            })
            .map(|i| r.counts[i])
            .sum::<u64>()
    };
    let n2 = |r: Rows, rows: &std::ops::Range<usize>| {
        rows.clone().map(|i| r.counts[i]).sum::<u64>()
    };
    let mut half = Best {
        rule: Rule {
            na: n2(a, &a2),
            nb: n2(b, &b2),
            ..keep.rule
        },
        best: keep.best,
    };
    if half.rule.na == 0 || half.rule.nb == 0 {
        return;
    }
    // The set on the whole search split of side `of`, without what the other side drew.
    let whole = |of: Rows, other: Rows| {
        let theirs: HashSet<u128, FixedState> = (0..other.len())
            .map(|i| fingerprint(other.row(i)))
            .collect();
        let mut seen: HashSet<u128, FixedState> = HashSet::default();
        let outcomes = (0..of.len())
            .map(|i| of.row(i))
            .filter(|row| {
                let k = fingerprint(row);
                !theirs.contains(&k) && seen.insert(k)
            })
            .map(<[f64]>::to_vec)
            .collect();
        Event::outcomes(outcomes)
    };
    // Side 0's outcomes: forward (p₁ on x); side 1's: backward, which `offer` also scores.
    half.offer(count(a, &a2, &a1, &b1), count(b, &b2, &a1, &b1), || {
        whole(a, b)
    });
    half.offer(count(a, &a2, &b1, &a1), count(b, &b2, &b1, &a1), || {
        whole(b, a)
    });
}
