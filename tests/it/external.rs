//! External stages through the whole command line: consent, keys on the code's content,
//! failures that lose nothing, and the same bytes for any `--jobs` and any number of shards.
//! (The runner's own hostile-program list is tested beside it, in `src/stages/external/`.)

use crate::common::{dplab, manifest_counts, text, write};

use std::path::Path;

/// A pipeline whose stage `ext` runs `prog.sh` once per value of `x`: the program appends a
/// line to `ran.txt` beside the pipeline (so a test counts the programs started) and writes
/// its seed's low half and `x` (failing with exit 3 when `x` is `fail_at`).
fn pipeline(dir: &Path, fail_at: i64) -> std::path::PathBuf {
    write(
        dir,
        "code/prog.sh",
        &format!(
            r#"#!/bin/sh
set -eu
v() {{ sed -n "s/^ *\"$1\": *\"\{{0,1\}}\([^\",]*\)\"\{{0,1\}},\{{0,1\}}\$/\1/p" "$DPLAB_JSON" | head -n 1; }}
x=$(v x)
echo "$x" >> {ran}
if [ "$x" = "{fail_at}" ]; then echo "no good at $x" >&2; exit 3; fi
printf 'x,lo,note\n%s,seed-%s,%s\n' "$x" "$(v lo)" "$(v note)" > output/out.csv
"#,
            ran = dir.join("ran.txt").display()
        ),
    );
    write(
        dir,
        "p.yaml",
        r#"name: ext
title: T
source: {paper: p, item: i}
description: d
seed: 7
axes:
  x: [1, 2, 3, 4]
stages:
  ext:
    kind: external
    with:
      command: [sh, code/prog.sh]
      code: [code]
      params: {x: $x, note: "$(touch pwned); reboot"}
      columns: [x, lo, note]
  all:
    kind: frame.stack
    input: [ext]
"#,
    )
}

fn started(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("ran.txt"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Without consent nothing runs: exit 2 with every command listed; `validate` and
/// `--dry-run` list the commands and start nothing; `--allow-exec` and `DPLAB_ALLOW_EXEC=1`
/// run them; a value that looks like shell arrives as text.
#[test]
fn a_pipeline_that_runs_programs_runs_only_with_consent() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), -1);
    let out = d.path().join("out");
    let store = d.path().join("store");
    let run = |extra: &[&str], env: Option<&str>| {
        let mut c = dplab();
        c.arg("run")
            .arg(&p)
            .arg("--out")
            .arg(&out)
            .arg("--store")
            .arg(&store);
        c.args(extra);
        if let Some(v) = env {
            c.env("DPLAB_ALLOW_EXEC", v);
        } else {
            c.env_remove("DPLAB_ALLOW_EXEC");
        }
        c.output().unwrap()
    };
    let o = run(&[], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("ext: stage `ext`: sh code/prog.sh") && text(&o).contains("--allow-exec"),
        "{}",
        text(&o)
    );
    assert_eq!(started(d.path()), 0);
    assert!(!out.exists());
    // Any other value of the variable is not consent.
    let o = run(&[], Some("yes"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for args in [vec!["validate"], vec!["run", "--dry-run"]] {
        let o = dplab()
            .args(&args)
            .arg(&p)
            .env_remove("DPLAB_ALLOW_EXEC")
            .args(if args[0] == "run" {
                vec!["--out", "o"]
            } else {
                vec![]
            })
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("runs (with --allow-exec): ext: stage `ext`: sh code/prog.sh"),
            "{args:?}: {}",
            text(&o)
        );
    }
    assert_eq!(started(d.path()), 0);
    let o = run(&["--allow-exec"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 4);
    let frame = std::fs::read_to_string(out.join("ext/all.csv")).unwrap();
    assert!(frame.contains("$(touch pwned); reboot"), "{frame}");
    assert!(!d.path().join("pwned").exists() && !out.join("ext/pwned").exists());
    let o = run(&["--force"], Some("1"));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 8);
}

