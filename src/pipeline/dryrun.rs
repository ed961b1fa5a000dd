//! `dplab run --dry-run`: per stage, how many instances would run and how many the store
//! has, and for those that would run, why — in terms a person can act on (a parameter that
//! changed from what to what, an input that changed, a kind whose implementation changed).
//!
//! The reasons come from comparing each instance with the same instance (pipeline, stage,
//! axis values) of the last run of this pipeline with this store ([`super::record`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::instance_store::InstanceStore;
use super::plan::Plan;
use super::record::{last_files, last_run, recorded, Files, Index, Recorded};

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

/// What the dry run finds of one stage.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StagePlan {
    pub stage: String,
    pub kind: String,
    /// Instances counted (a shard's share, or all).
    pub instances: usize,
    pub to_run: usize,
    pub in_store: usize,
    /// Why instances would run, with how many each reason covers.
    pub reasons: BTreeMap<String, usize>,
    /// For a stage `--stages` did not ask for: what becomes of it (it never runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// The dry run of `plan` as data, per stage (what `--dry-run` prints and `--message-format
/// json` sends). `share`: a shard's (per instance in plan order whether the shard owns it, see
/// [`super::shard::owners`]): only those are counted.
pub fn assess(
    plan: &Plan,
    store: Option<&InstanceStore>,
    force: &Force,
    share: Option<&[bool]>,
) -> Vec<StagePlan> {
    let last: Index = store.map(|s| last_run(s, &plan.name)).unwrap_or_default();
    let last_files: Files = store.map(|s| last_files(s, &plan.name)).unwrap_or_default();
    let mut digests = HashMap::new();
    let mut g = 0;
    let mut out = Vec::with_capacity(plan.stages.len());
    for stage in &plan.stages {
        // Not asked for (`--stages`): looked up, never run.
        if stage.kept {
            let stored = stage
                .instances
                .iter()
                .filter(|i| store.is_some_and(|s| s.contains(&i.store_key)))
                .count();
            g += stage.instances.len();
            let what = if stored == stage.instances.len() {
                "taken from the store"
            } else {
                "not asked for (--stages): its outputs in the results directory are kept as they are"
            };
            out.push(StagePlan {
                stage: stage.name.clone(),
                kind: stage.kind.name.to_string(),
                instances: stage.instances.len(),
                to_run: 0,
                in_store: stored,
                reasons: BTreeMap::new(),
                kept: Some(what.to_string()),
            });
            continue;
        }
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let (mut cached, mut counted) = (0, 0);
        for inst in &stage.instances {
            g += 1;
            if share.is_some_and(|owned| !owned[g - 1]) {
                continue;
            }
            counted += 1;
            let hit = store.is_some_and(|s| {
                s.contains(&inst.store_key) || kept_by_content(plan, stage, inst, s, &mut digests)
            });
            let reason = if force.covers(&stage.name) {
                Some("forced".to_string())
            } else if hit {
                None
            } else if store.is_none() {
                Some("no store (--no-store)".to_string())
            } else {
                let before = last
                    .get(&stage.name)
                    .and_then(|m| m.get(&inst.label_by_name()));
                Some(match before {
                    None => "new instance".to_string(),
                    Some(b) => why(
                        b,
                        &recorded(plan, stage, inst),
                        stage,
                        plan,
                        last_files.get(&stage.name),
                    ),
                })
            };
            match reason {
                None => cached += 1,
                Some(r) => *reasons.entry(r).or_default() += 1,
            }
        }
        out.push(StagePlan {
            stage: stage.name.clone(),
            kind: stage.kind.name.to_string(),
            instances: counted,
            to_run: counted - cached,
            in_store: cached,
            reasons,
            kept: None,
        });
    }
    out
}

