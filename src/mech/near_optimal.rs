//! The near-optimal mechanism for linear queries of Wu, He & Xia, "Near-optimal
//! differentially private mechanism for linear queries", Journal of Software (软件学报)
//! 28(9), 2017, §4–6: Algorithm 1 (the density), Definition 2 (convergence), Algorithm 2
//! (the sampler).
//!
//! # Guarantee
//! Releasing `f(x) + X`, `X ~ p` (the density of Algorithm 1 below), is ε-differentially
//! private for every linear query whose neighbour set is (contained in) V, for neighbouring
//! databases that differ in one record.
//!
//! Proof. Let `B_i = R_0 ∪ … ∪ R_i` and `level(r) = min{i : r ∈ B_i}`, so
//! `p(r) = e^(−ε·level(r))/α`. Writing `A_i = I_0 ∪ … ∪ I_i`, step 2 of the construction gives
//! `A_i = A_{i−1} ⊕ ±V` (because `0 ∈ V`) and step 3 gives `B_i = A_i ⊕ [−δ, δ]`, so
//! `B_i ⊕ ±V = B_{i+1}`: moving r by any `v ∈ ±V` changes its level by at most one. Hence for
//! neighbours `x, x'` and every output r, `p(r − f(x)) ≤ e^ε·p(r − f(x'))`. The bound is
//! attained (the paper's "reaches the boundary of the differential-privacy inequality").
//! The measured check is `w17-checks`.
//!
//! # Conditions
//! - `f(x') − f(x) ∈ ±V` for neighbouring databases (the caller's promise about the query).
//! - [`NeighbourSet::new`] checks V: a finite union of closed intervals `[lo, hi]`, `lo < hi`,
//!   increasing and separated by gaps, the first `[0, a]` with `a > 0`, every endpoint a
//!   finite decimal of magnitude at most 10^9 with at most 18 decimals (exact arithmetic,
//!   see [`super::interval`]).
//! - δ (the paper's widening of the sets, not a privacy δ) must be ≥ 0, with the same limits
//!   on its decimals; ε must be finite and > 0; `max_steps` must be in [1, [`MAX_STEPS`]].
//! - The sequence must converge (Definition 2) within `max_steps`
//!   ([`NearOptimalError::NotConverged`]), and `B_{n+1}` must be one interval
//!   ([`NearOptimalError::BrokenTail`]); otherwise there is no density. The sampler and the
//!   density need the sets kept (`keep_sets`, at most [`MAX_KEPT_PIECES`] intervals).
//! - The guarantee is for Algorithm 2 with [`GeometricSupport::FromOne`]; `FromZero` samples
//!   a different distribution (see the deviations).
//!
//! # Reference
//! Wu, He & Xia, "Near-optimal differentially private mechanism for linear queries", Journal
//! of Software (软件学报) 28(9), 2017, §4–6: Algorithm 1 (the density), Definition 2
//! (convergence), Algorithm 2 (the sampler); its §6 examples V1–V7 and the comparison with the
//! staircase mechanism ([`super::staircase`]).
//!
//! # Deviations from the paper
//! - The paper's examples take `V = [0, a] ∪ [b, c]` with `0 < a < b < c`: the text's
//!   "[a, b] ∪ [b, c]" is a typo, since its μ(V) = a + c − b and Δf = c fit `[0, a] ∪ [b, c]`.
//! - The paper's "mean" `Σ p_i ∫_{R_i} r dr` is 0 by symmetry; the quantity compared with the
//!   staircase mechanism's `Δf·e^(ε/2)/(e^ε − 1)` is `E|X|` ([`Summary::mean_abs`]).
//! - Algorithm 2's geometric variable with "parameter 1 − e^(−ε)": the tail levels
//!   `n + 1, n + 2, …` lie at `±(a_n + [jΔf, (j+1)Δf])` for `j = 1, 2, …`, so the geometric
//!   must count trials up to the first success (support {1, 2, …}); the support {0, 1, …}
//!   would put the tail's mass on level n instead ([`GeometricSupport`]).
//! - Where the paper leaves a convention open (exact arithmetic, touching intervals, the level
//!   at a boundary point), the choice is listed under "Conventions this implementation fixes".
//!
//! # The construction
//! A linear query `f` has a *neighbour set* `V = {f(y) : y a record}`: neighbouring
//! databases differ in one record, so `f(x') − f(x) ∈ ±V`. The paper's examples take
//! `V = [0, a] ∪ [b, c]` with `0 < a < b < c` and the single interval `[0, c]`.
//! [`NeighbourSet`] accepts any finite union of closed intervals starting with `[0, a]`,
//! `a > 0`; the sensitivity is `Δf = max V` and μ(V) its length.
//!
//! Algorithm 1, for the database with `f(x) = 0`:
//! 1. `I_0 = {0}`.
//! 2. `I_i` = the union, over the intervals `[s, e]` of `I_{i−1}`, of `[s, e + a]`,
//!    `[s + b, e + c]`, `[s − a, e]`, `[s − c, e − b]` (that is `[s, e] ⊕ ±V`), minus
//!    `I_0 ∪ … ∪ I_{i−1}` — the values reachable in i neighbour steps and not fewer
//!    ([`MinimalSequence`]).
//! 3. `R_i` = the union of the widened intervals `[s − δ, e + δ]`, `[s, e] ∈ I_i`, minus
//!    `R_0 ∪ … ∪ R_{i−1}`; so `R_0 = [−δ, δ]` ([`LevelBuilder`]).
//! 4. The sequence *converges at step n* (Definition 2) when `R_n = ±(a_n + [0, Δf])` and
//!    `R_{n+1} = ±(a_n + [Δf, 2Δf])` for some `a_n`; from there on every `R_i` is the next
//!    pair of intervals of length Δf (checked: `B_{n+1}` must be one interval). Read
//!    literally (`a_n` any real), n = 0 when Δf/2 ≤ δ ≤ Δf: `R_0 = [−δ, δ]` is then
//!    `±(a_0 + [0, Δf])` with `a_0 = δ − Δf ≤ 0`; the density is the same as with n = 1.
//! 5. `sum1 = Σ_{i≤n} e^(−iε) μ(R_i)`, `sum2 = 2Δf·e^(−ε(n+1))/(1 − e^(−ε))` (the levels
//!    after n), `α = sum1 + sum2`, and the density is `p(r) = e^(−iε)/α` on `R_i`.
//!
//! The sets depend on V only (the `I_i`) and on (V, δ) (the `R_i`); an ε only weighs the
//! per-level measures. [`sweep`] therefore builds the `I_i` once per V and feeds every δ
//! of a grid from the same sequence, and [`Levels`] keeps per level only μ(R_i) and
//! `∫_{R_i}|r| dr`, from which every ε costs O(n).
//!
//! # Conventions this implementation fixes
//! - Exact arithmetic: every endpoint is an integer in units of `1/den`, `den = 10^d` for the
//!   most decimals among V and the δ values ([`Scale`]); unions and differences are exact.
//! - Intervals are closed; differences are stored as closures; touching pieces are merged
//!   by default ([`Touching`]). Under [`Touching::Separate`] the pieces a step forms — the
//!   shifted copies of step 2, the widened intervals of step 3 — stay apart where they only
//!   touch, so a shell `±(a_n + [0, Δf])` assembled from two touching pieces does not count
//!   for Definition 2 (the running unions `A_i`, `B_i` are point sets in both conventions).
//!   This moves the step at convergence by one exactly when widened pieces touch inside the
//!   shell (e.g. V = [0, 1] ∪ [1000, 1001] at δ = 499.5); `w17-convergence` reports both.
//! - `level(r)` takes the smaller level at a boundary point (the closed `B_i`), which is what
//!   makes the privacy bound hold at every point rather than almost everywhere.

