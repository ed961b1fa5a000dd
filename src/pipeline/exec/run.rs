//! The scheduler: `--jobs` worker threads of its own, each taking the first ready instance
//! (plan order), running it to its end (`steps.rs`), storing and reporting it, handing its
//! frame to its readers, then taking the next (see the module doc of `exec` for why no
//! work-stealing pool). Every instance has a global id (`offset[stage] + index`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use polars::prelude::*;

use super::gather::{sources, InPlanOrder, Source};
use super::steps::{self, Looked, Lookup, Names};
use super::{RunError, RunOptions};
use crate::frames::concat;
use crate::kind::Artifact;
use crate::pipeline::failures::Failures;
use crate::pipeline::instance_store::{InstanceResult, InstanceStore};
use crate::pipeline::plan::Plan;
use crate::pipeline::progress::{Progress, INTERRUPTED, RUNNING, STORING};

/// What became of an instance a worker took: done (its result and whether it came from the
/// store, or `None` when it failed or was not run), or deferred (another shard computes it).
enum Took {
    Done(Option<(InstanceResult, bool)>),
    Deferred,
}

/// How often a shard waiting for another one's instance (see [`crate::pipeline::claim`]) looks
/// in the store when it has nothing else to do.
const CLAIM_POLL: Duration = Duration::from_millis(200);

/// Per stage, the state of the run.
pub(super) struct StageState {
    /// Instances not finished yet.
    pub(super) remaining: AtomicUsize,
    /// Readers (global ids) that read this stage whole.
    pub(super) whole_readers: Vec<usize>,
    pub(super) gather: Option<Mutex<InPlanOrder>>,
    /// The gathered frame, once the stage is done (when gathered).
    pub(super) whole: Mutex<Option<Arc<DataFrame>>>,
    /// Whether an instance of this stage failed or was not run.
    pub(super) broken: AtomicBool,
    /// A kept stage ([`crate::pipeline::plan::PlannedStage::kept`]) of which the store lacks
    /// an instance: this run writes none of its outputs (the results directory keeps the
    /// earlier ones).
    pub(super) absent: AtomicBool,
    pub(super) artifacts: Mutex<Vec<(usize, Vec<Artifact>)>>,
    pub(super) seconds: Mutex<Vec<f64>>,
    pub(super) cached: AtomicUsize,
    /// When the instances taken from the store were computed.
    pub(super) made: Mutex<crate::pipeline::results::MadeLog>,
    /// How many of `cached` were found by their key by content: an input was computed again
    /// and came out the same (early cutoff).
    pub(super) by_content: AtomicUsize,
    /// What every instance's `Ctx` says of the inputs: their stage names, and the axes the
    /// engine put on them (the same for every instance of the stage, so worked out once).
    pub(super) input_names: Vec<String>,
    pub(super) axis_names: Vec<String>,
}

/// The run's shared state: every instance has a global id (`offset[stage] + index`).
pub(super) struct Run<'a> {
    pub(super) plan: &'a Plan,
    pub(super) opts: &'a RunOptions,
    pub(super) progress: Progress,
    pub(super) offset: Vec<usize>,
    /// Inputs (upstream instances, or whole stages) each instance still waits for.
    pub(super) waiting: Vec<AtomicUsize>,
    /// CSR of the readers that read each instance as a piece: `readers[reader_at[g]..reader_at[g + 1]]`.
    pub(super) reader_at: Vec<usize>,
    pub(super) readers: Vec<usize>,
    /// Each instance's frame while a reader still needs it as a piece (boxed: most
    /// instances never hold one, and an empty slot costs 16 bytes instead of 56).
    pub(super) frames: Vec<Mutex<Option<Box<DataFrame>>>>,
    /// Readers of each instance's frame that have not run yet.
    pub(super) uses: Vec<AtomicUsize>,
    /// Whether an input of this instance failed (it is then not run).
    pub(super) poisoned: Vec<AtomicBool>,
    pub(super) stages: Vec<StageState>,
    pub(super) errors: Mutex<Vec<(usize, RunError)>>,
    /// Every failure, printed as it happens and counted per stage (see [`super::failures`]).
    pub(super) failures: Failures,
    pub(super) skipped: AtomicUsize,
    /// Instances whose inputs are all done, and how many are running (see [`Ready`]).
    pub(super) ready: Mutex<Ready>,
    /// Wakes a worker when an instance becomes ready or the run ends.
    pub(super) wake: Condvar,
    /// The instance first in line (see [`Run::rank`]): 0, or in a shard an offset that
    /// differs from shard to shard.
    pub(super) shift: usize,
    /// In a shard: the instances other shards need too, and how many of them it computed.
    pub(super) shared: Option<Vec<bool>>,
    pub(super) shared_computed: AtomicUsize,
    /// In a shard: the instances taken from the store without their inputs (see [`Need`]).
    pub(super) load_only: Option<Vec<bool>>,
    /// The first failure to store an entry.
    pub(super) store_error: Mutex<Option<String>>,
    /// Instances to compute a second time and compare ([`super::verify`]), and how many were.
    pub(super) verify: Vec<bool>,
    pub(super) verified: AtomicUsize,
    /// Stages a `--verify` found not deterministic.
    pub(super) distrusted: Mutex<Vec<usize>>,
    /// With a store: each instance's frame digest, once it is stored or read from the store
    /// (what its readers' keys by content are made of, see [`Run::content_key`]).
    pub(super) digests: Vec<OnceLock<[u8; 32]>>,
}

