//! `dplab run --dry-run`: per stage, how many instances would run and how many the store
//! has, and for those that would run, why — in terms a person can act on (a parameter that
//! changed from what to what, an input that changed, a kind whose implementation changed).
//!
//! The reasons come from comparing each instance with the same instance (pipeline, stage,
//! axis values) of the last run of this pipeline with this store ([`super::record`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::instance_store::InstanceStore;
use super::plan::Plan;
use super::record::{last_run, recorded, Index, Recorded};

/// Which stages to recompute even when the store has them (`--force`): the dry run says so,
/// and the executor does it.
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

/// The dry-run report of `plan`.
pub fn explain(plan: &Plan, store: Option<&InstanceStore>, force: &Force) -> String {
    let last: Index = store.map(|s| last_run(s, &plan.name)).unwrap_or_default();
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