use rand::Rng;
use rand_distr::{Distribution, Exp1};
use rayon::prelude::*;

use super::interval::{Decimal, Int, Interval, IntervalSet, Scale, Touching};
use super::{check_epsilon, ParamRangeError};

/// Why a construction could not be completed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NearOptimalError {
    #[error(transparent)]
    Param(#[from] ParamRangeError),
    #[error("the sets R_i for V = {set}, δ = {delta} have not converged (Definition 2) after max_steps = {max_steps} steps; raise max_steps (valid: 1 to {MAX_STEPS})")]
    NotConverged {
        set: String,
        delta: f64,
        max_steps: usize,
    },
    #[error("V = {set}, δ = {delta}: Definition 2 holds at step {n}, but B_(n+1) = R_0 ∪ … ∪ R_(n+1) still has {pieces} pieces, so the later sets are not the geometric tail Algorithm 1 assumes")]
    BrokenTail {
        set: String,
        delta: f64,
        n: usize,
        pieces: usize,
    },
    #[error("V = {set}, δ = {delta}: keeping the sets would take more than {MAX_KEPT_PIECES} intervals; use a coarser V or a larger δ for samplers and densities")]
    TooLarge { set: String, delta: f64 },
    #[error("the level sets were built without keeping the intervals (keep_sets = false); samplers and densities need them")]
    SetsNotKept,
}

/// Upper bound on `max_steps`.
pub(crate) const MAX_STEPS: usize = 1_000_000;

/// Upper bound on the intervals a [`Levels`] keeps for sampling and densities (~40 bytes each).
pub(crate) const MAX_KEPT_PIECES: usize = 20_000_000;

/// A neighbour set `V ⊂ [0, ∞)`: a union of closed intervals, the first `[0, a]` with `a > 0`.
#[derive(Clone, Debug, PartialEq)]
pub struct NeighbourSet {
    pieces: Vec<(Decimal, Decimal)>,
}

