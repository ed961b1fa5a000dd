//! Exact interval sets: finite unions of closed intervals of the real line with integer
//! endpoints, kept sorted and disjoint, with linear-time union, difference, dilation and
//! Minkowski sum.
//!
//! The set constructions of Wu, He & Xia 2017 (Algorithm 1, see [`super::near_optimal`])
//! take thousands of unions and differences in a row; in floating point the endpoints drift
//! and a gap that should close exactly stays open by 1e−13 (or the reverse), which changes
//! the step at which the sequence converges. Here every endpoint is an integer in units of
//! a fixed `1/den` chosen by the caller ([`Decimal`] and [`Scale`] turn the decimals a user
//! typed into such integers), so every operation is exact.
//!
//! # Endpoint convention
//! Every interval is closed, `[lo, hi]`, as the paper writes them. A difference `X \ Y` is
//! stored as its closure (the pieces of `X \ Y` are open where they meet `Y`; adding those
//! boundary points changes no length, no integral and no density away from finitely many
//! points). How two pieces that only *touch* (`[0, 5]` and `[5, 9]`) are stored is the
//! [`Touching`] convention: as one interval ([`Touching::Merge`], the point-set reading of
//! closed sets, the default) or as two ([`Touching::Separate`], as if the pieces were open
//! and their common point were a gap). The two conventions describe the same measures but
//! count components differently, which can move the step at which Definition 2 sees a
//! single interval. Operations keep the convention of their left operand.

use std::cmp::Ordering;

use super::ParamRangeError;

/// Integer endpoints in units of `1/den` of the caller's [`Scale`].
pub(crate) type Int = i128;

/// A closed interval `[lo, hi]`, `lo ≤ hi` (`lo = hi` is a single point).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Interval {
    pub lo: Int,
    pub hi: Int,
}

impl Interval {
    pub fn new(lo: Int, hi: Int) -> Self {
        debug_assert!(lo <= hi, "interval [{lo}, {hi}] is reversed");
        Interval { lo, hi }
    }

    /// `hi − lo` (an interval always holds at least its endpoints, so no `is_empty`).
    pub(crate) fn length(&self) -> Int {
        self.hi - self.lo
    }

    pub(crate) fn is_point(&self) -> bool {
        self.lo == self.hi
    }
}

/// How touching pieces are stored (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Touching {
    /// `[0, 5] ∪ [5, 9]` is stored as `[0, 9]`: the point-set reading of closed sets.
    #[default]
    Merge,
    /// `[0, 5] ∪ [5, 9]` stays two pieces: pieces merge only when they overlap in more than
    /// a point. A single point is never a piece of its own next to an interval that
    /// contains or touches it (a point is no gap).
    Separate,
}

impl Touching {
    /// Whether `next` (with `next.lo ≥ cur.lo`) joins `cur` into one piece.
    #[inline]
    fn joins(self, cur: &Interval, next: &Interval) -> bool {
        match self {
            Touching::Merge => next.lo <= cur.hi,
            Touching::Separate => {
                next.lo < cur.hi || (next.lo == cur.hi && (cur.is_point() || next.is_point()))
            }
        }
    }
}

/// A finite union of closed intervals: sorted by `lo`, pairwise disjoint except where the
/// [`Touching::Separate`] convention keeps touching pieces apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct IntervalSet {
    pieces: Vec<Interval>,
    touching: Touching,
}

/// Appends `iv` to a canonical list whose last `lo` is ≤ `iv.lo`, joining it to the last
/// piece when the convention says so.
#[inline]
fn push_canonical(out: &mut Vec<Interval>, iv: Interval, touching: Touching) {
    if let Some(last) = out.last_mut() {
        if touching.joins(last, &iv) {
            if iv.hi > last.hi {
                last.hi = iv.hi;
            }
            return;
        }
    }
    out.push(iv);
}

impl IntervalSet {
    pub(crate) fn empty(touching: Touching) -> Self {
        IntervalSet {
            pieces: Vec::new(),
            touching,
        }
    }

    /// The set `{x}`.
    pub(crate) fn point(x: Int, touching: Touching) -> Self {
        IntervalSet {
            pieces: vec![Interval::new(x, x)],
            touching,
        }
    }

    /// The union of arbitrary intervals (any order, overlaps allowed); `O(k log k)`.
    pub(crate) fn from_intervals(mut v: Vec<Interval>, touching: Touching) -> Self {
        v.sort_unstable_by(|a, b| a.lo.cmp(&b.lo).then(b.hi.cmp(&a.hi)));
        let mut pieces = Vec::with_capacity(v.len());
        for iv in v {
            push_canonical(&mut pieces, iv, touching);
        }
        IntervalSet { pieces, touching }
    }

