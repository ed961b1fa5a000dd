//! Execution: runs a plan's instances in parallel as their inputs become ready, then writes
//! the results atomically. Instances never share a generator and results are assembled in
//! plan order, so the output does not depend on `--jobs` or on scheduling.
//!
//! The scheduler is explicit: `--jobs` worker threads of its own, each taking the first ready
//! instance (plan order), running it to its end on its own stack, storing and reporting it,
//! then taking the next. Instances are never jobs of a work-stealing pool: a rayon worker that
//! waits (a nested `par_iter`, polars' pool, a child process) runs other jobs of its pool on
//! its stack meanwhile, so an instance that had finished was neither stored nor reported until
//! the one it had taken up ended — a quick instance beside a 20 s one sat unstored for seconds
//! and was lost to a Ctrl-C, and its recorded time was the slow one's. A kind's own data
//! parallelism still runs on rayon's global pool (sized by the caller), which holds no
//! instance: whatever its workers take up while they wait is that kind's own work.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use polars::prelude::*;

use super::claim::Claimed;
use super::dryrun::Force;
use super::failures::{Failures, MaxFailures};
use super::instance_store::{InstanceResult, InstanceStore};
use super::plan::Plan;
pub use super::progress::interrupted;
use super::progress::{Progress, INTERRUPTED, RUNNING, STORING};
use super::results::{self, RunFacts, StageOutput};
use super::shard::Shard;
use super::spec::AxisValue;
use crate::kind::{rng_from_seed, Artifact, Ctx};

/// A stage instance that failed while running: exit code 1.
#[derive(Debug, Clone)]
pub struct RunError {
    pub pipeline: String,
    pub stage: String,
    pub instance: String,
    pub message: String,
    /// The stage said an external input (a dataset file) is not on this machine
    /// ([`crate::kind::Unavailable`]): nothing is wrong with the pipeline itself.
    pub unavailable: bool,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.stage.is_empty() {
            write!(f, "pipeline `{}`: {}", self.pipeline, self.message)
        } else if self.instance.is_empty() {
            write!(
                f,
                "pipeline `{}`, stage `{}` failed: {}",
                self.pipeline, self.stage, self.message
            )
        } else {
            write!(
                f,
                "pipeline `{}`, stage `{}` instance {{{}}} failed: {}",
                self.pipeline, self.stage, self.instance, self.message
            )
        }
    }
}

impl std::error::Error for RunError {}

impl RunError {
    /// A failure of instance `inst` of stage `stage`.
    fn of_instance(
        plan: &Plan,
        stage: &str,
        inst: &super::plan::Instance,
        message: String,
        unavailable: bool,
    ) -> Self {
        RunError {
            pipeline: plan.name.clone(),
            stage: stage.to_string(),
            instance: inst.label(),
            message,
            unavailable,
        }
    }

    /// A failure of the pipeline as a whole, not of one stage or instance.
    fn of_pipeline(plan: &Plan, message: String) -> Self {
        RunError {
            pipeline: plan.name.clone(),
            stage: String::new(),
            instance: String::new(),
            message,
            unavailable: false,
        }
    }
}

/// Where and how to run.
pub struct RunOptions {
    pub out_dir: PathBuf,
    pub terminal: bool,
    pub jobs: usize,
    pub set: Vec<String>,
    /// The instance store, unless disabled (`--no-store`).
    pub store: Option<InstanceStore>,
    pub force: Force,
    /// Instances of stages that run programs to compute twice and compare (`--verify N`,
    /// see [`super::verify`]); not in a shard.
    pub verify: usize,
    /// When a stage that keeps failing stops (`--max-failures`).
    pub max_failures: MaxFailures,
}

/// How an instance reads one of its inputs.
enum Source<'p> {
    /// Every instance of the upstream stage, in plan order: the stage's gathered frame, ready
    /// when the whole stage is.
    Whole(usize),
    /// These instances of the upstream stage (indices in it, and the stage's first global
    /// id), each kept until its last reader ran.
    Pieces(usize, &'p [usize]),
}

impl Source<'_> {
    /// The global ids of the instances read as pieces.
    fn pieces(&self) -> impl Iterator<Item = usize> + '_ {
        let (base, js): (usize, &[usize]) = match self {
            Source::Whole(_) => (0, &[]),
            Source::Pieces(base, js) => (*base, js),
        };
        js.iter().map(move |j| base + j)
    }
}

