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

use super::exec::{concat, InstanceResult, RunOptions};
use super::plan::{hex, Plan};

pub fn write(
    plan: &Plan,
    results: &[Vec<Option<InstanceResult>>],
    opts: &RunOptions,
    wall: f64,
) -> Result<PathBuf> {
    fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    let final_dir = opts.out_dir.join(&plan.name);
    remove_stale(&opts.out_dir, &plan.name);
    let staging = opts
        .out_dir
        .join(format!(".{}.partial-{}", plan.name, std::process::id()));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    let outcome = write_all(plan, results, opts, wall, &staging);
    if let Err(e) = outcome {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    // Swap the directories: the old results stay complete until the new ones are.
    let old = opts
        .out_dir
        .join(format!(".{}.old-{}", plan.name, std::process::id()));
    if final_dir.exists() {
        fs::rename(&final_dir, &old)
            .with_context(|| format!("moving aside {}", final_dir.display()))?;
    }
    fs::rename(&staging, &final_dir)
        .with_context(|| format!("renaming {} to {}", staging.display(), final_dir.display()))?;
    if old.exists() {
        fs::remove_dir_all(&old)?;
    }
    Ok(final_dir)
}

fn write_all(
    plan: &Plan,
    results: &[Vec<Option<InstanceResult>>],
    opts: &RunOptions,
    wall: f64,
    dir: &Path,
) -> Result<()> {
    let mut outputs = Vec::new();
    let mut stages_json = Vec::new();
    for (si, stage) in plan.stages.iter().enumerate() {
        let res: Vec<&InstanceResult> = results[si]
            .iter()
            .map(|r| r.as_ref().expect("every instance ran"))
            .collect();
        // Plots return no frame: their data is their input's.
        if stage.store && res.iter().any(|r| r.frame.width() > 0) {
            let frames: Vec<&DataFrame> = res.iter().map(|r| &r.frame).collect();
            let mut df = concat(&frames)?;
            let mut csv = Vec::new();
            CsvWriter::new(&mut csv)
                .include_header(true)
                .finish(&mut df)?;
            outputs.push(put(dir, &format!("{}.csv", stage.name), &csv)?);
            let mut pq = Vec::new();
            ParquetWriter::new(&mut pq).finish(&mut df)?;
            outputs.push(put(dir, &format!("{}.parquet", stage.name), &pq)?);
        }
        for (inst, r) in stage.instances.iter().zip(&res) {
            for a in &r.artifacts {
                let name = if stage.instances.len() == 1 {
                    format!("{}.{}", stage.name, a.ext)
                } else {
                    format!("{}__{}.{}", stage.name, sanitise(&inst.label), a.ext)
                };
                outputs.push(put(dir, &name, &a.bytes)?);
            }
        }
        let secs: Vec<f64> = res.iter().map(|r| r.seconds).collect();
        stages_json.push(json!({
            "name": stage.name,
            "kind": stage.kind.name,
            "axes": stage.axes,
            "gathered": stage.gathered,
            "stored": stage.store,
            "instances": stage.instances.len(),
            "seconds_total": secs.iter().sum::<f64>(),
            "seconds_max": secs.iter().copied().fold(0.0, f64::max),
            "seeds": stage.instances.iter().map(|i| json!({"instance": i.label, "seed": format!("{:032x}", i.seed)})).collect::<Vec<_>>(),
        }));
    }
    let axes: serde_json::Map<String, serde_json::Value> = plan
        .axes
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!(v.iter().map(|x| x.canonical()).collect::<Vec<_>>()),
            )
        })
        .collect();
    let manifest = json!({
        "dplab_version": env!("CARGO_PKG_VERSION"),
        "git_commit": git_commit(&plan.base_dir),
        "pipeline": {
            "name": plan.name,
            "title": plan.title,
            "file": plan.file.display().to_string(),
            "sha256": plan.file_sha256,
            "source": plan.source,
            "description": plan.description,
        },
        "profile": plan.profile,
        "set": opts.set,
        "seed": plan.seed,
        "axes": axes,
        "jobs": opts.jobs,
        "wall_seconds": wall,
        "stages": stages_json,
        "outputs": outputs,
        "warning": "seeded runs reproduce research; never use them to release real private data",
    });
    put(
        dir,
        "manifest.json",
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    Ok(())
}

/// Staging directories left by interrupted runs of this pipeline (their process is gone).
fn remove_stale(out: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(out) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().to_string();
        let pid = file
            .strip_prefix(&format!(".{name}.partial-"))
            .or_else(|| file.strip_prefix(&format!(".{name}.old-")))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            let alive = Path::new(&format!("/proc/{pid}")).exists() && pid != std::process::id();
            if !alive {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Writes one file (temporary name, fsync, rename) and returns its manifest entry.
fn put(dir: &Path, name: &str, bytes: &[u8]) -> Result<serde_json::Value> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    {
        let mut f =
            fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    Ok(json!({"file": name, "bytes": bytes.len(), "sha256": hex(&Sha256::digest(bytes))}))
}

fn sanitise(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '=' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .replace("__", "_")
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
