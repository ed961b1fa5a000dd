//! Writing results: frames as CSV and Parquet, artifacts, and the manifest — first into a
//! hidden staging directory, which replaces the previous results only once everything is
//! written. A failed or interrupted run leaves the previous results as they were.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use polars::prelude::*;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::manifest::{
    Incomplete, InputFile, Kept, Manifest, OutputFile, PipelineInfo, Seed, StageEntry, WithoutSeeds,
};
use super::plan::{Plan, PlannedStage};
use super::spec::AxisValue;
use crate::kind::Artifact;
use crate::text::hex;
use instances::outputs_instances;
pub use kept::Carry;
use kept::{
    earlier_lacks, earlier_run, instances_moved, keep_file, kept_entry, names_stage, same_instances,
};

mod instances;
mod kept;

/// What the results directory needs of one stage once all its instances are done: its
/// frames gathered in plan order, its artifacts, and per instance the compute time and
/// whether it came from the store.
pub struct StageOutput {
    /// Set when this run did not make the stage's outputs: the writer keeps those of the
    /// results directory's earlier run, marked (see [`Carry`]).
    pub carry: Option<Carry>,
    /// The instances' frames, concatenated in plan order (`None` when no instance has a
    /// column, as for plots, or when the stage is neither stored nor read whole).
    pub frame: Option<DataFrame>,
    /// Each instance's rows of `frame`, in plan order (empty without a frame).
    pub rows: Vec<usize>,
    /// (instance index, its artifacts), for the instances that made any.
    pub artifacts: Vec<(usize, Vec<Artifact>)>,
    pub seconds: Vec<f64>,
    pub cached: usize,
    /// Per instance, its key by content when it has one ([`super::key::content_key`]): the
    /// manifest lists it beside the key, so `dplab store gc` keeps the entry filed under it.
    pub content_keys: Vec<Option<super::key::Key>>,
    /// When the instances taken from the store were computed.
    pub made: MadeLog,
}

/// What the instances of a stage taken from the store say of when, by which build and in
/// how long they were computed ([`super::instance_store::Made`]): the manifest lists it per
/// instance and sums it up per stage. Each build's text is kept once (a sweep of 10⁶
/// instances from the store is 10⁶ records of a handful of builds).
#[derive(Default)]
pub struct MadeLog {
    builds: Vec<String>,
    /// (instance index, seconds since the epoch, compute seconds, index into `builds`).
    records: Vec<(usize, u64, f64, u32)>,
    /// Instances from the store whose entry has no record.
    unrecorded: u64,
    /// Every instance taken from the store, and (instance, when it finished) for those this run
    /// computed: what `instances.parquet` says of each.
    taken: Vec<usize>,
    here: Vec<(usize, u64)>,
}

impl MadeLog {
    /// Instance `ii` was taken from the store; `made` is what its entry says.
    pub fn add(&mut self, ii: usize, made: Option<&super::instance_store::Made>) {
        self.taken.push(ii);
        let Some(m) = made else {
            self.unrecorded += 1;
            return;
        };
        let b = match self.builds.iter().position(|b| *b == m.by) {
            Some(b) => b,
            None => {
                self.builds.push(m.by.clone());
                self.builds.len() - 1
            }
        };
        self.records.push((ii, m.at, m.seconds, b as u32));
    }