/// The dry-run report of `plan` as a person reads it (see [`assess`]). `share`: a shard's
/// name and share.
pub fn explain(
    plan: &Plan,
    store: Option<&InstanceStore>,
    force: &Force,
    share: Option<(&str, &[bool])>,
) -> String {
    let mut out = match share {
        None => format!("{} ({}):\n", plan.name, plan.file.display()),
        Some((shard, _)) => format!(
            "{} ({}), the instances shard {shard} owns:\n",
            plan.name,
            plan.file.display()
        ),
    };
    let (mut total_run, mut total_cached) = (0, 0);
    for st in assess(plan, store, force, share.map(|(_, o)| o)) {
        let _ = write!(
            out,
            "  {:<24} {:>7} to run, {:>7} in the store",
            st.stage, st.to_run, st.in_store
        );
        if let Some(k) = &st.kept {
            let _ = writeln!(out, ": {k}");
            continue;
        }
        total_run += st.to_run;
        total_cached += st.in_store;
        let listed: Vec<String> = st
            .reasons
            .iter()
            .map(|(r, n)| {
                if *n == st.to_run && st.reasons.len() == 1 {
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

/// Whether `inst`, not in the store under its key, is there under its key by content
/// ([`super::key::content_key`]): its inputs are all stored under their keys (they ran again
/// since, as in a run of some stages) and came out as they were. `digests` keeps what was
/// read of the store, per key.
fn kept_by_content(
    plan: &Plan,
    stage: &super::plan::PlannedStage,
    inst: &super::plan::Instance,
    store: &InstanceStore,
    digests: &mut HashMap<super::key::Key, Option<[u8; 32]>>,
) -> bool {
    if stage.inputs.is_empty() {
        return false;
    }
    let mut all = Vec::with_capacity(stage.inputs.len());
    for (&up, js) in stage.inputs.iter().zip(inst.inputs.iter()) {
        let mut ds = Vec::with_capacity(js.len());
        for &j in js.iter() {
            let key = plan.stages[up].instances[j].store_key;
            let d = *digests
                .entry(key)
                .or_insert_with(|| store.get(&key).and_then(|r| r.digest));
            match d {
                Some(d) => ds.push(d),
                None => return false,
            }
        }
        all.push(ds);
    }
    store.contains(&super::key::content_key(&inst.own_key, &all))
}

/// Why an instance recorded as `b` is not in the store now that it is `a`.
fn why(
    b: &Recorded,
    a: &Recorded,
    stage: &super::plan::PlannedStage,
    plan: &Plan,
    files_before: Option<&BTreeMap<String, String>>,
) -> String {
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
    let changed: Vec<(String, bool)> = stage
        .inputs
        .iter()
        .enumerate()
        .filter(|(k, _)| b.inputs.get(*k) != a.inputs.get(*k))
        .map(|(k, &up)| {
            let reordered = !b.inputs_unordered.is_empty()
                && b.inputs_unordered.get(k) == a.inputs_unordered.get(k);
            (format!("`{}`", plan.stages[up].name), reordered)
        })
        .collect();
    if !changed.is_empty() && changed.iter().all(|(_, r)| *r) {
        let names: Vec<&str> = changed.iter().map(|(n, _)| n.as_str()).collect();
        return format!(
            "input {}: the same instances, read in another order (the order of `axes:` changed)",
            names.join(", ")
        );
    }
    if !changed.is_empty() {
        let names: Vec<&str> = changed.iter().map(|(n, _)| n.as_str()).collect();
        return format!(
            "input {} changed (kept if {} out the same: early cutoff)",
            names.join(", "),
            if names.len() == 1 {
                "it comes"
            } else {
                "they come"
            }
        );
    }
    // The files the stage's parameters name, as the last run read them and as they are now
    // (a folder's files each on their own: the file that changed is named, not only its
    // folder).
    if let Some(before) = files_before {
        let changed: Vec<&String> = stage
            .files
            .iter()
            .filter(|(path, digest)| before.get(*path) != Some(*digest))
            .map(|(path, _)| path)
            .collect();
        let inside = |folder: &str, path: &str| {
            path.strip_prefix(folder)
                .is_some_and(|rest| rest.starts_with('/'))
        };
        // A folder is named only when no file of it is (a file removed from it).
        let removed: Vec<&String> = before
            .keys()
            .filter(|p| !stage.files.contains_key(*p))
            .filter(|p| stage.files.keys().any(|f| inside(f, p)))
            .collect();
        let named: Vec<String> = changed
            .iter()
            .filter(|f| {
                !changed.iter().any(|g| inside(f, g)) && !removed.iter().any(|g| inside(f, g))
            })
            .map(|f| format!("`{f}`"))
            .collect();
        let mut parts = Vec::new();
        if !named.is_empty() {
            parts.push(format!(
                "{} {} changed",
                if named.len() == 1 { "file" } else { "files" },
                named.join(", ")
            ));
        }
        if !removed.is_empty() {
            let removed: Vec<String> = removed.iter().map(|f| format!("`{f}`")).collect();
            parts.push(format!(
                "{} {} removed",
                if removed.len() == 1 { "file" } else { "files" },
                removed.join(", ")
            ));
        }
        if !parts.is_empty() {
            return parts.join(", ");
        }
    }
    "its seed, axis values or a file it reads changed".into()
}

/// `parameter `samples` changed 200 → 300`, for each top-level parameter that differs.
fn param_changes(before: &str, after: &str) -> String {
    let parse = |s: &str| -> BTreeMap<String, serde_json::Value> {
        serde_json::from_str(s).unwrap_or_default()
    };
    let (b, a) = (parse(before), parse(after));
    let text = |v: Option<&serde_json::Value>| v.map(|v| v.to_string());
    let mut changes = Vec::new();
    for k in b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))) {
        if b.get(k) != a.get(k) {
            let (before, after) = shown_apart(text(b.get(k)), text(a.get(k)));
            changes.push(format!("parameter `{k}` changed {before} → {after}"));
        }
    }
    if changes.is_empty() {
        "its parameters changed".into()
    } else {
        changes.join(", ")
    }
}

/// Longest a changed value is shown.
const SHOWN: usize = 40;

/// Two values of a parameter as shown side by side: whole when short, otherwise around the
/// first place they differ (a few characters before it, `…` for what is left out), so a long
/// text that changed near its end does not show as two equal beginnings.
fn shown_apart(before: Option<String>, after: Option<String>) -> (String, String) {
    let (Some(b), Some(a)) = (&before, &after) else {
        let show = |v: Option<String>| {
            v.map_or_else(
                || "(unset)".to_string(),
                |t| crate::text::brief(&t, SHOWN - 1),
            )
        };
        return (show(before), show(after));
    };
    let (bc, ac): (Vec<char>, Vec<char>) = (b.chars().collect(), a.chars().collect());
    if bc.len() <= SHOWN && ac.len() <= SHOWN {
        return (b.clone(), a.clone());
    }
    let first = bc.iter().zip(&ac).take_while(|(x, y)| x == y).count();
    // Some characters before the difference, for context.
    let from = first.saturating_sub(10);
    let cut = |c: &[char]| {
        let end = (from + SHOWN).min(c.len());
        format!(
            "{}{}{}",
            if from > 0 { "…" } else { "" },
            c[from..end].iter().collect::<String>(),
            if end < c.len() { "…" } else { "" }
        )
    };
    (cut(&bc), cut(&ac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_value_is_shown_where_it_differs() {
        let before =
            "\"Mean L1 and L∞ error over 100 releases of the truncated Laplace mechanism\"";
        let after =
            "\"Mean L1 and L∞ error over 100 releases of the truncated Laplace mechanisms\"";
        let (b, a) = shown_apart(Some(before.into()), Some(after.into()));
        assert_ne!(b, a);
        assert!(b.starts_with('…') && b.contains("mechanism\""), "{b}");
        assert!(a.contains("mechanisms\""), "{a}");
        // Short values whole; a missing one as unset.
        assert_eq!(
            shown_apart(Some("200".into()), Some("300".into())),
            ("200".to_string(), "300".to_string())
        );
        assert_eq!(shown_apart(None, Some("1".into())).0, "(unset)");
    }
}