/// Frames of one stage gathered in plan order as instances finish in any order. Finished
/// frames wait in `early` until those before them are in; every [`BLOCK`] frames are joined
/// into one block, so a stage of 10⁶ instances holds a few thousand blocks, not 10⁶ frames.
#[derive(Default)]
struct InPlanOrder {
    next: usize,
    early: BTreeMap<usize, DataFrame>,
    part: Vec<DataFrame>,
    blocks: Vec<DataFrame>,
    any_columns: bool,
    /// Each instance's number of rows, in plan order: which rows of the stage's frame are
    /// whose (the Parquet file says it beside the instances' keys).
    rows: Vec<usize>,
}

const BLOCK: usize = 256;

/// How often a shard waiting for another one's instance (see [`super::claim`]) looks in the
/// store when it has nothing else to do.
const CLAIM_POLL: Duration = Duration::from_millis(200);

impl InPlanOrder {
    fn push(&mut self, i: usize, frame: DataFrame) -> Result<()> {
        self.early.insert(i, frame);
        while let Some(f) = self.early.remove(&self.next) {
            self.any_columns |= f.width() > 0;
            self.rows.push(f.height());
            self.part.push(f);
            self.next += 1;
            if self.part.len() == BLOCK {
                let refs: Vec<&DataFrame> = self.part.iter().collect();
                let block = concat(&refs)?;
                self.part.clear();
                self.blocks.push(block);
            }
        }
        Ok(())
    }

    /// The concatenation of every frame pushed, in order (the same frame `concat` of all of
    /// them gives: one chunk per column, and the union of their columns when instances differ
    /// in them). The blocks are moved into the result before it is rechunked one column at a
    /// time, so the stage's frame is in memory about once, not twice.
    fn finish(&mut self) -> Result<DataFrame> {
        let mut all = std::mem::take(&mut self.blocks);
        all.append(&mut self.part);
        let first_schema = match all.first() {
            None => return Ok(DataFrame::empty()),
            Some(f) => f.schema().clone(),
        };
        let union = (!all.iter().all(|f| *f.schema() == first_schema))
            .then(|| crate::frames::union_schema(&all));
        let mut rest = all.into_iter();
        let align = |f: DataFrame| match &union {
            Some(s) => crate::frames::aligned(&f, s),
            None => Ok(f),
        };
        let mut out = align(rest.next().expect("not empty"))?;
        for f in rest {
            out.vstack_mut_owned(align(f)?)?;
        }
        out.rechunk_mut();
        Ok(out)
    }
}

/// Per stage, the state of the run.
struct StageState {
    /// Instances not finished yet.
    remaining: AtomicUsize,
    /// Readers (global ids) that read this stage whole.
    whole_readers: Vec<usize>,
    gather: Option<Mutex<InPlanOrder>>,
    /// The gathered frame, once the stage is done (when gathered).
    whole: Mutex<Option<Arc<DataFrame>>>,
    /// Whether an instance of this stage failed or was not run.
    broken: AtomicBool,
    artifacts: Mutex<Vec<(usize, Vec<Artifact>)>>,
    seconds: Mutex<Vec<f64>>,
    cached: AtomicUsize,
    /// When the instances taken from the store were computed.
    made: Mutex<super::results::MadeLog>,
    /// How many of `cached` were found by their key by content: an input was computed again
    /// and came out the same (early cutoff).
    by_content: AtomicUsize,
    /// What every instance's `Ctx` says of the inputs: their stage names, and the axes the
    /// engine put on them (the same for every instance of the stage, so worked out once).
    input_names: Vec<String>,
    axis_names: Vec<String>,
}

