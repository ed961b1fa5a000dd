//! The run record: after every run, the store keeps per pipeline what each of its instances
//! was (key, kind version, parameters, inputs) in `runs/<pipeline>.json` under the store root.
//! `--dry-run` compares a plan with it to say why an instance would run
//! ([`super::dryrun`]), and `dplab store gc` keeps what the last run of each pipeline used.

use std::collections::BTreeMap;
use std::fs;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::instance_store::InstanceStore;
use super::plan::{Instance, Plan, PlannedStage};
use crate::text::hex;

/// What a run recorded of one instance.
#[derive(Serialize, Deserialize, Clone)]
pub struct Recorded {
    pub key: String,
    pub version: u32,
    pub params: String,
    /// Per input, a hash of the upstream instances' keys.
    pub inputs: Vec<String>,
    /// The same in key order: equal where `inputs` is not when the same instances are read
    /// in another order (the order of `axes:` changed).
    #[serde(default)]
    pub inputs_unordered: Vec<String>,
}

/// stage → instance label → what was recorded.
pub type Index = BTreeMap<String, BTreeMap<String, Recorded>>;

fn index_path(store: &InstanceStore, pipeline: &str) -> std::path::PathBuf {
    store.root().join("runs").join(format!("{pipeline}.json"))
}

/// The last run of `pipeline` recorded in `store` (empty when there is none or it does not
/// read).
// The store's run record (runs/<pipeline>.json): dplab wrote it under the store root.
#[expect(clippy::disallowed_methods)]
pub(crate) fn last_run(store: &InstanceStore, pipeline: &str) -> Index {
    fs::read(index_path(store, pipeline))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// stage → file or tree (as written) → its sha256 or digest ([`PlannedStage::files`]).
pub type Files = BTreeMap<String, BTreeMap<String, String>>;

/// Where the files of a pipeline's last run are recorded: per stage, not per instance (a
/// sweep's instances mostly read the same files), in a folder of their own so that the
/// folder of run records holds nothing else.
fn files_path(store: &InstanceStore, pipeline: &str) -> std::path::PathBuf {
    store
        .root()
        .join("runs")
        .join("files")
        .join(format!("{pipeline}.json"))
}

/// The files the last run of `pipeline` recorded (empty when there is no record).
// The store's run record: dplab wrote it under the store root.
#[expect(clippy::disallowed_methods)]
pub(crate) fn last_files(store: &InstanceStore, pipeline: &str) -> Files {
    fs::read(files_path(store, pipeline))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Records this plan's instances as the last run of its pipeline (tmp + rename). The record
/// is streamed from the plan, one instance at a time: as a map in memory, a sweep of 10⁶
/// instances took a gigabyte.
pub fn record(plan: &Plan, store: &InstanceStore) -> Result<()> {
    let files: Files = plan
        .stages
        .iter()
        .filter(|s| !s.files.is_empty())
        .map(|s| (s.name.clone(), s.files.clone()))
        .collect();
    write_json(&files_path(store, &plan.name), &plan.name, &files)?;
    write_json(&index_path(store, &plan.name), &plan.name, &Streamed(plan))
}

/// Writes `value` as JSON to `path` (tmp + rename).
fn write_json(path: &std::path::Path, pipeline: &str, value: &impl Serialize) -> Result<()> {
    let dir = path.parent().expect("has a parent");
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{pipeline}.{}.tmp", std::process::id()));
    let mut w = std::io::BufWriter::with_capacity(1 << 20, fs::File::create(&tmp)?);
    serde_json::to_writer(&mut w, value)?;
    std::io::Write::flush(&mut w)?;
    drop(w);
    fs::rename(&tmp, path)?;
    Ok(())
}

/// A plan's [`Index`], serialized without building it.
struct Streamed<'a>(&'a Plan);

impl Serialize for Streamed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let plan = self.0;
        s.collect_map(
            plan.stages
                .iter()
                .map(|stage| (&stage.name, StreamedStage(plan, stage))),
        )
    }
}

struct StreamedStage<'a>(&'a Plan, &'a PlannedStage);

impl Serialize for StreamedStage<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (plan, stage) = (self.0, self.1);
        s.collect_map(
            stage
                .instances
                .iter()
                .map(|inst| (inst.label_by_name(), recorded(plan, stage, inst))),
        )
    }
}

pub fn recorded(plan: &Plan, stage: &PlannedStage, inst: &Instance) -> Recorded {
    let hashed = |sorted: bool| {
        stage
            .inputs
            .iter()
            .zip(inst.inputs.iter())
            .map(|(&up, js)| {
                let mut keys: Vec<_> = js
                    .iter()
                    .map(|&j| plan.stages[up].instances[j].store_key)
                    .collect();
                if sorted {
                    keys.sort_unstable();
                }
                let mut h = Sha256::new();
                for k in keys {
                    h.update(k.hex_digits());
                }
                hex(&h.finalize())
            })
            .collect()
    };
    Recorded {
        key: inst.store_key.to_string(),
        version: stage.kind.version,
        params: stage.canonical_params(inst),
        inputs: hashed(false),
        inputs_unordered: hashed(true),
    }
}

/// Per pipeline with a recorded run in `store`, the instance keys of that run.
// The store's run records (runs/*.json): dplab wrote them under the store root.
#[expect(clippy::disallowed_methods)]
pub fn recorded_keys(store: &InstanceStore) -> Vec<(String, std::collections::HashSet<String>)> {
    let mut out = Vec::new();
    let Ok(files) = fs::read_dir(store.root().join("runs")) else {
        return out;
    };
    for f in files.flatten() {
        let name = f.file_name().to_string_lossy().to_string();
        let Some(pipeline) = name.strip_suffix(".json") else {
            continue;
        };
        if pipeline.starts_with('.') {
            continue;
        }
        let Some(idx) = fs::read(f.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<Index>(&b).ok())
        else {
            continue;
        };
        let keys = idx
            .values()
            .flat_map(|m| m.values().map(|r| r.key.clone()))
            .collect();
        out.push((pipeline.to_string(), keys));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
