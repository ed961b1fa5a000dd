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
    // Each release's fingerprint once: the halves' sets, the counts on the second halves and
    // the whole split's set all read these (they hashed every release three to five times).
    let prints = |r: Rows| {
        (0..r.len())
            .map(|i| fingerprint(r.row(i)))
            .collect::<Vec<_>>()
    };
    let (fa, fb) = (prints(a), prints(b));
    let set = |fs: &[u128]| {
        let mut s: HashSet<u128, FixedState> =
            HashSet::with_capacity_and_hasher(fs.len(), FixedState::default());
        s.extend(fs.iter().copied());
        s
    };
    let (mid_a, mid_b) = (a.len() / 2, b.len() / 2);
    let (a1, b1) = (set(&fa[..mid_a]), set(&fb[..mid_b]));
    // The draws of the second half of side `r` (fingerprints `fs`) in `only` and not in `not`.
    let count = |r: Rows,
                 fs: &[u128],
                 mid: usize,
                 only: &HashSet<u128, FixedState>,
                 not: &HashSet<u128, FixedState>| {
        (mid..r.len())
            .filter(|&i| only.contains(&fs[i]) && !not.contains(&fs[i]))
            .map(|i| r.counts[i])
            .sum::<u64>()
    };
    let mut half = Best {
        rule: Rule {
            na: a.counts[mid_a..].iter().sum(),
            nb: b.counts[mid_b..].iter().sum(),
            ..keep.rule
        },
        best: keep.best,
    };
    if half.rule.na == 0 || half.rule.nb == 0 {
        return;
    }
    // The set on the whole search split of side `of`, without what the other side drew.
    let whole = |of: Rows, of_prints: &[u128], other_prints: &[u128]| {
        let theirs = set(other_prints);
        let mut seen: HashSet<u128, FixedState> = HashSet::default();
        let outcomes = (0..of.len())
            .filter(|&i| {
                let k = of_prints[i];
                !theirs.contains(&k) && seen.insert(k)
            })
            .map(|i| of.row(i).to_vec())
            .collect();
        Event::outcomes(outcomes)
    };
    // Side 0's outcomes: forward (p₁ on x); side 1's: backward, which `offer` also scores.
    half.offer(
        count(a, &fa, mid_a, &a1, &b1),
        count(b, &fb, mid_b, &a1, &b1),
        || whole(a, &fa, &fb),
    );
    half.offer(
        count(a, &fa, mid_a, &b1, &a1),
        count(b, &fb, mid_b, &b1, &a1),
        || whole(b, &fb, &fa),
    );
}
