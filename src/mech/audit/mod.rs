//! Auditing a mechanism as a black box: an empirical lower bound on its privacy loss, with
//! confidence, from samples of its output on two neighbouring inputs.
//!
//! # The bound
//! ε_LB, below the mechanism's true ε with confidence 1 − α when the event was chosen
//! without the draws that measure it: [`bound`].
//!
//! # Selection and multiple testing
//! [`audit`] draws a *search split* on both inputs of every pair, tries every candidate event
//! there (in both directions: (x, x') and (x', x)), keeps the one whose bound on the search
//! split is largest, and measures only that one on a fresh *validation split*. The validation
//! draws are independent of the choice, so exactly one (pair, direction, event) is tested and
//! the confidence needs no correction beyond the factor 2 of Bonferroni for its two bounds;
//! choosing the event on the draws that measure it would make the bound optimistic.
//!
//! # Event searches ([`search`])
//! - discrete outputs: the exact histogram of releases, outcomes sorted by their likelihood
//!   ratio, every prefix a candidate set;
//! - scalar outputs: thresholds and intervals at quantiles of the pooled draws;
//! - vector outputs: the scalar search on every coordinate, and on a linear score learnt by a
//!   logistic regression that tells the two inputs apart (as DP-Sniper's classifier);
//! - outputs with too many distinct values for the histogram: the *support*, outcomes one side
//!   draws and the other never does, bit for bit — the flaw of floating-point samplers whose
//!   outputs are a sparse set that moves with the input (Mironov, CCS'12), cross-fitted on
//!   halves of the search split so that it is chosen only where it measures something.
//!
//! # What it cannot show
//! A bound below the claimed ε proves nothing: another event, pair or sample size may still
//! find a violation. A bound above the claim, at the stated confidence, shows the mechanism
//! (as implemented, with its sampler and floating point) is not as private as claimed.
//!
//! # Memory
//! The validation split is counted as it is drawn, chunk by chunk: memory holds the search
//! split and one chunk per thread, whatever the number of validation samples.

pub(crate) mod bound;
pub(crate) mod event;
pub(crate) mod keep;
pub(crate) mod search;

use std::sync::{Arc, Mutex};

use rayon::prelude::*;

pub(crate) use bound::{detectable, draws_to_flag, epsilon_lower_bound};
pub(crate) use event::Event;
pub(crate) use search::Searches;

/// Draws of a mechanism's output: release `i` is `values[i·dim .. (i+1)·dim]`, seen
/// `counts[i]` times (1 for single draws; a histogram's count for a mechanism that reports
/// its draws as one).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Releases {
    pub dim: usize,
    pub values: Vec<f64>,
    pub counts: Vec<u64>,
}

impl Releases {
    /// Single draws of dimension `dim`, row-major.
    pub(crate) fn draws(dim: usize, values: Vec<f64>) -> Self {
        let n = values.len().checked_div(dim).unwrap_or(0);
        Releases {
            dim,
            values,
            counts: vec![1; n],
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }

    /// Appends `other`'s releases (of the same dimension).
    pub(crate) fn extend(&mut self, other: Releases) {
        if self.counts.is_empty() {
            self.dim = other.dim;
        }
        self.values.extend(other.values);
        self.counts.extend(other.counts);
    }

    /// The releases where they are, to be read (or halved) without a copy.
    pub(crate) fn rows(&self) -> Rows<'_> {
        Rows {
            dim: self.dim,
            values: &self.values,
            counts: &self.counts,
        }
    }

    /// The draws that fall in `event`.
    pub(crate) fn count_in(&self, event: &Event) -> u64 {
        self.rows().count_in(event)
    }
}

/// [`Releases`] borrowed: a whole split, or a half of one, read in place. Halving a search
/// split of 10⁶ draws of 20 numbers by copying it wrote 160 MB of fresh memory per side and
/// pair (the kernel zeroing every page first).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rows<'a> {
    pub dim: usize,
    pub values: &'a [f64],
    pub counts: &'a [u64],
}