/// The run's shared state: every instance has a global id (`offset[stage] + index`).
struct Run<'a> {
    plan: &'a Plan,
    opts: &'a RunOptions,
    progress: Progress,
    offset: Vec<usize>,
    /// Inputs (upstream instances, or whole stages) each instance still waits for.
    waiting: Vec<AtomicUsize>,
    /// CSR of the readers that read each instance as a piece: `readers[reader_at[g]..reader_at[g + 1]]`.
    reader_at: Vec<usize>,
    readers: Vec<usize>,
    /// Each instance's frame while a reader still needs it as a piece (boxed: most
    /// instances never hold one, and an empty slot costs 16 bytes instead of 56).
    frames: Vec<Mutex<Option<Box<DataFrame>>>>,
    /// Readers of each instance's frame that have not run yet.
    uses: Vec<AtomicUsize>,
    /// Whether an input of this instance failed (it is then not run).
    poisoned: Vec<AtomicBool>,
    stages: Vec<StageState>,
    errors: Mutex<Vec<(usize, RunError)>>,
    /// Every failure, printed as it happens and counted per stage (see [`super::failures`]).
    failures: Failures,
    skipped: AtomicUsize,
    /// Instances whose inputs are all done, and how many are running (see [`Ready`]).
    ready: Mutex<Ready>,
    /// Wakes a worker when an instance becomes ready or the run ends.
    wake: Condvar,
    /// The instance first in line (see [`Run::rank`]): 0, or in a shard an offset that
    /// differs from shard to shard.
    shift: usize,
    /// In a shard: the instances other shards need too, and how many of them it computed.
    shared: Option<Vec<bool>>,
    shared_computed: AtomicUsize,
    /// In a shard: the instances taken from the store without their inputs (see [`Need`]).
    load_only: Option<Vec<bool>>,
    /// The first failure to store an entry.
    store_error: Mutex<Option<String>>,
    /// Instances to compute a second time and compare ([`super::verify`]), and how many were.
    verify: Vec<bool>,
    verified: AtomicUsize,
    /// Stages a `--verify` found not deterministic.
    distrusted: Mutex<Vec<usize>>,
    /// With a store: each instance's frame digest, once it is stored or read from the store
    /// (what its readers' keys by content are made of, see [`Run::content_key`]).
    digests: Vec<OnceLock<[u8; 32]>>,
}

/// The instances ready to run, first in plan order first (so stages are gathered with few
/// frames waiting for an earlier one), and how many instances workers are running: when none
/// is ready and none runs, nothing can become ready any more and the workers stop.
#[derive(Default)]
struct Ready {
    heap: BinaryHeap<Reverse<(usize, usize)>>,
    running: usize,
    /// A worker panicked (a bug): the others stop taking instances.
    panicked: bool,
}