    pub(crate) fn pieces(&self) -> &[Interval] {
        &self.pieces
    }

    /// Number of stored pieces (components under [`Touching::Merge`]).
    pub(crate) fn len(&self) -> usize {
        self.pieces.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Lebesgue measure, exactly, in units of `1/den`.
    pub(crate) fn measure(&self) -> Int {
        self.pieces.iter().map(Interval::length).sum()
    }

    pub(crate) fn max(&self) -> Option<Int> {
        self.pieces.last().map(|p| p.hi)
    }

    /// Whether `x` is in the set; `O(log k)`.
    #[cfg(test)]
    pub(crate) fn contains(&self, x: Int) -> bool {
        // The last piece starting at or before x is the only candidate: an earlier one
        // reaching x would overlap it (or, under `Separate`, touch it at x, where the later
        // piece contains x as well).
        let i = self.pieces.partition_point(|p| p.lo <= x);
        i > 0 && self.pieces[i - 1].hi >= x
    }

    /// `X ∪ Y`: one merge pass, `O(|X| + |Y|)`.
    pub(crate) fn union(&self, other: &IntervalSet) -> IntervalSet {
        let touching = self.touching;
        let (a, b) = (&self.pieces, &other.pieces);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let take_a = j == b.len()
                || (i < a.len()
                    && match a[i].lo.cmp(&b[j].lo) {
                        Ordering::Less => true,
                        Ordering::Greater => false,
                        Ordering::Equal => a[i].hi >= b[j].hi,
                    });
            let iv = if take_a {
                i += 1;
                a[i - 1]
            } else {
                j += 1;
                b[j - 1]
            };
            push_canonical(&mut out, iv, touching);
        }
        IntervalSet {
            pieces: out,
            touching,
        }
    }

    /// The closure of `X \ Y` (see the module documentation), `O(|X| + |Y|)`.
    ///
    /// A point of `X` that lies in `Y` is removed, so `{0} \ [0, 1] = ∅`; a piece of `X`
    /// cut by a single point of `Y` gives two touching pieces, which [`Touching::Merge`]
    /// joins again (removing one point leaves the closure unchanged).
    pub(crate) fn difference(&self, other: &IntervalSet) -> IntervalSet {
        let touching = self.touching;
        let y = &other.pieces;
        let mut out = Vec::with_capacity(self.pieces.len() + 2);
        let mut j = 0;
        for x in &self.pieces {
            // Pieces of Y entirely left of x can never meet a later piece of X either.
            while j < y.len() && y[j].hi < x.lo {
                j += 1;
            }
            let mut cur = x.lo;
            // Whether `cur` itself lies in Y (then it is not a point of X \ Y).
            let mut cur_removed = false;
            let mut k = j;
            while k < y.len() && y[k].lo <= x.hi {
                let yk = y[k];
                if yk.lo > cur {
                    push_canonical(&mut out, Interval::new(cur, yk.lo), touching);
                }
                if yk.hi >= cur {
                    cur = yk.hi;
                    cur_removed = true;
                }
                if yk.hi > x.hi {
                    break;
                }
                k += 1;
            }
            // A piece of Y reaching past x may cut the next piece of X too: resume there.
            j = k.min(y.len());
            if cur < x.hi || (cur == x.hi && !cur_removed) {
                push_canonical(&mut out, Interval::new(cur, x.hi), touching);
            }
        }
        IntervalSet {
            pieces: out,
            touching,
        }
    }

    /// `X ⊕ [−d, d]`: every point moved by at most `d ≥ 0`.
    pub(crate) fn dilate(&self, d: Int) -> IntervalSet {
        debug_assert!(d >= 0);
        let mut out = Vec::with_capacity(self.pieces.len());
        for p in &self.pieces {
            push_canonical(&mut out, Interval::new(p.lo - d, p.hi + d), self.touching);
        }
        IntervalSet {
            pieces: out,
            touching: self.touching,
        }
    }

    /// `X ⊕ [lo, hi] = {x + w : x ∈ X, lo ≤ w ≤ hi}`; order is preserved, so one pass.
    pub(crate) fn shifted(&self, w: Interval) -> IntervalSet {
        let mut out = Vec::with_capacity(self.pieces.len());
        for p in &self.pieces {
            push_canonical(
                &mut out,
                Interval::new(p.lo + w.lo, p.hi + w.hi),
                self.touching,
            );
        }
        IntervalSet {
            pieces: out,
            touching: self.touching,
        }
    }