    /// Instance `ii` was computed by this run and finished now.
    pub fn computed_now(&mut self, ii: usize) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.here.push((ii, at));
    }

    /// Done adding: the records in plan order.
    pub fn finish(mut self) -> Self {
        self.records.sort_by_key(|r| r.0);
        self.taken.sort_unstable();
        self.here.sort_unstable();
        self
    }

    /// Whether instance `ii` came from the store, and when, by which build and in how long it
    /// was computed (after [`Self::finish`]; `this_build` and `seconds` for one this run
    /// computed).
    fn made_of(
        &self,
        ii: usize,
        this_build: &str,
        seconds: Option<f64>,
    ) -> (bool, Option<String>, String, Option<f64>) {
        if self.taken.binary_search(&ii).is_ok() {
            return match self.computed(ii) {
                Some(c) => (true, Some(c.at), c.by, Some(c.seconds)),
                None => (true, None, String::new(), None),
            };
        }
        // Neither taken nor computed: it failed, or was not run (an input failed, its stage
        // stopped): no time, build or compute time to give.
        match self.here.binary_search_by_key(&ii, |r| r.0) {
            Ok(i) => (
                false,
                Some(at_text(self.here[i].1)),
                this_build.to_string(),
                seconds,
            ),
            Err(_) => (false, None, String::new(), None),
        }
    }

    /// Instance `ii`'s record (after [`Self::finish`]).
    fn computed(&self, ii: usize) -> Option<super::manifest::Computed> {
        let at = self.records.binary_search_by_key(&ii, |r| r.0).ok()?;
        let (_, at, seconds, b) = self.records[at];
        Some(super::manifest::Computed {
            at: at_text(at),
            by: self.builds[b as usize].clone(),
            seconds,
        })
    }

    /// The stage's summary; `None` when no instance came from the store.
    fn summary(&self) -> Option<super::manifest::FromStore> {
        if self.records.is_empty() && self.unrecorded == 0 {
            return None;
        }
        let first = self.records.iter().map(|r| r.1).min();
        let last = self.records.iter().map(|r| r.1).max();
        // Builds earliest first: by the earliest instance each computed.
        let mut builds: Vec<(u64, &String)> = self
            .builds
            .iter()
            .enumerate()
            .map(|(b, text)| {
                let t = self
                    .records
                    .iter()
                    .filter(|r| r.3 as usize == b)
                    .map(|r| r.1);
                (t.min().unwrap_or(0), text)
            })
            .collect();
        builds.sort();
        Some(super::manifest::FromStore {
            earliest: first.map(at_text).unwrap_or_default(),
            latest: last.map(at_text).unwrap_or_default(),
            builds: builds.into_iter().map(|(_, b)| b.clone()).collect(),
            seconds: self.records.iter().map(|r| r.2).sum(),
            unrecorded: self.unrecorded,
        })
    }
}

fn at_text(at: u64) -> String {
    super::instance_store::Made {
        at,
        by: String::new(),
        seconds: 0.0,
    }
    .at_text()
}

/// What a results directory records of how its run was made.
pub struct RunFacts<'a> {
    /// The directory the results directory goes under (`--out`).
    pub out_dir: &'a Path,
    /// The `--set` arguments.
    pub set: &'a [String],
    pub jobs: usize,
    /// The stages that failed, each with why (one line).
    pub failed: Vec<String>,
}

