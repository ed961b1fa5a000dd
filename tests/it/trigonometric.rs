//! The trigonometric-mechanism stage kinds through the command line: a small end-to-end run
//! (deterministic for any --jobs, wall times excepted), and bad parameters located in the file.

use std::fs;
use std::path::Path;

use predicates::prelude::*;
use tempfile::TempDir;

use crate::common;
use common::dplab;

/// Mechanism I on a 1-D sample, scored on smooth queries; the improved mechanism on 3-D data.
const PIPELINE: &str = r#"name: trig
title: Trigonometric mechanism, small
source: {paper: test, item: none}
description: Mechanism I and improved mechanism I on samples, scored on kernel queries.
seed: 11
axes:
  n: [200, 2000]
stages:
  line:
    kind: load.sample
    repeat: 2
    with: {n: $n, dim: 1}
  cube:
    kind: load.sample
    with: {n: $n, dim: 3, beta: [2, 2]}
  truth:
    kind: query.smooth
    input: line
    with: {queries: {count: 50, seed: 3}, sigmas: [1.5, 3]}
  cube_truth:
    kind: query.smooth
    input: cube
    with: {queries: {count: 50, seed: 3}, sigmas: [2]}
  full:
    kind: mechanism.trigonometric
    input: line
    with: {variant: full, epsilon: 1, smoothness: 2}
  improved:
    kind: mechanism.trigonometric
    input: cube
    repeat: 2
    with: {epsilon: 1, sigma: 2, bases: 7, candidates: 300, pca_dim: 2, kappa: 2}
  score:
    kind: evaluate.smooth_queries
    input: [full, truth]
    with: {queries: {count: 50, seed: 3}, sigma: 1.5}
  cube_score:
    kind: evaluate.smooth_queries
    input: [improved, cube_truth]
    with: {queries: {count: 50, seed: 3}, sigma: 2}
"#;

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("trig.yaml");
    fs::write(&p, text).unwrap();
    p
}

#[test]
fn runs_and_is_identical_for_any_jobs() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), PIPELINE);
    for (jobs, out) in [("1", "a"), ("2", "b")] {
        dplab()
            .args(["run", "-q", "--jobs", jobs, "--out"])
            .arg(dir.path().join(out))
            .arg(&p)
            .assert()
            .success();
    }
    let score = fs::read_to_string(dir.path().join("a/trig/score.csv")).unwrap();
    let header = score.lines().next().unwrap();
    for col in [
        "max_abs_error",
        "max_rel_error",
        "synthesis_seconds",
        "synthesis_support",
    ] {
        assert!(header.contains(col), "{header}");
    }
    // Four rows: two n × two repetitions; every error finite and below the kernel's range.
    assert_eq!(score.lines().count(), 5, "{score}");
    // Everything but the wall times is bit-identical (`compare` with zero tolerance skips them).
    dplab()
        .args(["compare", "--rtol", "0", "--atol", "0"])
        .arg(dir.path().join("a/trig"))
        .arg(dir.path().join("b/trig"))
        .assert()
        .success();
}

fn validate_error(edit: (&str, &str)) -> String {
    let dir = TempDir::new().unwrap();
    assert!(
        PIPELINE.contains(edit.0),
        "test edit does not apply: {}",
        edit.0
    );
    let p = write(dir.path(), &PIPELINE.replace(edit.0, edit.1));
    let out = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn improved_without_its_parameters_is_located() {
    let err = validate_error((", bases: 7", ""));
    assert!(err.contains("trig.yaml:"), "{err}");
    assert!(err.contains("bases"), "{err}");
}

#[test]
fn full_with_improved_parameters_is_refused() {
    let err = validate_error(("smoothness: 2}", "smoothness: 2, kappa: 3}"));
    assert!(
        err.contains("kappa") && err.contains("variant: improved"),
        "{err}"
    );
}

#[test]
fn smoothness_and_sigma_are_exclusive() {
    let err = validate_error(("smoothness: 2}", "smoothness: 2, sigma: 2}"));
    assert!(err.contains("exactly one"), "{err}");
}

#[test]
fn bad_ranges_name_the_value() {
    let err = validate_error(("epsilon: 1, smoothness", "epsilon: -1, smoothness"));
    assert!(err.contains("-1"), "{err}");
    let err = validate_error(("sigmas: [1.5, 3]", "sigmas: [1.5, 0]"));
    assert!(
        err.contains("sigmas[1] = 0 is invalid: must be > 0"),
        "{err}"
    );
}

#[test]
fn a_sigma_without_answers_fails_the_run_with_a_reason() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), &PIPELINE.replace("sigma: 1.5}", "sigma: 2.5}"));
    dplab()
        .args(["run", "-q", "--out"])
        .arg(dir.path().join("out"))
        .arg(&p)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("σ = 2.5").and(predicate::str::contains("score")));
}