impl NeighbourSet {
    /// `V = [0, a] ∪ [b, c]`, `0 < a < b < c` (the paper's §6 examples V1–V3, V5–V7).
    pub fn two_intervals(a: f64, b: f64, c: f64) -> Result<Self, ParamRangeError> {
        Self::new(&[(0.0, a), (b, c)])
    }

    /// `V = [0, c]`, `c > 0` (the paper's V4).
    #[cfg(test)]
    pub(crate) fn interval(c: f64) -> Result<Self, ParamRangeError> {
        Self::new(&[(0.0, c)])
    }

    /// A union of closed intervals `[lo, hi]`, in increasing order, separated by gaps, each
    /// of positive length, the first starting at 0.
    pub fn new(pieces: &[(f64, f64)]) -> Result<Self, ParamRangeError> {
        let bad = |value: String, valid: &str| ParamRangeError {
            name: "neighbour_set",
            value,
            valid: valid.into(),
        };
        let text = || {
            pieces
                .iter()
                .map(|(l, h)| format!("[{l}, {h}]"))
                .collect::<Vec<_>>()
                .join(" ∪ ")
        };
        if pieces.is_empty() {
            return Err(bad(
                "∅".into(),
                "must hold at least one interval [0, a], a > 0",
            ));
        }
        if pieces[0].0 != 0.0 {
            return Err(bad(
                text(),
                "must start at 0: V = {f(y) : y a record} holds the value 0 of an empty contribution, as in the paper's [0, a] ∪ [b, c]",
            ));
        }
        let mut out = Vec::with_capacity(pieces.len());
        let mut prev_hi = None;
        for &(lo, hi) in pieces {
            if lo.is_nan() || hi.is_nan() || lo >= hi {
                return Err(bad(
                    text(),
                    "every interval [lo, hi] needs lo < hi (0 < a < b < c for [0, a] ∪ [b, c])",
                ));
            }
            if let Some(p) = prev_hi {
                if lo <= p {
                    return Err(bad(
                        text(),
                        "the intervals must be increasing and separated by gaps (a < b); write touching intervals as one",
                    ));
                }
            }
            prev_hi = Some(hi);
            out.push((
                Decimal::from_f64("neighbour_set", lo)?,
                Decimal::from_f64("neighbour_set", hi)?,
            ));
        }
        Ok(NeighbourSet { pieces: out })
    }

    /// Parses `"[0, 1] ∪ [1000, 1001]"` (also `U` or `u` for ∪).
    pub(crate) fn parse(text: &str) -> Result<Self, ParamRangeError> {
        let bad = || ParamRangeError {
            name: "neighbour_set",
            value: format!("\"{text}\""),
            valid: "must be intervals written \"[0, a] ∪ [b, c]\" (∪, U or u between them)".into(),
        };
        let mut pieces = Vec::new();
        let normalised = text.replace(['U', 'u'], "∪");
        for part in normalised.split('∪') {
            let inner = part
                .trim()
                .strip_prefix('[')
                .and_then(|p| p.strip_suffix(']'))
                .ok_or_else(bad)?;
            let (lo, hi) = inner.split_once(',').ok_or_else(bad)?;
            let lo: f64 = lo.trim().parse().map_err(|_| bad())?;
            let hi: f64 = hi.trim().parse().map_err(|_| bad())?;
            pieces.push((lo, hi));
        }
        Self::new(&pieces)
    }

    /// Δf = max V − min V = max V.
    pub(crate) fn sensitivity(&self) -> f64 {
        self.pieces.last().map_or(0.0, |p| p.1.to_f64())
    }

    /// μ(V), the total length.
    pub(crate) fn measure(&self) -> f64 {
        let scale = self.scale();
        let units: Int = self
            .pieces
            .iter()
            .map(|&(l, h)| scale.units(h) - scale.units(l))
            .sum();
        scale.to_f64(units)
    }

    pub(crate) fn pieces(&self) -> Vec<(f64, f64)> {
        self.pieces
            .iter()
            .map(|&(l, h)| (l.to_f64(), h.to_f64()))
            .collect()
    }

