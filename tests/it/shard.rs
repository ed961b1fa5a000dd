//! Sharded runs (`dplab run --shard I/N`): N processes share a store, then a plain run
//! gathers. For N ∈ {1, 2, 3, 7}, with the shards running at once, the results are
//! byte-identical to a local `--jobs 2` run, and the merge computes only the stages that
//! gather.

use crate::common;
use common::{manifest_counts, text};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use tempfile::TempDir;

/// A shared upstream (`counts`, read by every repetition), a chain per repetition (`noisy`
/// → `shifted`, its summary), a gather over repetitions and a plot gathering every ε.
const FIXTURE: &str = r#"name: sharded
title: Shard test
source: {paper: test, item: none}
description: A shared input, chains per repetition, gathers.
seed: 9
axes:
  eps: [0.25, 0.5, 1.0, 2.0, 4.0]
stages:
  counts:
    kind: load.table
    with: {columns: {candidate: [a, b, c, d], utility: [1, 5, 2, 4]}}
  noisy:
    kind: mechanism.noise
    input: counts
    repeat: 4
    with: {column: utility, noise: laplace, epsilon: $eps, samples: 50}
  shifted:
    kind: aggregate.summary
    input: noisy
    with: {values: [noisy], by: [row]}
  summary:
    kind: aggregate.summary
    input: shifted
    over: [rep]
    with: {values: [mean], by: [row]}
  figure:
    kind: plot.lines
    input: summary
    with: {x: row, y: mean, series: eps, title: sharded, x_label: row, y_label: mean}
profiles:
  ci:
    description: fewer draws
    with:
      noisy: {samples: 40}
"#;

/// Pipelines of the project with no dataset and no wall-time column (their frames must be
/// byte-identical).
const PROJECT: &[&str] = &[
    "pipelines/dwork-roth/dr-two-diseases.yaml",
    "pipelines/dwork-roth/dr-pumpkin.yaml",
    "pipelines/wu2017/w17-fig1.yaml",
];

fn dplab(store: &Path) -> Command {
    Command::from_std(std_dplab(store))
}

/// [`dplab`] as a std command, to run several at once.
fn std_dplab(store: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("dplab"));
    c.env_remove("DPLAB_STORE")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_COUNT")
        .env_remove("JOB_COMPLETION_INDEX")
        .arg("run")
        .arg("--store")
        .arg(store);
    c
}

fn ok(o: Output, what: &str) -> Output {
    assert!(o.status.success(), "{what} failed:\n{}", text(&o));
    o
}

/// Every file of a results tree but the manifests, with its bytes.
fn files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !crate::common::RUN_RECORDS
                .contains(&p.file_name().unwrap().to_string_lossy().as_ref())
            {
                out.push((
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// Per stage and instance, the store keys a manifest records.
fn keys(results: &Path) -> serde_json::Value {
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(results.join("manifest.json")).unwrap()).unwrap();
    m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].clone(), s["instances"].clone()))
        .map(|(n, i)| serde_json::json!([n, i]))
        .collect()
}