/// The instances ready to run, first in plan order first (so stages are gathered with few
/// frames waiting for an earlier one), and how many instances workers are running: when none
/// is ready and none runs, nothing can become ready any more and the workers stop.
#[derive(Default)]
pub(super) struct Ready {
    heap: BinaryHeap<Reverse<(usize, usize)>>,
    running: usize,
    /// A worker panicked (a bug): the others stop taking instances.
    panicked: bool,
}

/// Which instances a shard's run touches: `need` (run them, or load them from the store),
/// and of those, `load`: taken from the store only (their own inputs are not needed); and
/// where in plan order it starts ([`Run::rank`]).
pub(super) struct Need {
    pub(super) need: Vec<bool>,
    pub(super) load: Vec<bool>,
    /// Instances other shards need too.
    pub(super) shared: Vec<bool>,
    pub(super) shift: usize,
}

/// Runs the instances (all, or those `need` names), flushes the store, and returns the run's
/// state (its failures: [`Run::first_error`]).
pub(super) fn drive<'a>(plan: &'a Plan, opts: &'a RunOptions, need: Option<Need>) -> Run<'a> {
    let run = Run::new(plan, opts, need);
    STORING.store(opts.store.is_some(), Ordering::Relaxed);
    std::thread::scope(|threads| {
        // A shard's claims stay fresh while it runs (see `claim`), even while no instance
        // finishes.
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        if let Some(store) = &opts.store {
            threads.spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(Duration::from_millis(250))
                {
                    store.claims().heartbeat();
                }
            });
        }
        {
            let mut ready = lock(&run.ready);
            for (g, w) in run.waiting.iter().enumerate() {
                if w.load(Ordering::Relaxed) == 0 {
                    ready.heap.push(Reverse((run.rank(g), g)));
                }
            }
        }
        let workers: Vec<_> = (0..opts.jobs.max(1))
            .map(|_| {
                let run = &run;
                threads.spawn(move || run.worker())
            })
            .collect();
        let panicked = workers.into_iter().find_map(|w| w.join().err());
        drop(stop);
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
    });
    run.progress.finish();
    let unfinished: usize = run
        .stages
        .iter()
        .map(|s| s.remaining.load(Ordering::Acquire))
        .sum();
    if unfinished > 0 {
        lock(&run.errors).push((
            usize::MAX,
            RunError::of_pipeline(
                plan,
                format!("{unfinished} instances never started (a scheduler bug: please report it)"),
            ),
        ));
    }
    if let Some(s) = &opts.store {
        if let Err(e) = s.flush() {
            run.not_stored(s, e);
        }
    }
    run.forget_distrusted();
    // A shard's only output is what it stores: work it could not store is a failure.
    if let Some(first) = lock(&run.store_error)
        .take()
        .filter(|_| run.load_only.is_some())
    {
        lock(&run.errors).push((
            usize::MAX,
            RunError::of_pipeline(
                plan,
                format!("this shard's work could not all be stored, so the run that gathers would compute it again: {first}"),
            ),
        ));
    }
    run
}

impl<'a> Run<'a> {
    /// The run's first failure (plan order), its message followed by what failed in all
    /// (per stage, see [`Failures::summary`]) and what that leaves; `None` when nothing failed.
    pub(super) fn first_error(&mut self, opts: &RunOptions) -> Option<RunError> {
        let mut errors = std::mem::take(&mut *lock(&self.errors));
        if errors.is_empty() {
            return None;
        }
        errors.sort_by_key(|(g, _)| *g);
        // Instance failures were printed as they happened; what failed the pipeline as a
        // whole (g = usize::MAX) was not, unless it is the one returned.
        for (_, e) in errors.iter().skip(1).filter(|(g, _)| *g == usize::MAX) {
            tracing::error!("{e}");
        }
        let (_, mut first) = errors.swap_remove(0);
        let skipped = self.skipped.load(Ordering::Relaxed);
        let mut lines = self.failures.summary();
        let failed = self.failures.count();
        if failed > 1 || skipped > 0 || !lines.is_empty() {
            if skipped > 0 {
                lines.push(format!(
                    "{skipped} instance(s) not run because an input failed"
                ));
            }
            lines.push(match &opts.store {
                Some(_) => "everything else finished and is in the store".to_string(),
                None => "everything else finished (--no-store: nothing was kept)".to_string(),
            });
            for l in lines {
                first.message.push_str("\n  ");
                first.message.push_str(&l);
            }
        }
        Some(first)
    }