/// Runs every instance and writes `out_dir/<pipeline>/`. Returns the results directory.
///
/// Dataflow: an instance starts as soon as the instances it reads are done (not when a whole
/// level of the graph is), in plan order among those ready. A frame is kept only while a
/// reader still needs it; stages are gathered in plan order as their instances finish, so
/// memory is about the gathered frames, not one frame per instance. When an instance fails,
/// everything that does not depend on it still runs and is stored; the error names it.
pub fn execute(plan: &Plan, opts: &RunOptions) -> Result<PathBuf, RunError> {
    let started = Instant::now();
    super::provenance::start();
    let mut run = drive(plan, opts, None);
    let failed = run.first_error(opts);
    // A dataset that is not on this machine: the caller skips the pipeline (or fails it),
    // and there is nothing to write.
    if let Some(e) = failed.as_ref().filter(|e| e.unavailable) {
        return Err(RunError { ..e.clone() });
    }
    if opts.verify > 0 {
        let checked = run.verified.load(Ordering::Relaxed);
        tracing::info!(
            "{}: --verify: {checked} instance(s) of stages that run programs computed again, each gave the same bytes{}",
            plan.name,
            if checked < opts.verify { " (that is all it has)" } else { "" }
        );
    }
    // Early cutoff, said where it happened: what an edit upstream did not change.
    for (st, stage) in run.stages.iter().zip(&plan.stages) {
        let n = st.by_content.load(Ordering::Relaxed);
        if n > 0 {
            let inputs: Vec<String> = stage
                .inputs
                .iter()
                .map(|&u| format!("`{}`", plan.stages[u].name))
                .collect();
            tracing::info!(
                "{}: stage `{}`: {n} instance(s) kept: input {} ran again and came out the same",
                plan.name,
                stage.name,
                inputs.join(", ")
            );
        }
    }
    let fail = |message: String| RunError::of_pipeline(plan, message);
    let failed_lines = run.failures.summary();
    let run_broken: Vec<bool> = run
        .stages
        .iter()
        .map(|s| s.broken.load(Ordering::Acquire))
        .collect();
    let mut content_keys: Vec<Vec<_>> = plan
        .stages
        .iter()
        .enumerate()
        .map(|(si, s)| {
            (0..s.instances.len())
                .map(|ii| run.content_key(run.offset[si] + ii))
                .collect()
        })
        .collect();
    let mut outputs = Vec::with_capacity(plan.stages.len());
    for (si, st) in run.stages.into_iter().enumerate() {
        let frame = if plan.stages[si].store {
            st.whole
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .map(|f| Arc::try_unwrap(f).unwrap_or_else(|f| (*f).clone()))
        } else {
            None
        };
        let rows = match (&frame, &st.gather) {
            (Some(_), Some(g)) => std::mem::take(&mut lock(g).rows),
            _ => Vec::new(),
        };
        outputs.push(StageOutput {
            content_keys: std::mem::take(&mut content_keys[si]),
            frame,
            rows,
            artifacts: st.artifacts.into_inner().unwrap_or_else(|e| e.into_inner()),
            seconds: st.seconds.into_inner().unwrap_or_else(|e| e.into_inner()),
            cached: st.cached.into_inner(),
            made: st
                .made
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .finish(),
        });
    }
    // What the results lack: stages left out (`--stages`), and stages that have no frame
    // because an instance of theirs or of an input failed. What succeeded is written anyway.
    let broken: Vec<String> = plan
        .stages
        .iter()
        .zip(&outputs)
        .zip(&run_broken)
        .filter(|(_, b)| **b)
        .map(|((s, _), _)| s.name.clone())
        .collect();
    let incomplete =
        (!plan.left_out.is_empty() || failed.is_some()).then(|| super::manifest::Incomplete {
            left_out: plan.left_out.clone(),
            failed: broken
                .iter()
                .map(|name| {
                    match failed_lines
                        .iter()
                        .find(|l| l.contains(&format!("stage `{name}`:")))
                    {
                        Some(l) => l.clone(),
                        None => format!(
                            "stage `{name}`: not run, or not all of it, because an input failed"
                        ),
                    }
                })
                .collect(),
        });
    let facts = RunFacts {
        out_dir: &opts.out_dir,
        set: &opts.set,
        jobs: opts.jobs,
        incomplete,
    };
    let dir = results::write(plan, &outputs, &facts, started.elapsed().as_secs_f64())
        .map_err(|e| fail(format!("writing results: {e:#}")))?;
    if let Some(s) = &opts.store {
        if let Err(e) = super::record::record(plan, s) {
            tracing::warn!("could not record this run for --dry-run: {e:#}");
        }
    }
    match failed {
        Some(mut e) => {
            e.message.push_str(&format!(
                "\n  what succeeded is in {} (its manifest says what is missing)",
                dir.display()
            ));
            Err(e)
        }
        None => Ok(dir),
    }
}

/// What one shard did with a pipeline.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardReport {
    /// Instances this shard owns (its share), and how many of them were in the store
    /// already (from an earlier or concurrent run: not run again).
    pub owned: usize,
    pub owned_stored: usize,
    /// Instances computed: owned, and shared ones (read by several shards) that were missing.
    pub computed: usize,
    pub shared_computed: usize,
    /// Instances read from the store as inputs of those computed.
    pub loaded: usize,
    /// Seconds the computed instances took (their sum over threads): this shard's share of
    /// the work, whatever the counts.
    pub compute_seconds: f64,
}