impl<'a> Rows<'a> {
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub(crate) fn row(&self, i: usize) -> &'a [f64] {
        &self.values[i * self.dim..(i + 1) * self.dim]
    }

    /// The number of draws they stand for.
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The first half of the releases and the rest (of single draws: halves of the draws).
    pub(crate) fn halves(&self) -> (Rows<'a>, Rows<'a>) {
        let mid = self.len() / 2;
        let (v1, v2) = self.values.split_at(mid * self.dim);
        let (c1, c2) = self.counts.split_at(mid);
        (
            Rows {
                dim: self.dim,
                values: v1,
                counts: c1,
            },
            Rows {
                dim: self.dim,
                values: v2,
                counts: c2,
            },
        )
    }

    /// The draws that fall in `event`.
    pub(crate) fn count_in(&self, event: &Event) -> u64 {
        if let Event::Outcomes { bits, .. } = event {
            // One key buffer for every row, where `Event::contains` allocates one per row.
            let mut key = Vec::with_capacity(self.dim);
            return (0..self.len())
                .filter(|&i| {
                    event::key_into(self.row(i), &mut key);
                    bits.contains(key.as_slice())
                })
                .map(|i| self.counts[i])
                .sum();
        }
        (0..self.len())
            .filter(|&i| event.contains(self.row(i)))
            .map(|i| self.counts[i])
            .sum()
    }
}

/// Which draws a sampler is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    Search,
    Validation,
}

/// One chunk of draws: `n` releases of the mechanism on side `side` (0: x, 1: x') of pair
/// `pair`, chunk `chunk` of `split`. Each chunk must use its own random stream, derived from
/// these four numbers alone, for the result not to depend on the number of threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Draw {
    pub pair: usize,
    pub side: usize,
    pub split: Split,
    pub chunk: u64,
    pub n: u64,
}

impl Draw {
    /// A distinct number for each (pair, side, split, chunk): the index of its random stream.
    pub(crate) fn stream(&self) -> u64 {
        let split = match self.split {
            Split::Search => 0,
            Split::Validation => 1,
        };
        (((self.pair as u64) << 2 | (self.side as u64) << 1 | split) << 40) | self.chunk
    }
}

/// What an audit draws and with what confidence.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Neighbouring pairs (x, x') to try: each side's input, numbered so that equal inputs share
    /// a number. An input's search split is drawn once, where it first appears (that pair's
    /// and side's random stream), and serves every pair that holds it: StatDP's patterns hold
    /// x = (1, …, 1) in seven pairs of eight.
    pub inputs: Vec<[usize; 2]>,
    /// Draws per side and pair for choosing the event.
    pub search_samples: u64,
    /// Draws per side for measuring it.
    pub samples: u64,
    /// Draws per call of the sampler.
    pub chunk: u64,
    pub confidence: f64,
    /// The claim's (ε, δ) points an event may be tested at, ε increasing: one for a point
    /// claim, a curve's for a curve ([`crate::mech::privacy::Privacy::points`]). The search
    /// split chooses the event and the point together; the validation split tests that one
    /// event at that one point.
    pub points: Vec<(f64, f64)>,
    pub searches: Searches,
    /// Whether a draw waits on something outside this process (a program's answer): see
    /// [`Draws`].
    pub waits: bool,
}

/// The event an audit chose and what the validation split says of it.
#[derive(Clone, Debug)]
pub(crate) struct Finding {
    pub pair: usize,
    /// true: p₁ is measured on x (side 0) and p₂ on x' (side 1); false: the other way round.
    pub forward: bool,
    pub event: Event,
    /// The claim's point it was tested at.
    pub epsilon: f64,
    pub delta: f64,
    /// Validation draws per side.
    pub samples: u64,
    pub k1: u64,
    pub k2: u64,
    /// ε_LB at the point's δ.
    pub epsilon_lb: f64,
    /// δ_LB at the point's ε: LCB(p₁) − e^ε·UCB(p₂), at least 0.
    pub delta_lb: f64,
    /// The chosen event's draws, on p₁'s side and p₂'s, of `search_n` per side of the search
    /// split that scored it, and that score (see [`search`]).
    pub search_k1: u64,
    pub search_k2: u64,
    pub search_n: u64,
    pub search_score: f64,
}