#[test]
fn the_text_pca_scale_is_refused_where_it_is_not_private() {
    // k·L = 2·51 = 102 > 100: 10ρ√(dkL)/ε no longer covers the ℓ₁ sensitivity √d·k·L·ρ.
    let err = validate_error((
        "pca_dim: 2, kappa: 2}",
        "pca_dim: 2, pca_iterations: 51, kappa: 2}",
    ));
    assert!(
        err.contains("pca_noise") && err.contains("k·L = 102"),
        "{err}"
    );
    // Algorithm 7's printed scale is private for any k·L.
    let dir = TempDir::new().unwrap();
    let p = write(
        dir.path(),
        &PIPELINE.replace(
            "pca_dim: 2, kappa: 2}",
            "pca_dim: 2, pca_iterations: 51, kappa: 2, pca_noise: algorithm}",
        ),
    );
    dplab().arg("validate").arg(&p).assert().success();
    // With δ the PCA is Gaussian (Algorithm 6): the Laplace reading does not apply.
    let err = validate_error((
        "epsilon: 1, sigma: 2,",
        "epsilon: 1, delta: 0.001, pca_noise: text, sigma: 2,",
    ));
    assert!(
        err.contains("pca_noise") && err.contains("Gaussian"),
        "{err}"
    );
}

#[test]
fn diagnostics_that_remove_noise_are_checked() {
    let err = validate_error((
        "{variant: full, epsilon: 1, smoothness: 2}",
        "{variant: full, epsilon: 1, smoothness: 2, exact: [pca]}",
    ));
    assert!(err.contains("exact"), "{err}");
    let err = validate_error((
        "{variant: full, epsilon: 1, smoothness: 2}",
        "{variant: grid_floor, epsilon: 1, smoothness: 2, exact: [basis]}",
    ));
    assert!(err.contains("no noise"), "{err}");
}

#[test]
fn the_grid_floor_and_the_exact_runs_produce_databases() {
    let dir = TempDir::new().unwrap();
    let extra = r#"  floor:
    kind: mechanism.trigonometric
    input: cube
    with: {variant: grid_floor, epsilon: 1, sigma: 2}
  exact:
    kind: mechanism.trigonometric
    input: cube
    with: {epsilon: 1, sigma: 2, bases: 7, candidates: 300, pca_dim: 2, kappa: 2, exact: [basis, mean, pca]}
  floor_score:
    kind: evaluate.smooth_queries
    input: [floor, cube_truth]
    with: {queries: {count: 50, seed: 3}, sigma: 2}
"#;
    let p = write(dir.path(), &format!("{PIPELINE}{extra}"));
    dplab()
        .args(["run", "-q", "--out"])
        .arg(dir.path().join("out"))
        .arg(&p)
        .assert()
        .success();
    // The floor: distinct grid cells weighted by their share of the n records.
    let floor = fs::read_to_string(dir.path().join("out/trig/floor_n=2000.csv"))
        .or_else(|_| fs::read_to_string(dir.path().join("out/trig/floor.csv")))
        .unwrap();
    let header: Vec<&str> = floor.lines().next().unwrap().split(',').collect();
    let w = header.iter().position(|c| *c == "weight").unwrap();
    let n_col = header.iter().position(|c| *c == "n").unwrap();
    let total: f64 = floor
        .lines()
        .skip(1)
        // Integer axis values are written as floats ("2000.0"), like every numeric column.
        .filter(|l| l.split(',').nth(n_col).and_then(|v| v.parse::<f64>().ok()) == Some(2000.0))
        .map(|l| l.split(',').nth(w).unwrap().parse::<f64>().unwrap())
        .sum();
    assert!((total - 1.0).abs() < 1e-9, "{total}");
    let exact = fs::read_to_string(dir.path().join("out/trig/exact.csv")).unwrap();
    assert!(exact.lines().next().unwrap().contains("synthesis_outside"));
    let score = fs::read_to_string(dir.path().join("out/trig/floor_score.csv")).unwrap();
    assert_eq!(score.lines().count(), 3, "{score}");
}
