//! `audit.epsilon` through the command line: auditing a built-in mechanism needs no consent,
//! auditing a researcher's program does (consent follows the programs named, not the kind), an
//! external program that honours `samples` is audited like a built-in one, and the results are
//! the same bytes for any `--jobs`.

use crate::common::{dplab, text, write};

const HEADER: &str = r#"name: au
title: T
source: {paper: p, item: i}
description: d
seed: 27
"#;

/// An audit of the Laplace mechanism of `mechanism.noise`, correct, at ε ∈ {0.5, 1}.
const BUILT_IN: &str = r#"axes:
  eps: [0.5, 1]
stages:
  audit:
    kind: audit.epsilon
    with:
      mechanism: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: $eps}}
      output: [noisy]
      claim: {epsilon: $eps}
      neighbours: {column: value, relation: l1, pairs: [[[0], [1]]]}
      samples: 40000
      search_samples: 10000
"#;

/// A researcher's Laplace mechanism with the classic bug, noise of scale ε instead of Δ/ε
/// (claimed ε = 0.5: scale 0.5, a true ε of 2), which honours `samples` in its parameters:
/// `samples` releases of every input row, numbered by `sample`.
const PROGRAM: &str = r#"#!/bin/sh
set -eu
v() { sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" "$DPLAB_JSON" | head -n 1; }
awk -F, -v eps="$(v epsilon)" -v n="$(v samples)" -v seed="$(v lo)" '
    BEGIN { srand(substr(seed, length(seed) > 9 ? length(seed) - 8 : 1) + 0); b = eps }
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == "value") c = i; print "row,sample,noisy"; next }
    {
        for (s = 0; s < n; s++) {
            u = rand() - 0.5; g = u < 0 ? -1 : 1
            printf "%d,%d,%.17g\n", NR - 2, s, $c - b * g * log(1 - 2 * g * u)
        }
    }
' "$(v csv)" > output/out.csv
"#;

const EXTERNAL: &str = r#"stages:
  audit:
    kind: audit.epsilon
    with:
      mechanism:
        kind: external
        with: {command: [sh, code/laplace.sh], code: [code], params: {epsilon: 0.5}}
      samples_at: params.samples
      output: [noisy]
      claim: {epsilon: 0.5}
      neighbours: {column: value, relation: l1, pairs: [[[0], [1]]]}
      samples: 20000
      search_samples: 5000
"#;

fn run(p: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    dplab()
        .arg("run")
        .arg(p)
        .arg("--out")
        .arg(out)
        .args(extra)
        .env_remove("DPLAB_ALLOW_EXEC")
        .output()
        .unwrap()
}

/// The built-in audit runs without --allow-exec (its kind may run programs, but it names
/// none), flags nothing, and writes the same bytes with 1 and 2 worker threads.
#[test]
fn auditing_a_built_in_mechanism_needs_no_consent_and_ignores_jobs() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "au.yaml", &format!("{HEADER}{BUILT_IN}"));
    let mut frames = Vec::new();
    for jobs in ["1", "2"] {
        let out = d.path().join(format!("out{jobs}"));
        let o = run(&p, &out, &["--jobs", jobs]);
        assert!(o.status.success(), "{}", text(&o));
        frames.push(std::fs::read_to_string(out.join("au/audit.csv")).unwrap());
    }
    assert_eq!(frames[0], frames[1]);
    let mut lines = frames[0].lines();
    assert_eq!(
        lines.next(),
        Some(
            "eps,epsilon,delta,epsilon_lb,confidence,samples,p1,p2,pair,event,violation,\
             detectable,search_samples,search_k1,search_k2,search_score,\
             claim,conversion,delta_lb,draws_to_flag,expect,unexpected,reproducible"
        )
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{}", frames[0]);
    // Not flagged, and how sure: the least loss these draws would have flagged lies above
    // the claim (ε = 0.5 and 1 here), the search split's counts and bound are there.
    for r in &rows {
        let cells: Vec<&str> = r.split(',').collect();
        assert_eq!(cells[10], "false", "{}", frames[0]);
        let (claim, detectable): (f64, f64) =
            (cells[1].parse().unwrap(), cells[11].parse().unwrap());
        assert!(detectable > claim, "{}", frames[0]);
        assert!(cells[12..17].iter().all(|c| !c.is_empty()), "{}", frames[0]);
    }
}