pub fn write(plan: &Plan, results: &[StageOutput], opts: &RunFacts, wall: f64) -> Result<PathBuf> {
    let name = plan.name.as_str();
    // The planner refuses unsafe names; this guard keeps the writer safe on its own.
    let mut parts = Path::new(name).components();
    anyhow::ensure!(
        matches!(
            (parts.next(), parts.next()),
            (Some(std::path::Component::Normal(_)), None)
        ) && !name.starts_with('.'),
        "refusing to write results for pipeline name {name:?}: not one plain path component"
    );
    fs::create_dir_all(opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    let final_dir = opts.out_dir.join(name);
    // One writer per results directory at a time; concurrent runs of the same pipeline
    // each compute, then swap in turn, and the directory is always one complete result.
    let _lock = lock(opts.out_dir)?;
    recover(opts.out_dir, name, &final_dir)?;
    replaceable(&final_dir, name).map_err(anyhow::Error::msg)?;
    // Read only when some stage keeps its earlier outputs: a manifest of 10⁶ instances is
    // hundreds of MB as a tree.
    let earlier = if results.iter().any(|r| r.carry.is_some()) {
        earlier_run(&final_dir)
    } else {
        None
    };
    let staging = opts
        .out_dir
        .join(format!(".{name}.partial-{}", std::process::id()));
    fs::create_dir_all(&staging)?;
    let earlier = earlier.as_ref().map(|m| (final_dir.as_path(), m));
    let outcome = write_all(plan, results, opts, wall, &staging, earlier);
    if let Err(e) = outcome {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    swap_in(
        &staging,
        &final_dir,
        &opts
            .out_dir
            .join(format!(".{name}.old-{}", std::process::id())),
    )?;
    Ok(final_dir)
}

/// Whether a run of pipeline `name` may replace `dir` with its results: it may if `dir` does
/// not exist, is an empty directory, or is a results directory of this pipeline (a real
/// directory whose `manifest.json` dplab wrote for `name`). Anything else — a file, a link, a
/// source tree that `--out .` and `name: src` would point at — is refused with the reason,
/// so a pipeline file can never make dplab delete a directory it did not create.
pub fn replaceable(dir: &Path, name: &str) -> Result<(), String> {
    let meta = match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
        Ok(m) => m,
    };
    let advice = "move it away or choose another --out";
    if meta.file_type().is_symlink() {
        return Err(format!(
            "{} is a symbolic link: dplab replaces results directories and will not follow a link ({advice})",
            dir.display()
        ));
    }
    if !meta.is_dir() {
        return Err(format!(
            "{} exists and is not a directory: pipeline `{name}` would replace it ({advice})",
            dir.display()
        ));
    }
    let empty = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .next()
        .is_none();
    if empty || written_by_dplab(&dir.join("manifest.json"), name) {
        return Ok(());
    }
    Err(format!(
        "{} exists and is not results of pipeline `{name}` (it has no manifest.json that dplab wrote for `{name}`): a run would replace it ({advice})",
        dir.display()
    ))
}

/// Whether `path` is a regular file holding a dplab manifest of pipeline `name`. The
/// manifest is read as a stream, skipping its per-instance lists, so a large one costs no
/// memory.
fn written_by_dplab(path: &Path, name: &str) -> bool {
    let regular = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    if !regular {
        return false;
    }
    let Ok((f, _)) = crate::regular::open_regular(path) else {
        return false;
    };
    serde_json::from_reader::<_, WithoutSeeds>(std::io::BufReader::new(f))
        .is_ok_and(|m| m.is_dplab() && m.pipeline.name == name)
}

/// Puts `staging` in the place of `final_dir` so that a complete results directory is
/// there at every moment: one atomic exchange (Linux `renameat2(RENAME_EXCHANGE)`), then the
/// old results, now under the staging name, are removed. Where the file system cannot
/// exchange, two renames; a kill between them is repaired by [`recover`] on the next run.
fn swap_in(staging: &Path, final_dir: &Path, old: &Path) -> Result<()> {
    if !final_dir.exists() {
        fs::rename(staging, final_dir).with_context(|| {
            format!("renaming {} to {}", staging.display(), final_dir.display())
        })?;
        return sync_dir(final_dir.parent());
    }
    match exchange(staging, final_dir) {
        Ok(()) => {
            sync_dir(final_dir.parent())?;
            fs::remove_dir_all(staging)
                .with_context(|| format!("removing the old results {}", staging.display()))?;
        }
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP)
            ) =>
        {
            fs::rename(final_dir, old)
                .with_context(|| format!("moving aside {}", final_dir.display()))?;
            fs::rename(staging, final_dir).with_context(|| {
                format!("renaming {} to {}", staging.display(), final_dir.display())
            })?;
            sync_dir(final_dir.parent())?;
            fs::remove_dir_all(old)?;
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "exchanging {} with {}",
                    staging.display(),
                    final_dir.display()
                )
            })
        }
    }
    Ok(())
}

fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 reads them and nothing else.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

// Opens a directory dplab just renamed into, only to fsync it.
#[expect(clippy::disallowed_methods)]
fn sync_dir(dir: Option<&Path>) -> Result<()> {
    if let Some(d) = dir {
        // Durability of the rename; a file system that cannot sync a directory is no error.
        if let Ok(f) = fs::File::open(d) {
            let _ = f.sync_all();
        }
    }
    Ok(())
}

/// An exclusive advisory lock on the results root `path` (a directory: no lock file is
/// left behind), held until the returned handle is dropped. Writers of any pipeline into
/// this root take turns for the short swap; they wait (saying so) for each other.
// Opens the results root, which create_dir_all has just made sure is a directory, to flock it.
#[expect(clippy::disallowed_methods)]
fn lock(path: &Path) -> Result<fs::File> {
    use std::os::unix::io::AsRawFd;
    let f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        tracing::info!(
            "waiting for another dplab process writing the same results ({})",
            path.display()
        );
        // SAFETY: as above.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("locking {}", path.display()));
        }
    }
    Ok(f)
}