    /// `X ⊕ W` for a set `W` given by its pieces: the union of the shifted copies, merged
    /// pairwise so that the cost is `O(|X|·|W|·log|W|)`.
    pub(crate) fn minkowski(&self, w: &[Interval]) -> IntervalSet {
        let mut parts: Vec<IntervalSet> = w.iter().map(|&wi| self.shifted(wi)).collect();
        if parts.is_empty() {
            return IntervalSet::empty(self.touching);
        }
        while parts.len() > 1 {
            let mut next = Vec::with_capacity(parts.len().div_ceil(2));
            let mut it = parts.into_iter();
            while let Some(a) = it.next() {
                next.push(match it.next() {
                    Some(b) => a.union(&b),
                    None => a,
                });
            }
            parts = next;
        }
        parts
            .pop()
            .unwrap_or_else(|| IntervalSet::empty(self.touching))
    }

    /// `{−x : x ∈ X}`.
    #[cfg(test)]
    pub(crate) fn negated(&self) -> IntervalSet {
        let pieces = self
            .pieces
            .iter()
            .rev()
            .map(|p| Interval::new(-p.hi, -p.lo))
            .collect();
        IntervalSet {
            pieces,
            touching: self.touching,
        }
    }

    /// The part in `[0, ∞)` (a piece straddling 0 is cut at 0).
    pub(crate) fn non_negative_half(&self) -> Vec<Interval> {
        let start = self.pieces.partition_point(|p| p.hi < 0);
        self.pieces[start..]
            .iter()
            .map(|p| Interval::new(p.lo.max(0), p.hi))
            .collect()
    }

    /// The same points stored under another [`Touching`] convention.
    #[cfg(test)]
    pub(crate) fn with_touching(&self, touching: Touching) -> IntervalSet {
        let mut out = Vec::with_capacity(self.pieces.len());
        for &p in &self.pieces {
            push_canonical(&mut out, p, touching);
        }
        IntervalSet {
            pieces: out,
            touching,
        }
    }

    /// Whether the stored form is canonical: sorted, `lo ≤ hi`, and no two consecutive
    /// pieces that the convention would join.
    #[cfg(test)]
    pub(crate) fn is_canonical(&self) -> bool {
        self.pieces.iter().all(|p| p.lo <= p.hi)
            && self
                .pieces
                .windows(2)
                .all(|w| w[0].lo <= w[1].lo && !self.touching.joins(&w[0], &w[1]))
    }
}

/// A decimal number exactly as written: `mantissa · 10^(−decimals)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decimal {
    pub mantissa: i128,
    pub decimals: u32,
}

/// At most this many digits after the decimal point: enough for the grids pipeline files
/// write (`linspace`/`logspace` values are tidied to 15 significant digits, so values down
/// to 0.001 have at most 18 decimals), while the
/// endpoints of thousands of Minkowski steps still fit in an `i128` (see [`Scale`]).
pub(crate) const MAX_DECIMALS: u32 = 18;

/// Magnitudes above this are refused: an endpoint after a million steps then stays below
/// 10^6 · 10^9 · 10^18 = 10^33, inside `i128` (1.7·10^38).
pub(crate) const MAX_MAGNITUDE: f64 = 1e9;

impl Decimal {
    /// The shortest decimal that reads back as `x` (what the user typed, for any number
    /// with at most 15–17 significant digits), as an exact rational.
    pub(crate) fn from_f64(name: &'static str, x: f64) -> Result<Self, ParamRangeError> {
        let bad = |valid: String| ParamRangeError {
            name,
            value: x.to_string(),
            valid,
        };
        if !x.is_finite() || x.abs() > MAX_MAGNITUDE {
            return Err(bad(format!(
                "must be a finite number of magnitude at most {MAX_MAGNITUDE:e}"
            )));
        }
        // Rust's `Display` for f64 is the shortest round-trip decimal, never in exponent form.
        let text = format!("{x}");
        let (int_part, frac_part) = match text.split_once('.') {
            Some((i, f)) => (i, f),
            None => (text.as_str(), ""),
        };
        let decimals = frac_part.len() as u32;
        if decimals > MAX_DECIMALS {
            return Err(bad(format!(
                "has {decimals} digits after the decimal point; exact interval arithmetic \
                 takes at most {MAX_DECIMALS} (round the value, e.g. write the grid with a \
                 coarser step)"
            )));
        }
        let digits: String = int_part.chars().chain(frac_part.chars()).collect();
        let mantissa: i128 = digits
            .parse()
            .map_err(|_| bad("must be a plain decimal number".into()))?;
        Ok(Decimal { mantissa, decimals }.normalised())
    }