    /// The step n of Definition 2 predicted from the widest gap, without building the sets,
    /// for `V = [0, c]` and for `V = [0, a] ∪ [b, c]` with `2a ≥ c − b` (closed sets,
    /// touching intervals merged); `None` for other shapes.
    ///
    /// Derivation: `A_i` (the values reachable in i steps) is a union of clusters
    /// `m·[b, c] ⊕ (i − m)·[−a, a] = [mb − (i−m)a, mc + (i−m)a]`, `|m| ≤ i` (using `−[b, c]`
    /// instead only shrinks them when `2a ≥ c − b`). The gap between clusters m and m + 1,
    /// `b − m(c − b) − (2i − 2m − 1)a`, grows with m, so the widest is the outermost,
    /// `b − a − (i − 1)(c − b)`, and `B_i = A_i ⊕ [−δ, δ]` is one interval once it is
    /// `≤ 2δ`. Let s be the first i ≥ 1 where that holds. Definition 2 at n needs
    /// `R_n = B_n \ B_{n−1}` and `R_{n+1}` to be pure shells, i.e. `B_{n−1}` and `B_n` single
    /// intervals; `B_0 = [−δ, δ]` always is. So n = 1 if s = 1 and n = s + 1 otherwise —
    /// except that for `c/2 ≤ δ ≤ c`, `R_0 = [−δ, δ]` itself is `±(a_0 + [0, c])` with
    /// `a_0 = δ − c ≤ 0` (the two intervals overlap), so n = 0.
    pub(crate) fn steps_by_gap_formula(&self, delta: f64) -> Option<usize> {
        let d = Decimal::from_f64("delta", delta).ok()?;
        let scale = Scale::common(self.decimals().chain([d]));
        let u = |x: Decimal| scale.units(x);
        let two_delta = 2 * u(d);
        match self.pieces[..] {
            [(_, c)] => Some(if (u(c)..=2 * u(c)).contains(&two_delta) {
                0
            } else {
                1
            }),
            [(_, a), (b, c)] if 2 * u(a) >= u(c) - u(b) => {
                let (a, b, c) = (u(a), u(b), u(c));
                if (c..=2 * c).contains(&two_delta) {
                    return Some(0);
                }
                let widest = b - a - two_delta;
                let s = if widest <= 0 {
                    1
                } else {
                    1 + (widest + (c - b) - 1) / (c - b)
                };
                Some(if s == 1 { 1 } else { s as usize + 1 })
            }
            _ => None,
        }
    }

    fn decimals(&self) -> impl Iterator<Item = Decimal> + '_ {
        self.pieces.iter().flat_map(|&(l, h)| [l, h])
    }

    fn scale(&self) -> Scale {
        Scale::common(self.decimals())
    }

    /// The shifts of step 2, `±V` in units of `scale`: for `[0, a] ∪ [b, c]` the intervals
    /// `[0, a]`, `[b, c]`, `[−a, 0]`, `[−c, −b]`, so that `[s, e] ⊕ shift` gives the four
    /// intervals of Algorithm 1 in its order.
    fn shifts(&self, scale: Scale) -> Vec<Interval> {
        let plus: Vec<Interval> = self
            .pieces
            .iter()
            .map(|&(l, h)| Interval::new(scale.units(l), scale.units(h)))
            .collect();
        let minus = plus.iter().map(|p| Interval::new(-p.hi, -p.lo));
        plus.iter().copied().chain(minus).collect()
    }
}

impl std::fmt::Display for NeighbourSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .pieces
            .iter()
            .map(|(l, h)| format!("[{}, {}]", l.to_f64(), h.to_f64()))
            .collect();
        f.write_str(&parts.join(" ∪ "))
    }
}

/// The minimal sequence `I_0, I_1, …` of Algorithm 1, step 2 (it depends on V only).
pub(crate) struct MinimalSequence {
    shifts: Vec<Interval>,
    current: IntervalSet,
    /// `A_i = I_0 ∪ … ∪ I_i`, always with touching pieces merged: it is only ever
    /// subtracted, and seams in it would merely record which step added which piece.
    reached: IntervalSet,
}

impl MinimalSequence {
    /// Starts at `I_0 = {0}`; endpoints in units of `scale` (which must hold V's decimals).
    pub fn new(v: &NeighbourSet, scale: Scale, touching: Touching) -> Self {
        let start = IntervalSet::point(0, touching);
        MinimalSequence {
            shifts: v.shifts(scale),
            reached: IntervalSet::point(0, Touching::Merge),
            current: start,
        }
    }

    /// `I_i` for the current `i`.
    pub(crate) fn current(&self) -> &IntervalSet {
        &self.current
    }

    /// `A_i = I_0 ∪ … ∪ I_i`.
    #[cfg(test)]
    pub(crate) fn reached(&self) -> &IntervalSet {
        &self.reached
    }

    /// Moves to `I_{i+1}`: the shifted copies of every interval of `I_i`, minus `A_i`.
    pub(crate) fn advance(&mut self) {
        let next = self
            .current
            .minkowski(&self.shifts)
            .difference(&self.reached);
        self.reached = self.reached.union(&next);
        self.current = next;
    }
}

/// Options of a construction.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub touching: Touching,
    /// Give up (with [`NearOptimalError::NotConverged`]) after this many steps.
    pub max_steps: usize,
    /// Keep the intervals of every `R_i` (for samplers, densities and `level`); otherwise
    /// only their measures and first absolute moments.
    pub keep_sets: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            touching: Touching::Merge,
            max_steps: 100_000,
            keep_sets: false,
        }
    }
}