    fn new(plan: &'a Plan, opts: &'a RunOptions, need: Option<Need>) -> Self {
        let needed = |g: usize| need.as_ref().is_none_or(|n| n.need[g]);
        let load_only = |g: usize| need.as_ref().is_some_and(|n| n.load[g]);
        let mut offset = Vec::with_capacity(plan.stages.len() + 1);
        let mut n = 0;
        for s in &plan.stages {
            offset.push(n);
            n += s.instances.len();
        }
        offset.push(n);
        let mut waiting = Vec::with_capacity(n);
        let mut whole_readers: Vec<Vec<usize>> = vec![Vec::new(); plan.stages.len()];
        let mut uses = vec![0usize; n];
        // Readers of each instance as a piece, as one flat array (10⁶ small vectors cost
        // more than the edges they hold): counted, then filled.
        let mut reader_at = vec![0usize; n + 1];
        let mut remaining = vec![0usize; plan.stages.len()];
        for (si, s) in plan.stages.iter().enumerate() {
            for ii in 0..s.instances.len() {
                let g = offset[si] + ii;
                if !needed(g) || load_only(g) || s.kept {
                    // Never run (`ready` takes only instances with nothing to wait for), or
                    // taken from the store without reading its inputs (a kept stage's
                    // instances are never computed, so they wait for nothing).
                    waiting.push(AtomicUsize::new(usize::from(!needed(g))));
                    remaining[si] += usize::from(needed(g));
                    continue;
                }
                remaining[si] += 1;
                let mut waits = 0;
                for src in sources(plan, &offset, si, ii) {
                    match src {
                        Source::Whole(up) => {
                            whole_readers[up].push(g);
                            waits += 1;
                        }
                        p => {
                            for u in p.pieces() {
                                uses[u] += 1;
                                reader_at[u + 1] += 1;
                                waits += 1;
                            }
                        }
                    }
                }
                waiting.push(AtomicUsize::new(waits));
            }
        }
        for i in 0..n {
            reader_at[i + 1] += reader_at[i];
        }
        let mut fill = reader_at.clone();
        let mut readers = vec![0usize; reader_at[n]];
        for (si, s) in plan.stages.iter().enumerate() {
            for ii in 0..s.instances.len() {
                let g = offset[si] + ii;
                if !needed(g) || load_only(g) || s.kept {
                    continue;
                }
                for src in sources(plan, &offset, si, ii) {
                    for u in src.pieces() {
                        readers[fill[u]] = offset[si] + ii;
                        fill[u] += 1;
                    }
                }
            }
        }
        // A shard writes no results, and no stage of a shard is read whole (those gather).
        let results = need.is_none();
        let stages = plan
            .stages
            .iter()
            .zip(whole_readers)
            .zip(remaining)
            .map(|((s, whole_readers), remaining)| StageState {
                remaining: AtomicUsize::new(remaining),
                gather: (results && (s.store || !whole_readers.is_empty()))
                    .then(|| Mutex::new(InPlanOrder::default())),
                whole_readers,
                whole: Mutex::new(None),
                broken: AtomicBool::new(false),
                absent: AtomicBool::new(false),
                artifacts: Mutex::new(Vec::new()),
                seconds: Mutex::new(vec![0.0; s.instances.len()]),
                cached: AtomicUsize::new(0),
                made: Mutex::default(),
                by_content: AtomicUsize::new(0),
                input_names: s
                    .inputs
                    .iter()
                    .map(|&i| plan.stages[i].name.clone())
                    .collect(),
                axis_names: {
                    let mut names: Vec<String> = Vec::new();
                    for &up in &s.inputs {
                        for a in &plan.stages[up].axes {
                            if !names.contains(a) {
                                names.push(a.clone());
                            }
                        }
                    }
                    names
                },
            })
            .collect();
        let verify = if need.is_none() {
            crate::pipeline::verify::choose(plan, &offset, opts.verify)
        } else {
            Vec::new()
        };
        Run {
            plan,
            opts,
            // A kept stage's instances are only looked up: not counted, not ticked.
            progress: Progress::new(
                &plan.name,
                need.as_ref().map_or_else(
                    || {
                        plan.stages
                            .iter()
                            .filter(|s| !s.kept)
                            .map(|s| s.instances.len())
                            .sum()
                    },
                    |x| x.need.iter().filter(|&&b| b).count(),
                ),
                opts.reporter.clone(),
            ),
            offset,
            waiting,
            reader_at,
            readers,
            frames: (0..n).map(|_| Mutex::new(None)).collect(),
            uses: uses.into_iter().map(AtomicUsize::new).collect(),
            poisoned: (0..n).map(|_| AtomicBool::new(false)).collect(),
            stages,
            errors: Mutex::new(Vec::new()),
            failures: Failures::new(
                &plan.name,
                plan.stages.iter().map(|s| s.name.clone()).collect(),
                opts.max_failures,
            ),
            skipped: AtomicUsize::new(0),
            ready: Mutex::new(Ready::default()),
            wake: Condvar::new(),
            shift: need.as_ref().map_or(0, |x| x.shift),
            shared_computed: AtomicUsize::new(0),
            shared: need.as_ref().map(|x| x.shared.clone()),
            verify,
            verified: AtomicUsize::new(0),
            distrusted: Mutex::new(Vec::new()),
            digests: if opts.store.is_some() {
                (0..n).map(|_| OnceLock::new()).collect()
            } else {
                Vec::new()
            },
            load_only: need.map(|n| n.load),
            store_error: Mutex::new(None),
        }
    }

