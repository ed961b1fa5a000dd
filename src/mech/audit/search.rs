//! The event searches of an audit: candidate events scored on the search split by the bound
//! they would give there ([`super::epsilon_lower_bound`] on the search counts), which prefers
//! a large likelihood ratio but penalises events too rare to measure. When the validation
//! split is smaller than the search split, an event is also scored by the bound its expected
//! validation counts would give (the search counts scaled down), and the smaller score counts:
//! an event seen 30 times in 10⁴ search draws is seen about 3 times in 10³ validation draws,
//! too few for any bound above 0, and a commoner event with a smaller ratio is chosen instead.
//! (A larger validation split is not scaled up: that would trust the search split's ratio of
//! a rare event beyond what its counts show.)

use std::collections::{HashMap, HashSet};

use nalgebra::{DMatrix, DVector};

use super::{epsilon_lower_bound, Releases};
use crate::text::significant;

/// Distinct outcomes beyond which the discrete search does not apply; it does not either when
/// they are more than a tenth of the draws (continuous outputs: every draw is its own outcome).
pub(crate) const MAX_OUTCOMES: usize = 10_000;

/// Outcomes an event's description lists before it says how many more there are.
const LISTED: usize = 12;

/// Dimensions beyond which the linear score is not learnt (Newton's method is cubic in them).
pub(crate) const MAX_LINEAR_DIM: usize = 256;

/// Releases the logistic regression is trained on, at most (the first ones of the split).
const MAX_TRAIN: usize = 200_000;

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
}

impl Searches {
    #[cfg(test)]
    pub(crate) const ALL: Searches = Searches {
        discrete: true,
        scalar: true,
        linear: true,
        support: true,
    };
}

/// A number computed from a release.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Projection {
    /// Its coordinate `j`.
    Coordinate(usize),
    /// `weights · release + offset`.
    Linear { weights: Vec<f64>, offset: f64 },
}

impl Projection {
    pub(crate) fn of(&self, x: &[f64]) -> f64 {
        match self {
            Projection::Coordinate(j) => x[*j],
            Projection::Linear { weights, offset } => {
                weights.iter().zip(x).map(|(w, v)| w * v).sum::<f64>() + offset
            }
        }
    }
}

/// An event on releases.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Event {
    /// The release is one of `outcomes` (compared number by number, bit for bit; −0 = 0).
    Outcomes {
        outcomes: Vec<Vec<f64>>,
        bits: HashSet<Vec<u64>>,
    },
    /// lo ≤ projection < hi; an infinite end makes it a threshold.
    Range {
        projection: Projection,
        lo: f64,
        hi: f64,
    },
}

fn key(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| (v + 0.0).to_bits()).collect()
}

impl Event {
    pub(crate) fn outcomes(outcomes: Vec<Vec<f64>>) -> Self {
        let bits = outcomes.iter().map(|o| key(o)).collect();
        Event::Outcomes { outcomes, bits }
    }

    pub(crate) fn contains(&self, x: &[f64]) -> bool {
        match self {
            Event::Outcomes { bits, .. } => bits.contains(&key(x)),
            Event::Range { projection, lo, hi } => {
                let s = projection.of(x);
                *lo <= s && s < *hi
            }
        }
    }