/// What interrupted writers of this pipeline left (called with the lock held, so no other
/// writer is active): staging directories are removed, and results moved aside by a writer
/// killed between its two renames are put back when no newer results took their place.
fn recover(out: &Path, name: &str, final_dir: &Path) -> Result<()> {
    let Ok(entries) = fs::read_dir(out) else {
        return Ok(());
    };
    let (partial, old) = (format!(".{name}.partial-"), format!(".{name}.old-"));
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().to_string();
        let suffix_is_pid = |prefix: &str| {
            file.strip_prefix(prefix)
                .is_some_and(|p| p.parse::<u32>().is_ok())
        };
        if suffix_is_pid(&old) && !final_dir.exists() {
            tracing::warn!(
                "restoring {} from {} (left by an interrupted run)",
                final_dir.display(),
                e.path().display()
            );
            fs::rename(e.path(), final_dir)?;
        } else if suffix_is_pid(&partial) || suffix_is_pid(&old) {
            fs::remove_dir_all(e.path())
                .with_context(|| format!("removing {}", e.path().display()))?;
        }
    }
    Ok(())
}

fn write_all(
    plan: &Plan,
    results: &[StageOutput],
    opts: &RunFacts,
    wall: f64,
    dir: &Path,
    earlier: Option<(&Path, &Manifest)>,
) -> Result<()> {
    let mut outputs = Vec::new();
    let mut names = OutputNames::default();
    let mut stages = Vec::new();
    let (mut left_out, mut stale) = (Vec::new(), Vec::new());
    // Per stage, the earlier entry whose outputs are kept.
    let mut carried: Vec<Option<&StageEntry>> = vec![None; plan.stages.len()];
    // Stages are in topological order: whether each reads only what the seed decides.
    let mut reproducible: Vec<bool> = Vec::with_capacity(plan.stages.len());
    for stage in &plan.stages {
        let r = stage.seeded && stage.inputs.iter().all(|&u| reproducible[u]);
        reproducible.push(r);
    }
    for (si, stage) in plan.stages.iter().enumerate() {
        let res = &results[si];
        if let Some(carry) = res.carry {
            // An earlier entry that itself had no outputs (left out, failed) has nothing to
            // keep: the stage is as missing now as it was then.
            let entry = earlier.and_then(|(from, m)| {
                let e = m.stages.iter().find(|e| e.name == stage.name)?;
                (!earlier_lacks(m, &stage.name)).then_some((from, m, e))
            });
            if let Some((from, m, e)) = entry {
                let mut lost = 0;
                for f in m.outputs.iter().filter(|f| f.of_stage(&stage.name)) {
                    match keep_file(from, dir, f, &stage.name, &mut names)? {
                        Some(o) => outputs.push(o),
                        None => lost += 1,
                    }
                }
                // Current only if its instances are those that made the outputs, the outputs
                // were current then, and all of them are still here.
                let was_current = e.kept.as_ref().is_none_or(|k| k.current)
                    && !m
                        .incomplete
                        .as_ref()
                        .is_some_and(|i| i.stale.iter().any(|l| names_stage(l, &stage.name)));
                let same = same_instances(stage, e);
                let kept = Kept {
                    why: carry.why().into(),
                    current: same && was_current && lost == 0,
                };
                if !kept.current {
                    let because = if !same {
                        format!(
                            "its instances are not those that made them any more ({}: an input, a parameter or the seed changed)",
                            instances_moved(stage, e)
                        )
                    } else if lost > 0 {
                        format!("{lost} of its files are not in the results directory any more")
                    } else {
                        "they were stale already when that run kept them".to_string()
                    };
                    stale.push(format!(
                        "stage `{}`: its outputs are an earlier run's ({}), and {because}: run it to bring it up to date",
                        stage.name,
                        carry.why(),
                    ));
                }
                carried[si] = Some(e);
                stages.push(kept_entry(e, kept));
                continue;
            }
            if carry == Carry::NotAsked {
                // Nothing to keep: listed as left out; the entry says what it would be.
                left_out.push(stage.name.clone());
                stages.push(StageEntry {
                    kept: Some(Kept {
                        why: "not asked for (--stages), not all in the store, and no earlier outputs to keep".into(),
                        current: false,
                    }),
                    ..entry_of(stage, res, reproducible[si])
                });
                continue;
            }
        }
        let first_output = outputs.len();
        // Plots return no frame: their data is their input's.
        if let Some(df) = res.frame.as_ref().filter(|f| f.width() > 0) {
            let mut df = df.clone();
            outputs.push(put_with(
                dir,
                &names.claim(format!("{}.csv", stage.name))?,
                |w| Ok(CsvWriter::new(w).include_header(true).finish(&mut df)?),
            )?);
            outputs.push(put_with(
                dir,
                &names.claim(format!("{}.parquet", stage.name))?,
                |w| {
                    ParquetWriter::new(w)
                        .with_key_value_metadata(Some(KeyValueMetadata::from_static(
                            parquet_metadata(plan, stage, &res.rows),
                        )))
                        .finish(&mut df)?;
                    Ok(())
                },
            )?);
        }
        let mut artifacts: Vec<&(usize, Vec<crate::kind::Artifact>)> =
            res.artifacts.iter().collect();
        artifacts.sort_by_key(|(i, _)| *i);
        for (ii, arts) in artifacts {
            let inst = &stage.instances[*ii];
            for a in arts {
                let name = if stage.instances.len() == 1 {
                    format!("{}.{}", stage.name, a.ext)
                } else {
                    instance_file(&stage.name, &inst.key(), &a.ext)
                };
                outputs.push(put(dir, &names.claim(name)?, &a.bytes)?);
            }
        }
        if let Some(first) = stage.instances.first() {
            let files = stage
                .build(first)
                .and_then(|run| run.stage_files())
                .with_context(|| format!("stage `{}`: its files", stage.name))?;
            for a in files {
                let name = format!("{}.{}", stage.name, a.ext);
                outputs.push(put(dir, &names.claim(name)?, &a.bytes)?);
            }
        }
        for o in &mut outputs[first_output..] {
            o.stage = stage.name.clone();
        }
        stages.push(entry_of(stage, res, reproducible[si]));
    }
    let axes = plan
        .axes
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                // A record as written (its fields say what ran), a number or text as its
                // canonical text.
                v.iter().map(axis_json).collect(),
            )
        })
        .collect();
    let inputs = plan
        .files
        .all()
        .into_iter()
        .map(|(rel, bytes)| InputFile {
            path: rel.display().to_string(),
            resolved: std::path::absolute(plan.base_dir.join(rel))
                .map_or_else(|_| String::new(), |p| p.display().to_string()),
            bytes: bytes.len() as u64,
            sha256: hex(&Sha256::digest(bytes)),
        })
        .collect();
    let mut manifest = Manifest {
        dplab_version: env!("CARGO_PKG_VERSION").into(),
        build: super::provenance::build(),
        inputs,
        git_commit: git_commit(&plan.base_dir),
        pipeline: PipelineInfo {
            name: plan.name.clone(),
            title: plan.title.clone(),
            file: plan.file.display().to_string(),
            sha256: plan.file_sha256.clone(),
            source: plan.source.clone(),
            description: plan.description.clone(),
            findings: plan.findings.clone(),
        },
        profile: plan.profile.clone(),
        set: opts.set.to_vec(),
        seed: Some(plan.seed),
        axes,
        jobs: Some(opts.jobs as u64),
        wall_seconds: Some(wall),
        outputs,
        warning: "seeded runs reproduce research; never use them to release real private data"
            .into(),
        stages_asked: plan.asked.clone(),
        incomplete: {
            let inc = Incomplete {
                left_out,
                failed: opts.failed.clone(),
                stale,
            };
            let whole = inc.left_out.is_empty() && inc.failed.is_empty() && inc.stale.is_empty();
            (!whole).then_some(inc)
        },
        stages,
    };
    outputs_instances(
        plan,
        results,
        &carried,
        dir,
        &mut names,
        &mut manifest.outputs,
    )?;
    manifest.outputs.extend(rerun(plan, dir)?);
    put_with(dir, &names.claim("manifest.json".into())?, |w| {
        Ok(serde_json::to_writer_pretty(w, &manifest)?)
    })?;
    Ok(())
}

