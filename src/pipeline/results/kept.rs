//! What a run that did not make a stage's outputs keeps of them (see [`Carry`]): the earlier
//! run's files and manifest entry, copied from the results directory it replaces, and whether
//! they are still current.

use std::fs;
use std::path::Path;

use anyhow::Result;

use super::{put_with, Listed, OutputNames};
use crate::pipeline::manifest::{Kept, Manifest, OutputFile, StageEntry};
use crate::pipeline::plan::PlannedStage;

/// Why a stage's outputs are not this run's. Nothing a user did not ask to change may
/// disappear from a results directory: a run of some stages (`--stages`) and a run in which a
/// stage failed keep that stage's earlier outputs and its earlier manifest entry, marked
/// [`Kept`], and listed as stale when its instances are not those that made them any more
/// (compared by store key: kind, parameters, seed and inputs). An interrupted run writes
/// nothing, so it leaves the whole directory as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carry {
    /// A stage `--stages` did not ask for, of which the store lacks an instance.
    NotAsked,
    /// An instance of the stage, or of one it reads, failed.
    Failed,
}

impl Carry {
    pub(super) fn why(self) -> &'static str {
        match self {
            Carry::NotAsked => "not asked for (--stages), and not all in the store",
            Carry::Failed => "failed in this run",
        }
    }
}

/// The manifest of the results `dir` holds (which [`replaceable`] found to be this
/// pipeline's), when it has one that reads: what a stage this run did not make keeps.
pub(super) fn earlier_run(dir: &Path) -> Option<Manifest> {
    let path = dir.join("manifest.json");
    fs::symlink_metadata(&path)
        .ok()
        .filter(|m| m.file_type().is_file())?;
    let (f, _) = crate::regular::open_regular(&path).ok()?;
    serde_json::from_reader::<_, Manifest>(std::io::BufReader::new(f))
        .ok()
        .filter(|m| m.is_dplab())
}

/// An earlier run's entry of a stage whose outputs this run keeps: as it was, marked.
pub(super) fn kept_entry(e: &StageEntry, kept: Kept) -> StageEntry<Listed<'_>> {
    StageEntry {
        name: e.name.clone(),
        kind: e.kind.clone(),
        kind_version: e.kind_version,
        instances_run: e.instances_run,
        instances_cached: e.instances_cached,
        axes: e.axes.clone(),
        gathered: e.gathered.clone(),
        stored: e.stored,
        reproducible: e.reproducible,
        instances: e.instances,
        seconds_total: e.seconds_total,
        seconds_max: e.seconds_max,
        programs: e.programs.clone(),
        params: e.params.clone(),
        files: e.files.clone(),
        sources: e.sources.clone(),
        environment: e.environment.clone(),
        from_store: e.from_store.clone(),
        kept: Some(kept),
        seeds: Listed::Kept(&e.seeds),
    }
}

/// Whether the earlier entry `e` lists the instances `stage` has now, key for key.
pub(super) fn same_instances(stage: &PlannedStage, e: &StageEntry) -> bool {
    e.seeds.len() == stage.instances.len()
        && e.seeds
            .iter()
            .zip(&stage.instances)
            .all(|(s, i)| s.key == i.store_key.to_string())
}

/// How the instances of `stage` differ from those of its earlier entry `e`, in a few words.
pub(super) fn instances_moved(stage: &PlannedStage, e: &StageEntry) -> String {
    let before: std::collections::HashSet<&str> = e.seeds.iter().map(|s| s.key.as_str()).collect();
    let changed = stage
        .instances
        .iter()
        .filter(|i| !before.contains(i.store_key.to_string().as_str()))
        .count();
    format!(
        "{changed} of its {} instance(s) have other keys now, it had {}",
        stage.instances.len(),
        e.seeds.len()
    )
}

/// Copies file `f` of the earlier results `from` into `dir` for stage `stage`, as it is now
/// (its size and hash taken again). Only a plain name of that directory and a regular file
/// are copied: a manifest is no licence to read elsewhere. A file that is not there any more
/// is left out, with a warning.
pub(super) fn keep_file(
    from: &Path,
    dir: &Path,
    f: &OutputFile,
    stage: &str,
    names: &mut OutputNames,
) -> Result<Option<OutputFile>> {
    let mut parts = Path::new(&f.file).components();
    let plain = matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    ) && !f.file.starts_with('.');
    let src = from.join(&f.file);
    let regular = plain && fs::symlink_metadata(&src).is_ok_and(|m| m.file_type().is_file());
    if !regular {
        tracing::warn!(
            "stage `{stage}`: its earlier output `{}` is not a file of {} any more: not kept",
            f.file,
            from.display()
        );
        return Ok(None);
    }
    let (mut file, _) = crate::regular::open_regular(&src)
        .map_err(|e| anyhow::anyhow!("{}: {e}", src.display()))?;
    let mut out = put_with(dir, &names.claim(f.file.clone())?, |w| {
        std::io::copy(&mut file, w)?;
        Ok(())
    })?;
    out.stage = stage.to_string();
    Ok(Some(out))
}

/// Whether the earlier run `m` lists stage `name` as having no outputs of its own: left out,
/// or failed (then its outputs, if any, were kept from a run before it and are named stale).
pub(super) fn earlier_lacks(m: &Manifest, name: &str) -> bool {
    let kept = m
        .stages
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.kept.as_ref());
    let kept_none = kept.is_some_and(|k| k.why.contains("no earlier outputs"));
    kept_none
        || m.incomplete.as_ref().is_some_and(|i| {
            i.left_out.iter().any(|s| s == name)
                // Failed, and kept nothing from a run before it.
                || (kept.is_none() && i.failed.iter().any(|l| names_stage(l, name)))
        })
}

/// Whether a line of `incomplete` (`stage `x`: …`) is about stage `name`.
pub(super) fn names_stage(line: &str, name: &str) -> bool {
    line.starts_with(&format!("stage `{name}`:"))
}