impl Options {
    fn check(&self) -> Result<(), ParamRangeError> {
        if (1..=MAX_STEPS).contains(&self.max_steps) {
            Ok(())
        } else {
            Err(ParamRangeError {
                name: "max_steps",
                value: self.max_steps.to_string(),
                valid: format!("must be in [1, {MAX_STEPS}]"),
            })
        }
    }
}

/// The sets `R_i` for one δ, built from the `I_i` as they come (Algorithm 1, step 3), and
/// checked for Definition 2 after each step.
pub(crate) struct LevelBuilder {
    set: String,
    scale: Scale,
    delta: Decimal,
    delta_units: Int,
    sensitivity_units: Int,
    opts: Options,
    /// `B_{i−1} = R_0 ∪ … ∪ R_{i−1}`, with touching pieces merged (like `A_i`).
    covered: IntervalSet,
    previous: Option<IntervalSet>,
    measure: Vec<Int>,
    moment: Vec<f64>,
    pieces: Vec<usize>,
    kept: Vec<Vec<Interval>>,
    kept_total: usize,
    outcome: Option<Result<Int, NearOptimalError>>,
}

/// What the sequence looks like at convergence: `±(a + [k·Δf, (k+1)·Δf])`.
fn shell(a: Int, k: Int, df: Int, touching: Touching) -> IntervalSet {
    IntervalSet::from_intervals(
        vec![
            Interval::new(-a - (k + 1) * df, -a - k * df),
            Interval::new(a + k * df, a + (k + 1) * df),
        ],
        touching,
    )
}

/// `∫_{[lo, hi]} |r| dr` in units of `1/den²`, in floating point (the squares of exact
/// endpoints can exceed `i128`, the factors cannot).
fn abs_moment(p: &Interval) -> f64 {
    let len = p.length() as f64;
    if p.lo >= 0 {
        len * (p.hi + p.lo) as f64 / 2.0
    } else if p.hi <= 0 {
        -len * (p.hi + p.lo) as f64 / 2.0
    } else {
        ((p.lo as f64).powi(2) + (p.hi as f64).powi(2)) / 2.0
    }
}

impl LevelBuilder {
    fn new(
        v: &NeighbourSet,
        scale: Scale,
        delta: Decimal,
        opts: Options,
    ) -> Result<Self, NearOptimalError> {
        if delta.mantissa < 0 {
            return Err(ParamRangeError {
                name: "delta",
                value: delta.to_f64().to_string(),
                valid: "must be ≥ 0 (δ = 0 gives R_i = I_i)".into(),
            }
            .into());
        }
        Ok(LevelBuilder {
            set: v.to_string(),
            scale,
            delta,
            delta_units: scale.units(delta),
            sensitivity_units: v.pieces.last().map_or(0, |p| scale.units(p.1)),
            opts,
            covered: IntervalSet::empty(Touching::Merge),
            previous: None,
            measure: Vec::new(),
            moment: Vec::new(),
            pieces: Vec::new(),
            kept: Vec::new(),
            kept_total: 0,
            outcome: None,
        })
    }

    fn done(&self) -> bool {
        self.outcome.is_some()
    }

    /// Takes `I_i` (called with `i = 0, 1, …` in order) and forms `R_i`.
    fn push(&mut self, minimal: &IntervalSet) {
        if self.done() {
            return;
        }
        let i = self.measure.len();
        let r = minimal.dilate(self.delta_units).difference(&self.covered);
        self.covered = self.covered.union(&r);
        let df = self.sensitivity_units;
        // Definition 2 at n = i − 1: R_{i−1} = ±(a + [0, Δf]) and R_i = ±(a + [Δf, 2Δf]).
        if let Some(prev) = &self.previous {
            if let Some(top) = prev.max() {
                let a = top - df;
                let t = self.opts.touching;
                if *prev == shell(a, 0, df, t) && r == shell(a, 1, df, t) {
                    let n = i - 1;
                    // Then B_{n+1} must be the single interval ±(a + 2Δf), or the later sets
                    // are not the tail Algorithm 1 assumes.
                    let solid = &self.covered;
                    self.outcome = Some(if solid.len() == 1 {
                        Ok(a)
                    } else {
                        Err(NearOptimalError::BrokenTail {
                            set: self.set.clone(),
                            delta: self.delta.to_f64(),
                            n,
                            pieces: solid.len(),
                        })
                    });
                    // R_{n+1} belongs to the tail: only levels 0..=n are recorded.
                    return;
                }
            }
        }
        self.measure.push(r.measure());
        self.moment.push(r.pieces().iter().map(abs_moment).sum());
        self.pieces.push(r.len());
        if self.opts.keep_sets {
            let half = r.non_negative_half();
            self.kept_total += half.len();
            if self.kept_total > MAX_KEPT_PIECES {
                self.outcome = Some(Err(NearOptimalError::TooLarge {
                    set: self.set.clone(),
                    delta: self.delta.to_f64(),
                }));
                return;
            }
            self.kept.push(half);
        }
        if i >= self.opts.max_steps {
            self.outcome = Some(Err(NearOptimalError::NotConverged {
                set: self.set.clone(),
                delta: self.delta.to_f64(),
                max_steps: self.opts.max_steps,
            }));
            return;
        }
        self.previous = Some(r);
    }

