//! A researcher's working day (issue #38): failures told as they happen, a stage that cannot
//! succeed stopped early, and what an interrupt or a failed run leaves.

use crate::common::{dplab, text, write};

use std::io::BufRead;
use std::path::Path;

/// A pipeline of `n` instances of `ext` (axis `x` = 1..n) running `code/prog.sh`, which
/// appends `x` to `ran.txt` beside the pipeline, then runs `body` (with `$x` set).
fn pipeline(dir: &Path, n: usize, body: &str) -> std::path::PathBuf {
    write(
        dir,
        "code/prog.sh",
        &format!(
            "#!/bin/sh\nx=$(sed -n 's/^ *\"x\": *\\([0-9]*\\).*/\\1/p' \"$DPLAB_JSON\" | head -n 1)\necho \"$x\" >> {ran}\n{body}\n",
            ran = dir.join("ran.txt").display()
        ),
    );
    write(
        dir,
        "p.yaml",
        &format!(
            r#"name: day
title: T
description: d
seed: 3
axes:
  x: {{from: 1, to: {n}, step: 1}}
stages:
  ext:
    kind: external
    with:
      command: [sh, code/prog.sh]
      code: [code]
      params: {{x: $x}}
      columns: [y]
  fine:
    kind: load.table
    with: {{columns: {{a: [1, 2]}}}}
"#
        ),
    )
}