    /// The event in words: `noisy ≥ 10.7`, `candidate ∈ {r3}`, `2 ≤ noisy[1] < 3.5`.
    /// `name(j)` names coordinate j; `value(j, v)` writes its value v (a label for codes).
    pub(crate) fn describe(
        &self,
        name: &dyn Fn(usize) -> String,
        value: &dyn Fn(usize, f64) -> String,
    ) -> String {
        match self {
            Event::Outcomes { outcomes, .. } => {
                let dim = outcomes.first().map_or(1, Vec::len);
                let what = if dim == 1 {
                    name(0)
                } else {
                    format!("({})", (0..dim).map(name).collect::<Vec<_>>().join(", "))
                };
                let items: Vec<String> = outcomes
                    .iter()
                    .map(|o| {
                        let vs: Vec<String> =
                            o.iter().enumerate().map(|(j, &v)| value(j, v)).collect();
                        if dim == 1 {
                            vs[0].clone()
                        } else {
                            format!("({})", vs.join(", "))
                        }
                    })
                    .collect();
                if items.len() > LISTED {
                    format!(
                        "{what} ∈ {{{}, … ({} outcomes)}}",
                        items[..LISTED].join(", "),
                        items.len()
                    )
                } else {
                    format!("{what} ∈ {{{}}}", items.join(", "))
                }
            }
            Event::Range { projection, lo, hi } => {
                let what = match projection {
                    Projection::Coordinate(j) => name(*j),
                    Projection::Linear { weights, offset } => {
                        let mut s = String::new();
                        for (j, w) in weights.iter().enumerate() {
                            let sign = if w.is_sign_negative() {
                                " − "
                            } else if s.is_empty() {
                                ""
                            } else {
                                " + "
                            };
                            let sign = if s.is_empty() && w.is_sign_negative() {
                                "−"
                            } else {
                                sign
                            };
                            s.push_str(&format!("{sign}{}·{}", significant(w.abs(), 4), name(j)));
                        }
                        let sign = if offset.is_sign_negative() {
                            "−"
                        } else {
                            "+"
                        };
                        format!("{s} {sign} {}", significant(offset.abs(), 4))
                    }
                };
                match (lo.is_finite(), hi.is_finite()) {
                    (true, false) => format!("{what} ≥ {}", significant(*lo, 4)),
                    (false, true) => format!("{what} < {}", significant(*hi, 4)),
                    (true, true) => {
                        format!("{} ≤ {what} < {}", significant(*lo, 4), significant(*hi, 4))
                    }
                    (false, false) => "any output".to_string(),
                }
            }
        }
    }
}

/// A candidate event, its direction, and its bound on the search split.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub event: Event,
    /// true: p₁ on side 0 (x), p₂ on side 1 (x').
    pub forward: bool,
    pub score: f64,
}

/// Keeps the best-scoring candidate; ties keep the first (the searches run in a fixed order).
struct Best<'a> {
    delta: f64,
    confidence: f64,
    na: u64,
    nb: u64,
    /// Validation draws per side (events are scored for it too when it is below na or nb).
    validation: u64,
    best: &'a mut Option<Candidate>,
}

impl Best<'_> {
    /// Scores the event with `ka` of side 0's and `kb` of side 1's draws in it, both ways
    /// (forward first on a tie); `event` is built only for a new best.
    fn offer(&mut self, ka: u64, kb: u64, event: impl FnOnce() -> Event) {
        let current = self.best.as_ref().map_or(0.0, |c| c.score);
        let score = |k1: u64, n1: u64, k2: u64, n2: u64| {
            // The bound never exceeds the plug-in estimate: skip what cannot win.
            let plug_in = (k1 as f64 / n1 as f64 - self.delta) / (k2 as f64 / n2 as f64);
            if plug_in.is_nan() || plug_in <= current.exp() {
                0.0
            } else {
                let here = epsilon_lower_bound(k1, n1, k2, n2, self.delta, self.confidence);
                let v = self.validation;
                if v >= n1 && v >= n2 {
                    return here;
                }
                let expected = |k: u64, n: u64| (k as f64 * v as f64 / n as f64).round() as u64;
                here.min(epsilon_lower_bound(
                    expected(k1, n1),
                    v,
                    expected(k2, n2),
                    v,
                    self.delta,
                    self.confidence,
                ))
            }
        };
        let forward = score(ka, self.na, kb, self.nb);
        let backward = score(kb, self.nb, ka, self.na);
        let (forward, score) = if backward > forward {
            (false, backward)
        } else {
            (true, forward)
        };
        if score > current {
            *self.best = Some(Candidate {
                event: event(),
                forward,
                score,
            });
        }
    }
}

