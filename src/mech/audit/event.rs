//! Events on a mechanism's releases, and their text: what an audit measures and how its
//! output names it. A projection reads a number off a release (a coordinate, a learnt linear
//! score of its [`Feature`]s); an event is a range of a projection or a set of exact outcomes.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};

use foldhash::fast::FixedState;

use crate::text::significant;

/// Outcomes an event's description lists before it says how many more there are.
const LISTED: usize = 12;

/// A number computed from a release.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Projection {
    /// Its coordinate `j`.
    Coordinate(usize),
    /// The exponent k of coordinate `j`'s lowest set bit: the largest k for which it is a
    /// multiple of 2^k (+∞ for 0; NaN, in no range, for ±∞ and NaN).
    LowBit(usize),
    /// How many significant bits coordinate `j` has: from its leading bit to its lowest set
    /// bit (0 for 0; NaN for ±∞ and NaN).
    Precision(usize),
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
    pub(super) fn at(&self, x: &[f64]) -> f64 {
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
            Projection::LowBit(j) => low_bit(x[*j]),
            Projection::Precision(j) => precision(x[*j]),
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

/// The mantissa (with its leading bit) and the exponent of the unit in its last place, of a
/// finite nonzero `v`: |v| = m·2^e.
fn mantissa(v: f64) -> Option<(u64, i32)> {
    if !v.is_finite() || v == 0.0 {
        return None;
    }
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    Some(if exp == 0 {
        (frac, -1074)
    } else {
        (frac | 1u64 << 52, exp - 1075)
    })
}

fn low_bit(v: f64) -> f64 {
    match mantissa(v) {
        Some((m, e)) => f64::from(e + m.trailing_zeros() as i32),
        None if v == 0.0 => f64::INFINITY,
        None => f64::NAN,
    }
}

fn precision(v: f64) -> f64 {
    match mantissa(v) {
        Some((m, _)) => f64::from(64 - m.leading_zeros() - m.trailing_zeros()),
        None if v == 0.0 => 0.0,
        None => f64::NAN,
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

pub(super) fn key(x: &[f64]) -> Vec<u64> {
    let mut k = Vec::with_capacity(x.len());
    key_into(x, &mut k);
    k
}

/// [`key`] into `out`, which it replaces: one buffer for many releases.
pub(super) fn key_into(x: &[f64], out: &mut Vec<u64>) {
    out.clear();
    out.extend(x.iter().map(|v| (v + 0.0).to_bits()));
}

/// A release's fingerprint, for the sets and histograms the searches build over every draw of
/// the search split: two 64-bit hashes of its numbers' bits (−0 as 0) under two seeds, where
/// [`key`] would allocate a vector per draw. Distinct releases that share one are vanishingly
/// rare among a mechanism's draws (the hash is fast, not cryptographic: a program could make
/// them on purpose), and even then only a candidate's search counts are off: the event the
/// validation split measures keeps its outcomes exact ([`Event::outcomes`]), so the bound
/// stays valid.
pub(super) fn fingerprint(x: &[f64]) -> u128 {
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
                    Projection::LowBit(j) => format!("log₂ of {}'s lowest set bit", name(*j)),
                    Projection::Precision(j) => format!("{}'s significant bits", name(*j)),
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