    fn finish(mut self) -> Result<Levels, NearOptimalError> {
        let a_n = match self.outcome.take() {
            Some(Ok(a)) => a,
            Some(Err(e)) => return Err(e),
            None => {
                return Err(NearOptimalError::NotConverged {
                    set: self.set,
                    delta: self.delta.to_f64(),
                    max_steps: self.opts.max_steps,
                })
            }
        };
        // Levels R_0 … R_n were recorded; R_{n+1} starts the tail and was not.
        let n = self.measure.len() - 1;
        let tiles = self.opts.keep_sets.then(|| Tiles::new(&self.kept));
        let den2 = (self.scale.den() as f64).powi(2);
        Ok(Levels {
            scale: self.scale,
            sensitivity_units: self.sensitivity_units,
            steps: n,
            a_n,
            measure: self.measure,
            moment: self.moment.iter().map(|m| m / den2).collect(),
            pieces: self.pieces,
            kept: self.opts.keep_sets.then_some(self.kept),
            tiles,
        })
    }
}

/// The sets `R_0 … R_n` of one (V, δ) after convergence at step n, reduced to what an ε
/// needs: per level the measure and the first absolute moment (and, if kept, the
/// intervals in `[0, ∞)`; the sets are symmetric).
#[derive(Clone, Debug)]
pub struct Levels {
    scale: Scale,
    sensitivity_units: Int,
    steps: usize,
    a_n: Int,
    measure: Vec<Int>,
    moment: Vec<f64>,
    pieces: Vec<usize>,
    kept: Option<Vec<Vec<Interval>>>,
    tiles: Option<Tiles>,
}

/// Summary of the density for one ε.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub alpha: f64,
    /// `E|X|`, including the geometric tail.
    pub mean_abs: f64,
    /// `E|X|·(e^ε − 1)/(Δf·e^(ε/2))`: E|X| over the optimal staircase mechanism's.
    pub rate: f64,
    /// `sum2/α`, the probability of a level after n.
    pub tail_mass: f64,
    /// `μ(R_0)/α`, the probability of level 0.
    pub level0_mass: f64,
}

impl Levels {
    /// n, the step at which the sequence converges (Definition 2).
    pub(crate) fn steps(&self) -> usize {
        self.steps
    }

    /// `a_n` of Definition 2.
    pub(crate) fn a_n(&self) -> f64 {
        self.scale.to_f64(self.a_n)
    }

    /// `a_n` exactly, in units of `1/den` of [`Levels::scale`].
    pub(crate) fn a_n_units(&self) -> Int {
        self.a_n
    }

    /// Δf exactly, in units of `1/den`.
    pub(crate) fn sensitivity_units(&self) -> Int {
        self.sensitivity_units
    }

    pub(crate) fn sensitivity(&self) -> f64 {
        self.scale.to_f64(self.sensitivity_units)
    }

    pub(crate) fn scale(&self) -> Scale {
        self.scale
    }

    /// Number of intervals of each `R_i` (the paper's `N_i`), i = 0..=n.
    pub(crate) fn pieces_per_level(&self) -> &[usize] {
        &self.pieces
    }

    /// The intervals of `R_i ∩ [0, ∞)` in units of `1/den`, if kept.
    #[cfg(test)]
    pub(crate) fn level_set(&self, i: usize) -> Option<&[Interval]> {
        self.kept.as_ref().and_then(|k| k.get(i)).map(Vec::as_slice)
    }

    /// α, E|X|, rate and the tail mass for one ε (O(n)).
    pub fn summary(&self, epsilon: f64) -> Result<Summary, ParamRangeError> {
        check_epsilon(epsilon)?;
        let df = self.sensitivity();
        let n = self.steps as f64;
        let q = (-epsilon).exp();
        let one_minus_q = -(-epsilon).exp_m1();
        let (mut sum1, mut first1) = (0.0, 0.0);
        for (i, (&m, &mom)) in self.measure.iter().zip(&self.moment).enumerate() {
            let w = (-(i as f64) * epsilon).exp();
            sum1 += w * self.scale.to_f64(m);
            first1 += w * mom;
        }
        let qn = (-n * epsilon).exp();
        // Levels n + j, j ≥ 1: measure 2Δf each, on ±(a_n + [jΔf, (j+1)Δf]).
        let sum2 = 2.0 * df * qn * q / one_minus_q;
        let centre = self.a_n() + df / 2.0;
        let first2 = 2.0 * df * qn * (centre * q / one_minus_q + df * q / one_minus_q.powi(2));
        let alpha = sum1 + sum2;
        let mean_abs = (first1 + first2) / alpha;
        Ok(Summary {
            alpha,
            mean_abs,
            rate: mean_abs * epsilon.exp_m1() / (df * (epsilon / 2.0).exp()),
            tail_mass: sum2 / alpha,
            level0_mass: self.scale.to_f64(self.measure[0]) / alpha,
        })
    }