/// Runs shard `shard`'s share of `plan` into the store (`owners` from
/// [`super::shard::owners`]) and writes no results directory: only the instances it owns that
/// are missing from the store (or forced), and what they read that is missing too, run;
/// what they read that is stored is loaded.
pub fn execute_shard(
    plan: &Plan,
    opts: &RunOptions,
    shard: Shard,
    owners: &[u32],
) -> Result<ShardReport, RunError> {
    let store = opts.store.as_ref().ok_or_else(|| {
        RunError::of_pipeline(
            plan,
            "a shard needs the instance store (it is where its work goes)".into(),
        )
    })?;
    let mut stage_of = Vec::with_capacity(owners.len());
    let mut offset = Vec::with_capacity(plan.stages.len());
    for (si, s) in plan.stages.iter().enumerate() {
        offset.push(stage_of.len());
        stage_of.extend(std::iter::repeat_n(si, s.instances.len()));
    }
    let missing = |g: usize| {
        let si = stage_of[g];
        opts.force.covers(&plan.stages[si].name)
            || !store.contains(&plan.stages[si].instances[g - offset[si]].store_key)
    };
    let n = owners.len();
    let mut need = Need {
        need: vec![false; n],
        load: vec![false; n],
        shared: owners.iter().map(|&o| o == super::shard::SHARED).collect(),
        shift: shard.index * n / shard.count,
    };
    let mut report = ShardReport::default();
    let mut stack = Vec::new();
    for (g, &o) in owners.iter().enumerate() {
        if o as usize != shard.index {
            continue;
        }
        report.owned += 1;
        if missing(g) {
            stack.push(g);
        } else {
            report.owned_stored += 1;
        }
    }
    while let Some(g) = stack.pop() {
        if need.need[g] {
            continue;
        }
        need.need[g] = true;
        if owners[g] as usize != shard.index && !missing(g) {
            need.load[g] = true;
            report.loaded += 1;
            continue;
        }
        let si = stage_of[g];
        for src in sources(plan, &offset, si, g - offset[si]) {
            stack.extend(src.pieces());
        }
    }
    let mut run = drive(plan, opts, Some(need));
    if let Some(e) = run.first_error(opts) {
        return Err(e);
    }
    let cached: usize = run
        .stages
        .iter()
        .map(|s| s.cached.load(Ordering::Relaxed))
        .sum();
    report.computed = run.progress.done.load(Ordering::Relaxed) - cached;
    report.shared_computed = run.shared_computed.load(Ordering::Relaxed);
    report.compute_seconds = run
        .stages
        .iter()
        .map(|s| lock(&s.seconds).iter().sum::<f64>())
        .sum();
    Ok(report)
}

/// Which instances a shard's run touches: `need` (run them, or load them from the store),
/// and of those, `load`: taken from the store only (their own inputs are not needed); and
/// where in plan order it starts ([`Run::rank`]).
struct Need {
    need: Vec<bool>,
    load: Vec<bool>,
    /// Instances other shards need too.
    shared: Vec<bool>,
    shift: usize,
}

