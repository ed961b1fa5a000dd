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
//!
//! # Its rooms
//! - this file: what the caller sees — [`RunOptions`], [`RunError`], [`execute`] (a whole
//!   run, then the results directory) and [`execute_shard`] (a shard's share, into the store);
//! - `run.rs`: the scheduler — the run's shared state, the worker threads, which instance is
//!   ready, what a finished instance hands to its readers;
//! - `steps.rs`: one instance's steps, as functions that know no scheduler: its look-up in the
//!   store (with a shard's claim and the early cutoff), its computation, the message of its
//!   failure;
//! - `gather.rs`: inputs read as a whole stage or as pieces, and frames gathered in plan order;
//! - `slots.rs`: how many instances run at once across the pipelines of one command (they
//!   run at once, each with its scheduler).
//!
//! Progress is ticked in [`super::progress`], failures told in [`super::failures`].

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::dryrun::Force;
use super::failures::MaxFailures;
use super::instance_store::InstanceStore;
use super::plan::Plan;
pub use super::progress::interrupted;
use super::results::{self, RunFacts, StageOutput};
use super::shard::Shard;
use gather::sources;
use run::{drive, lock, Need};

mod gather;
mod run;
mod slots;
mod steps;

pub use slots::Slots;

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
    /// The results directory, when what succeeded was written there.
    pub written: Option<Box<std::path::Path>>,
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
    pub(super) fn of_instance(
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
            written: None,
        }
    }

    /// A failure of the pipeline as a whole, not of one stage or instance.
    pub(super) fn of_pipeline(plan: &Plan, message: String) -> Self {
        RunError {
            pipeline: plan.name.clone(),
            stage: String::new(),
            instance: String::new(),
            message,
            unavailable: false,
            written: None,
        }
    }
}

/// Where and how to run.
pub struct RunOptions {
    pub out_dir: PathBuf,
    /// Told the counts as the run goes.
    pub reporter: Arc<dyn super::progress::Reporter>,
    /// This pipeline's worker threads.
    pub jobs: usize,
    /// What its workers take a slot of to run an instance: shared by the pipelines a command
    /// runs at once, so that together they run `--jobs` instances.
    pub slots: Arc<Slots>,
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
    say_what_is_stored(plan, opts);
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
    // Early cutoff, said where it happened: what an edit upstream did not change. Its
    // inputs may have run again or been kept themselves (by content, one level up): either
    // way they came out as they were when this stage's instances were stored.
    for (st, stage) in run.stages.iter().zip(&plan.stages) {
        let n = st.by_content.load(Ordering::Relaxed);
        if n > 0 {
            let inputs: Vec<String> = stage
                .inputs
                .iter()
                .map(|&u| format!("`{}`", plan.stages[u].name))
                .collect();
            tracing::info!(
                "{}: stage `{}`: {n} instance(s) taken from the store by content: what {} gave is the same as when they were stored",
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
    let absent: Vec<bool> = run
        .stages
        .iter()
        .map(|s| s.absent.load(Ordering::Acquire))
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
        // What this run did not make is kept from the results directory's earlier run.
        let carry = if run_broken[si] {
            Some(results::Carry::Failed)
        } else if absent[si] {
            Some(results::Carry::NotAsked)
        } else {
            None
        };
        outputs.push(StageOutput {
            carry,
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
    // What the results lack: stages that have no frame because an instance of theirs or of
    // an input failed (each with why). Stages this run did not make keep their earlier
    // outputs; the writer says which of those are stale, and which had none to keep.
    let broken: Vec<String> = plan
        .stages
        .iter()
        .zip(&run_broken)
        .filter(|(_, b)| **b)
        .map(|(s, _)| s.name.clone())
        .collect();
    let failed_stages: Vec<String> = broken
        .iter()
        .map(|name| {
            match failed_lines
                .iter()
                .find(|l| l.contains(&format!("stage `{name}`:")))
            {
                Some(l) => l.clone(),
                None => {
                    format!("stage `{name}`: not run, or not all of it, because an input failed")
                }
            }
        })
        .collect();
    let facts = RunFacts {
        out_dir: &opts.out_dir,
        set: &opts.set,
        jobs: opts.jobs,
        failed: failed_stages,
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
            e.written = Some(dir.clone().into_boxed_path());
            Err(e)
        }
        None => Ok(dir),
    }
}

/// Says, before anything runs, how many of the instances this run goes through the store holds
/// already (under their keys). A run killed with SIGKILL cannot say what it left: its last
/// progress line is as old as its last tick (every few seconds in a log), and the instances
/// stored since are more. The next run says the exact number before it starts.
fn say_what_is_stored(plan: &Plan, opts: &RunOptions) {
    let Some(store) = &opts.store else {
        return;
    };
    let forced = |s: &super::plan::PlannedStage| opts.force.covers(&s.name);
    let (mut total, mut stored) = (0usize, 0usize);
    for s in plan.stages.iter().filter(|s| !s.kept) {
        total += s.instances.len();
        if !forced(s) {
            stored += s
                .instances
                .iter()
                .filter(|i| store.contains(&i.store_key))
                .count();
        }
    }
    if stored > 0 {
        tracing::info!(
            "{}: {stored} of {total} instances are in the store already ({}): they are taken, not computed",
            plan.name,
            store.root().display()
        );
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
