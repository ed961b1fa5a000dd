//! The event searches of an audit, and how one event is chosen among them.
//!
//! # Scoring
//! A candidate event is scored by the bound it would give ([`super::epsilon_lower_bound`]) on
//! the counts that score it, which prefers a large likelihood ratio but penalises events too
//! rare to measure; and, when the validation split is smaller than those counts' split, by the
//! bound its expected validation counts would give (the counts scaled down) — the smaller score
//! counts: an event seen 30 times in 10⁴ draws is seen about 3 times in 10³ validation draws,
//! too few for any bound above 0. An event seen fewer than [`MIN_DRAWS`] times on its likelier
//! side is not scored at all (a tail fitted to a handful of draws).
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
//! # Features of a release
//! The linear score (c) is learnt on features of the release, not its raw numbers: a value
//! that recurs in at least [`CODE_SHARE`] of a coordinate's draws is a *code* (a sparse-vector
//! mechanism's −1000 for ⊥, 0/1 answers) and gets an indicator feature; a code outside the
//! range of the coordinate's other values is a label, not a magnitude, and the coordinate's
//! value feature reads the others' mean in its place (else −1000 would swamp every weight); a
//! label code in several coordinates also gets a count feature (how many answers were ⊥) —
//! DP-Sniper's feature map for such outputs (Bichsel et al., S&P'21, §VI).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

use foldhash::fast::FixedState;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

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

/// Rows per block of the logistic regression's sums (fixed, so that the sums are the same on
/// any number of threads).
const BLOCK: usize = 4096;

/// Candidates the first half of the search split hands to the second (see the module doc).
pub(crate) const TOP: usize = 32;

/// Draws on its likelier side below which an event is not scored.
pub(crate) const MIN_DRAWS: u64 = 10;

/// Draws per side and half below which the search split is not halved (too few to choose on
/// half of them): it is then searched whole, as before the halving.
const MIN_HALF: usize = 1_000;

/// Share of a coordinate's draws at which a value that recurs is a code (see the module doc).
pub(crate) const CODE_SHARE: f64 = 0.01;

/// Codes per coordinate, at most (the commonest).
const MAX_CODES: usize = 8;

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
    /// `Σ weights[i] · terms[i](release) + offset`.
    Linear {
        terms: Vec<Feature>,
        weights: Vec<f64>,
        offset: f64,
    },
}

/// A feature of a release (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Feature {
    /// Coordinate `j`'s value, or `fill` when it is one of `labels` (codes that are not
    /// magnitudes).
    Value {
        j: usize,
        labels: Vec<f64>,
        fill: f64,
    },
    /// 1 when coordinate `j` is `code`, else 0.
    Is { j: usize, code: f64 },
    /// How many coordinates are `code`.
    Count { code: f64 },
}

impl Feature {
    fn at(&self, x: &[f64]) -> f64 {
        match self {
            Feature::Value { j, labels, fill } => {
                if labels.contains(&x[*j]) {
                    *fill
                } else {
                    x[*j]
                }
            }
            Feature::Is { j, code } => f64::from(u8::from(x[*j] == *code)),
            Feature::Count { code } => x.iter().filter(|v| **v == *code).count() as f64,
        }
    }

    fn describe(
        &self,
        name: &dyn Fn(usize) -> String,
        value: &dyn Fn(usize, f64) -> String,
    ) -> String {
        match self {
            Feature::Value { j, .. } => name(*j),
            Feature::Is { j, code } => format!("[{} = {}]", name(*j), value(*j, *code)),
            Feature::Count { code } => format!("#({})", value(0, *code)),
        }
    }
}