    /// Where instance `g` stands among those ready: plan order, so stages are gathered with
    /// few frames waiting for an earlier one. Shards start at different points of it (and
    /// wrap around): shards running at once then tend to reach the instances several of them
    /// need (a dataset, a shared solve) at different times, and the later ones find them
    /// stored (see the look again in [`Run::instance`]) instead of computing them too.
    fn rank(&self, g: usize) -> usize {
        let n = self.waiting.len();
        (g + n - self.shift) % n
    }

    /// The stage and index of instance `g`.
    fn locate(&self, g: usize) -> (usize, usize) {
        let si = self.offset.partition_point(|&o| o <= g) - 1;
        (si, g - self.offset[si])
    }

    /// Runs (or takes from the store) instance `g`, whose inputs are all done, then hands its
    /// frame to its readers and starts those that have nothing left to wait for. `true` when
    /// it was deferred instead: another shard or pipeline is computing it (the caller puts it
    /// back in line with [`Run::defer`], once it has given back its slot).
    fn instance(&self, g: usize) -> bool {
        let (si, ii) = self.locate(g);
        let outcome = if self.poisoned[g].load(Ordering::Acquire) {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            self.progress.tick_failed();
            None
        } else {
            match self.take_or_compute(g, si, ii) {
                Took::Done(outcome) => outcome,
                // Another shard or pipeline is computing it: back in line.
                Took::Deferred => return true,
            }
        };
        let outcome = match outcome {
            Some((res, hit)) if self.verify.get(g) == Some(&true) => {
                self.verify_again(si, ii, g, res, hit)
            }
            o => o,
        };
        self.release_inputs(g);
        self.finished(g, si, ii, outcome);
        false
    }