fn started(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("ran.txt"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Starts `cmd` (stderr captured), sends it `signal` once `n` programs have started (as
/// `ran.txt` beside the pipeline counts them), and waits for its end.
fn signal_once_started(
    mut cmd: std::process::Command,
    dir: &Path,
    n: usize,
    signal: libc::c_int,
) -> std::process::Output {
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while started(dir) < n {
        assert!(t0.elapsed().as_secs() < 60, "the programs did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: signalling the dplab process this test started.
    unsafe { libc::kill(child.id() as i32, signal) };
    child.wait_with_output().unwrap()
}

fn run(p: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    dplab()
        .args(["run", "--allow-exec", "--out"])
        .arg(out)
        .arg(p)
        .args(if extra.contains(&"--jobs") {
            &[][..]
        } else {
            &["--jobs", "2"][..]
        })
        .args(extra)
        .output()
        .unwrap()
}

/// A stage whose program fails on every instance stops after its first few (the others are
/// not started), says so, and counts the rest; `--max-failures all` runs them all and
/// collapses identical failures into one count; `--max-failures 2` stops at the second.
#[test]
fn a_stage_that_fails_on_everything_stops_early_and_identical_failures_are_counted() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 40, "echo 'cannot import foo' >&2; exit 3");
    let o = run(&p, &d.path().join("out"), &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let n = started(d.path());
    assert!((5..=7).contains(&n), "{n} programs started\n{t}");
    assert!(
        t.contains("stage `ext` stopped: its first 5 instances all failed")
            && t.contains(&format!("{} instance(s) not run", 40 - n))
            && t.contains("all with the same output")
            && t.contains("everything else finished and is in the store"),
        "{t}"
    );
    // The program's output is shown once, not once per instance.
    assert_eq!(t.matches("cannot import foo").count(), 2, "{t}");

    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 12, "echo 'cannot import foo' >&2; exit 3");
    let o = run(
        &p,
        &d.path().join("out"),
        &["--max-failures", "all", "--no-store"],
    );
    let t = text(&o);
    assert_eq!(started(d.path()), 12, "{t}");
    assert!(
        t.contains("stage `ext`: 12 instance(s) failed, all with the same output")
            && t.contains("everything else finished (--no-store: nothing was kept)")
            && !t.contains("is in the store"),
        "{t}"
    );

    // Some succeed: a limit stops the stage at its N-th failure.
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(
        d.path(),
        30,
        "if [ \"$x\" -gt 2 ]; then echo \"bad $x\" >&2; exit 4; fi\nprintf 'y\\n1\\n' > output/out.csv",
    );
    let o = run(
        &p,
        &d.path().join("out"),
        &["--max-failures", "3", "--jobs", "1"],
    );
    let t = text(&o);
    assert_eq!(started(d.path()), 5, "{t}");
    assert!(
        t.contains("stage `ext`: 3 instance(s) failed: 1 with `")
            && t.contains(
                "stopped, 25 instance(s) not run: 3 of its instances failed (--max-failures 3)"
            ),
        "{t}"
    );
    let o = dplab()
        .args(["run", "--max-failures", "0"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("count ≥ 1"), "{}", text(&o));
}

/// A failure is printed while the run goes on: instance 1 fails at once, instance 2 waits
/// (up to 60 s) for the test to have read that failure on dplab's stderr, and says whether it
/// did. Reported only when the run ends, the failure would come after instance 2 gave up.
#[test]
fn a_failure_is_printed_the_moment_it_happens() {
    let d = tempfile::tempdir().unwrap();
    let seen = d.path().join("seen");
    let p = pipeline(
        d.path(),
        2,
        &format!(
            "if [ \"$x\" = 1 ]; then echo 'first one broke' >&2; exit 3; fi\ni=0\nwhile [ ! -e {s} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\nif [ -e {s} ]; then echo saw > {w}; fi\nprintf 'y\\n1\\n' > output/out.csv",
            s = seen.display(),
            w = d.path().join("saw").display()
        ),
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dplab"))
        .args(["run", "--allow-exec", "--jobs", "2", "--no-store", "--out"])
        .arg(d.path().join("out"))
        .arg(&p)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.contains("first one broke") && !seen.exists() {
            std::fs::write(&seen, "").unwrap();
        }
        lines.push(line);
    }
    child.wait().unwrap();
    assert!(seen.exists(), "{}", lines.join("\n"));
    // The waiting instance saw the file: the failure was printed while it ran.
    assert!(d.path().join("saw").exists(), "{}", lines.join("\n"));
    assert_eq!(started(d.path()), 2);
}

/// SIGTERM during a run prints what it leaves: how many instances were computed and are in
/// the store, and how many running were stopped.
#[test]
fn an_interrupt_says_what_it_leaves() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(
        d.path(),
        6,
        "if [ \"$x\" -gt 2 ]; then exec sleep 300; fi\nprintf 'y\\n1\\n' > output/out.csv",
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dplab"));
    cmd.args(["run", "--allow-exec", "--jobs", "2", "--out"])
        .arg(d.path().join("out"))
        .arg("--store")
        .arg(d.path().join("store"))
        .arg(&p);
    let o = signal_once_started(cmd, d.path(), 4, libc::SIGTERM);
    let t = String::from_utf8_lossy(&o.stderr);
    assert!(
        t.contains("interrupted: 2 instance(s) computed by this run, in the store")
            && t.contains("2 running were stopped"),
        "{t}"
    );
}

/// A pipeline of built-in kinds: `doubled` computes `y` from `data`, `noisy` adds noise to it
/// per (eps, n).
fn cutoff_pipeline(dir: &Path, y: &str, axes: &str) -> std::path::PathBuf {
    write(
        dir,
        "p.yaml",
        &format!(
            r#"name: cut
title: t
description: d
seed: 5
axes:
{axes}
stages:
  data:
    kind: load.table
    with: {{columns: {{x: [1, 2, 3]}}}}
  doubled:
    kind: frame.derive
    input: data
    with:
      columns:
        y: "{y}"
  noisy:
    kind: mechanism.noise
    input: doubled
    with: {{column: y, noise: laplace, epsilon: $eps, sensitivity: 1, samples: $n}}
  all:
    kind: frame.stack
    input: [noisy]
"#
        ),
    )
}

const AXES: &str = "  eps: [0.5, 1.0]\n  n: [10, 20]";

fn counts(out: &Path) -> Vec<(String, u64, u64)> {
    crate::common::manifest_counts(&out.join("cut"))
}

/// An edit upstream whose output is bit-identical stops the cascade: the readers are kept (by
/// their key by content), the run and `--dry-run` say so; an edit that changes the output
/// recomputes them.
#[test]
fn an_upstream_edit_with_the_same_output_keeps_everything_below_it() {
    let d = tempfile::tempdir().unwrap();
    let (out, store) = (d.path().join("out"), d.path().join("store"));
    let run = |p: &Path| {
        dplab()
            .args(["run", "--out"])
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .arg(p)
            .output()
            .unwrap()
    };
    let p = cutoff_pipeline(d.path(), "x * 2", AXES);
    assert!(run(&p).status.success());
    let first = std::fs::read(out.join("cut/noisy.csv")).unwrap();
    let p = cutoff_pipeline(d.path(), "x + x", AXES);
    let o = dplab()
        .args(["run", "--dry-run", "--store"])
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        text(&o).contains("input `doubled` changed (kept if it comes out the same: early cutoff)"),
        "{}",
        text(&o)
    );
    let o = run(&p);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(
            "stage `noisy`: 4 instance(s) taken from the store by content: what `doubled` gave is the same as when they were stored"
        ),
        "{}",
        text(&o)
    );
    assert_eq!(
        counts(&out),
        [
            ("data".to_string(), 0, 1),
            ("doubled".to_string(), 1, 0),
            ("noisy".to_string(), 0, 4),
            ("all".to_string(), 0, 4)
        ]
    );
    assert_eq!(std::fs::read(out.join("cut/noisy.csv")).unwrap(), first);
    // Kept under its key too: the next dry run has nothing to run.
    let o = dplab()
        .args(["run", "--dry-run", "--store"])
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert!(text(&o).contains("0 instance(s) would run"), "{}", text(&o));
    // Another output: everything below runs.
    let p = cutoff_pipeline(d.path(), "x * 3", AXES);
    assert!(run(&p).status.success());
    assert_eq!(
        counts(&out),
        [
            ("data".to_string(), 0, 1),
            ("doubled".to_string(), 1, 0),
            ("noisy".to_string(), 4, 0),
            ("all".to_string(), 4, 0)
        ]
    );
}

/// Swapping two lines of `axes:` keeps every instance (keys name axes, not their order); the
/// results put the axis columns in the new order.
#[test]
fn the_order_of_axes_is_not_part_of_a_key() {
    let d = tempfile::tempdir().unwrap();
    let (out, store) = (d.path().join("out"), d.path().join("store"));
    let run = |p: &Path| {
        dplab()
            .args(["run", "--out"])
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .arg(p)
            .output()
            .unwrap()
    };
    let p = cutoff_pipeline(d.path(), "x * 2", AXES);
    assert!(run(&p).status.success());
    let before = std::fs::read_to_string(out.join("cut/noisy.csv")).unwrap();
    let p = cutoff_pipeline(d.path(), "x * 2", "  n: [10, 20]\n  eps: [0.5, 1.0]");
    let o = dplab()
        .args(["run", "--dry-run", "--store"])
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert!(text(&o).contains("0 instance(s) would run"), "{}", text(&o));
    assert!(run(&p).status.success());
    assert!(
        counts(&out).iter().all(|(_, run, _)| *run == 0),
        "{:?}",
        counts(&out)
    );
    let after = std::fs::read_to_string(out.join("cut/noisy.csv")).unwrap();
    assert!(
        before.starts_with("eps,n,") && after.starts_with("n,eps,"),
        "{after}"
    );
    // The same rows, whatever the order of columns and instances.
    let rows = |t: &str, swap: bool| {
        let mut r: Vec<String> = t
            .lines()
            .skip(1)
            .map(|l| {
                let mut c: Vec<&str> = l.split(',').collect();
                if swap {
                    c.swap(0, 1);
                }
                c.join(",")
            })
            .collect();
        r.sort();
        r
    };
    assert_eq!(rows(&before, false), rows(&after, true));
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// `--stages` runs the stages named and what they read, no more, with the keys a whole run
/// gives them (the next whole run takes them from the store); a name no pipeline has is bad
/// input.
#[test]
fn part_of_a_pipeline_runs_with_stages() {
    let d = tempfile::tempdir().unwrap();
    let (out, store) = (d.path().join("out"), d.path().join("store"));
    let p = cutoff_pipeline(d.path(), "x * 2", AXES);
    let o = dplab()
        .args(["run", "--stages", "noisy", "--out"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // The manifest lists the whole pipeline; `all` neither ran nor had anything to keep.
    assert_eq!(
        counts(&out),
        [
            ("data".to_string(), 1, 0),
            ("doubled".to_string(), 1, 0),
            ("noisy".to_string(), 4, 0),
            ("all".to_string(), 4, 0)
        ]
    );
    assert!(out.join("cut/noisy.csv").exists() && !out.join("cut/all.csv").exists());
    let m = manifest(&out.join("cut"));
    assert_eq!(
        m["incomplete"]["left_out"],
        serde_json::json!(["all"]),
        "{m}"
    );
    assert_eq!(m["stages_asked"], serde_json::json!(["noisy"]), "{m}");
    // Again: `all` has no outputs still, and the manifest still says so (an entry that had
    // none is no output to keep).
    let o = dplab()
        .args(["run", "--stages", "noisy", "--out"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let m = manifest(&out.join("cut"));
    assert_eq!(
        m["incomplete"]["left_out"],
        serde_json::json!(["all"]),
        "{m}"
    );
    let o = dplab()
        .args(["run", "--out"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        counts(&out),
        [
            ("data".to_string(), 0, 1),
            ("doubled".to_string(), 0, 1),
            ("noisy".to_string(), 0, 4),
            ("all".to_string(), 4, 0)
        ]
    );
    assert!(manifest(&out.join("cut")).get("incomplete").is_none());
    let o = dplab()
        .args(["run", "--stages", "noisy,nope", "--dry-run"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("no pipeline given has a stage named `nope`"),
        "{}",
        text(&o)
    );
}

/// The files of a results directory and their bytes, `rerun/` and the manifest aside.
fn files_of(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.path().is_file()
                && !crate::common::RUN_RECORDS.contains(&e.file_name().to_string_lossy().as_ref())
        })
        .map(|e| {
            (
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Nothing a user did not ask to change disappears (issue #54): after a whole run, a run of
/// one stage keeps every other stage's outputs — from the store when it has them, else as
/// they were — and its manifest and `rerun/` describe the whole pipeline. When a kept
/// stage's instances changed (an edit above it), its outputs stay, marked stale, never
/// passed off as current.
#[test]
fn a_partial_run_keeps_every_other_stage_s_results() {
    let d = tempfile::tempdir().unwrap();
    let (out, store) = (d.path().join("out"), d.path().join("store"));
    let p = cutoff_pipeline(d.path(), "x * 2", AXES);
    let run = |store: &Path, extra: &[&str]| {
        let o = dplab()
            .args(["run", "--out"])
            .arg(&out)
            .arg("--store")
            .arg(store)
            .arg(&p)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    };
    run(&store, &[]);
    let whole = files_of(&out.join("cut"));
    assert!(whole.contains_key("all.csv") && whole.contains_key("all.parquet"));
    // From the store: the same bytes, and a complete manifest.
    run(&store, &["--stages", "doubled"]);
    assert_eq!(files_of(&out.join("cut")), whole);
    let m = manifest(&out.join("cut"));
    assert!(m.get("incomplete").is_none(), "{m}");
    assert_eq!(m["stages"].as_array().unwrap().len(), 4, "{m}");
    let as_run = std::fs::read_to_string(out.join("cut/rerun/pipeline.as-run")).unwrap();
    for stage in ["data:", "doubled:", "noisy:", "all:"] {
        assert!(as_run.contains(stage), "{as_run}");
    }
    assert!(as_run.contains("ran only `doubled`"), "{as_run}");
    // A store that has none of them: the earlier outputs, kept as they were, current.
    let empty = d.path().join("empty-store");
    run(&empty, &["--stages", "doubled"]);
    assert_eq!(files_of(&out.join("cut")), whole);
    let m = manifest(&out.join("cut"));
    assert!(m.get("incomplete").is_none(), "{m}");
    let all = m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "all")
        .unwrap();
    assert_eq!(all["kept"]["current"], serde_json::json!(true), "{m}");
    // An edit above them: kept, and marked stale in the manifest.
    let p = cutoff_pipeline(d.path(), "x * 3", AXES);
    assert!(p.exists());
    run(&store, &["--stages", "doubled"]);
    let now = files_of(&out.join("cut"));
    assert_eq!(now["all.csv"], whole["all.csv"]);
    assert_ne!(now["doubled.csv"], whole["doubled.csv"]);
    let m = manifest(&out.join("cut"));
    let stale = m["incomplete"]["stale"].to_string();
    assert!(
        stale.contains("stage `noisy`")
            && stale.contains("stage `all`")
            && stale.contains("changed"),
        "{m}"
    );
    // The whole run brings them up to date.
    run(&store, &[]);
    assert!(manifest(&out.join("cut")).get("incomplete").is_none());
}

/// A run in which a stage fails keeps that stage's earlier outputs, marked; an interrupted
/// run leaves the results directory as it was.
#[test]
fn a_failed_or_interrupted_run_loses_no_earlier_result() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 3, "printf 'y\\n1\\n' > output/out.csv");
    let out = d.path().join("out");
    let o = run(&p, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let whole = files_of(&out.join("day"));
    assert!(whole.contains_key("ext.csv"), "{whole:?}");
    pipeline(d.path(), 3, "echo 'cannot import foo' >&2; exit 3");
    let o = run(&p, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(files_of(&out.join("day")), whole);
    let m = manifest(&out.join("day"));
    assert!(
        m["incomplete"]["failed"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with("stage `ext`"),
        "{m}"
    );
    assert!(
        m["incomplete"]["stale"].to_string().contains("stage `ext`"),
        "{m}"
    );
    let ext = m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "ext")
        .unwrap();
    assert_eq!(ext["kept"]["why"], "failed in this run", "{m}");
    // Interrupted while its programs run: nothing of the directory changes.
    let before = std::fs::read(out.join("day/manifest.json")).unwrap();
    pipeline(d.path(), 3, "exec sleep 300");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dplab"));
    cmd.args(["run", "--allow-exec", "--jobs", "2", "--out"])
        .arg(&out)
        .arg(&p)
        .current_dir(d.path());
    signal_once_started(cmd, d.path(), 8, libc::SIGINT);
    assert_eq!(files_of(&out.join("day")), whole);
    assert_eq!(
        std::fs::read(out.join("day/manifest.json")).unwrap(),
        before
    );
}

/// A run in which some instances fail still writes what succeeded, and its manifest says what
/// is missing and why; the exit status is still a failure's.
#[test]
fn a_failed_run_writes_what_succeeded_marked_incomplete() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 3, "echo 'cannot import foo' >&2; exit 3");
    let out = d.path().join("out");
    let o = run(&p, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("what succeeded is in"), "{}", text(&o));
    assert!(out.join("day/fine.csv").exists() && !out.join("day/ext.csv").exists());
    let m = manifest(&out.join("day"));
    let failed = m["incomplete"]["failed"][0].as_str().unwrap_or_default();
    assert!(
        failed.starts_with("stage `ext`: 3 instance(s) failed"),
        "{m}"
    );
}

/// A program's CSV in the program's terms: an integer beyond i64 (the u64 `seed.lo` dplab
/// hands programs) and a float column whose first 150 rows are integers are read, not
/// failed.
#[test]
fn a_program_s_csv_keeps_u64_integers_and_late_floats() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.yaml",
        r#"name: typed
title: T
description: d
seed: 3
stages:
  ext:
    kind: external
    with:
      command: [sh, code/prog.sh]
      code: [code]
      columns: [lo, late]
"#,
    );
    write(
        d.path(),
        "code/prog.sh",
        "#!/bin/sh\n{ echo lo,late; i=0; while [ $i -lt 150 ]; do echo 18446744073709551615,-1000; i=$((i+1)); done; echo 1,0.5; } > output/out.csv\n",
    );
    let out = d.path().join("out");
    let o = run(&p, &out, &["--no-store"]);
    assert!(o.status.success(), "{}", text(&o));
    let csv = std::fs::read_to_string(out.join("typed/ext.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[1], "18446744073709551615,-1000.0", "{csv}");
    assert_eq!(lines[151], "1,0.5", "{csv}");
}

/// `--dry-run` with `--shard` says what that shard would run: its share only.
#[test]
fn a_dry_run_of_a_shard_counts_its_share() {
    let d = tempfile::tempdir().unwrap();
    let p = cutoff_pipeline(d.path(), "x * 2", AXES);
    let total = |shard: &str| {
        let o = dplab()
            .args(["run", "--dry-run", "--shard", shard])
            .arg(&p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let t = text(&o);
        assert!(t.contains(&format!("shard {shard} owns")), "{t}");
        t.lines()
            .find_map(|l| l.trim().strip_suffix(" come from the store"))
            .and_then(|l| l.split(' ').next())
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    let (a, b) = (total("0/2"), total("1/2"));
    assert!(a > 0 && b > 0 && a + b <= 10, "{a} + {b}");
}

/// A results directory holds what it takes to run it again: `rerun/` has the pipeline as it
/// ran (`--set` applied) and a copy of each file it read, at the same paths, with a script's
/// execute bit. Run from there after the files beside the pipeline changed, it finds every
/// instance in the store (the same keys) and gives the same frames.
#[test]
fn a_results_directory_runs_again_from_its_rerun_folder() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.yaml",
        r#"name: again
title: T
description: d
seed: 3
axes:
  eps: [0.5, 1]
stages:
  t: {kind: load.table, with: {path: data/t.csv}}
  ext:
    kind: external
    input: t
    with:
      command: [./code/prog.sh]
      code: [code]
      params: {k: 2}
      columns: [v]
"#,
    );
    write(d.path(), "data/t.csv", "value\n3\n5\n");
    let prog = write(
        d.path(),
        "code/prog.sh",
        "#!/bin/sh\n. ./code/lib.sh\nprintf 'v\\n%s\\n' \"$(answer)\" > output/out.csv\n",
    );
    write(d.path(), "code/lib.sh", "answer() { echo 42; }\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (out, store) = (d.path().join("out"), d.path().join("store"));
    let o = run(
        &p,
        &out,
        &[
            "--store",
            store.to_str().unwrap(),
            "--set",
            "ext.params.k=3",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let rerun = out.join("again/rerun");
    for (f, want) in [
        ("data/t.csv", "value\n3\n5\n"),
        ("code/lib.sh", "answer() { echo 42; }\n"),
    ] {
        assert_eq!(std::fs::read_to_string(rerun.join(f)).unwrap(), want);
    }
    let mode = std::fs::metadata(rerun.join("code/prog.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert!(mode & 0o100 != 0, "{mode:o}");
    let as_run = std::fs::read_to_string(rerun.join("pipeline.as-run")).unwrap();
    assert!(as_run.starts_with("# p.yaml as it ran"), "{as_run}");
    assert!(as_run.contains("k: 3"), "--set applied: {as_run}");
    // Every copy is listed with its sha256.
    let m = manifest(&out.join("again"));
    let listed: Vec<&str> = m["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["file"].as_str().unwrap())
        .collect();
    for f in [
        "rerun/pipeline.as-run",
        "rerun/data/t.csv",
        "rerun/code/prog.sh",
        "rerun/code/lib.sh",
    ] {
        assert!(listed.contains(&f), "{f} not in {listed:?}");
    }
    // The files beside the pipeline change; the copy runs as it did.
    write(d.path(), "data/t.csv", "value\n7\n");
    write(d.path(), "code/lib.sh", "answer() { echo 0; }\n");
    let out2 = d.path().join("out2");
    let o = run(
        &rerun.join("pipeline.as-run"),
        &out2,
        &["--store", store.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let counts = crate::common::manifest_counts(&out2.join("again"));
    assert!(counts.iter().all(|(_, run, _)| *run == 0), "{counts:?}");
    for f in ["t.csv", "ext.csv"] {
        assert_eq!(
            std::fs::read(out.join("again").join(f)).unwrap(),
            std::fs::read(out2.join("again").join(f)).unwrap(),
            "{f}"
        );
    }
    // Two results directories of one pipeline compare frame by frame (`rerun/` is no
    // pipeline of a results root).
    let o = dplab()
        .arg("compare")
        .arg(out.join("again"))
        .arg(out2.join("again"))
        .output()
        .unwrap();
    assert!(
        o.status.success() && text(&o).contains("ok: 2 frames"),
        "{}",
        text(&o)
    );
}

/// `dplab new --external NAME` writes a pipeline and its numpy program that validate as they
/// are, and refuses to write over either. With numpy they run (here when this machine's
/// python3 has it; `make external-check` always runs them with numpy); without it, the probe
/// says so before any instance runs.
#[test]
fn new_external_writes_a_program_and_its_pipeline() {
    let d = tempfile::tempdir().unwrap();
    let new = || {
        dplab()
            .args(["new", "--external", "mech", "--dir"])
            .arg(d.path())
            .output()
            .unwrap()
    };
    let o = new();
    assert!(o.status.success(), "{}", text(&o));
    let p = d.path().join("mech.yaml");
    let program = std::fs::read_to_string(d.path().join("mech/mechanism.py")).unwrap();
    assert!(program.contains("job.rng.laplace"), "{program}");
    let again = new();
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(
        text(&again).contains("exists: not overwritten"),
        "{}",
        text(&again)
    );
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let numpy = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success());
    let out = d.path().join("out");
    let o = run(&p, &out, &["--profile", "ci", "--no-store"]);
    if numpy {
        assert!(o.status.success(), "{}", text(&o));
        let summary = std::fs::read_to_string(out.join("mech/summary.csv")).unwrap();
        // 2 ε × 2 metrics.
        assert_eq!(summary.lines().count(), 5, "{summary}");
    } else {
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            text(&o).contains("No module named 'numpy'") && text(&o).contains("probe"),
            "{}",
            text(&o)
        );
        assert!(!out.join("mech").exists());
    }
}

/// After `kill -9` the killed run's last progress line (a log's, every few seconds) is older
/// than what it stored: the next run says, before it starts, exactly how many instances the
/// store holds already — the number `--dry-run` counts — and computes only the rest.
#[test]
fn after_kill_9_the_next_run_says_exactly_what_is_stored() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(
        d.path(),
        400,
        "sleep 0.04\nprintf 'y\\n1\\n' > output/out.csv",
    );
    let (out, store) = (d.path().join("out"), d.path().join("store"));
    let log = d.path().join("killed.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dplab"))
        .args(["run", "--allow-exec", "--jobs", "2", "--out"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .arg(&p)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // A progress line is written every 5 s: kill a while after the first one.
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains(" instances (")
    {
        assert!(t0.elapsed().as_secs() < 120, "no progress line");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let shown: usize = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .rev()
        .find_map(|l| l.split("day: ").nth(1)?.split('/').next()?.parse().ok())
        .unwrap();
    let dry = dplab()
        .args(["run", "--dry-run", "--allow-exec", "--store"])
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    // "  N instance(s) would run, M come from the store"
    let stored: usize = text(&dry)
        .lines()
        .find_map(|l| {
            l.split("would run, ")
                .nth(1)?
                .strip_suffix(" come from the store")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{}", text(&dry)));
    assert!(
        stored >= shown,
        "the store holds {stored}, the log showed {shown}"
    );
    let o = run(&p, &out, &["--store", store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let said = format!("day: {stored} of 401 instances are in the store already");
    assert!(text(&o).contains(&said), "expected `{said}`:\n{}", text(&o));
    let (ran, taken) = counts_of(&out.join("day"), "ext");
    let (_, fine) = counts_of(&out.join("day"), "fine");
    assert_eq!((ran, taken + fine), (400 - taken, stored as u64));
}

/// A stage's (instances run, instances taken from the store) in a results directory.
fn counts_of(dir: &Path, stage: &str) -> (u64, u64) {
    crate::common::manifest_counts(dir)
        .into_iter()
        .find(|(s, _, _)| s == stage)
        .map(|(_, r, c)| (r, c))
        .unwrap()
}