/// Runs shards 0..n of `pipelines` at once on a fresh store, then the merge into `out`.
fn sharded(dir: &Path, pipelines: &[PathBuf], n: usize, args: &[&str]) -> PathBuf {
    let store = dir.join(format!("store{n}"));
    let out = dir.join(format!("merged{n}"));
    let children: Vec<_> = (0..n)
        .map(|i| {
            let mut c = std_dplab(&store);
            c.args(["-q", "--jobs", "1", "--shard", &format!("{i}/{n}")])
                .args(args)
                .args(pipelines)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        ok(c.wait_with_output().unwrap(), &format!("shard {i}/{n}"));
    }
    assert!(
        !out.exists(),
        "a shard wrote a results directory at {}",
        out.display()
    );
    ok(
        dplab(&store)
            .args(["-q", "--jobs", "2", "--out"])
            .arg(&out)
            .args(args)
            .args(pipelines)
            .output()
            .unwrap(),
        "merge",
    );
    out
}

#[test]
fn shards_and_a_merge_give_a_local_run_byte_for_byte() {
    let dir = TempDir::new().unwrap();
    let fixture = common::write(dir.path(), "sharded.yaml", FIXTURE);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pipelines = vec![fixture];
    pipelines.extend(PROJECT.iter().map(|p| root.join(p)));
    let local = dir.path().join("local");
    ok(
        dplab(&dir.path().join("local-store"))
            .args(["-q", "--jobs", "2", "--profile", "ci", "--out"])
            .arg(&local)
            .args(&pipelines)
            .output()
            .unwrap(),
        "local run",
    );
    let expected = files(&local);
    assert!(expected.len() > 10, "{} result files", expected.len());
    for n in [1, 2, 3, 7] {
        let merged = sharded(dir.path(), &pipelines, n, &["--profile", "ci"]);
        let got = files(&merged);
        assert_eq!(
            got.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            expected.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            "{n} shards: other files"
        );
        for ((p, a), (_, b)) in got.iter().zip(&expected) {
            assert!(
                a == b,
                "{n} shards: {} differs from the local run",
                p.display()
            );
        }
        for name in ["sharded", "dr-two-diseases", "dr-pumpkin", "w17-fig1"] {
            assert_eq!(
                keys(&merged.join(name)),
                keys(&local.join(name)),
                "{n} shards: {name}'s instance keys"
            );
        }
        // The merge computed only what gathers: the summary over repetitions and the plot.
        let run: Vec<(String, u64)> = manifest_counts(&merged.join("sharded"))
            .into_iter()
            .map(|(s, r, _)| (s, r))
            .collect();
        assert_eq!(
            run,
            [
                ("counts", 0),
                ("noisy", 0),
                ("shifted", 0),
                ("summary", 5),
                ("figure", 1)
            ]
            .map(|(s, r)| (s.to_string(), r)),
            "{n} shards: what the merge ran"
        );
    }
}

#[test]
fn a_shard_whose_share_is_stored_computes_nothing_and_the_others_fill_the_gaps() {
    let dir = TempDir::new().unwrap();
    let p = common::write(dir.path(), "sharded.yaml", FIXTURE);
    let store = dir.path().join("store");
    let shard = |i: usize| {
        let o = ok(
            dplab(&store)
                .args(["--jobs", "1", "--shard", &format!("{i}/3")])
                .arg(&p)
                .output()
                .unwrap(),
            "shard",
        );
        let t = text(&o);
        let line = t
            .lines()
            .find(|l| l.contains("owns"))
            .unwrap_or_else(|| panic!("no summary line in:\n{t}"))
            .to_string();
        line
    };
    let first = shard(1);
    assert!(first.contains("(0 already stored)"), "{first}");
    let again = shard(1);
    assert!(
        again.contains("computed 0 ") && again.contains("loaded 0 "),
        "a rerun of a finished shard: {again}"
    );
    // Shard 1 left its share and the shared input in the store; the others compute the rest.
    let mut computed = 0;
    for i in [0, 2] {
        let l = shard(i);
        let n: usize = l
            .split("computed ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{l}"));
        computed += n;
    }
    // 1 + 20 + 20 shardable instances: shard 1 computed its third of the chains and the
    // shared table, so the other two computed the remaining chains and nothing shared.
    let out = dir.path().join("out");
    ok(
        dplab(&store)
            .args(["-q", "--out"])
            .arg(&out)
            .arg(&p)
            .output()
            .unwrap(),
        "merge",
    );
    let run: u64 = manifest_counts(&out.join("sharded"))
        .iter()
        .filter(|(s, _, _)| ["counts", "noisy", "shifted"].contains(&s.as_str()))
        .map(|(_, r, _)| r)
        .sum();
    assert_eq!(run, 0, "the merge recomputed shardable instances");
    let first_n: usize = first
        .split("computed ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap();
    assert_eq!(
        first_n + computed,
        41,
        "{first}; others computed {computed}"
    );
    // About a third of the 20 chains (2 instances each), plus the shared table.
    assert!(
        (13..=17).contains(&first_n),
        "shard 1 of 3 computed {first_n} of 41: {first}"
    );
}

#[test]
fn bad_shard_specs_are_refused_with_the_valid_forms() {
    let dir = TempDir::new().unwrap();
    let p = common::write(dir.path(), "sharded.yaml", FIXTURE);
    let store = dir.path().join("store");
    for (spec, env, says) in [
        (
            "3/3",
            None,
            "shard index 3 is out of range for 3 shards: give 0 to 2",
        ),
        ("0/0", None, "0 shards is out of range"),
        ("x", None, "give `I/N`"),
        ("1/-2", None, "is not a whole number"),
        ("auto", None, "SLURM_ARRAY_TASK_ID is not set"),
        (
            "auto/4",
            None,
            "neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX",
        ),
        (
            "auto/4",
            Some(("JOB_COMPLETION_INDEX", "4")),
            "shard index 4 is out of range for 4 shards",
        ),
        (
            "auto/4",
            Some(("SLURM_ARRAY_TASK_ID", "two")),
            "the index `two` (from SLURM_ARRAY_TASK_ID) is not a whole number",
        ),
    ] {
        let mut c = dplab(&store);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let o = c.args(["--shard", spec]).arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "--shard {spec}: {}", text(&o));
        assert!(text(&o).contains(says), "--shard {spec}: {}", text(&o));
        assert!(!store.exists(), "--shard {spec} touched the store");
    }
    // Index and count from a Slurm array task, or a Kubernetes indexed job with its count.
    for env in [
        vec![
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "2"),
        ],
        vec![("JOB_COMPLETION_INDEX", "1")],
    ] {
        let mut c = dplab(&store);
        for (k, v) in &env {
            c.env(k, v);
        }
        let spec = if env.len() == 2 { "auto" } else { "auto/2" };
        let o = ok(c.args(["--shard", spec]).arg(&p).output().unwrap(), spec);
        assert!(text(&o).contains("shard 1/2: owns"), "{}", text(&o));
    }
    let o = dplab(&store)
        .args(["--shard", "0/2", "--no-store"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// A shard's only output is the store: when it cannot store its work it fails (exit 1), where
/// a plain run only warns (its results directory still has everything).
#[test]
fn a_shard_that_cannot_store_its_work_fails() {
    let dir = TempDir::new().unwrap();
    let p = common::write(dir.path(), "sharded.yaml", FIXTURE);
    let store = dir.path().join("store");
    fs::create_dir_all(&store).unwrap();
    // Entries are written under tmp/ and renamed: a file there makes every write fail,
    // even for root (whom permissions do not stop).
    fs::write(store.join("tmp"), b"").unwrap();
    let o = dplab(&store)
        .args(["--shard", "0/2"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("this shard's work could not all be stored"),
        "{}",
        text(&o)
    );
    let o = dplab(&store)
        .args(["-q", "--out"])
        .arg(dir.path().join("out"))
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "a plain run only warns: {}", text(&o));
}

/// What other shards need too is computed by one shard: the others wait while its claim
/// (`claims/<key>` in the store) lives, then take the instance (or, when the claim ends
/// without it, compute it themselves). The claim here is another host's, held by no process,
/// so only its removal (or a minute without a heartbeat) ends it.
#[test]
fn a_shard_waits_for_a_claim_on_what_others_need_and_goes_on_when_it_ends() {
    let dir = TempDir::new().unwrap();
    let p = common::write(dir.path(), "sharded.yaml", FIXTURE);
    // The key of `counts`, which every repetition reads (so both shards need it).
    let local = dir.path().join("local");
    ok(
        dplab(&dir.path().join("other"))
            .args(["-q", "--out"])
            .arg(&local)
            .arg(&p)
            .output()
            .unwrap(),
        "local run",
    );
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(local.join("sharded/manifest.json")).unwrap()).unwrap();
    let key = m["stages"][0]["seeds"][0]["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(m["stages"][0]["name"], "counts");
    let store = dir.path().join("store");
    let claim = store.join("claims").join(&key);
    fs::create_dir_all(claim.parent().unwrap()).unwrap();
    fs::write(&claim, "elsewhere.example 12345").unwrap();
    let mut shard = std_dplab(&store);
    shard
        .args(["--jobs", "2", "--shard", "0/2"])
        .arg(&p)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = shard.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let early = child.try_wait().unwrap();
    fs::remove_file(&claim).unwrap();
    let o = ok(child.wait_with_output().unwrap(), "shard 0/2");
    assert!(
        early.is_none(),
        "the shard finished while another held the claim on what it needs: {}",
        text(&o)
    );
    assert!(
        text(&o).contains("(1 of them shared with other shards)"),
        "once the claim ended, the shard computed `counts` itself: {}",
        text(&o)
    );
    let left: Vec<_> = fs::read_dir(store.join("claims")).unwrap().collect();
    assert!(
        left.is_empty(),
        "the shard left its claims behind: {left:?}"
    );
}
