//! `--message-format json` (issue #55): the events a program reads of `run`, its dry run,
//! `validate` and `show`, pinned whole — one JSON object per line on stdout, nothing else there,
//! `"format": 1` on each. What varies from run to run (seconds, times, the temporary
//! directory, the throttled `progress` events) is normalised; everything else is as written.

use std::path::Path;

use crate::common::{dplab, stable, write};

const PIPELINE: &str = r#"name: ev
title: Events
description: d
seed: 4
axes:
  eps: [0.5, 1.0]
stages:
  counts: {kind: load.table, with: {columns: {utility: [1, 5, 2]}}}
  noisy:
    kind: mechanism.noise
    input: counts
    with: {column: utility, noise: laplace, epsilon: $eps, samples: 20}
"#;

/// The events of `dplab ARGS --message-format json`, normalised: one per line, `progress`
/// events counted (their number depends on time) and dropped, seconds as `S`.
fn events(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = dplab()
        .args(args)
        .args(["--message-format", "json", "--jobs", "1"])
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8(o.stdout).unwrap();
    let mut lines = Vec::new();
    let mut progress = 0;
    for line in stdout.lines() {
        let mut v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON event ({e}): {line}"));
        assert_eq!(v["format"], 1, "{line}");
        if v["event"] == "progress" {
            progress += 1;
            continue;
        }
        if let Some(s) = v.get_mut("seconds") {
            *s = serde_json::json!("S");
        }
        lines.push(v.to_string());
    }
    if args.first() == Some(&"run") && !args.contains(&"--dry-run") && o.status.code() == Some(0) {
        assert!(progress >= 1, "no progress event:\n{stdout}");
    }
    (o.status.code(), stable(&lines.join("\n"), dir))
}

/// `--jobs` is not a flag of validate and show.
fn events_of(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = dplab()
        .args(args)
        .args(["--message-format", "json"])
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8(o.stdout).unwrap();
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["format"], 1, "{line}");
    }
    (o.status.code(), stable(&stdout, dir))
}

#[test]
fn a_run_its_dry_run_and_a_second_run_in_events() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "p.yaml", PIPELINE);
    let store = ["--store", "store", "--out", "out"];
    let (code, dry) = events(
        d.path(),
        &[&["run", "p.yaml", "--dry-run"][..], &store].concat(),
    );
    assert_eq!(code, Some(0));
    let (code, first) = events(d.path(), &[&["run", "p.yaml"][..], &store].concat());
    assert_eq!(code, Some(0));
    let (code, again) = events(d.path(), &[&["run", "p.yaml"][..], &store].concat());
    assert_eq!(code, Some(0));
    insta::assert_snapshot!(format!(
        "dry run:\n{dry}\n\nrun:\n{first}\n\nagain:\n{again}"
    ));
}

#[test]
fn failures_and_refusals_in_events() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "bad.yaml",
        &PIPELINE.replace("samples: 20", "sample: 20"),
    );
    let (code, invalid) = events_of(d.path(), &["validate", "bad.yaml"]);
    assert_eq!(code, Some(2));
    write(d.path(), "p.yaml", PIPELINE);
    let (code, valid) = events_of(d.path(), &["validate", "p.yaml"]);
    assert_eq!(code, Some(0));
    // A stage that fails at run time: its instances' failures, the pipeline's, the run's.
    write(
        d.path(),
        "fails.yaml",
        &PIPELINE
            .replace("column: utility,", "column: utility_typo,")
            .replace("{columns: {utility: [1, 5, 2]}}", "{path: counts.csv}"),
    );
    write(d.path(), "counts.csv", "utility\n1\n5\n");
    let (code, failed) = events(
        d.path(),
        &["run", "fails.yaml", "--store", "store", "--out", "out"],
    );
    assert_eq!(code, Some(1));
    // A program without consent: refused before anything runs, the commands in the message.
    write(
        d.path(),
        "prog.yaml",
        "name: prog\ntitle: t\ndescription: d\nseed: 1\nstages:\n  ext:\n    kind: external\n    with: {command: [sh, prog.sh], code: [prog.sh], columns: [y]}\n",
    );
    write(d.path(), "prog.sh", "printf 'y\\n1\\n' > output/out.csv\n");
    let (code, refused) = events(d.path(), &["run", "prog.yaml", "--store", "store"]);
    assert_eq!(code, Some(2));
    let (code, shown) = events_of(d.path(), &["show", "p.yaml"]);
    assert_eq!(code, Some(0));
    // Where `sh` is differs between machines.
    let refused = refused
        .replace("/usr/bin/sh", "SH")
        .replace("/bin/sh", "SH");
    insta::assert_snapshot!(format!(
        "validate (invalid):\n{invalid}\nvalidate:\n{valid}\nrun (fails):\n{failed}\n\nrun (no consent):\n{refused}\n\nshow:\n{shown}"
    ));
}