    /// Instance `g` taken from the store or computed, or deferred: another shard is
    /// computing it.
    fn take_or_compute(&self, g: usize, si: usize, ii: usize) -> Took {
        let stage = &self.plan.stages[si];
        let inst = &stage.instances[ii];
        if stage.kept {
            return Took::Done(self.kept(g, si, ii));
        }
        let forced = self.opts.force.covers(&stage.name);
        let looked = match self.opts.store.as_ref().filter(|_| !forced) {
            Some(store) => steps::look_up(
                Lookup {
                    store,
                    kind: stage.kind.name,
                    key: inst.store_key,
                    by_content: self.content_key(g),
                    fresh: self.load_only.is_some(),
                    shared: self.shared.as_ref().is_some_and(|x| x[g]),
                },
                &|e| self.not_stored(store, e),
            ),
            None => Looked::Missing(None),
        };
        let claim = match looked {
            Looked::Theirs => {
                tracing::debug!(
                    "{} {} {{{}}}: another shard or pipeline is computing it; waiting",
                    self.plan.name,
                    stage.name,
                    inst.label()
                );
                return Took::Deferred;
            }
            Looked::Found { hit, by_content } => {
                tracing::debug!(
                    "{} {} {{{}}}: from the store ({}{})",
                    self.plan.name,
                    stage.name,
                    inst.label(),
                    inst.store_key,
                    if by_content {
                        ", by content: its inputs came out the same"
                    } else {
                        ""
                    }
                );
                if by_content {
                    self.stages[si].by_content.fetch_add(1, Ordering::Relaxed);
                }
                self.progress.tick(true);
                if let (Some(d), Some(slot)) = (hit.digest, self.digests.get(g)) {
                    let _ = slot.set(d);
                }
                let hit = InstanceResult {
                    frame: steps::in_stage_order(hit.frame, &inst.key()),
                    ..hit
                };
                return Took::Done(Some((hit, true)));
            }
            Looked::Missing(claim) => claim,
        };
        if self.load_only.as_ref().is_some_and(|l| l[g]) {
            self.fail(g, RunError::of_instance(
                self.plan,
                &stage.name,
                inst,
                "its store entry disappeared while this shard ran (a concurrent `dplab store gc`?): run the shard again".into(),
                false,
            ));
            return Took::Done(None);
        }
        // Its stage failed on too many instances (`--max-failures`): the others are not run,
        // and their readers neither.
        if self.failures.stopped(si) {
            self.failures.not_run(si);
            self.progress.tick_failed();
            return Took::Done(None);
        }
        if self.progress.per_instance() {
            self.progress.instance_started(&stage.name, &inst.label());
        }
        match self.compute(si, ii, false) {
            Ok(res) => {
                self.failures.succeeded(si);
                tracing::debug!(
                    "{} {} {{{}}}: computed in {:.3} s ({} rows)",
                    self.plan.name,
                    stage.name,
                    inst.label(),
                    res.seconds,
                    res.frame.height()
                );
                // Stored as soon as it exists: a run that fails or is killed later keeps it.
                // One to compute again (`--verify`) is stored once the two agree: a program
                // that is not deterministic leaves nothing a later run would take.
                let verifying = self.verify.get(g) == Some(&true);
                if let Some(s) = self.opts.store.as_ref().filter(|_| !verifying) {
                    let now = claim.as_ref().is_some_and(|c| c.across_processes());
                    self.put(s, g, now, &res);
                }
                // Stored where waiting shards look: they may take it now.
                drop(claim);
                if self.shared.as_ref().is_some_and(|x| x[g]) {
                    self.shared_computed.fetch_add(1, Ordering::Relaxed);
                }
                self.progress.tick(false);
                Took::Done(Some((res, false)))
            }
            Err(e) => {
                let (message, unavailable) = steps::failure_message(self.plan, si, inst, &e);
                self.progress.tick_failed();
                self.fail(
                    g,
                    RunError::of_instance(self.plan, &stage.name, inst, message, unavailable),
                );
                Took::Done(None)
            }
        }
    }

    /// Instance `g` of a kept stage: what the store holds under its key, never computed.
    /// `None` (and the stage marked absent) when the store lacks it.
    fn kept(&self, g: usize, si: usize, ii: usize) -> Option<(InstanceResult, bool)> {
        let inst = &self.plan.stages[si].instances[ii];
        let hit = self
            .opts
            .store
            .as_ref()
            .and_then(|s| s.get(&inst.store_key));
        let Some(hit) = hit else {
            self.stages[si].absent.store(true, Ordering::Release);
            return None;
        };
        if let (Some(d), Some(slot)) = (hit.digest, self.digests.get(g)) {
            let _ = slot.set(d);
        }
        let frame = steps::in_stage_order(hit.frame, &inst.key());
        Some((InstanceResult { frame, ..hit }, true))
    }

    /// Instance `g` is done (`outcome`: its result and whether it came from the store, or
    /// `None`): its frame goes to its stage's gathering and to the readers that read it as a
    /// piece; the last instance of a stage hands the gathered frame to its whole readers.
    fn finished(&self, g: usize, si: usize, ii: usize, outcome: Option<(InstanceResult, bool)>) {
        let st = &self.stages[si];
        let stage = &self.plan.stages[si];
        if let Some((res, hit)) = outcome.as_ref().filter(|_| self.progress.per_instance()) {
            if !stage.kept {
                self.progress.instance_finished(
                    &stage.name,
                    &stage.instances[ii].label(),
                    res.seconds,
                    *hit,
                );
            }
        }
        // A checking kind's verdict, from its frame: one taken from the store speaks up as one
        // computed now. A kept stage's was not asked for.
        if let (Some((res, _)), Some(read), false) = (&outcome, stage.kind.verdict, stage.kept) {
            if let Some(v) = read(&res.frame) {
                self.progress
                    .verdict(&stage.name, &stage.instances[ii].label(), &v);
            }
        }
        match outcome {
            Some((res, hit)) => {
                if hit {
                    st.cached.fetch_add(1, Ordering::Relaxed);
                    lock(&st.made).add(ii, res.made.as_ref());
                } else {
                    lock(&st.made).computed_now(ii);
                }
                lock(&st.seconds)[ii] = res.seconds;
                if !res.artifacts.is_empty() {
                    lock(&st.artifacts).push((ii, res.artifacts));
                }
                if self.uses[g].load(Ordering::Acquire) > 0 {
                    *lock(&self.frames[g]) = Some(Box::new(res.frame.clone()));
                }
                if let Some(gather) = &st.gather {
                    if let Err(e) = lock(gather).push(ii, res.frame) {
                        self.fail_stage(si, g, e);
                    }
                }
            }
            // A kept stage's instance the store lacks: no failure (nothing reads it).
            None if self.plan.stages[si].kept => {}
            None => self.break_stage(si, g),
        }
        let stage_done = st.remaining.fetch_sub(1, Ordering::AcqRel) == 1;
        if stage_done {
            if let Some(gather) = &st.gather {
                if !st.broken.load(Ordering::Acquire) && !st.absent.load(Ordering::Acquire) {
                    match lock(gather).finish() {
                        Ok(f) => *lock(&st.whole) = Some(Arc::new(f)),
                        Err(e) => self.fail_stage(si, g, e),
                    }
                }
            }
            let broken = st.broken.load(Ordering::Acquire);
            for &r in &st.whole_readers {
                if broken {
                    self.poisoned[r].store(true, Ordering::Release);
                }
                self.arrived(r);
            }
        }
        for &r in &self.readers[self.reader_at[g]..self.reader_at[g + 1]] {
            self.arrived(r);
        }
    }

