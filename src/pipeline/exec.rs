//! Execution: runs a plan's instances level by level in parallel (rayon), then stores the
//! results atomically. Instances never share a generator and results are assembled in
//! plan order, so the output does not depend on `--jobs` or on scheduling.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use polars::prelude::*;
use rayon::prelude::*;

use super::cache::InstanceStore;
use super::plan::{Plan, PlannedStage};
use super::spec::AxisValue;
use super::store;
use crate::kind::{rng_from_seed, Artifact, Ctx};

/// A stage instance that failed while running: exit code 1.
#[derive(Debug)]
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

/// Progress over all instances: a bar on a terminal, a plain line every few seconds otherwise.
pub struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    done: AtomicUsize,
    /// How many of `done` came from the instance store.
    cached: AtomicUsize,
    last_line: Mutex<Instant>,
    label: String,
}

impl Progress {
    pub fn new(label: &str, total: usize, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let b = ProgressBar::new(total as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} instances ({msg} from the store), ETA {eta}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            b.set_prefix(label.to_string());
            b
        });
        Progress {
            bar,
            total,
            done: AtomicUsize::new(0),
            cached: AtomicUsize::new(0),
            last_line: Mutex::new(Instant::now()),
            label: label.to_string(),
        }
    }

    /// One more instance done: computed, or taken from the store (`cached`).
    fn tick(&self, cached: bool) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let hits = self
            .cached
            .fetch_add(usize::from(cached), Ordering::Relaxed)
            + usize::from(cached);
        match &self.bar {
            Some(b) => {
                b.set_message(hits.to_string());
                b.inc(1);
            }
            None => {
                let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= Duration::from_secs(5) || done == self.total {
                    *last = Instant::now();
                    tracing::info!(
                        "{}: {done}/{} instances ({} computed, {hits} from the store)",
                        self.label,
                        self.total,
                        done - hits
                    );
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// What one instance produced.
pub struct InstanceResult {
    pub frame: DataFrame,
    pub artifacts: Vec<Artifact>,
    /// Compute time (of the run that computed it, when it came from the store).
    pub seconds: f64,
}

/// Which stages to recompute even when the store has them.
#[derive(Clone, Debug, Default)]
pub enum Force {
    #[default]
    Nothing,
    All,
    Stages(Vec<String>),
}

impl Force {
    pub fn covers(&self, stage: &str) -> bool {
        match self {
            Force::Nothing => false,
            Force::All => true,
            Force::Stages(s) => s.iter().any(|x| x == stage),
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
}

/// Runs every instance and writes `out_dir/<pipeline>/`. Returns the results directory.
pub fn execute(plan: &Plan, opts: &RunOptions) -> Result<PathBuf, RunError> {
    let started = Instant::now();
    let fail = |stage: &str, instance: &str, message: String| RunError {
        pipeline: plan.name.clone(),
        stage: stage.to_string(),
        instance: instance.to_string(),
        message,
        unavailable: false,
    };
    let progress = Progress::new(&plan.name, plan.instance_count(), opts.terminal);
    let mut results: Vec<Vec<Option<InstanceResult>>> = plan
        .stages
        .iter()
        .map(|s| s.instances.iter().map(|_| None).collect())
        .collect();
    let mut cached: Vec<Vec<bool>> = plan
        .stages
        .iter()
        .map(|s| vec![false; s.instances.len()])
        .collect();
    let max_depth = plan.stages.iter().map(|s| s.depth).max().unwrap_or(0);
    for depth in 0..=max_depth {
        let work: Vec<(usize, usize)> = plan
            .stages
            .iter()
            .enumerate()
            .filter(|(_, s)| s.depth == depth)
            .flat_map(|(si, s)| (0..s.instances.len()).map(move |ii| (si, ii)))
            .collect();
        let done: Vec<Result<(InstanceResult, bool), RunError>> = work
            .par_iter()
            .map(|&(si, ii)| {
                let stage = &plan.stages[si];
                let inst = &stage.instances[ii];
                let store = opts.store.as_ref();
                if !opts.force.covers(&stage.name) {
                    if let Some(hit) = store.and_then(|s| s.get(&inst.store_key)) {
                        progress.tick(true);
                        return Ok((hit, true));
                    }
                }
                let r = run_instance(plan, stage, ii, &results).map_err(|e| RunError {
                    unavailable: e.downcast_ref::<crate::kind::Unavailable>().is_some(),
                    ..fail(&stage.name, &inst.label, format!("{e:#}"))
                });
                // Stored as soon as it exists: a run that fails or is killed later keeps it.
                if let (Ok(res), Some(s)) = (&r, store) {
                    if let Err(e) = s.put(&inst.store_key, stage.kind.name, res) {
                        tracing::warn!("not stored ({}): {e:#}", s.root().display());
                    }
                }
                progress.tick(false);
                r.map(|res| (res, false))
            })
            .collect();
        for (&(si, ii), r) in work.iter().zip(done) {
            match r {
                Ok((res, hit)) => {
                    results[si][ii] = Some(res);
                    cached[si][ii] = hit;
                }
                Err(e) => {
                    progress.finish();
                    return Err(e);
                }
            }
        }
    }
    progress.finish();
    let dir = store::write(
        plan,
        &results,
        &cached,
        opts,
        started.elapsed().as_secs_f64(),
    )
    .map_err(|e| fail("", "", format!("writing results: {e:#}")))?;
    if let Some(s) = &opts.store {
        if let Err(e) = super::dryrun::record(plan, s) {
            tracing::warn!("could not record this run for --dry-run: {e:#}");
        }
    }
    Ok(dir)
}

fn run_instance(
    plan: &Plan,
    stage: &PlannedStage,
    ii: usize,
    results: &[Vec<Option<InstanceResult>>],
) -> Result<InstanceResult> {
    let inst = &stage.instances[ii];
    let t0 = Instant::now();
    let mut inputs = Vec::with_capacity(stage.inputs.len());
    for (k, &up) in stage.inputs.iter().enumerate() {
        let frames: Vec<&DataFrame> = inst.inputs[k]
            .iter()
            .map(|&j| {
                &results[up][j]
                    .as_ref()
                    .expect("upstream level finished")
                    .frame
            })
            .collect();
        inputs.push(concat(&frames).with_context(|| {
            format!("joining the instances of input `{}`", plan.stages[up].name)
        })?);
    }
    let input_names: Vec<String> = stage
        .inputs
        .iter()
        .map(|&i| plan.stages[i].name.clone())
        .collect();
    let mut axis_names: Vec<String> = Vec::new();
    for &up in &stage.inputs {
        for a in &plan.stages[up].axes {
            if !axis_names.contains(a) {
                axis_names.push(a.clone());
            }
        }
    }
    let mut ctx = Ctx {
        inputs: &inputs,
        axis_names: &axis_names,
        input_names: &input_names,
        rng: rng_from_seed(inst.seed),
        seed: inst.seed,
        files: &plan.files,
        stage: &stage.name,
        label: &inst.label,
    };
    let out = inst.run.run(&mut ctx)?;
    let frame = with_axis_columns(out.frame, &inst.key)?;
    Ok(InstanceResult {
        frame,
        artifacts: out.artifacts,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

pub use crate::frames::concat;

/// Puts one constant column per axis value at the front of the frame (replacing any
/// column of the same name), so a gathered or stored frame says which instance each row
/// came from.
fn with_axis_columns(frame: DataFrame, key: &[(String, AxisValue)]) -> Result<DataFrame> {
    if key.is_empty() {
        return Ok(frame);
    }
    let height = frame.height();
    let mut cols: Vec<Column> = key
        .iter()
        .map(|(axis, v)| match v {
            AxisValue::Num(x) => Column::new_scalar(axis.as_str().into(), Scalar::from(*x), height),
            AxisValue::Text(s) => Column::new_scalar(
                axis.as_str().into(),
                Scalar::from(PlSmallStr::from(s.as_str())),
                height,
            ),
        })
        .collect();
    for c in frame.columns() {
        match key.iter().find(|(a, _)| a.as_str() == c.name().as_str()) {
            None => cols.push(c.clone()),
            // A column passed through from an input that already carries this axis holds
            // the same value on every row and is replaced; any other column of that name is
            // the stage's own data, which an axis value must never overwrite.
            Some((axis, v)) if !holds_only(c, v) => anyhow::bail!(
                "the stage's output has a column `{axis}` of its own, and `{axis}` is also an axis: the axis value would overwrite it; rename the axis"
            ),
            Some(_) => {}
        }
    }
    Ok(DataFrame::new(height, cols)?)
}

/// Whether every row of `c` is the axis value `v`.
fn holds_only(c: &Column, v: &AxisValue) -> bool {
    match v {
        AxisValue::Num(x) => c
            .cast(&DataType::Float64)
            .ok()
            .and_then(|c| c.f64().ok().map(|ca| ca.iter().all(|y| y == Some(*x))))
            .unwrap_or(false),
        AxisValue::Text(s) => c
            .str()
            .map(|ca| ca.iter().all(|y| y == Some(s.as_str())))
            .unwrap_or(false),
    }
}

/// Where a pipeline's results go.
pub fn results_dir(out: &Path, plan: &Plan) -> PathBuf {
    out.join(&plan.name)
}