/// The best candidate event separating draws `a` (side 0) from `b` (side 1), over the
/// searches that apply; `None` when none gives a bound above 0.
#[cfg(test)]
pub(crate) fn best(
    a: &Releases,
    b: &Releases,
    searches: Searches,
    delta: f64,
    confidence: f64,
) -> Option<Candidate> {
    best_for(a, b, searches, delta, confidence, u64::MAX)
}

/// [`best`], for a validation split of `validation` draws per side: when it is smaller than
/// the search split, events too rare to be measured on it score less (see the module's
/// documentation).
pub(crate) fn best_for(
    a: &Releases,
    b: &Releases,
    searches: Searches,
    delta: f64,
    confidence: f64,
    validation: u64,
) -> Option<Candidate> {
    let mut best = None;
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut keep = Best {
        delta,
        confidence,
        na: a.total(),
        nb: b.total(),
        validation,
        best: &mut best,
    };
    if searches.discrete {
        discrete(a, b, &mut keep);
    }
    if searches.scalar {
        for j in 0..a.dim {
            ranges(Projection::Coordinate(j), a, b, &mut keep);
        }
    }
    if searches.linear && a.dim >= 2 && a.dim <= MAX_LINEAR_DIM {
        if let Some(p) = logistic(a, b) {
            ranges(p, a, b, &mut keep);
        }
    }
    if searches.support && !discrete_applies(a, b) {
        support(a, b, &mut keep);
    }
    best
}