/// An axis value in the manifest and in `instances.parquet`: a record as written (its fields
/// say what ran), a number or text as its canonical text.
fn axis_json(x: &AxisValue) -> serde_json::Value {
    match x {
        // JSON has only text keys: a record with others is kept as YAML.
        AxisValue::Record(r) => serde_json::to_value(&r.fields)
            .unwrap_or_else(|_| json!(serde_yaml_ng::to_string(&r.fields).unwrap_or_default())),
        _ => json!(x.canonical()),
    }
}

/// A stage's manifest entry as this run made it.
fn entry_of<'a>(
    stage: &'a PlannedStage,
    res: &'a StageOutput,
    reproducible: bool,
) -> StageEntry<Listed<'a>> {
    let secs = &res.seconds;
    let hits = res.cached;
    StageEntry {
        name: stage.name.clone(),
        kind: stage.kind.name.to_string(),
        kind_version: stage.kind.version,
        instances_run: (stage.instances.len() - hits) as u64,
        instances_cached: hits as u64,
        axes: stage.axes.clone(),
        gathered: stage.gathered.clone(),
        stored: stage.store,
        reproducible,
        instances: stage.instances.len() as u64,
        seconds_total: secs.iter().sum::<f64>(),
        seconds_max: secs.iter().copied().fold(0.0, f64::max),
        programs: stage.programs.clone(),
        params: serde_json::to_value(&stage.with)
            .unwrap_or_else(|_| json!(serde_yaml_ng::to_string(&stage.with).unwrap_or_default())),
        files: stage.files.clone(),
        sources: stage.sources.clone(),
        environment: stage.environment.clone(),
        from_store: res.made.summary(),
        kept: None,
        seeds: Listed::Plan(SeedsOf(stage, &res.content_keys, &res.made)),
    }
}