    /// The level of a point given in units of `1/den` (exact): the least i with r ∈ B_i.
    pub(crate) fn level_units(&self, r: Int) -> Result<u64, NearOptimalError> {
        let tiles = self.tiles.as_ref().ok_or(NearOptimalError::SetsNotKept)?;
        let x = r.abs();
        let edge = self.a_n + self.sensitivity_units;
        if x > edge {
            // Level n + k on (a_n + kΔf, a_n + (k+1)Δf], k ≥ 1.
            let df = self.sensitivity_units;
            let k = (x - self.a_n + df - 1) / df - 1;
            return Ok(self.steps as u64 + k as u64);
        }
        Ok(tiles.level(|t| t.lo <= x, |t| t.hi >= x))
    }

    /// The level of a real point. Boundaries are compared in floating point (each endpoint
    /// rounded once), which only matters at the boundary points themselves.
    #[cfg(test)]
    pub(crate) fn level(&self, r: f64) -> Result<u64, NearOptimalError> {
        let tiles = self.tiles.as_ref().ok_or(NearOptimalError::SetsNotKept)?;
        let x = r.abs();
        let s = self.scale;
        let edge = s.to_f64(self.a_n + self.sensitivity_units);
        if x > edge {
            let df = self.sensitivity();
            let k = ((x - self.a_n()) / df).ceil() - 1.0;
            return Ok(self.steps as u64 + k.max(1.0) as u64);
        }
        Ok(tiles.level(|t| s.to_f64(t.lo) <= x, |t| s.to_f64(t.hi) >= x))
    }

    /// The intervals of `R_0 … R_n` in `[0, ∞)`, sorted by position, with their levels.
    pub(crate) fn partition(&self) -> Result<&[(Interval, u32)], NearOptimalError> {
        Ok(&self
            .tiles
            .as_ref()
            .ok_or(NearOptimalError::SetsNotKept)?
            .tiles)
    }

    /// The density for one ε, ready to sample and evaluate (needs the kept sets).
    pub fn mechanism(&self, epsilon: f64) -> Result<NearOptimal<'_>, NearOptimalError> {
        NearOptimal::new(self, epsilon)
    }
}

/// The kept intervals sorted by position, for `level`.
#[derive(Clone, Debug)]
struct Tiles {
    tiles: Vec<(Interval, u32)>,
}

impl Tiles {
    fn new(kept: &[Vec<Interval>]) -> Self {
        let mut tiles: Vec<(Interval, u32)> = kept
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.iter().map(move |&p| (p, i as u32)))
            .collect();
        tiles.sort_unstable_by_key(|t| (t.0.lo, t.0.hi));
        Tiles { tiles }
    }

    /// The least level among the tiles containing x, given `starts_before(t) = t.lo ≤ x`
    /// and `reaches(t) = t.hi ≥ x`: tiles partition `[0, a_n + Δf]`, so at most the last
    /// tile starting at or before x and the ones touching it from the left contain x.
    fn level(
        &self,
        starts_before: impl Fn(&Interval) -> bool,
        reaches: impl Fn(&Interval) -> bool,
    ) -> u64 {
        let mut i = self.tiles.partition_point(|t| starts_before(&t.0));
        let mut best = u32::MAX;
        while i > 0 && reaches(&self.tiles[i - 1].0) {
            best = best.min(self.tiles[i - 1].1);
            i -= 1;
        }
        best as u64
    }
}

/// Builds the `R_i` of one (V, δ) (Algorithm 1, steps 1–3 and Definition 2).
pub fn construct(v: &NeighbourSet, delta: f64, opts: Options) -> Result<Levels, NearOptimalError> {
    sweep(v, &[delta], opts)?
        .pop()
        .expect("one δ gives one result")
}