/// (a) Exact outcomes sorted by their likelihood ratio, every prefix a candidate set.
fn discrete(a: &Releases, b: &Releases, keep: &mut Best) {
    let mut hist: HashMap<Vec<u64>, (u64, u64, usize)> = HashMap::new();
    let mut order: Vec<Vec<f64>> = Vec::new();
    for (side, r) in [a, b].into_iter().enumerate() {
        for i in 0..r.len() {
            let row = r.row(i);
            let next = order.len();
            let e = hist.entry(key(row)).or_insert_with(|| (0, 0, next));
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
    if order.len().saturating_mul(10) as u64 > keep.na + keep.nb {
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
fn discrete_applies(a: &Releases, b: &Releases) -> bool {
    let mut seen: HashSet<Vec<u64>> = HashSet::new();
    for r in [a, b] {
        for i in 0..r.len() {
            seen.insert(key(r.row(i)));
            if seen.len() > MAX_OUTCOMES {
                return false;
            }
        }
    }
    seen.len().saturating_mul(10) as u64 <= a.total() + b.total()
}

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
fn support(a: &Releases, b: &Releases, keep: &mut Best) {
    let halves = |r: &Releases| {
        let mid = r.len() / 2;
        let first: HashSet<Vec<u64>> = (0..mid).map(|i| key(r.row(i))).collect();
        (first, mid..r.len())
    };
    let ((a1, a2), (b1, b2)) = (halves(a), halves(b));
    let count = |r: &Releases,
                 rows: &std::ops::Range<usize>,
                 only: &HashSet<Vec<u64>>,
                 not: &HashSet<Vec<u64>>| {
        rows.clone()
            .filter(|&i| {
                let k = key(r.row(i));
                only.contains(&k) && !not.contains(&k)
            })
            .map(|i| r.counts[i])
            .sum::<u64>()
    };
    let n2 = |r: &Releases, rows: &std::ops::Range<usize>| {
        rows.clone().map(|i| r.counts[i]).sum::<u64>()
    };
    let mut half = Best {
        delta: keep.delta,
        confidence: keep.confidence,
        na: n2(a, &a2),
        nb: n2(b, &b2),
        validation: keep.validation,
        best: keep.best,
    };
    if half.na == 0 || half.nb == 0 {
        return;
    }
    // The set on the whole search split of side `of`, without what the other side drew.
    let whole = |of: &Releases, other: &Releases| {
        let theirs: HashSet<Vec<u64>> = (0..other.len()).map(|i| key(other.row(i))).collect();
        let mut seen = HashSet::new();
        let outcomes = (0..of.len())
            .map(|i| of.row(i))
            .filter(|row| {
                let k = key(row);
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

/// (b) Thresholds and intervals on a projection, at quantiles of the pooled draws.
fn ranges(projection: Projection, a: &Releases, b: &Releases, keep: &mut Best) {
    let sorted = |r: &Releases| {
        let mut v: Vec<(f64, u64)> = (0..r.len())
            .map(|i| (projection.of(r.row(i)), r.counts[i]))
            .collect();
        v.sort_by(|x, y| x.0.total_cmp(&y.0));
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
    let mut pooled: Vec<f64> = sa
        .iter()
        .chain(&sb)
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    pooled.sort_by(f64::total_cmp);
    pooled.dedup();
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

/// (c) A linear score telling side 0 from side 1: a logistic regression on the standardised
/// releases, fitted by Newton's method with a small ridge (which keeps it finite when the
/// sides separate), written back in the releases' own units. Hand-written: a few lines on
/// nalgebra, where a machine-learning crate would bring a tree of dependencies for one fit.
fn logistic(a: &Releases, b: &Releases) -> Option<Projection> {
    let d = a.dim;
    let rows: Vec<(&[f64], f64, f64)> = [(a, 1.0), (b, 0.0)]
        .into_iter()
        .flat_map(|(r, y)| {
            (0..r.len().min(MAX_TRAIN / 2)).map(move |i| (r.row(i), y, r.counts[i] as f64))
        })
        .collect();
    let w_total: f64 = rows.iter().map(|r| r.2).sum();
    let mut mean = vec![0.0; d];
    let mut sd = vec![0.0; d];
    for (x, _, w) in &rows {
        for j in 0..d {
            mean[j] += w * x[j] / w_total;
        }
    }
    for (x, _, w) in &rows {
        for j in 0..d {
            sd[j] += w * (x[j] - mean[j]).powi(2) / w_total;
        }
    }
    let sd: Vec<f64> = sd
        .iter()
        .map(|v| if v.sqrt() > 0.0 { v.sqrt() } else { 1.0 })
        .collect();
    if rows
        .iter()
        .any(|(x, _, _)| x.iter().any(|v| !v.is_finite()))
    {
        return None;
    }
    let z = |x: &[f64], k: usize| if k < d { (x[k] - mean[k]) / sd[k] } else { 1.0 };
    let ridge = 1e-6 * w_total;
    let mut beta = DVector::<f64>::zeros(d + 1);
    for _ in 0..50 {
        let mut h = DMatrix::<f64>::zeros(d + 1, d + 1);
        let mut g = DVector::<f64>::zeros(d + 1);
        for (x, y, w) in &rows {
            let zs: Vec<f64> = (0..=d).map(|k| z(x, k)).collect();
            let eta: f64 = zs.iter().zip(beta.iter()).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-eta).exp());
            let v = w * p * (1.0 - p);
            for k in 0..=d {
                g[k] += w * (y - p) * zs[k];
                for l in 0..=k {
                    h[(k, l)] += v * zs[k] * zs[l];
                }
            }
        }
        for k in 0..=d {
            for l in 0..k {
                h[(l, k)] = h[(k, l)];
            }
            if k < d {
                h[(k, k)] += ridge;
                g[k] -= ridge * beta[k];
            }
        }
        let step = h.cholesky()?.solve(&g);
        beta += &step;
        if step.amax() < 1e-9 {
            break;
        }
    }
    let weights: Vec<f64> = (0..d).map(|j| beta[j] / sd[j]).collect();
    let offset = beta[d] - (0..d).map(|j| beta[j] * mean[j] / sd[j]).sum::<f64>();
    (weights.iter().all(|w| w.is_finite()) && weights.iter().any(|&w| w != 0.0))
        .then_some(Projection::Linear { weights, offset })
}
