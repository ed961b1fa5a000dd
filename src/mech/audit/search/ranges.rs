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
        if r.counts.iter().all(|&c| c == 1) {
            // Single draws: the values alone, sorted as integers in f64::total_cmp's order
            // (half the bytes of value–count pairs, and no comparison closure), and the draws
            // below the i-th are i.
            let mut keys: Vec<u64> = (0..r.len())
                .map(|i| order_key(projection.of(r.row(i))))
                .collect();
            keys.sort_unstable();
            let values: Vec<f64> = keys.into_iter().map(from_order_key).collect();
            return (values, (0..=r.len() as u64).collect());
        }
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

/// `x` as an integer that sorts as [`f64::total_cmp`] orders the floats (its own
/// transformation of the bits, made unsigned), and back: the sorted floats are the same bits.
fn order_key(x: f64) -> u64 {
    let b = x.to_bits() as i64;
    ((b ^ (((b >> 63) as u64) >> 1) as i64) as u64) ^ (1 << 63)
}

fn from_order_key(k: u64) -> f64 {
    let b = (k ^ (1 << 63)) as i64;
    f64::from_bits((b ^ (((b >> 63) as u64) >> 1) as i64) as u64)
}

/// Draws equal to t.
fn at(s: &[f64], t: f64, c: &[u64]) -> u64 {
    c[s.partition_point(|&x| x <= t)] - c[s.partition_point(|&x| x < t)]
}

#[cfg(test)]
mod tests {
    use super::{from_order_key, order_key};

    /// The integer keys sort floats exactly as `f64::total_cmp` (NaNs of both signs, ±∞, ±0,
    /// subnormals), and give the same bits back.
    #[test]
    fn order_keys_sort_as_total_cmp() {
        let mut xs = vec![
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            0.1,
            -1000.0,
            2.5,
        ];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            xs.push(f64::from_bits(rng));
        }
        let mut by_cmp = xs.clone();
        by_cmp.sort_by(f64::total_cmp);
        let mut keys: Vec<u64> = xs.iter().map(|&x| order_key(x)).collect();
        keys.sort_unstable();
        let by_key: Vec<u64> = keys
            .into_iter()
            .map(|k| from_order_key(k).to_bits())
            .collect();
        let want: Vec<u64> = by_cmp.iter().map(|x| x.to_bits()).collect();
        assert_eq!(by_key, want);
    }
}