    /// Instance `g` waits for another shard or pipeline to store it: back in line after every
    /// instance that can run now. When nothing else can, this worker pauses first (holding no
    /// slot), so waiting costs a look at the store every [`CLAIM_POLL`], not a spinning core.
    fn defer(&self, g: usize) {
        let n = self.waiting.len();
        let mut ready = lock(&self.ready);
        if ready
            .heap
            .peek()
            .is_none_or(|Reverse((rank, _))| *rank >= n)
        {
            drop(ready);
            std::thread::sleep(CLAIM_POLL);
            ready = lock(&self.ready);
        }
        ready.heap.push(Reverse((n + self.rank(g), g)));
    }

    /// A `--verify` found a stage's program not deterministic given its seed: every stored
    /// result of the stage is one draw of many, and so is everything computed from them. All
    /// of them leave the store, so that no later run takes them (the next run computes them
    /// again, and `--verify` can check again).
    fn forget_distrusted(&self) {
        let mut stages = std::mem::take(&mut *lock(&self.distrusted));
        let Some(store) = self.opts.store.as_ref().filter(|_| !stages.is_empty()) else {
            return;
        };
        // Stages come in plan order, inputs first: one pass finds everything downstream.
        let mut bad = vec![false; self.plan.stages.len()];
        for &si in &stages {
            bad[si] = true;
        }
        for (si, s) in self.plan.stages.iter().enumerate() {
            if s.inputs.iter().any(|&u| bad[u]) {
                bad[si] = true;
            }
        }
        stages.sort_unstable();
        stages.dedup();
        // Under their keys and their keys by content: either would give them to a later run.
        let keys: Vec<_> = self
            .plan
            .stages
            .iter()
            .enumerate()
            .filter(|(si, _)| bad[*si])
            .flat_map(|(si, s)| {
                (0..s.instances.len()).flat_map(move |ii| {
                    let g = self.offset[si] + ii;
                    std::iter::once(s.instances[ii].store_key).chain(self.content_key(g))
                })
            })
            .collect();
        let names: Vec<&str> = stages
            .iter()
            .map(|&si| self.plan.stages[si].name.as_str())
            .collect();
        match store.forget(&keys) {
            // An error, not a warning: `--quiet` shows it, and the run fails anyway.
            Ok(n) => tracing::error!(
                "{}: --verify found stage(s) {} not deterministic: their {n} stored result(s), and those computed from them, were removed from the store",
                self.plan.name,
                names.join(", ")
            ),
            Err(e) => lock(&self.errors).push((
                usize::MAX,
                RunError::of_pipeline(
                    self.plan,
                    format!(
                        "--verify found stage(s) {} not deterministic, and their stored results could not be removed ({e:#}): remove the store {} before the next run",
                        names.join(", "),
                        store.root().display()
                    ),
                ),
            )),
        }
    }

    /// Stores computed instance `g` under its key and, when it reads inputs, its key by
    /// content; `now`: in a file of its own (what waiting shards look for).
    fn put(&self, store: &InstanceStore, g: usize, now: bool, res: &InstanceResult) {
        let (si, ii) = self.locate(g);
        let stage = &self.plan.stages[si];
        let mut keys = vec![stage.instances[ii].store_key];
        keys.extend(self.content_key(g));
        let put = if now {
            store.put_now(&keys, stage.kind.name, res)
        } else {
            store.put_as(&keys, stage.kind.name, res)
        };
        match put {
            Ok(d) => {
                let _ = self.digests[g].set(d);
            }
            Err(e) => self.not_stored(store, e),
        }
    }