/// A stage's instances in its manifest entry: streamed from the plan, or as an earlier run
/// listed them (a stage whose outputs are kept).
enum Listed<'a> {
    Plan(SeedsOf<'a>),
    Kept(&'a [Seed]),
}

impl serde::Serialize for Listed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Listed::Plan(p) => p.serialize(s),
            Listed::Kept(k) => k.serialize(s),
        }
    }
}

/// `rerun/`: the pipeline as it ran (profile, `--set`, `--sweep` and `--stages` applied, as
/// `dplab show` prints it) and a copy of every file its parameters named that the run read —
/// tables, a program's code — at the same paths relative to it. What to read, and run again,
/// months later, after the files beside the pipeline changed: `dplab run
/// results/<name>/rerun/pipeline.as-run` reads these copies and finds the same store keys.
/// Each file is in the manifest's outputs, with its sha256. A file named outside the
/// pipeline's directory (`--allow-read`) is not copied: the as-run file's header says which.
///
/// Not `*.yaml`: a results root inside a folder of pipelines must not add pipelines to a
/// later `dplab run FOLDER`. Its first line names the file by its name only, so the bytes do
/// not depend on where the pipeline lay.
fn rerun(plan: &Plan, dir: &Path) -> Result<Vec<OutputFile>> {
    let root = dir.join(RERUN);
    fs::create_dir(&root).with_context(|| format!("creating {}", root.display()))?;
    let mut out = Vec::new();
    let mut outside = Vec::new();
    for (rel, bytes) in plan.files.all() {
        let plain = rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        let name = rel.to_string_lossy();
        if !plain || rel == Path::new(AS_RUN) || name.contains('\\') {
            outside.push(name.to_string());
            continue;
        }
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        // A program run as `./x.sh` needs its execute bit as much as its bytes.
        let executable = fs::metadata(plan.base_dir.join(rel))
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0);
        if executable {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755))?;
        }
        out.push(OutputFile {
            file: format!("{RERUN}/{name}"),
            bytes: bytes.len() as u64,
            sha256: hex(&Sha256::digest(bytes)),
            stage: String::new(),
        });
    }
    let composed = super::show::composed(plan);
    let body = composed.split_once('\n').map_or("", |(_, rest)| rest);
    let file = plan
        .file
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut as_run = format!(
        "# {file} as it ran: profile, --set and --sweep applied (`dplab show`), beside\n\
         # a copy of the files it read: `dplab run {AS_RUN}` runs it again.\n"
    );
    if !plan.asked.is_empty() {
        as_run += &format!(
            "# This run ran only {} and what they read (--stages): the manifest says which\n\
             # stages' outputs it kept from the store or an earlier run.\n",
            plan.asked
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !outside.is_empty() {
        as_run += &format!(
            "# Not copied here (outside the pipeline's directory, or named like this file): {}\n",
            outside.join(", ")
        );
    }
    as_run += body;
    let mut listed = put(&root, AS_RUN, as_run.as_bytes())?;
    listed.file = format!("{RERUN}/{AS_RUN}");
    out.push(listed);
    Ok(out)
}

/// The folder of a results directory that holds what `dplab run` needs to run it again.
pub(crate) const RERUN: &str = "rerun";
const AS_RUN: &str = "pipeline.as-run";

/// What a results Parquet file says of itself (file-level key-value metadata), so that a
/// frame copied away from its directory still names what made it: the pipeline, the stage,
/// the dplab version, and its instance's store key (for a frame of many instances, the sha256
/// of their keys in plan order, as the manifest lists them).
fn parquet_metadata(plan: &Plan, stage: &PlannedStage, rows: &[usize]) -> Vec<(String, String)> {
    let mut meta = vec![
        ("dplab.pipeline".into(), plan.name.clone()),
        ("dplab.stage".into(), stage.name.clone()),
        ("dplab.version".into(), env!("CARGO_PKG_VERSION").into()),
    ];
    match stage.instances.as_slice() {
        [one] => meta.push(("dplab.instance_key".to_string(), one.store_key.to_string())),
        all => {
            let mut sha = Sha256::new();
            for i in all {
                sha.update(i.store_key.to_string().as_bytes());
                sha.update(b"\n");
            }
            meta.push((
                "dplab.instance_keys_sha256".to_string(),
                hex(&sha.finalize()),
            ));
            // Which rows are whose: each instance's store key and rows, in row order, so a
            // number read from the file leads to the entry that made it without the manifest
            // (whose `seeds` say the same, with labels and seeds). Up to [`LISTED`]
            // instances: a footer of 10⁶ keys would be 70 MB, more than some readers take.
            if all.len() == rows.len() && all.len() <= LISTED {
                let list: Vec<serde_json::Value> = all
                    .iter()
                    .zip(rows)
                    .map(|(i, n)| json!([i.store_key.to_string(), n]))
                    .collect();
                meta.push((
                    "dplab.instances".to_string(),
                    serde_json::Value::Array(list).to_string(),
                ));
            }
        }
    }
    meta
}

/// The most instances whose keys a Parquet file lists ([`parquet_metadata`]).
const LISTED: usize = 100_000;

/// A stage's instances (label, seed, store key) in the manifest, streamed straight from the
/// plan: as a JSON tree, a sweep of 10⁶ instances took 2 GB.
struct SeedsOf<'a>(&'a PlannedStage, &'a [Option<super::key::Key>], &'a MadeLog);