/// Builds the `R_i` of one V for every δ of a grid from a single pass over the `I_i`
/// (which depend on V only); the δ are processed in parallel at each step. One result per
/// δ, in order; a δ that fails does not stop the others.
pub(crate) fn sweep(
    v: &NeighbourSet,
    deltas: &[f64],
    opts: Options,
) -> Result<Vec<Result<Levels, NearOptimalError>>, NearOptimalError> {
    opts.check()?;
    let decimals = deltas
        .iter()
        .map(|&d| Decimal::from_f64("delta", d))
        .collect::<Result<Vec<_>, _>>()?;
    let scale = Scale::common(v.decimals().chain(decimals.iter().copied()));
    let mut builders = decimals
        .iter()
        .map(|&d| LevelBuilder::new(v, scale, d, opts))
        .collect::<Result<Vec<_>, _>>()?;
    let mut minimal = MinimalSequence::new(v, scale, opts.touching);
    loop {
        let current = minimal.current();
        builders.par_iter_mut().for_each(|b| b.push(current));
        if builders.iter().all(LevelBuilder::done) {
            break;
        }
        minimal.advance();
    }
    Ok(builders.into_iter().map(LevelBuilder::finish).collect())
}

/// Which geometric distribution Algorithm 2 draws ("a geometric distribution with
/// parameter 1 − e^(−ε)"); see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometricSupport {
    /// Trials up to and including the first success, j ∈ {1, 2, …}: lands on levels
    /// n + 1, n + 2, … as the density requires.
    FromOne,
    /// Failures before the first success, j ∈ {0, 1, …}: lands on levels n, n + 1, …,
    /// one level too close to 0.
    FromZero,
}

impl GeometricSupport {
    pub(crate) fn name(self) -> &'static str {
        match self {
            GeometricSupport::FromOne => "from_one",
            GeometricSupport::FromZero => "from_zero",
        }
    }
}

/// The density of Algorithm 1 for one ε, with Algorithm 2's sampler.
pub struct NearOptimal<'a> {
    levels: &'a Levels,
    epsilon: f64,
    summary: Summary,
    /// Cumulative probabilities of levels 0..=n; the rest is the tail.
    level_cdf: Vec<f64>,
    /// Per level, cumulative lengths (in units) of its intervals in [0, ∞).
    piece_cdf: Vec<Vec<f64>>,
}

impl<'a> NearOptimal<'a> {
    pub fn new(levels: &'a Levels, epsilon: f64) -> Result<Self, NearOptimalError> {
        let kept = levels.kept.as_ref().ok_or(NearOptimalError::SetsNotKept)?;
        let summary = levels.summary(epsilon)?;
        let mut acc = 0.0;
        let level_cdf = levels
            .measure
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                acc += (-(i as f64) * epsilon).exp() * levels.scale.to_f64(m) / summary.alpha;
                acc
            })
            .collect();
        let piece_cdf = kept
            .iter()
            .map(|v| {
                let mut acc = 0.0;
                v.iter()
                    .map(|p| {
                        acc += p.length() as f64;
                        acc
                    })
                    .collect()
            })
            .collect();
        Ok(NearOptimal {
            levels,
            epsilon,
            summary,
            level_cdf,
            piece_cdf,
        })
    }

    pub fn summary(&self) -> Summary {
        self.summary
    }

    pub(crate) fn alpha(&self) -> f64 {
        self.summary.alpha
    }

    /// `p(r) = e^(−ε·level(r))/α`.
    #[cfg(test)]
    pub(crate) fn density(&self, r: f64) -> Result<f64, NearOptimalError> {
        Ok((-(self.levels.level(r)? as f64) * self.epsilon).exp() / self.summary.alpha)
    }

    /// Algorithm 2: a level i ≤ n with probability `e^(−iε)μ(R_i)/α` and a point uniform in
    /// `R_i`; otherwise (probability `sum2/α`) a geometric j and a point uniform in
    /// `±(a_n + [jΔf, (j+1)Δf])`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R, support: GeometricSupport) -> f64 {
        let u: f64 = rng.random();
        let level = self.level_cdf.partition_point(|&c| c <= u);
        let s = self.levels.scale;
        let magnitude = if level < self.level_cdf.len() {
            let cdf = &self.piece_cdf[level];
            let pieces = &self.levels.kept.as_ref().expect("checked in new")[level];
            let total = cdf.last().copied().unwrap_or(0.0);
            if total == 0.0 {
                // R_0 = {0} when δ = 0: a null set, never chosen (its probability is 0).
                0.0
            } else {
                let t = rng.random::<f64>() * total;
                let k = cdf.partition_point(|&c| c <= t).min(pieces.len() - 1);
                let p = pieces[k];
                s.to_f64(p.lo) + rng.random::<f64>() * s.to_f64(p.length())
            }
        } else {
            let e: f64 = Exp1.sample(rng);
            // ⌊E/ε⌋ is geometric on {0, 1, …} with P(≥ k) = e^(−εk).
            let failures = (e / self.epsilon).floor();
            let j = match support {
                GeometricSupport::FromOne => failures + 1.0,
                GeometricSupport::FromZero => failures,
            };
            let df = self.levels.sensitivity();
            self.levels.a_n() + (j + rng.random::<f64>()) * df
        };
        if rng.random::<bool>() {
            magnitude
        } else {
            -magnitude
        }
    }
}

#[cfg(test)]
mod tests;