    /// Instance `g`'s key by what it reads ([`crate::pipeline::key::content_key`]): its own key and the
    /// digests of the frames of its inputs, once all are known (with a store, after they ran
    /// or were read from it). `None` for an instance that reads nothing (its key already is
    /// its content) or without a store.
    pub(super) fn content_key(&self, g: usize) -> Option<crate::pipeline::key::Key> {
        if self.digests.is_empty() {
            return None;
        }
        let (si, ii) = self.locate(g);
        let stage = &self.plan.stages[si];
        let inst = &stage.instances[ii];
        if stage.inputs.is_empty() {
            return None;
        }
        let mut all = Vec::with_capacity(stage.inputs.len());
        for (&up, js) in stage.inputs.iter().zip(inst.inputs.iter()) {
            let base = self.offset[up];
            let ds: Option<Vec<[u8; 32]>> = js
                .iter()
                .map(|&j| self.digests[base + j].get().copied())
                .collect();
            all.push(ds?);
        }
        Some(crate::pipeline::key::content_key(&inst.own_key, &all))
    }

    /// Writing to the store failed: a warning (the results are still written), remembered
    /// for a shard, whose only output the store is.
    fn not_stored(&self, store: &InstanceStore, e: anyhow::Error) {
        let msg = format!("not stored ({}): {e:#}", store.root().display());
        tracing::warn!("{msg}");
        lock(&self.store_error).get_or_insert(msg);
    }

    /// An instance of stage `si` failed or was not run: its readers are not run either.
    fn break_stage(&self, si: usize, g: usize) {
        self.stages[si].broken.store(true, Ordering::Release);
        for &r in &self.readers[self.reader_at[g]..self.reader_at[g + 1]] {
            self.poisoned[r].store(true, Ordering::Release);
        }
    }

    /// Gathering stage `si`'s frames failed (a column that cannot take the common type).
    fn fail_stage(&self, si: usize, g: usize, e: anyhow::Error) {
        let err = RunError {
            pipeline: self.plan.name.clone(),
            stage: self.plan.stages[si].name.clone(),
            instance: String::new(),
            message: format!("joining its instances' frames: {e:#}"),
            unavailable: false,
            written: None,
        };
        self.fail(g, err);
        self.stages[si].broken.store(true, Ordering::Release);
    }

    /// Instance `g` (or its stage) failed: told at once ([`Failures`]), counted in the
    /// progress, kept for the end of the run.
    fn fail(&self, g: usize, err: RunError) {
        let (si, _) = self.locate(g);
        let quiet = err.unavailable || INTERRUPTED.load(Ordering::Relaxed);
        if !quiet && self.progress.per_instance() {
            self.progress
                .instance_failed(&err.stage, &err.instance, &err.message);
        }
        self.failures.failed(si, &err.instance, &err.message, quiet);
        lock(&self.errors).push((g, err));
    }

    /// One input of reader `r` is done; it is ready once none is left.
    fn arrived(&self, r: usize) {
        if self.waiting[r].fetch_sub(1, Ordering::AcqRel) == 1 {
            lock(&self.ready).heap.push(Reverse((self.rank(r), r)));
            self.wake.notify_one();
        }
    }

