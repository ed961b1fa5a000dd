//! `evaluate.error` through the whole CLI: planned, validated, run, summarised over
//! repetitions as any other metric.

use std::path::Path;

use tempfile::TempDir;

use crate::common::{self, dplab, write};

/// A researcher's experiment: a histogram, Laplace noise at two ε, 20 repetitions, the ℓ1 and
/// ℓ∞ errors of each release, their mean over the repetitions.
const EXPERIMENT: &str = r#"name: errs
title: Errors of Laplace noise on a histogram
source: {paper: test, item: none}
description: l1 and linf per repetition, and their mean.
seed: 11
axes:
  eps: [0.5, 2.0]
stages:
  hist:
    kind: load.table
    with: {columns: {bin: [0, 1, 2, 3], count: [10, 0, 3, 7]}}
  noisy:
    kind: mechanism.noise
    input: hist
    repeat: 20
    with: {column: count, noise: laplace, epsilon: $eps}
  errors:
    kind: evaluate.error
    input: noisy
    with: {estimate: noisy, truth: count, metrics: [l1, linf]}
  summary:
    kind: aggregate.summary
    input: errors
    over: [rep]
    with: {values: [l1, linf]}
"#;

fn csv(dir: &Path, stage: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join(format!("{stage}.csv"))).unwrap();
    text.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn column(rows: &[Vec<String>], name: &str) -> Vec<f64> {
    let i = rows[0]
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", rows[0]));
    rows[1..].iter().map(|r| r[i].parse().unwrap()).collect()
}

/// One row of errors per (ε, repetition); the summary's means are near E ℓ1 = 4/ε (Laplace
/// noise of scale 1/ε on 4 bins): 8 at ε = 0.5 and 2 at ε = 2, standard errors ≈ 0.9 and
/// 0.22 over 20 repetitions (tolerances 3 and 0.8: above 3 standard errors); bit-identical with
/// one job or two.
#[test]
fn errors_per_repetition_feed_the_summary() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "errs.yaml", EXPERIMENT);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (out, jobs) in [(&a, "1"), (&b, "2")] {
        let o = dplab()
            .args(["run", "-q", "--jobs", jobs, "--out"])
            .arg(out)
            .arg(&p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::text(&o));
    }
    let (a, b) = (a.join("errs"), b.join("errs"));
    let errors = csv(&a, "errors");
    assert_eq!(errors[0], ["eps", "rep", "l1", "linf"]);
    assert_eq!(errors.len(), 1 + 2 * 20);
    let summary = csv(&a, "summary");
    assert_eq!(summary.len(), 1 + 2 * 2, "{summary:?}");
    let mean = column(&summary, "mean");
    assert!(
        (mean[0] - 8.0).abs() < 3.0 && (mean[2] - 2.0).abs() < 0.8,
        "{summary:?}"
    );
    for stage in ["errors", "summary"] {
        assert_eq!(csv(&a, stage), csv(&b, stage), "{stage}: --jobs 1 vs 2");
    }
}

/// A misspelt column is found by `validate` before anything runs, at the parameter's
/// file:line:col, with the nearest column of the stage above.
#[test]
fn a_misspelt_column_is_located_before_anything_runs() {
    let dir = TempDir::new().unwrap();
    let p = write(
        dir.path(),
        "bad.yaml",
        &EXPERIMENT.replace("truth: count,", "truth: cuont,"),
    );
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    let e = common::stable(&String::from_utf8(o.stderr).unwrap(), dir.path());
    assert!(
        e.contains("bad.yaml:20:36")
            && e.contains("no column `cuont`")
            && e.contains("did you mean `count`?"),
        "{e}"
    );
}