impl Projection {
    pub(crate) fn of(&self, x: &[f64]) -> f64 {
        match self {
            Projection::Coordinate(j) => x[*j],
            Projection::Linear {
                terms,
                weights,
                offset,
            } => {
                terms
                    .iter()
                    .zip(weights)
                    .map(|(t, w)| w * t.at(x))
                    .sum::<f64>()
                    + offset
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
        bits: HashSet<Vec<u64>, FixedState>,
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

/// A release's fingerprint, for the sets and histograms the searches build over every draw of
/// the search split: two 64-bit hashes of its numbers' bits (−0 as 0) under two seeds, where
/// [`key`] would allocate a vector per draw. Distinct releases that share one are vanishingly
/// rare among a mechanism's draws (the hash is fast, not cryptographic: a program could make
/// them on purpose), and even then only a candidate's search counts are off: the event the
/// validation split measures keeps its outcomes exact ([`Event::outcomes`]), so the bound
/// stays valid.
fn fingerprint(x: &[f64]) -> u128 {
    let half = |seed: u64| {
        let mut h = FixedState::with_seed(seed).build_hasher();
        for v in x {
            h.write_u64((v + 0.0).to_bits());
        }
        h.finish()
    };
    u128::from(half(0x9e37_79b9_7f4a_7c15)) << 64 | u128::from(half(0x243f_6a88_85a3_08d3))
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
                    Projection::Linear {
                        terms,
                        weights,
                        offset,
                    } => {
                        let mut s = String::new();
                        for (t, w) in terms.iter().zip(weights) {
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
                            s.push_str(&format!(
                                "{sign}{}·{}",
                                significant(w.abs(), 4),
                                t.describe(name, value)
                            ));
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

/// A candidate event, its direction, and its score with the counts that gave it.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub event: Event,
    /// true: p₁ on side 0 (x), p₂ on side 1 (x').
    pub forward: bool,
    pub score: f64,
    /// The draws in the event on p₁'s side and on p₂'s, of `n` per side, that scored it (the
    /// second half of the search split when it was halved).
    pub k1: u64,
    pub k2: u64,
    pub n1: u64,
    pub n2: u64,
}

/// How a candidate with k₁ of n₁ draws on p₁'s side and k₂ of n₂ on p₂'s scores (see the
/// module doc): the bound on those counts, and on their expectation at `validation` draws per
/// side when that is fewer; 0 below [`MIN_DRAWS`].
fn score(k1: u64, n1: u64, k2: u64, n2: u64, delta: f64, confidence: f64, validation: u64) -> f64 {
    if k1 < MIN_DRAWS {
        return 0.0;
    }
    let here = epsilon_lower_bound(k1, n1, k2, n2, delta, confidence);
    let v = validation;
    if v >= n1 && v >= n2 {
        return here;
    }
    let expected = |k: u64, n: u64| (k as f64 * v as f64 / n as f64).round() as u64;
    here.min(epsilon_lower_bound(
        expected(k1, n1),
        v,
        expected(k2, n2),
        v,
        delta,
        confidence,
    ))
}

/// Keeps the `keep` best-scoring candidates, best first; ties keep the earlier (the searches
/// run in a fixed order).
struct Best<'a> {
    rule: Rule,
    best: &'a mut Vec<Candidate>,
}

/// What a [`Best`] scores and keeps by: the claimed δ, the confidence, the draws per side, and
/// how many candidates it keeps. Searches run side by side each keep by a copy of one rule.
#[derive(Clone, Copy)]
struct Rule {
    delta: f64,
    confidence: f64,
    na: u64,
    nb: u64,
    /// Validation draws per side (events are scored for it too when it is below na or nb).
    validation: u64,
    keep: usize,
}

impl<'a> Best<'a> {
    /// Keeps `keep` candidates separating `a` from `b` in `best`.
    fn over(
        (a, b): (&Releases, &Releases),
        (delta, confidence, validation): (f64, f64, u64),
        keep: usize,
        best: &'a mut Vec<Candidate>,
    ) -> Self {
        Best {
            rule: Rule {
                delta,
                confidence,
                na: a.total(),
                nb: b.total(),
                validation,
                keep,
            },
            best,
        }
    }

    /// The score a candidate must beat to be kept.
    fn floor(&self) -> f64 {
        if self.best.len() < self.rule.keep {
            0.0
        } else {
            self.best.last().map_or(0.0, |c| c.score)
        }
    }

    /// Scores the event with `ka` of side 0's and `kb` of side 1's draws in it, both ways
    /// (forward first on a tie); `event` is built only when it is kept.
    fn offer(&mut self, ka: u64, kb: u64, event: impl FnOnce() -> Event) {
        let floor = self.floor();
        let rate = |k1: u64, n1: u64, k2: u64, n2: u64| {
            // The bound never exceeds the plug-in estimate: skip what cannot be kept.
            let plug_in = (k1 as f64 / n1 as f64 - self.rule.delta) / (k2 as f64 / n2 as f64);
            if plug_in.is_nan() || plug_in <= floor.exp() {
                0.0
            } else {
                score(
                    k1,
                    n1,
                    k2,
                    n2,
                    self.rule.delta,
                    self.rule.confidence,
                    self.rule.validation,
                )
            }
        };
        let forward = rate(ka, self.rule.na, kb, self.rule.nb);
        let backward = rate(kb, self.rule.nb, ka, self.rule.na);
        let (forward, score) = if backward > forward {
            (false, backward)
        } else {
            (true, forward)
        };
        if score > floor {
            let (k1, n1, k2, n2) = if forward {
                (ka, self.rule.na, kb, self.rule.nb)
            } else {
                (kb, self.rule.nb, ka, self.rule.na)
            };
            self.take(Candidate {
                event: event(),
                forward,
                score,
                k1,
                k2,
                n1,
                n2,
            });
        }
    }

    /// Keeps a candidate scored elsewhere if it beats the floor (after those of equal score).
    fn take(&mut self, c: Candidate) {
        if c.score > self.floor() {
            let at = self.best.partition_point(|b| b.score >= c.score);
            self.best.insert(at, c);
            self.best.truncate(self.rule.keep);
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

/// [`best`], for a validation split of `validation` draws per side, chosen as the module doc
/// says: on halves of the search split when its releases are single draws.
pub(crate) fn best_for(
    a: &Releases,
    b: &Releases,
    searches: Searches,
    delta: f64,
    confidence: f64,
    validation: u64,
) -> Option<Candidate> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let rule = (delta, confidence, validation);
    // The support search runs beside the others, and its best is offered after theirs.
    let (mut found, beside) = rayon::join(
        || chosen(a, b, searches, rule),
        || {
            let mut kept = Vec::new();
            if searches.support && !discrete_applies(a, b) {
                support(a, b, &mut Best::over((a, b), rule, 1, &mut kept));
            }
            kept
        },
    );
    let mut keep = Best::over((a, b), rule, 1, &mut found);
    for c in beside {
        keep.take(c);
    }
    found.into_iter().next()
}

/// The best of the discrete, scalar and linear searches (at most one), chosen on halves when
/// the releases are single draws (the module doc).
fn chosen(a: &Releases, b: &Releases, searches: Searches, rule: (f64, f64, u64)) -> Vec<Candidate> {
    let (delta, confidence, validation) = rule;
    let single = |r: &Releases| r.counts.iter().all(|&c| c == 1) && r.len() >= 2 * MIN_HALF;
    let mut found = Vec::new();
    if single(a) && single(b) {
        let (a1, a2) = a.halves();
        let (b1, b2) = b.halves();
        let mut top = Vec::new();
        let mut keep = Best::over((&a1, &b1), rule, TOP, &mut top);
        searched(&a1, &b1, searches, &mut keep);
        let (na, nb) = (a2.total(), b2.total());
        // Most candidates are ranges of a few projections (the linear score's above all):
        // each projection is computed once per release of the second half, not per candidate.
        let mut distinct: Vec<&Projection> = Vec::new();
        for c in &top {
            if let Event::Range { projection, .. } = &c.event {
                if !distinct.contains(&projection) {
                    distinct.push(projection);
                }
            }
        }
        let projected: Vec<[Vec<f64>; 2]> = distinct
            .par_iter()
            .map(|p| [&a2, &b2].map(|r| (0..r.len()).map(|i| p.of(r.row(i))).collect()))
            .collect();
        let count = |event: &Event, side: usize| -> u64 {
            let r = if side == 0 { &a2 } else { &b2 };
            let Event::Range { projection, lo, hi } = event else {
                return r.count_in(event);
            };
            let at = distinct.iter().position(|p| *p == projection);
            let Some(values) = at.map(|i| &projected[i][side]) else {
                return r.count_in(event);
            };
            values
                .iter()
                .zip(&r.counts)
                .filter(|(v, _)| *lo <= **v && **v < *hi)
                .map(|(_, c)| c)
                .sum()
        };
        let counted: Vec<(u64, u64)> = top
            .par_iter()
            .map(|c| (count(&c.event, 0), count(&c.event, 1)))
            .collect();
        for (c, (ka, kb)) in top.iter().zip(counted) {
            let (k1, n1, k2, n2) = if c.forward {
                (ka, na, kb, nb)
            } else {
                (kb, nb, ka, na)
            };
            let score = score(k1, n1, k2, n2, delta, confidence, validation);
            if score > 0.0 && found.first().is_none_or(|b: &Candidate| score > b.score) {
                found = vec![Candidate {
                    score,
                    k1,
                    k2,
                    n1,
                    n2,
                    ..c.clone()
                }];
            }
        }
    } else {
        searched(a, b, searches, &mut Best::over((a, b), rule, 1, &mut found));
    }
    found
}

/// The discrete, scalar and linear searches, each where it applies. They run side by side,
/// each keeping its own best, which are then offered in this fixed order: the result does not
/// depend on the number of threads.
fn searched(a: &Releases, b: &Releases, searches: Searches, keep: &mut Best) {
    #[derive(Clone, Copy)]
    enum Task {
        Discrete,
        Coordinate(usize),
        Linear,
    }
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
    let rule = keep.rule;
    let found: Vec<Vec<Candidate>> = tasks
        .into_par_iter()
        .map(|task| {
            let mut own = Vec::new();
            let mut k = Best {
                rule,
                best: &mut own,
            };
            match task {
                Task::Discrete => discrete(a, b, &mut k),
                Task::Coordinate(j) => ranges(Projection::Coordinate(j), a, b, &mut k),
                Task::Linear => {
                    if let Some(p) = logistic(a, b) {
                        ranges(p, a, b, &mut k);
                    }
                }
            }
            own
        })
        .collect();
    for c in found.into_iter().flatten() {
        keep.take(c);
    }
}

/// (a) Exact outcomes sorted by their likelihood ratio, every prefix a candidate set.
fn discrete(a: &Releases, b: &Releases, keep: &mut Best) {
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
fn discrete_applies(a: &Releases, b: &Releases) -> bool {
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
        let first: HashSet<u128, FixedState> = (0..mid).map(|i| fingerprint(r.row(i))).collect();
        (first, mid..r.len())
    };
    let ((a1, a2), (b1, b2)) = (halves(a), halves(b));
    let count = |r: &Releases,
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
    let n2 = |r: &Releases, rows: &std::ops::Range<usize>| {
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
    let whole = |of: &Releases, other: &Releases| {
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

/// (b) Thresholds and intervals on a projection, at quantiles of the pooled draws.
fn ranges(projection: Projection, a: &Releases, b: &Releases, keep: &mut Best) {
    let sorted = |r: &Releases| {
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

/// The features of releases like `rows` (see the module doc): per coordinate its value (its
/// label codes read as the others' mean) unless every value is a code, an indicator per code,
/// and a count per label code that several coordinates hold. `None` beyond
/// [`MAX_LINEAR_DIM`] features.
fn features(rows: &[(&[f64], f64, f64)], d: usize) -> Option<Vec<Feature>> {
    let total: f64 = rows.iter().map(|r| r.2).sum();
    let mut out = Vec::new();
    let mut label_in: Vec<(u64, usize)> = Vec::new();
    for j in 0..d {
        let mut seen: HashMap<u64, f64, FixedState> = HashMap::default();
        for (x, _, w) in rows {
            *seen.entry((x[j] + 0.0).to_bits()).or_default() += w;
        }
        let mut codes: Vec<(f64, f64)> = seen
            .iter()
            .filter(|(_, &w)| w >= CODE_SHARE * total)
            .map(|(&b, &w)| (f64::from_bits(b), w))
            .collect();
        // The commonest first, then by value: the same codes whatever the hash's order.
        codes.sort_by(|p, q| q.1.total_cmp(&p.1).then(p.0.total_cmp(&q.0)));
        codes.truncate(MAX_CODES);
        let mut codes: Vec<f64> = codes.into_iter().map(|c| c.0).collect();
        codes.sort_by(f64::total_cmp);
        let others = || {
            rows.iter()
                .map(|r| (r.0[j], r.2))
                .filter(|(v, _)| !codes.contains(v))
        };
        let (lo, hi, sum, weight) = others().fold(
            (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.0),
            |(lo, hi, s, n), (v, w)| (lo.min(v), hi.max(v), s + w * v, n + w),
        );
        if weight > 0.0 {
            let labels: Vec<f64> = codes
                .iter()
                .copied()
                .filter(|&c| c < lo || c > hi)
                .collect();
            for &c in &labels {
                match label_in.iter_mut().find(|(b, _)| *b == c.to_bits()) {
                    Some((_, n)) => *n += 1,
                    None => label_in.push((c.to_bits(), 1)),
                }
            }
            out.push(Feature::Value {
                j,
                labels,
                fill: sum / weight,
            });
        }
        // A coordinate of codes only needs one indicator fewer than it has codes.
        let skip = usize::from(weight == 0.0);
        out.extend(codes.iter().skip(skip).map(|&code| Feature::Is { j, code }));
    }
    out.extend(
        label_in
            .iter()
            .filter(|(_, n)| *n >= 2)
            .map(|(b, _)| Feature::Count {
                code: f64::from_bits(*b),
            }),
    );
    (out.len() <= MAX_LINEAR_DIM && !out.is_empty()).then_some(out)
}

/// [`logistic`], for the tests of the features it learns on.
#[cfg(test)]
pub(crate) fn logistic_for_tests(a: &Releases, b: &Releases) -> Option<Projection> {
    logistic(a, b)
}

/// (c) A linear score telling side 0 from side 1: a logistic regression on the standardised
/// [`features`] of the releases, fitted by Newton's method with a small ridge (which keeps it
/// finite when the sides separate), written back in the features' own units. Hand-written: a
/// few lines on nalgebra, where a machine-learning crate would bring a tree of dependencies
/// for one fit.
fn logistic(a: &Releases, b: &Releases) -> Option<Projection> {
    let raw: Vec<(&[f64], f64, f64)> = [(a, 1.0), (b, 0.0)]
        .into_iter()
        .flat_map(|(r, y)| {
            (0..r.len().min(MAX_TRAIN / 2)).map(move |i| (r.row(i), y, r.counts[i] as f64))
        })
        .collect();
    if raw.iter().any(|(x, _, _)| x.iter().any(|v| !v.is_finite())) {
        return None;
    }
    let terms = features(&raw, a.dim)?;
    let d = terms.len();
    let w_total: f64 = raw.iter().map(|r| r.2).sum();
    // The features of every row, once, row after row.
    let mut x: Vec<f64> = Vec::with_capacity(raw.len() * d);
    for (r, _, _) in &raw {
        x.extend(terms.iter().map(|t| t.at(r)));
    }
    let mut mean = vec![0.0; d];
    let mut sd = vec![0.0; d];
    for (row, (_, _, w)) in x.chunks_exact(d).zip(&raw) {
        for j in 0..d {
            mean[j] += w * row[j] / w_total;
        }
    }
    for (row, (_, _, w)) in x.chunks_exact(d).zip(&raw) {
        for j in 0..d {
            sd[j] += w * (row[j] - mean[j]).powi(2) / w_total;
        }
    }
    let sd: Vec<f64> = sd
        .iter()
        .map(|v| if v.sqrt() > 0.0 { v.sqrt() } else { 1.0 })
        .collect();
    // Standardised, with the intercept's 1 last: row i is z[i·e .. (i+1)·e].
    let e = d + 1;
    let mut z: Vec<f64> = Vec::with_capacity(raw.len() * e);
    for row in x.chunks_exact(d) {
        z.extend((0..d).map(|k| (row[k] - mean[k]) / sd[k]));
        z.push(1.0);
    }
    drop(x);
    let labels: Vec<(f64, f64)> = raw.iter().map(|r| (r.1, r.2)).collect();
    let ridge = 1e-6 * w_total;
    let mut beta = DVector::<f64>::zeros(e);
    for _ in 0..50 {
        // The gradient and the Hessian's lower triangle, summed over blocks of rows side by
        // side, then block after block in order: the same sums on any number of threads.
        let parts: Vec<(Vec<f64>, Vec<f64>)> = z
            .par_chunks(BLOCK * e)
            .zip(labels.par_chunks(BLOCK))
            .map(|(zs, ys)| {
                let mut g = vec![0.0; e];
                let mut h = vec![0.0; e * e];
                for (row, (y, w)) in zs.chunks_exact(e).zip(ys) {
                    let eta: f64 = row.iter().zip(beta.iter()).map(|(a, b)| a * b).sum();
                    let p = 1.0 / (1.0 + (-eta).exp());
                    let v = w * p * (1.0 - p);
                    let r = w * (y - p);
                    for k in 0..e {
                        g[k] += r * row[k];
                        let vk = v * row[k];
                        let hk = &mut h[k * e..k * e + k + 1];
                        for (hl, zl) in hk.iter_mut().zip(&row[..=k]) {
                            *hl += vk * zl;
                        }
                    }
                }
                (g, h)
            })
            .collect();
        let mut h = DMatrix::<f64>::zeros(e, e);
        let mut g = DVector::<f64>::zeros(e);
        for (pg, ph) in &parts {
            for k in 0..e {
                g[k] += pg[k];
                for l in 0..=k {
                    h[(k, l)] += ph[k * e + l];
                }
            }
        }
        for k in 0..e {
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
    (weights.iter().all(|w| w.is_finite()) && weights.iter().any(|&w| w != 0.0)).then_some(
        Projection::Linear {
            terms,
            weights,
            offset,
        },
    )
}