/// The store key covers the code's content: touching a file reruns nothing, editing one
/// reruns exactly the instances that run it (and `--dry-run` says why), and a program that
/// fails for one instance fails the run (exit 1, its stderr in the message) while the others
/// are stored, so the next run starts only the failed one.
#[test]
fn the_code_is_keyed_by_content_and_a_failure_loses_only_its_instance() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 3);
    let out = d.path().join("out");
    let store = d.path().join("store");
    let run = || {
        dplab()
            .arg("run")
            .arg(&p)
            .arg("--out")
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .arg("--allow-exec")
            .output()
            .unwrap()
    };
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("no good at 3") && text(&o).contains("exit"),
        "{}",
        text(&o)
    );
    assert_eq!(started(d.path()), 4);
    // The program fixed: only the failed instance runs again.
    let prog = d.path().join("code/prog.sh");
    let fixed = std::fs::read_to_string(&prog)
        .unwrap()
        .replace("= \"3\"", "= \"-1\"");
    std::fs::write(&prog, &fixed).unwrap();
    // An edit changes every instance's key: all four run. (The first edit is the fix.)
    let o = run();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 8);
    // Touched, the same bytes: nothing runs.
    std::fs::write(&prog, &fixed).unwrap();
    let o = run();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 8);
    assert_eq!(
        manifest_counts(&out.join("ext"))
            .into_iter()
            .find(|(s, _, _)| s == "ext")
            .unwrap(),
        ("ext".to_string(), 0, 4)
    );
    // A new file in the code folder is an edit of the code.
    write(d.path(), "code/lib/helper.sh", "# nothing yet\n");
    let o = dplab()
        .args(["run", "--dry-run"])
        .arg(&p)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(" 4 to run") && text(&o).contains("file `code` changed"),
        "{}",
        text(&o)
    );
    let o = run();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 12);

    // A failure of one instance, the others stored: the next run starts only it.
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 2);
    let run = |store: &Path| {
        dplab()
            .arg("run")
            .arg(&p)
            .arg("--out")
            .arg(d.path().join("out"))
            .arg("--store")
            .arg(store)
            .arg("--allow-exec")
            .output()
            .unwrap()
    };
    let store = d.path().join("store");
    assert_eq!(run(&store).status.code(), Some(1));
    assert_eq!(started(d.path()), 4);
    assert_eq!(run(&store).status.code(), Some(1));
    assert_eq!(
        started(d.path()),
        5,
        "only the failed instance starts again"
    );
}

/// The shipped example gives the same bytes for `--jobs 1`, `--jobs 2` and 3 shards plus a
/// merge: every frame of its results directory.
#[test]
fn the_example_gives_the_same_bytes_for_any_jobs_and_shards() {
    let d = tempfile::tempdir().unwrap();
    let pipe =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/examples/ex-permute-and-flip.yaml");
    let run = |out: &str, store: &str, extra: &[&str]| {
        let o = dplab()
            .arg("run")
            .arg(&pipe)
            .args(["--profile", "ci", "--allow-exec", "--out"])
            .arg(d.path().join(out))
            .arg("--store")
            .arg(d.path().join(store))
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{extra:?}: {}", text(&o));
    };
    run("j1", "s1", &["--jobs", "1"]);
    run("j2", "s2", &["--jobs", "2"]);
    for i in 0..3 {
        run(
            "unused",
            "s3",
            &["--jobs", "1", "--shard", &format!("{i}/3")],
        );
    }
    run("sh", "s3", &["--jobs", "2"]);
    let frames = |dir: &str| -> Vec<(String, Vec<u8>)> {
        let root = d.path().join(dir).join("ex-permute-and-flip");
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "csv" || x == "parquet"))
            .map(|p| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let one = frames("j1");
    assert!(one.iter().any(|(n, _)| n == "permute_and_flip.csv"));
    assert!(
        one.len() >= 10,
        "{:?}",
        one.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for other in ["j2", "sh"] {
        let f = frames(other);
        assert_eq!(
            one.iter().map(|x| &x.0).collect::<Vec<_>>(),
            f.iter().map(|x| &x.0).collect::<Vec<_>>()
        );
        for ((name, a), (_, b)) in one.iter().zip(&f) {
            assert!(a == b, "{other}: {name} differs from --jobs 1");
        }
    }
}

/// Permute-and-flip's error probability with two candidates is ½e^(−εc/2): each Monte-Carlo
/// frequency of the shipped example (Python and sh/awk) lies within its 99.9% interval.
#[test]
fn the_example_permute_and_flip_has_its_known_error_probability() {
    let d = tempfile::tempdir().unwrap();
    let pipe =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/examples/ex-permute-and-flip.yaml");
    let o = dplab()
        .arg("run")
        .arg(&pipe)
        .args(["--profile", "ci", "--allow-exec", "--out"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let csv = std::fs::read_to_string(d.path().join("ex-permute-and-flip/errors.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let mut checked = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if !f[col("source")].starts_with("permute-and-flip") {
            continue;
        }
        let (eps, c): (f64, f64) = (f[col("eps")].parse().unwrap(), f[col("c")].parse().unwrap());
        let want = 0.5 * (-eps * c / 2.0).exp();
        let (lo, hi): (f64, f64) = (
            f[col("pr_ci_lo")].parse().unwrap(),
            f[col("pr_ci_hi")].parse().unwrap(),
        );
        assert!(lo <= want && want <= hi, "{l}: ½e^(−εc/2) = {want}");
        if f[col("source")].contains("Python") {
            let exact: f64 = f[col("pr_exact")].parse().unwrap();
            assert!(
                (exact - want).abs() <= 1e-12 * want,
                "{l}: exact {exact} vs {want}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 16, "two programs × 8 (ε, c) of the ci profile");
}