    /// One worker: takes the first ready instance and runs it to its end — stored, reported
    /// and its readers made ready before it takes another — until no instance is ready and
    /// none is running (then none can become ready).
    fn worker(&self) {
        /// Ends the run for every worker if this one unwinds (a bug in a kind), instead of
        /// leaving them waiting for an instance that will never finish.
        struct OnPanic<'r, 'a>(&'r Run<'a>);
        impl Drop for OnPanic<'_, '_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    lock(&self.0.ready).panicked = true;
                    self.0.wake.notify_all();
                }
            }
        }
        let _guard = OnPanic(self);
        let mut ready = lock(&self.ready);
        loop {
            if ready.panicked {
                return;
            }
            if INTERRUPTED.load(Ordering::Relaxed) {
                self.wake.notify_all();
                return;
            }
            if let Some(Reverse((_, g))) = ready.heap.pop() {
                ready.running += 1;
                drop(ready);
                let slot = self.opts.slots.take();
                RUNNING.fetch_add(1, Ordering::Relaxed);
                let deferred = self.instance(g);
                RUNNING.fetch_sub(1, Ordering::Relaxed);
                drop(slot);
                if deferred {
                    self.defer(g);
                }
                ready = lock(&self.ready);
                ready.running -= 1;
                continue;
            }
            if ready.running == 0 {
                // Nothing ready and nothing running: wake the others so they see it too.
                self.wake.notify_all();
                return;
            }
            ready = self.wake.wait(ready).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Instance `g` has run: the frames it read as pieces lose one reader, and are dropped
    /// when none is left.
    fn release_inputs(&self, g: usize) {
        let (si, ii) = self.locate(g);
        // Those read no inputs (see `Run::new`).
        if self.load_only.as_ref().is_some_and(|l| l[g]) || self.plan.stages[si].kept {
            return;
        }
        for src in sources(self.plan, &self.offset, si, ii) {
            for u in src.pieces() {
                if self.uses[u].fetch_sub(1, Ordering::AcqRel) == 1 {
                    *lock(&self.frames[u]) = None;
                }
            }
        }
    }

    /// `--verify`: computes instance `g` again (its inputs are still held) and keeps `res`
    /// only when the two are the same bytes; otherwise the instance fails with the first
    /// difference.
    fn verify_again(
        &self,
        si: usize,
        ii: usize,
        g: usize,
        res: InstanceResult,
        hit: bool,
    ) -> Option<(InstanceResult, bool)> {
        let stage = &self.plan.stages[si];
        let inst = &stage.instances[ii];
        let first = if hit {
            "the stored result"
        } else {
            "its first run"
        };
        let message = match self.compute(si, ii, true) {
            Ok(again) => match crate::pipeline::verify::first_difference(&res, &again) {
                None => {
                    self.verified.fetch_add(1, Ordering::Relaxed);
                    if let Some(s) = self.opts.store.as_ref().filter(|_| !hit) {
                        self.put(s, g, false, &res);
                    }
                    tracing::debug!(
                        "{} {} {{{}}}: computed again (--verify): the same bytes",
                        self.plan.name,
                        stage.name,
                        inst.label()
                    );
                    return Some((res, hit));
                }
                Some(d) => format!(
                    "--verify: computed again, it differs from {first} ({d}): its program is not deterministic given its seed, so the store would keep one draw of many"
                ),
            },
            Err(e) => format!("--verify: computing it again failed: {e:#}"),
        };
        // What is stored of its stage is one draw of many: see `forget_distrusted`.
        lock(&self.distrusted).push(si);
        self.fail(
            g,
            RunError::of_instance(self.plan, &stage.name, inst, message, false),
        );
        None
    }

    /// The input frames of instance `ii` of stage `si`, whose inputs are all done: a whole
    /// stage as gathered, pieces joined in plan order, an input that ran at no value of this
    /// instance as an empty frame of its columns.
    pub(super) fn inputs(&self, si: usize, ii: usize) -> Result<Vec<DataFrame>> {
        let plan = self.plan;
        let stage = &plan.stages[si];
        let mut inputs = Vec::with_capacity(stage.inputs.len());
        for (k, src) in sources(plan, &self.offset, si, ii).enumerate() {
            let frame = match src {
                Source::Whole(up) => {
                    let whole = lock(&self.stages[up].whole).clone();
                    (*whole.expect("a whole input is gathered before its readers start")).clone()
                }
                // An input that ran only at other values (`only:`): no rows, with the
                // columns planning knows it has (of no type yet: stacked, they take the
                // type of the frames that have values).
                p if p.pieces().next().is_none() => {
                    let up = &plan.stages[stage.inputs[k]];
                    let cols: Vec<Column> = up
                        .columns
                        .iter()
                        .flatten()
                        .map(|c| Column::full_null(c.as_str().into(), 0, &DataType::Null))
                        .collect();
                    DataFrame::new(0, cols)?
                }
                p => {
                    let frames: Vec<DataFrame> = p
                        .pieces()
                        .map(|u| {
                            *lock(&self.frames[u])
                                .clone()
                                .expect("a piece is kept until its readers ran")
                        })
                        .collect();
                    let refs: Vec<&DataFrame> = frames.iter().collect();
                    concat(&refs).with_context(|| {
                        format!(
                            "joining the instances of input `{}`",
                            plan.stages[stage.inputs[k]].name
                        )
                    })?
                }
            };
            inputs.push(frame);
        }
        Ok(inputs)
    }

    /// Computes instance `ii` of stage `si` on its inputs ([`steps::compute`]); `again` for
    /// `--verify`'s second computation.
    fn compute(&self, si: usize, ii: usize, again: bool) -> Result<InstanceResult> {
        let plan = self.plan;
        let stage = &plan.stages[si];
        tracing::trace!(
            "{} {} {{{}}}: starts",
            plan.name,
            stage.name,
            stage.instances[ii].label()
        );
        let started = Instant::now();
        let inputs = self.inputs(si, ii)?;
        let st = &self.stages[si];
        let names = Names {
            inputs: &st.input_names,
            axes: &st.axis_names,
        };
        steps::compute(plan, si, ii, &inputs, names, again, started)
    }
}

/// A poisoned lock still holds consistent data here (every critical section is a store).
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