/// The external program is audited without any change to the audit: refused without consent
/// (the refusal names its command), run with it, and flagged — which, unexpected (no
/// `expect:`), says so on stderr and exits 4, and with `expect: violation` passes.
#[test]
fn an_external_program_is_audited_with_consent_and_its_bug_is_flagged() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "code/laplace.sh", PROGRAM);
    let p = write(d.path(), "au.yaml", &format!("{HEADER}{EXTERNAL}"));
    let out = d.path().join("out");
    let o = run(&p, &out, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("sh code/laplace.sh") && text(&o).contains("--allow-exec"),
        "{}",
        text(&o)
    );
    assert!(!out.exists());
    let o = run(&p, &out, &["--allow-exec"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(
        text(&o).contains("au: audit: flagged: ε = 0.5") && text(&o).contains("[UNEXPECTED]"),
        "{}",
        text(&o)
    );
    let frame = std::fs::read_to_string(out.join("au/audit.csv")).unwrap();
    assert!(frame.contains(",true,"), "{frame}");
    let expected = EXTERNAL.replace(
        "claim: {epsilon: 0.5}",
        "claim: {epsilon: 0.5}\n      expect: violation",
    );
    let p = write(d.path(), "au.yaml", &format!("{HEADER}{expected}"));
    let o = run(&p, &out, &["--allow-exec"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("[expected]"), "{}", text(&o));
    let frame = std::fs::read_to_string(out.join("au/audit.csv")).unwrap();
    let row = frame.lines().nth(1).unwrap();
    assert_eq!(row.split(',').nth(9), Some("true"), "{frame}");
    let lb: f64 = row.split(',').nth(2).unwrap().parse().unwrap();
    assert!(lb > 1.0 && lb <= 2.0, "{frame}");
}

/// Audits of three kinds of release (a number, a histogram of records under add/remove, a
/// selection's histogram) over three ε, stacked.
const SEVERAL: &str = r#"axes:
  eps: [0.5, 1, 2]
stages:
  laplace:
    kind: audit.epsilon
    with:
      mechanism: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: $eps}}
      output: [noisy]
      claim: {epsilon: $eps}
      neighbours: {column: value, relation: l1, base: [0], patterns: [one_above, one_below]}
      samples: 30000
      search_samples: 5000
  histogram:
    kind: audit.epsilon
    with:
      mechanism: {kind: mechanism.noise, with: {column: count, noise: geometric, epsilon: $eps}}
      output: [noisy]
      claim: {epsilon: $eps}
      neighbours: {column: count, relation: add_remove, bins: [a, b], dataset: [a]}
      samples: 30000
      search_samples: 5000
  noisy_max:
    kind: audit.epsilon
    with:
      mechanism: {kind: mechanism.select, with: {method: report_noisy_max, epsilon: $eps}}
      output: [candidate]
      count: count
      claim: {epsilon: $eps}
      neighbours:
        column: utility
        relation: replace
        bins: [r0, r1, r2]
        key: candidate
        dataset: [r0, r0, r1]
      samples: 30000
      search_samples: 5000
  all:
    kind: frame.stack
    input: [laplace, histogram, noisy_max]
"#;

/// The results of a run: every CSV frame under `out`, by name.
fn frames(out: &std::path::Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(out.join("au"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "csv"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Audit results are the same bytes on 1 and 2 worker threads and when the run is split into 3
/// shards sharing a store (each shard a separate process, run one after the other) and merged.
#[test]
fn audits_are_bit_identical_for_any_jobs_and_shards() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "au.yaml", &format!("{HEADER}{SEVERAL}"));
    let mut results = Vec::new();
    for jobs in ["1", "2"] {
        let out = d.path().join(format!("jobs{jobs}"));
        let o = run(&p, &out, &["--jobs", jobs]);
        assert!(o.status.success(), "{}", text(&o));
        results.push(frames(&out));
    }
    let store = d.path().join("store");
    for i in 0..3 {
        let o = run(
            &p,
            &d.path().join("unused"),
            &[
                "--jobs",
                "1",
                "--shard",
                &format!("{i}/3"),
                "--store",
                store.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "shard {i}/3: {}", text(&o));
    }
    let merged = d.path().join("merged");
    let o = run(
        &p,
        &merged,
        &["--jobs", "2", "--store", store.to_str().unwrap()],
    );
    assert!(o.status.success(), "merge: {}", text(&o));
    let m = std::fs::read_to_string(merged.join("au/manifest.json")).unwrap();
    let m: serde_json::Value = serde_json::from_str(&m).unwrap();
    let computed: u64 = m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "audit.epsilon")
        .map(|s| s["instances_run"].as_u64().unwrap())
        .sum();
    assert_eq!(computed, 0, "the merge computed audits again: {m}");
    results.push(frames(&merged));
    assert_eq!(results[0].len(), 4, "{:?}", results[0]);
    assert_eq!(results[0], results[1], "--jobs 1 vs 2");
    assert_eq!(results[0], results[2], "--jobs 1 vs 3 shards merged");
    let all = &results[0].iter().find(|(n, _)| n == "all.csv").unwrap().1;
    assert_eq!(all.lines().count(), 1 + 9, "{all}");
}
