//! (a) The discrete search: exact outcomes sorted by their likelihood ratio.

use std::collections::{HashMap, HashSet};

use foldhash::fast::FixedState;

use super::super::event::{fingerprint, Event};
use super::super::keep::Best;
use super::Rows;

/// Distinct outcomes beyond which the discrete search does not apply; it does not either when
/// they are more than a tenth of the draws (continuous outputs: every draw is its own outcome).
pub(crate) const MAX_OUTCOMES: usize = 10_000;

/// (a) Exact outcomes sorted by their likelihood ratio, every prefix a candidate set.
pub(super) fn discrete(a: Rows, b: Rows, keep: &mut Best) {
    let mut hist: HashMap<u128, (u64, u64, usize), FixedState> = HashMap::default();
    let mut order: Vec<Vec<f64>> = Vec::new();
    for (side, r) in [a, b].into_iter().enumerate() {
        for i in 0..r.len() {
            let row = r.row(i);
            let next = order.len();
            let e = hist.entry(fingerprint(row)).or_insert_with(|| (0, 0, next));
            if e.2 == next {
                if order.len() >= MAX_OUTCOMES {
                    return;
                }
                order.push(row.to_vec());
            }
            if side == 0 {
                e.0 += r.counts[i];
            } else {
                e.1 += r.counts[i];
            }
        }
    }
    // A continuous output makes every draw its own outcome: sets of them fit the search split
    // and hold nothing on the validation split. Only outcomes seen ten times on average count.
    if order.len().saturating_mul(10) as u64 > keep.rule.na + keep.rule.nb {
        return;
    }
    let mut items: Vec<(u64, u64, usize)> = hist.into_values().collect();
    // First-seen order breaks ties, so the result does not depend on the hash.
    items.sort_by_key(|t| t.2);
    for forward in [true, false] {
        // Add-½ ratios, so that outcomes never seen on one side still sort.
        let ratio = |t: &(u64, u64, usize)| {
            let (p, q) = if forward { (t.0, t.1) } else { (t.1, t.0) };
            (p as f64 + 0.5) / (q as f64 + 0.5)
        };
        let mut sorted = items.clone();
        sorted.sort_by(|x, y| ratio(y).total_cmp(&ratio(x)).then(x.2.cmp(&y.2)));
        let (mut ka, mut kb) = (0, 0);
        for m in 0..sorted.len().saturating_sub(1) {
            ka += sorted[m].0;
            kb += sorted[m].1;
            let set = || Event::outcomes(sorted[..=m].iter().map(|t| order[t.2].clone()).collect());
            keep.offer(ka, kb, set);
        }
    }
}

/// Whether the discrete search applies: at most [`MAX_OUTCOMES`] distinct outcomes, seen ten
/// times each on average (the rule [`discrete`] keeps).
pub(super) fn applies(a: Rows, b: Rows) -> bool {
    let mut seen: HashSet<u128, FixedState> = HashSet::default();
    for r in [a, b] {
        for i in 0..r.len() {
            seen.insert(fingerprint(r.row(i)));
            if seen.len() > MAX_OUTCOMES {
                return false;
            }
        }
    }
    seen.len().saturating_mul(10) as u64 <= a.total() + b.total()
}