impl Finding {
    pub(crate) fn p1(&self) -> f64 {
        self.k1 as f64 / self.samples as f64
    }
    pub(crate) fn p2(&self) -> f64 {
        self.k2 as f64 / self.samples as f64
    }
}

/// Where the draws run. rayon's global pool is as wide as the cores, and a draw that waits on
/// another process (a program computing the chunk) holds its worker idle meanwhile: two
/// such draws in flight left no worker for the searches, and the DP-Sniper suite's audits ran
/// at 93 % of two cores. A waiting mechanism's draws therefore run on a pool of the audit's own,
/// as wide as the global one, whose threads spend their time waiting; the search keeps every
/// global worker. A global worker that waits for this pool runs other global work meanwhile
/// (rayon's cross-pool wait). Which thread draws a chunk changes nothing: each chunk has its
/// own random stream ([`Draw::stream`]) and chunks are put together in their order.
struct Draws(Option<rayon::ThreadPool>);

impl Draws {
    /// A pool that cannot be started (no threads left) leaves the draws on the global pool:
    /// slower, never different.
    fn for_plan(plan: &Plan) -> Self {
        Draws(
            plan.waits
                .then(|| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(rayon::current_num_threads())
                        .thread_name(|i| format!("audit-draw-{i}"))
                        .build()
                        .ok()
                })
                .flatten(),
        )
    }

    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.0 {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// Audits a mechanism given by `draw` (see the module documentation): searches every pair's
/// search split for the best event, measures it on the validation split. `None` when no search
/// applies to the releases (none was given any candidate).
pub(crate) fn audit<E: Send>(
    plan: &Plan,
    draw: impl Fn(Draw) -> Result<Releases, E> + Sync,
) -> Result<Option<Finding>, E> {
    let pairs = plan.inputs.len();
    let draws = Draws::for_plan(plan);
    // Where each input first appears: its search split is drawn there.
    let mut first: Vec<(usize, (usize, usize))> = Vec::new();
    for (pair, sides) in plan.inputs.iter().enumerate() {
        for (side, &input) in sides.iter().enumerate() {
            if !first.iter().any(|(i, _)| *i == input) {
                first.push((input, (pair, side)));
            }
        }
    }
    // Search splits no pair holds any longer, whose memory the next ones are drawn into: a
    // fresh one of 10⁶ draws of 20 numbers is 160 MB that the kernel zeroes page by page.
    let spare: Mutex<Vec<Releases>> = Mutex::new(Vec::new());
    let drawn = |input: usize, kept: &[(usize, Arc<Releases>)]| -> Result<Arc<Releases>, E> {
        if let Some((_, r)) = kept.iter().find(|(i, _)| *i == input) {
            return Ok(Arc::clone(r));
        }
        let (pair, side) = first
            .iter()
            .find(|(i, _)| *i == input)
            .map_or((0, 0), |(_, at)| *at);
        let reuse = spare.lock().ok().and_then(|mut s| s.pop());
        Ok(Arc::new(draw_all(plan, pair, side, &draw, reuse)?))
    };
    let both = |pair: usize, kept: &[(usize, Arc<Releases>)]| -> Result<[Arc<Releases>; 2], E> {
        let [x, x2] = plan.inputs[pair];
        let a = drawn(x, kept)?;
        let b = if x2 == x {
            Arc::clone(&a)
        } else {
            drawn(x2, kept)?
        };
        Ok([a, b])
    };
    let mut best: Option<(usize, search::Candidate)> = None;
    let bounds = keep::Bounds::default();
    let mut kept: Vec<(usize, Arc<Releases>)> = Vec::new();
    let mut next = if pairs > 0 {
        Some(draws.run(|| both(0, &kept))?)
    } else {
        None
    };
    for pair in 0..pairs {
        let Some([a, b]) = next.take() else { break };
        for (input, r) in plan.inputs[pair].iter().zip([&a, &b]) {
            if !kept.iter().any(|(i, _)| i == input) {
                kept.push((*input, Arc::clone(r)));
            }
        }
        // Kept while a later pair holds it.
        kept.retain(|(i, _)| plan.inputs[pair + 1..].iter().any(|s| s.contains(i)));
        // This pair is searched while the next one's inputs are drawn (the program runs on
        // one core while the search runs on the other).
        let (found, ahead) = rayon::join(
            || {
                search::best_for(
                    &a,
                    &b,
                    plan.searches,
                    keep::Claim {
                        points: &plan.points,
                        confidence: plan.confidence,
                        validation: plan.samples,
                        bounds: &bounds,
                    },
                )
            },
            || {
                (pair + 1 < pairs)
                    .then(|| draws.run(|| both(pair + 1, &kept)))
                    .transpose()
            },
        );
        next = ahead?;
        if let Some(c) = found {
            if best.as_ref().is_none_or(|(_, b)| c.score > b.score) {
                best = Some((pair, c));
            }
        }
        // Held by no later pair (the next one's are drawn by now): to be drawn into again.
        for r in [a, b] {
            if let (Ok(r), Ok(mut s)) = (Arc::try_unwrap(r), spare.lock()) {
                s.push(r);
            }
        }
    }
    drop(spare);
    let Some((pair, chosen)) = best else {
        return Ok(None);
    };
    // The validation split is counted in waves of a few chunks per thread: a mechanism that
    // is parallel inside (rayon) lets a waiting thread steal further chunks, and without a
    // bound every chunk of the split could be drawn and held at once (1.3 GB at 10⁸ draws).
    let wave = 4 * rayon::current_num_threads().max(1) as u64;
    let count = |side: usize| -> Result<u64, E> {
        let chunks = plan.samples.div_ceil(plan.chunk);
        let mut total = 0;
        let mut start = 0;
        while start < chunks {
            let end = (start + wave).min(chunks);
            total += (start..end)
                .into_par_iter()
                .map(|chunk| {
                    let n = plan.chunk.min(plan.samples - chunk * plan.chunk);
                    let r = draw(Draw {
                        pair,
                        side,
                        split: Split::Validation,
                        chunk,
                        n,
                    })?;
                    Ok(r.count_in(&chosen.event))
                })
                .try_reduce(|| 0, |x, y| Ok(x + y))?;
            start = end;
        }
        Ok(total)
    };
    let (on_x, on_x2) = (draws.run(|| count(0))?, draws.run(|| count(1))?);
    let (k1, k2) = if chosen.forward {
        (on_x, on_x2)
    } else {
        (on_x2, on_x)
    };
    let n = plan.samples;
    let (epsilon, delta) = plan.points[chosen.point];
    Ok(Some(Finding {
        pair,
        forward: chosen.forward,
        epsilon,
        delta,
        samples: n,
        k1,
        k2,
        epsilon_lb: epsilon_lower_bound(k1, n, k2, n, delta, plan.confidence),
        delta_lb: bound::delta_lower_bound(k1, n, k2, n, epsilon, plan.confidence),
        search_k1: chosen.k1,
        search_k2: chosen.k2,
        search_n: chosen.n1.max(chosen.n2),
        search_score: chosen.bound,
        event: chosen.event,
    }))
}

/// The search split of one side of a pair, in chunk order, into `reuse`'s memory if given.
fn draw_all<E: Send>(
    plan: &Plan,
    pair: usize,
    side: usize,
    draw: &(impl Fn(Draw) -> Result<Releases, E> + Sync),
    reuse: Option<Releases>,
) -> Result<Releases, E> {
    let chunks = plan.search_samples.div_ceil(plan.chunk);
    let parts: Vec<Releases> = (0..chunks)
        .into_par_iter()
        .map(|chunk| {
            let n = plan.chunk.min(plan.search_samples - chunk * plan.chunk);
            draw(Draw {
                pair,
                side,
                split: Split::Search,
                chunk,
                n,
            })
        })
        .collect::<Result<_, E>>()?;
    let mut all = reuse.unwrap_or_default();
    all.dim = 0;
    all.values.clear();
    all.counts.clear();
    // Sized once: grown part by part, it was copied at every doubling.
    all.values
        .reserve(parts.iter().map(|p| p.values.len()).sum::<usize>());
    all.counts
        .reserve(parts.iter().map(Releases::len).sum::<usize>());
    for p in parts {
        all.extend(p);
    }
    Ok(all)
}

#[cfg(test)]
mod tests;