/// Runs the instances (all, or those `need` names), flushes the store, and returns the run's
/// state (its failures: [`Run::first_error`]).
fn drive<'a>(plan: &'a Plan, opts: &'a RunOptions, need: Option<Need>) -> Run<'a> {
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
    fn first_error(&mut self, opts: &RunOptions) -> Option<RunError> {
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
                if !needed(g) || load_only(g) {
                    // Never run (`ready` takes only instances with nothing to wait for), or
                    // taken from the store without reading its inputs.
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
                if !needed(g) || load_only(g) {
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
            super::verify::choose(plan, &offset, opts.verify)
        } else {
            Vec::new()
        };
        Run {
            plan,
            opts,
            progress: Progress::new(
                &plan.name,
                need.as_ref()
                    .map_or(n, |x| x.need.iter().filter(|&&b| b).count()),
                opts.terminal,
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
    /// frame to its readers and starts those that have nothing left to wait for.
    fn instance(&self, g: usize) {
        let (si, ii) = self.locate(g);
        let stage = &self.plan.stages[si];
        let inst = &stage.instances[ii];
        let outcome = if self.poisoned[g].load(Ordering::Acquire) {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            self.progress.tick_failed();
            None
        } else {
            let forced = self.opts.force.covers(&stage.name);
            let cached = if forced {
                None
            } else {
                self.opts.store.as_ref().and_then(|s| {
                    s.get(&inst.store_key).or_else(|| {
                        // A shard looks again: another shard may have stored it meanwhile.
                        self.load_only
                            .is_some()
                            .then(|| s.get_fresh(&inst.store_key))
                            .flatten()
                    })
                })
            };
            // What other shards need too is computed by one of them: the others wait for it.
            let mut claim = None;
            let cached = match (cached, &self.opts.store) {
                (None, Some(s)) if !forced && self.shared.as_ref().is_some_and(|x| x[g]) => {
                    match s.claims().claim(&inst.store_key) {
                        Claimed::Mine(c) => {
                            claim = Some(c);
                            // Its last holder may have stored it just before this claimed it.
                            s.get_fresh(&inst.store_key)
                        }
                        Claimed::Theirs => {
                            tracing::debug!(
                                "{} {} {{{}}}: another shard is computing it; waiting",
                                self.plan.name,
                                stage.name,
                                inst.label()
                            );
                            self.defer(g);
                            return;
                        }
                    }
                }
                (c, _) => c,
            };
            // Early cutoff: not stored under its key (an input's key changed), perhaps under
            // its key by content (the input came out the same). Found there, it is stored
            // under its key too, so the next run and `--dry-run` find it at once.
            let by_content = self.content_key(g);
            let (cached, cut_off) = match (cached, &self.opts.store, by_content) {
                (None, Some(s), Some(ck)) if !forced => match s.get(&ck) {
                    Some(hit) => {
                        if let Err(e) = s.put(&inst.store_key, stage.kind.name, &hit) {
                            self.not_stored(s, e);
                        }
                        (Some(hit), true)
                    }
                    None => (None, false),
                },
                (c, _, _) => (c, false),
            };
            match cached {
                Some(hit) => {
                    tracing::debug!(
                        "{} {} {{{}}}: from the store ({}{})",
                        self.plan.name,
                        stage.name,
                        inst.label(),
                        inst.store_key,
                        if cut_off {
                            ", by content: its inputs came out the same"
                        } else {
                            ""
                        }
                    );
                    if cut_off {
                        self.stages[si].by_content.fetch_add(1, Ordering::Relaxed);
                    }
                    // Stored under its key but not under its key by content (a kill between the
                    // two writes, or an older store): filed there too, so the next edit above
                    // it can cut off here.
                    if let (false, Some(s), Some(ck)) = (cut_off, &self.opts.store, by_content) {
                        if !forced && !s.contains(&ck) {
                            if let Err(e) = s.put(&ck, stage.kind.name, &hit) {
                                self.not_stored(s, e);
                            }
                        }
                    }
                    self.progress.tick(true);
                    if let (Some(d), Some(slot)) = (hit.digest, self.digests.get(g)) {
                        let _ = slot.set(d);
                    }
                    let hit = InstanceResult {
                        frame: in_stage_order(hit.frame, &inst.key()),
                        ..hit
                    };
                    Some((hit, true))
                }
                None if self.load_only.as_ref().is_some_and(|l| l[g]) => {
                    self.fail(g, RunError::of_instance(
                        self.plan,
                        &stage.name,
                        inst,
                        "its store entry disappeared while this shard ran (a concurrent `dplab store gc`?): run the shard again".into(),
                        false,
                    ));
                    None
                }
                // Its stage failed on too many instances (`--max-failures`): the others are
                // not run, and their readers neither.
                None if self.failures.stopped(si) => {
                    self.failures.not_run(si);
                    self.progress.tick_failed();
                    None
                }
                None => match self.compute(si, ii, false) {
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
                        // Stored as soon as it exists: a run that fails or is killed later
                        // keeps it. One to compute again (`--verify`) is stored once the two
                        // agree: a program that is not deterministic leaves nothing a later
                        // run would take.
                        let verifying = self.verify.get(g) == Some(&true);
                        if let Some(s) = self.opts.store.as_ref().filter(|_| !verifying) {
                            self.put(s, g, claim.is_some(), &res);
                        }
                        // Stored where waiting shards look: they may take it now.
                        drop(claim.take());
                        if self.shared.as_ref().is_some_and(|x| x[g]) {
                            self.shared_computed.fetch_add(1, Ordering::Relaxed);
                        }
                        self.progress.tick(false);
                        Some((res, false))
                    }
                    Err(e) => {
                        let message =
                            if let Some(mc) = e.downcast_ref::<crate::kind::MissingColumn>() {
                                self.plan.column_error(si, inst, mc)
                            } else if let Some(pe) = e.downcast_ref::<crate::kind::ParamError>() {
                                self.plan.located(si, &pe.path.join("."), &pe.message)
                            } else {
                                format!("{e:#}")
                            };
                        self.progress.tick_failed();
                        let unavailable = e.downcast_ref::<crate::kind::Unavailable>().is_some();
                        self.fail(
                            g,
                            RunError::of_instance(
                                self.plan,
                                &stage.name,
                                inst,
                                message,
                                unavailable,
                            ),
                        );
                        None
                    }
                },
            }
        };
        let outcome = match outcome {
            Some((res, hit)) if self.verify.get(g) == Some(&true) => {
                self.verify_again(si, ii, g, res, hit)
            }
            o => o,
        };
        self.release_inputs(g);
        let st = &self.stages[si];
        match outcome {
            Some((res, hit)) => {
                if hit {
                    st.cached.fetch_add(1, Ordering::Relaxed);
                    lock(&st.made).add(ii, res.made.as_ref());
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
            None => self.break_stage(si, g),
        }
        let stage_done = st.remaining.fetch_sub(1, Ordering::AcqRel) == 1;
        if stage_done {
            if let Some(gather) = &st.gather {
                if !st.broken.load(Ordering::Acquire) {
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

    /// Instance `g` waits for another shard to store it: back in line after every instance
    /// that can run now. When nothing else can, this worker pauses first, so waiting costs a
    /// look at the store every [`CLAIM_POLL`], not a spinning core.
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

    /// Instance `g`'s key by what it reads ([`super::key::content_key`]): its own key and the
    /// digests of the frames of its inputs, once all are known (with a store, after they ran
    /// or were read from it). `None` for an instance that reads nothing (its key already is
    /// its content) or without a store.
    fn content_key(&self, g: usize) -> Option<super::key::Key> {
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
        Some(super::key::content_key(&inst.own_key, &all))
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
        };
        self.fail(g, err);
        self.stages[si].broken.store(true, Ordering::Release);
    }

    /// Instance `g` (or its stage) failed: told at once ([`Failures`]), counted in the
    /// progress, kept for the end of the run.
    fn fail(&self, g: usize, err: RunError) {
        let (si, _) = self.locate(g);
        let quiet = err.unavailable || INTERRUPTED.load(Ordering::Relaxed);
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
                RUNNING.fetch_add(1, Ordering::Relaxed);
                self.instance(g);
                RUNNING.fetch_sub(1, Ordering::Relaxed);
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
        if self.load_only.as_ref().is_some_and(|l| l[g]) {
            return;
        }
        let (si, ii) = self.locate(g);
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
            Ok(again) => match super::verify::first_difference(&res, &again) {
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

    /// Computes instance `ii` of stage `si`; `again` for `--verify`'s second computation
    /// ([`Ctx::again`]).
    fn compute(&self, si: usize, ii: usize, again: bool) -> Result<InstanceResult> {
        let plan = self.plan;
        let stage = &plan.stages[si];
        let inst = &stage.instances[ii];
        tracing::trace!("{} {} {{{}}}: starts", plan.name, stage.name, inst.label());
        let t0 = Instant::now();
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
        let st = &self.stages[si];
        let key = inst.key();
        // The kind sees its axes by name, not in the order `axes:` lists them: its output
        // must not depend on that order, which its key leaves out (see `key::store_key`).
        let mut by_name = key.clone();
        by_name.sort_by(|a, b| a.0.cmp(&b.0));
        let label: Vec<String> = by_name.iter().map(|(a, v)| format!("{a}={v}")).collect();
        let mut ctx = Ctx {
            inputs: &inputs,
            axis_names: &st.axis_names,
            input_names: &st.input_names,
            rng: rng_from_seed(inst.seed),
            seed: inst.seed,
            files: &plan.files,
            stage: &stage.name,
            label: &label.join(", "),
            axes: &by_name,
            again,
        };
        let out = stage.build(inst)?.run(&mut ctx)?;
        let frame = with_axis_columns(out.frame, &key)?;
        // Planning checked later stages against the columns the kind declares: an output that
        // does not bear them out is a bug in the kind, caught at its first run.
        if let Some(cols) = &stage.columns {
            let produced = frame.get_column_names();
            anyhow::ensure!(
                produced.iter().map(|c| c.as_str()).eq(cols.iter().map(String::as_str)),
                "kind `{}` declares the output columns [{}] but produced [{}] (a bug in the kind: please report it)",
                stage.kind.name,
                cols.join(", "),
                produced.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
        Ok(InstanceResult {
            frame,
            artifacts: out.artifacts,
            seconds: t0.elapsed().as_secs_f64(),
            digest: None,
            made: None,
        })
    }
}

/// How instance `ii` of stage `si` reads each of its inputs: a whole stage when it reads
/// every instance of it (more than one), otherwise the instances it reads.
fn sources<'p>(
    plan: &'p Plan,
    offset: &'p [usize],
    si: usize,
    ii: usize,
) -> impl Iterator<Item = Source<'p>> + 'p {
    let stage = &plan.stages[si];
    let inst = &stage.instances[ii];
    stage
        .inputs
        .iter()
        .zip(inst.inputs.iter())
        .map(move |(&up, js)| {
            if js.len() > 1 && js.len() == plan.stages[up].instances.len() {
                Source::Whole(up)
            } else {
                Source::Pieces(offset[up], js)
            }
        })
}

/// A poisoned lock still holds consistent data here (every critical section is a store).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub use crate::frames::concat;

/// Puts one constant column per axis value at the front of the frame (replacing any
/// column of the same name), so a gathered or stored frame says which instance each row
/// came from.
///
/// A column of the axis's name that the stage passed through from its inputs holds the
/// instance's value on the rows of inputs that vary over the axis, and is empty on the rows
/// of inputs that do not (a `frame.stack` told by `over:` to vary over an axis only one of
/// its inputs varies over): every row of the instance belongs to its axis values, so the
/// column is replaced by the value. Any other value in it is the stage's own data, which an
/// axis value must never overwrite.
fn with_axis_columns(frame: DataFrame, key: &[(Arc<str>, AxisValue)]) -> Result<DataFrame> {
    if key.is_empty() {
        return Ok(frame);
    }
    let height = frame.height();
    let mut cols: Vec<Column> = key
        .iter()
        .map(|(axis, v)| match (v, v.cell()) {
            (AxisValue::Int(i), _) => {
                Column::new_scalar((&**axis).into(), Scalar::from(*i), height)
            }
            (_, Ok(x)) => Column::new_scalar((&**axis).into(), Scalar::from(x), height),
            (_, Err(s)) => {
                Column::new_scalar((&**axis).into(), Scalar::from(PlSmallStr::from(s)), height)
            }
        })
        .collect();
    for c in frame.columns() {
        match key.iter().find(|(a, _)| &**a == c.name().as_str()) {
            None => cols.push(c.clone()),
            Some((axis, v)) => {
                if let Some(other) = other_value(c, v) {
                    anyhow::bail!(
                        "the stage's output has a column `{axis}` of its own (holding {other} where this instance's `{axis}` is {v}), and `{axis}` is also an axis the stage varies over: the axis value would overwrite it; rename the axis, or the column"
                    );
                }
            }
        }
    }
    Ok(DataFrame::new(height, cols)?)
}

/// A stored frame with its axis columns in the order of the stage's axes, which may differ
/// from the order they had when it was stored (the key leaves that order out, see
/// `key::store_key`). A frame without them all is left as it is.
fn in_stage_order(frame: DataFrame, key: &[(Arc<str>, AxisValue)]) -> DataFrame {
    let names = frame.get_column_names();
    if key.is_empty() || names.iter().zip(key).all(|(c, (a, _))| c.as_str() == &**a) {
        return frame;
    }
    let mut order: Vec<PlSmallStr> = key.iter().map(|(a, _)| (&**a).into()).collect();
    order.extend(
        names
            .iter()
            .filter(|c| !key.iter().any(|(a, _)| &**a == c.as_str()))
            .map(|c| (*c).clone()),
    );
    frame.select(order).unwrap_or(frame)
}

/// A value of `c` other than the axis value `v` (nulls aside), as text, if any. A number and
/// its text are different values: an engine axis column of numbers is a number column.
fn other_value(c: &Column, v: &AxisValue) -> Option<String> {
    if c.null_count() == c.len() {
        return None;
    }
    let t = c.dtype();
    match v.cell() {
        Ok(x) if t.is_primitive_numeric() => {
            let c = c.cast(&DataType::Float64).ok()?;
            let ca = c.f64().ok()?;
            let other = ca
                .iter()
                .flatten()
                .find(|y| *y != x && !(y.is_nan() && x.is_nan()));
            other.map(|y| y.to_string())
        }
        Err(s) if t == &DataType::String => c
            .str()
            .ok()?
            .iter()
            .flatten()
            .find(|y| *y != s)
            .map(|y| format!("`{}`", crate::text::brief(y, 40))),
        _ => Some(format!("values of type {t}")),
    }
}

/// Where a pipeline's results go.
pub fn results_dir(out: &Path, plan: &Plan) -> PathBuf {
    out.join(&plan.name)
}