impl serde::Serialize for SeedsOf<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.instances.iter().enumerate().map(|(ii, i)| Seed {
            instance: i.label(),
            seed: format!("{:032x}", i.seed),
            key: i.store_key.to_string(),
            content_key: self.1.get(ii).copied().flatten().map(|k| k.to_string()),
            computed: self.2.computed(ii),
        }))
    }
}

/// Writes one file (temporary name, fsync, rename) and returns its manifest entry.
fn put(dir: &Path, name: &str, bytes: &[u8]) -> Result<OutputFile> {
    put_with(dir, name, |w| Ok(w.write_all(bytes)?))
}

/// [`put`] of what `write` writes, streamed to the file (a frame of 10⁶ instances is not
/// first built as bytes in memory) and hashed on the way.
fn put_with(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&mut Hashing<std::io::BufWriter<fs::File>>) -> Result<()>,
) -> Result<OutputFile> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let f = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut w = Hashing {
        inner: std::io::BufWriter::with_capacity(1 << 20, f),
        sha: Sha256::new(),
        bytes: 0,
    };
    write(&mut w).with_context(|| format!("writing {}", path.display()))?;
    w.flush()?;
    let Hashing { inner, sha, bytes } = w;
    inner.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    fs::rename(&tmp, &path)?;
    Ok(OutputFile {
        file: name.to_string(),
        bytes,
        sha256: hex(&sha.finalize()),
        stage: String::new(),
    })
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W> {
    inner: W,
    sha: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The names given to a results directory's files: no two outputs may share one (nor
/// differ only in case, which would collide on macOS and Windows file systems).
#[derive(Default)]
struct OutputNames(std::collections::HashMap<String, String>);

impl OutputNames {
    fn claim(&mut self, name: String) -> Result<String> {
        if let Some(first) = self.0.insert(name.to_lowercase(), name.clone()) {
            anyhow::bail!("two outputs would be written as `{first}` and `{name}`: rename a stage");
        }
        Ok(name)
    }
}

/// `<stage>__<axis>=<value>,<axis>=<value>.<ext>`: an axis name or value keeps its ASCII
/// letters, digits and `._+-` as they are (`clean__dataset=CRM.md`), and every other byte is
/// percent-encoded (`a b` → `a%20b`, `%` → `%25`, `é` → `%C3%A9`), so distinct instances
/// never share a file name. Nor on a case-insensitive file system (macOS, Windows): stage
/// names differ in more than case, and planning refuses two values of one axis that differ
/// only in case (`crate::axis`), so two instances of one stage always differ in more than the
/// case of a letter. Non-ASCII text is encoded because such file systems fold (and
/// normalise) it by rules of their own. A name too long for a file system ends in a hash of
/// the full one instead.
pub(crate) fn instance_file(
    stage: &str,
    key: &[(std::sync::Arc<str>, AxisValue)],
    ext: &str,
) -> String {
    let label = key
        .iter()
        .map(|(a, v)| format!("{}={}", encode(a), encode(&v.canonical())))
        .collect::<Vec<_>>()
        .join(",");
    let name = format!("{stage}__{label}.{ext}");
    if name.len() <= 200 {
        return name;
    }
    let mut cut = 120;
    while !label.is_char_boundary(cut) {
        cut -= 1;
    }
    let digest = hex(&Sha256::digest(label.as_bytes()));
    format!("{stage}__{}~{}.{ext}", &label[..cut], &digest[..16])
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn git_commit(dir: &Path) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let dirty = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pairs: &[(&str, AxisValue)]) -> Vec<(std::sync::Arc<str>, AxisValue)> {
        pairs
            .iter()
            .map(|(a, v)| ((*a).into(), v.clone()))
            .collect()
    }

    #[test]
    fn instance_files_are_distinct_and_safe() {
        let t = |s: &str| AxisValue::Text(s.into());
        let a = instance_file("f", &key(&[("c", t("a b"))]), "svg");
        let b = instance_file("f", &key(&[("c", t("a_b"))]), "svg");
        assert_ne!(a, b);
        assert_eq!(a, "f__c=a%20b.svg");
        let evil = instance_file("f", &key(&[("c", t("../../x/y"))]), "svg");
        assert!(!evil.contains('/'), "{evil}");
        let n = instance_file(
            "f",
            &key(&[("eps", AxisValue::Num(0.5)), ("rep", AxisValue::Num(3.0))]),
            "svg",
        );
        assert_eq!(n, "f__eps=0.5,rep=3.svg");
        let long1 = instance_file("f", &key(&[("c", t(&"x".repeat(300)))]), "svg");
        let long2 = instance_file(
            "f",
            &key(&[("c", t(&format!("{}y", "x".repeat(299))))]),
            "svg",
        );
        assert!(long1.len() < 255 && long1 != long2);
        // Names stay readable: capitals are kept (planning refuses axis values that differ
        // only in case, `axis::tests::values_differing_only_in_case_are_refused`).
        let crm = instance_file("clean", &key(&[("dataset", t("CRM"))]), "md");
        assert_eq!(crm, "clean__dataset=CRM.md");
        assert_eq!(
            instance_file("f", &key(&[("c", t("x%41,é"))]), "svg"),
            "f__c=x%2541%2C%C3%A9.svg"
        );
    }

    #[test]
    fn output_names_never_collide() {
        let mut n = OutputNames::default();
        n.claim("f.svg".into()).unwrap();
        assert!(n.claim("f.svg".into()).is_err());
        assert!(n.claim("F.svg".into()).is_err());
    }
}
