//! `dplab run --dry-run`: per stage, how many instances would run and how many the store
//! has, and for those that would run, why — in terms a person can act on (a parameter that
//! changed from what to what, an input that changed, a kind whose implementation changed).
//!
//! The reasons come from comparing each instance with the same instance (pipeline, stage,
//! axis values) of the last run of this pipeline with this store, which each run records in
//! `runs/<pipeline>.json` under the store root.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache::InstanceStore;
use super::exec::Force;
use super::plan::{hex, Plan};

/// What a run recorded of one instance.
#[derive(Serialize, Deserialize, Clone)]
struct Recorded {
    key: String,
    version: u32,
    params: String,
    /// Per input, a hash of the upstream instances' keys.
    inputs: Vec<String>,
}

/// stage → instance label → what was recorded.
type Index = BTreeMap<String, BTreeMap<String, Recorded>>;

fn index_path(store: &InstanceStore, pipeline: &str) -> std::path::PathBuf {
    store.root().join("runs").join(format!("{pipeline}.json"))
}

/// Records this plan's instances as the last run of its pipeline (tmp + rename). The record
/// is streamed from the plan, one instance at a time: as a map in memory, a sweep of 10⁶
/// instances took a gigabyte.
pub fn record(plan: &Plan, store: &InstanceStore) -> Result<()> {
    let path = index_path(store, &plan.name);
    let dir = path.parent().expect("has a parent");
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.{}.tmp", plan.name, std::process::id()));
    let mut w = std::io::BufWriter::with_capacity(1 << 20, fs::File::create(&tmp)?);
    serde_json::to_writer(&mut w, &Streamed(plan))?;
    std::io::Write::flush(&mut w)?;
    drop(w);
    fs::rename(&tmp, &path)?;
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

struct StreamedStage<'a>(&'a Plan, &'a super::plan::PlannedStage);

impl Serialize for StreamedStage<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (plan, stage) = (self.0, self.1);
        s.collect_map(
            stage
                .instances
                .iter()
                .map(|inst| (inst.label(), recorded(plan, stage, inst))),
        )
    }
}

fn recorded(
    plan: &Plan,
    stage: &super::plan::PlannedStage,
    inst: &super::plan::Instance,
) -> Recorded {
    let inputs = stage
        .inputs
        .iter()
        .zip(inst.inputs.iter())
        .map(|(&up, js)| {
            let mut h = Sha256::new();
            for &j in js.iter() {
                h.update(plan.stages[up].instances[j].store_key.hex_digits());
            }
            hex(&h.finalize())
        })
        .collect();
    Recorded {
        key: inst.store_key.to_string(),
        version: stage.kind.version,
        params: stage.canonical_params(inst),
        inputs,
    }
}

/// The dry-run report of `plan`.
// The store's run record (runs/<pipeline>.json): dplab wrote it under the store root.
#[allow(clippy::disallowed_methods)]
pub fn explain(plan: &Plan, store: Option<&InstanceStore>, force: &Force) -> String {
    let last: Index = store
        .and_then(|s| fs::read(index_path(s, &plan.name)).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut out = format!("{} ({}):\n", plan.name, plan.file.display());
    let (mut total_run, mut total_cached) = (0, 0);
    for stage in &plan.stages {
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let mut cached = 0;
        for inst in &stage.instances {
            let hit = store.is_some_and(|s| s.contains(&inst.store_key));
            let reason = if force.covers(&stage.name) {
                Some("forced".to_string())
            } else if hit {
                None
            } else if store.is_none() {
                Some("no store (--no-store)".to_string())
            } else {
                let before = last.get(&stage.name).and_then(|m| m.get(&inst.label()));
                Some(match before {
                    None => "new instance".to_string(),
                    Some(b) => why(b, &recorded(plan, stage, inst), stage, plan),
                })
            };
            match reason {
                None => cached += 1,
                Some(r) => *reasons.entry(r).or_default() += 1,
            }
        }
        let run = stage.instances.len() - cached;
        total_run += run;
        total_cached += cached;
        let _ = write!(
            out,
            "  {:<24} {:>7} to run, {:>7} in the store",
            stage.name, run, cached
        );
        let listed: Vec<String> = reasons
            .iter()
            .map(|(r, n)| {
                if *n == run && reasons.len() == 1 {
                    r.clone()
                } else {
                    format!("{r} (×{n})")
                }
            })
            .collect();
        if !listed.is_empty() {
            let _ = write!(out, ": {}", listed.join("; "));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "  {total_run} instance(s) would run, {total_cached} come from the store"
    );
    out
}

/// Why an instance recorded as `b` is not in the store now that it is `a`.
fn why(b: &Recorded, a: &Recorded, stage: &super::plan::PlannedStage, plan: &Plan) -> String {
    if b.key == a.key {
        return "not in the store (removed, or its run did not finish)".into();
    }
    if b.version != a.version {
        return format!(
            "kind `{}` implementation changed (version {} → {})",
            stage.kind.name, b.version, a.version
        );
    }
    if b.params != a.params {
        return param_changes(&b.params, &a.params);
    }
    let changed: Vec<String> = stage
        .inputs
        .iter()
        .enumerate()
        .filter(|(k, _)| b.inputs.get(*k) != a.inputs.get(*k))
        .map(|(_, &up)| format!("`{}`", plan.stages[up].name))
        .collect();
    if !changed.is_empty() {
        return format!("input {} changed", changed.join(", "));
    }
    "its seed, axis values or a file it reads changed".into()
}

/// `parameter `samples` changed 200 → 300`, for each top-level parameter that differs.
fn param_changes(before: &str, after: &str) -> String {
    let parse = |s: &str| -> BTreeMap<String, serde_json::Value> {
        serde_json::from_str(s).unwrap_or_default()
    };
    let (b, a) = (parse(before), parse(after));
    let show = |v: Option<&serde_json::Value>| -> String {
        match v {
            None => "(unset)".into(),
            Some(v) => {
                let t = v.to_string();
                if t.chars().count() > 40 {
                    format!("{}…", t.chars().take(39).collect::<String>())
                } else {
                    t
                }
            }
        }
    };
    let mut changes = Vec::new();
    for k in b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))) {
        if b.get(k) != a.get(k) {
            changes.push(format!(
                "parameter `{k}` changed {} → {}",
                show(b.get(k)),
                show(a.get(k))
            ));
        }
    }
    if changes.is_empty() {
        "its parameters changed".into()
    } else {
        changes.join(", ")
    }
}

/// Per pipeline with a recorded run in `store`, the instance keys of that run.
// The store's run records (runs/*.json): dplab wrote them under the store root.
#[allow(clippy::disallowed_methods)]
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
