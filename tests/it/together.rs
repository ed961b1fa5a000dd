//! The pipelines of one `dplab run` run at once, in one pool of `--jobs` (the engine's
//! `Slots`): while one pipeline has a single instance left, another's ready ones take the
//! other cores. Each keeps its own results, and work two of them share is computed once.

use crate::common::{dplab, text, write};

use std::path::Path;

/// Pipeline `name` with one external instance per `x` of `xs` that runs `prog.sh`: the
/// program marks itself running in `marks/`, notes in `marks/overlap` whether an instance of
/// another pipeline was running meanwhile (it looks for 2 s, or until it sees one), and
/// appends a line to `ran.txt` (so a test counts the programs started).
fn pipeline(dir: &Path, name: &str, seed: u64, xs: &str) -> std::path::PathBuf {
    write(
        dir,
        "pipelines/code/prog.sh",
        &format!(
            r#"#!/bin/sh
set -eu
v() {{ sed -n "s/^ *\"$1\": *\"\{{0,1\}}\([^\",]*\)\"\{{0,1\}},\{{0,1\}}\$/\1/p" "$DPLAB_JSON" | head -n 1; }}
me=$(v who)-$(v x)
marks={marks}
mkdir -p "$marks"
echo "$me" >> {ran}
touch "$marks/in-$me"
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  others=$(ls "$marks" | grep '^in-' | grep -v "^in-$(v who)-" || true)
  if [ -n "$others" ]; then echo "$me with $others" >> "$marks/overlap"; break; fi
  sleep 0.1
done
rm -f "$marks/in-$me"
printf 'x,who\n%s,%s\n' "$(v x)" "$(v who)" > output/out.csv
"#,
            marks = dir.join("marks").display(),
            ran = dir.join("ran.txt").display()
        ),
    );
    write(
        dir,
        &format!("pipelines/{name}.yaml"),
        &format!(
            r#"name: {name}
title: T
source: {{paper: p, item: i}}
description: d
seed: {seed}
axes:
  x: {xs}
stages:
  ext:
    kind: external
    with:
      command: [sh, code/prog.sh]
      code: [code]
      params: {{x: $x, who: w{seed}}}
      columns: [x, who]
"#
        ),
    )
}

fn run(dir: &Path, jobs: &str) -> std::process::Output {
    dplab()
        .args(["run", "-q", "--allow-exec", "--jobs", jobs, "--out"])
        .arg(dir.join("out"))
        .arg("--store")
        .arg(dir.join("store"))
        .arg(dir.join("pipelines"))
        .output()
        .unwrap()
}

fn lines(p: &Path) -> Vec<String> {
    let mut l: Vec<String> = std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    l.sort();
    l
}

/// Two pipelines of one instance each, `--jobs 2`: the second does not wait for the first
/// (one after another, neither would see the other running); each writes its own results.
#[test]
fn two_pipelines_of_one_run_run_at_once() {
    let d = tempfile::tempdir().unwrap();
    pipeline(d.path(), "a", 1, "[1]");
    pipeline(d.path(), "b", 2, "[1]");
    let o = run(d.path(), "2");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !lines(&d.path().join("marks/overlap")).is_empty(),
        "neither pipeline's instance saw the other's running: they ran one after another"
    );
    for name in ["a", "b"] {
        assert!(
            d.path()
                .join("out")
                .join(name)
                .join("manifest.json")
                .exists(),
            "{name}: {}",
            text(&o)
        );
    }
}

/// `--jobs 1` is one instance at a time over the whole run, whichever pipeline it is of.
#[test]
fn with_one_job_no_two_instances_of_the_run_overlap() {
    let d = tempfile::tempdir().unwrap();
    pipeline(d.path(), "a", 1, "[1, 2]");
    pipeline(d.path(), "b", 2, "[1, 2]");
    let o = run(d.path(), "1");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(lines(&d.path().join("ran.txt")).len(), 4);
    assert_eq!(lines(&d.path().join("marks/overlap")), Vec::<String>::new());
}

/// Two pipelines that hold the same work (same seed, stage and parameters: the same store
/// keys) and run at once compute each instance once: the second waits for the first's
/// result instead of computing it too; both results directories have it.
#[test]
fn work_two_pipelines_share_is_computed_once() {
    let d = tempfile::tempdir().unwrap();
    pipeline(d.path(), "a", 5, "[1, 2, 3]");
    pipeline(d.path(), "b", 5, "[1, 2, 3]");
    let o = run(d.path(), "2");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        lines(&d.path().join("ran.txt")),
        ["w5-1", "w5-2", "w5-3"],
        "{}",
        text(&o)
    );
    for name in ["a", "b"] {
        let m =
            std::fs::read_to_string(d.path().join("out").join(name).join("manifest.json")).unwrap();
        assert!(m.contains("\"ext\""), "{name}: {m}");
    }
}