    fn normalised(mut self) -> Self {
        while self.decimals > 0 && self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.decimals -= 1;
        }
        self
    }

    pub(crate) fn to_f64(self) -> f64 {
        self.mantissa as f64 / 10f64.powi(self.decimals as i32)
    }
}

/// The common unit `1/den`, `den = 10^decimals`, in which a computation expresses all its
/// decimals as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scale {
    decimals: u32,
}

impl Scale {
    /// The coarsest unit in which every one of `values` is an integer.
    pub(crate) fn common(values: impl IntoIterator<Item = Decimal>) -> Self {
        Scale {
            decimals: values.into_iter().map(|d| d.decimals).max().unwrap_or(0),
        }
    }

    pub(crate) fn den(self) -> Int {
        10i128.pow(self.decimals)
    }

    /// `d` in units of `1/den` (exact: `den` is a multiple of `d`'s denominator).
    pub(crate) fn units(self, d: Decimal) -> Int {
        debug_assert!(d.decimals <= self.decimals);
        d.mantissa * 10i128.pow(self.decimals - d.decimals)
    }

    /// An integer number of units as a real number (rounded once).
    pub(crate) fn to_f64(self, units: Int) -> f64 {
        units as f64 / self.den() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    fn random_set(rng: &mut Pcg64Mcg, touching: Touching) -> IntervalSet {
        // Even endpoints on a small range, so that overlaps, touching pieces, points and
        // nested pieces all occur often; odd numbers are then never endpoints.
        let k = rng.random_range(0..8);
        let v = (0..k)
            .map(|_| {
                let lo = 2 * rng.random_range(-20i128..20);
                let len = if rng.random_bool(0.2) {
                    0
                } else {
                    2 * rng.random_range(0i128..8)
                };
                Interval::new(lo, lo + len)
            })
            .collect();
        IntervalSet::from_intervals(v, touching)
    }

    /// Membership of the odd points in [−61, 61], which are never endpoints, so that the
    /// closure in `difference` cannot change it.
    fn odd_members(s: &IntervalSet) -> Vec<bool> {
        (-30..=30).map(|k| s.contains(2 * k + 1)).collect()
    }

    const CASES: usize = 4000;

    /// Union and difference agree pointwise with the Boolean operations, the result is
    /// canonical, and the usual laws hold, over 4000 random pairs per convention.
    #[test]
    fn union_and_difference_obey_set_laws() {
        for touching in [Touching::Merge, Touching::Separate] {
            let mut rng = Pcg64Mcg::seed_from_u64(17);
            for _ in 0..CASES {
                let a = random_set(&mut rng, touching);
                let b = random_set(&mut rng, touching);
                let c = random_set(&mut rng, touching);
                let (ma, mb) = (odd_members(&a), odd_members(&b));
                let u = a.union(&b);
                let d = a.difference(&b);
                assert!(u.is_canonical() && d.is_canonical(), "{a:?} {b:?}");
                let (mu, md) = (odd_members(&u), odd_members(&d));
                for (k, (&x, &y)) in ma.iter().zip(&mb).enumerate() {
                    assert_eq!(mu[k], x || y);
                    assert_eq!(md[k], x && !y, "{a:?} \\ {b:?} = {d:?}");
                }
                // Commutativity, associativity, idempotence (stored forms are equal).
                assert_eq!(u, b.union(&a));
                assert_eq!(u.union(&c), a.union(&b.union(&c)));
                assert_eq!(a.union(&a), a);
                // (A \ B) ∪ B = A ∪ B as closed sets: equal once touching pieces merge.
                assert_eq!(
                    d.union(&b).with_touching(Touching::Merge),
                    u.with_touching(Touching::Merge)
                );
                // μ(A ∪ B) = μ(A) + μ(B \ A), and A \ A is empty.
                assert_eq!(u.measure(), a.measure() + b.difference(&a).measure());
                assert!(a.difference(&a).is_empty());
                // De Morgan inside a box: A \ (B ∪ C) = (A \ B) \ C.
                assert_eq!(
                    a.difference(&b.union(&c)).with_touching(Touching::Merge),
                    d.difference(&c).with_touching(Touching::Merge)
                );
                // The conventions differ only in how touching pieces are stored.
                assert_eq!(
                    u.with_touching(Touching::Merge),
                    a.with_touching(Touching::Merge)
                        .union(&b.with_touching(Touching::Merge))
                );
            }
        }
    }

    #[test]
    fn dilation_and_minkowski_agree_with_their_definitions() {
        let mut rng = Pcg64Mcg::seed_from_u64(29);
        for _ in 0..CASES {
            let a = random_set(&mut rng, Touching::Merge);
            let b = random_set(&mut rng, Touching::Merge);
            let d = 2 * rng.random_range(0i128..4);
            // Dilation distributes over union.
            assert_eq!(a.union(&b).dilate(d), a.dilate(d).union(&b.dilate(d)));
            // x ∈ A ⊕ [−d, d] ⟺ some point of A within d of x (checked on odd x).
            let da = a.dilate(d);
            for k in -40..=40 {
                let x = 2 * k + 1;
                let near = a.pieces().iter().any(|p| p.lo - d <= x && x <= p.hi + d);
                assert_eq!(da.contains(x), near);
            }
            // A ⊕ W through shifted copies equals the sort-based union of all sums.
            let w = random_set(&mut rng, Touching::Merge);
            let brute: Vec<Interval> = a
                .pieces()
                .iter()
                .flat_map(|p| {
                    w.pieces()
                        .iter()
                        .map(move |q| Interval::new(p.lo + q.lo, p.hi + q.hi))
                })
                .collect();
            assert_eq!(
                a.minkowski(w.pieces()),
                IntervalSet::from_intervals(brute, Touching::Merge)
            );
            assert!(a.negated().negated() == a && a.negated().is_canonical());
        }
    }

    #[test]
    fn closure_conventions_on_small_cases() {
        let m = Touching::Merge;
        let s = Touching::Separate;
        let set = |v: &[(i128, i128)], t| {
            IntervalSet::from_intervals(v.iter().map(|&(a, b)| Interval::new(a, b)).collect(), t)
        };
        // Touching pieces: one under Merge, two under Separate; a point is absorbed.
        assert_eq!(set(&[(0, 5), (5, 9)], m).len(), 1);
        assert_eq!(set(&[(0, 5), (5, 9)], s).len(), 2);
        assert_eq!(set(&[(0, 5), (5, 5)], s).len(), 1);
        // Removing a point: invisible under Merge, a seam under Separate.
        let cut = set(&[(0, 10)], m).difference(&IntervalSet::point(4, m));
        assert_eq!(cut, set(&[(0, 10)], m));
        let cut = set(&[(0, 10)], s).difference(&IntervalSet::point(4, s));
        assert_eq!(cut.pieces(), &[Interval::new(0, 4), Interval::new(4, 10)]);
        // A point of X inside Y disappears; one outside stays.
        assert!(IntervalSet::point(0, m)
            .difference(&set(&[(0, 1)], m))
            .is_empty());
        assert_eq!(
            IntervalSet::point(3, m).difference(&set(&[(0, 1)], m)),
            IntervalSet::point(3, m)
        );
        // A piece of Y spanning two pieces of X cuts both.
        let d = set(&[(0, 4), (6, 10)], m).difference(&set(&[(3, 7)], m));
        assert_eq!(d.pieces(), &[Interval::new(0, 3), Interval::new(7, 10)]);
        assert_eq!(
            set(&[(-3, 2), (4, 6)], m).non_negative_half(),
            vec![Interval::new(0, 2), Interval::new(4, 6)]
        );
    }

    #[test]
    fn decimals_are_exact() {
        let d = Decimal::from_f64("delta", 0.37).unwrap();
        assert_eq!((d.mantissa, d.decimals), (37, 2));
        let d = Decimal::from_f64("delta", 1000.0).unwrap();
        assert_eq!((d.mantissa, d.decimals), (1000, 0));
        let d = Decimal::from_f64("delta", -2.5e-7).unwrap();
        assert_eq!((d.mantissa, d.decimals), (-25, 8));
        let s = Scale::common([Decimal::from_f64("a", 0.37).unwrap(), d]);
        assert_eq!(s.den(), 100_000_000);
        assert_eq!(s.units(Decimal::from_f64("a", 0.37).unwrap()), 37_000_000);
        let e = Decimal::from_f64("delta", 1e-20).unwrap_err();
        assert!(
            e.to_string().contains("delta = 0.00000000000000000001"),
            "{e}"
        );
        assert!(Decimal::from_f64("c", f64::NAN).is_err());
        assert!(Decimal::from_f64("c", 2e9).is_err());
    }
}
