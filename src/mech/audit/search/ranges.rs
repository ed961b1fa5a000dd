//! (b) Thresholds and intervals on a projection of the releases, at quantiles of the pooled
//! draws.

use super::super::event::{Event, Projection};
use super::super::keep::Best;
use super::Rows;

/// Quantile levels of the pooled search draws at which thresholds and interval ends sit:
/// every 2 %, and the tails, where a mechanism's likelihood ratio is often largest.
fn levels() -> Vec<f64> {
    let mut l: Vec<f64> = (1..50).map(|i| i as f64 / 50.0).collect();
    for t in [1e-4, 3e-4, 1e-3, 3e-3, 1e-2] {
        l.push(t);
        l.push(1.0 - t);
    }
    l.sort_by(f64::total_cmp);
    l
}

/// (b) Thresholds and intervals on a projection, at quantiles of the pooled draws.
pub(super) fn ranges(projection: Projection, a: Rows, b: Rows, keep: &mut Best) {
    let sorted = |r: Rows| {
        let mut v: Vec<(f64, u64)> = (0..r.len())
            .map(|i| (projection.of(r.row(i)), r.counts[i]))
            .collect();
        // Unstable is enough: draws are only ever counted up to a value, never among equals.
        v.sort_unstable_by(|x, y| x.0.total_cmp(&y.0));
        let mut cum = Vec::with_capacity(v.len() + 1);
        cum.push(0u64);
        for (_, c) in &v {
            cum.push(cum.last().copied().unwrap_or(0) + c);
        }
        (v.into_iter().map(|(s, _)| s).collect::<Vec<f64>>(), cum)
    };
    let (sa, ca) = sorted(a);
    let (sb, cb) = sorted(b);
    // Draws below t on each side.
    let below = |s: &[f64], c: &[u64], t: f64| c[s.partition_point(|&x| x < t)];
    // Pooled quantiles: the smallest value with at least that share of the draws at or below it.
    let total = ca[sa.len()] + cb[sb.len()];
    let mut cuts: Vec<f64> = Vec::new();
    // The distinct finite values of both sides, in order: a merge of the two sorted sides.
    let mut pooled: Vec<f64> = Vec::with_capacity(sa.len() + sb.len());
    let (mut i, mut j) = (0, 0);
    while i < sa.len() || j < sb.len() {
        let x = if j == sb.len() || (i < sa.len() && sa[i].total_cmp(&sb[j]).is_le()) {
            i += 1;
            sa[i - 1]
        } else {
            j += 1;
            sb[j - 1]
        };
        if x.is_finite() && pooled.last() != Some(&x) {
            pooled.push(x);
        }
    }
    for l in levels() {
        let target = (l * total as f64).ceil() as u64;
        // Binary search over the distinct values for the first whose share reaches the level.
        let i = pooled.partition_point(|&t| {
            below(&sa, &ca, t) + below(&sb, &cb, t) + at(&sa, t, &ca) + at(&sb, t, &cb) < target
        });
        if let Some(&t) = pooled.get(i) {
            cuts.push(t);
        }
    }
    cuts.dedup();
    let counts = |lo: f64, hi: f64| {
        let n = |s: &[f64], c: &[u64]| below(s, c, hi) - below(s, c, lo);
        (n(&sa, &ca), n(&sb, &cb))
    };
    let ends: Vec<f64> = std::iter::once(f64::NEG_INFINITY)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(f64::INFINITY))
        .collect();
    for i in 0..ends.len() {
        for j in i + 1..ends.len() {
            let (lo, hi) = (ends[i], ends[j]);
            if lo == f64::NEG_INFINITY && hi == f64::INFINITY {
                continue;
            }
            let (ka, kb) = counts(lo, hi);
            keep.offer(ka, kb, || Event::Range {
                projection: projection.clone(),
                lo,
                hi,
            });
        }
    }
}

/// Draws equal to t.
fn at(s: &[f64], t: f64, c: &[u64]) -> u64 {
    c[s.partition_point(|&x| x <= t)] - c[s.partition_point(|&x| x < t)]
}
