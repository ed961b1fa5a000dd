//! `frame.derive`, `frame.group` and `frame.join` through the whole CLI: a researcher's
//! errors computed in YAML alone, checked against the same numbers computed here from the
//! noisy releases; a misspelt column and a hostile expression found by `validate`.

use std::collections::BTreeMap;
use std::path::Path;

use tempfile::TempDir;

use crate::common::{self, dplab, write};

/// Laplace and geometric noise at two ε, 5 repetitions; the noisy histogram joined with a
/// truth table on `bin`, |noisy − truth| derived, and grouped by (mechanism, ε) over every
/// repetition and bin.
const PIPELINE: &str = r#"name: derived
title: Errors derived, grouped and joined in YAML
description: abs error per bin, its mean, 0.9-quantile and worst per mechanism and eps.
seed: 5
axes:
  mechanism:
    - {name: laplace, noise: laplace}
    - {name: geometric, noise: geometric}
  eps: [0.5, 2]
stages:
  hist:
    kind: load.table
    with: {columns: {bin: [0, 1, 2, 3], count: [10, 0, 3, 7]}}
  truth:
    kind: load.table
    with: {columns: {bin: [3, 2, 1, 0], truth: [7, 3, 0, 10]}}
  noisy:
    kind: mechanism.noise
    input: hist
    repeat: 5
    with: {column: count, noise: $mechanism.noise, epsilon: $eps}
  joined:
    kind: frame.join
    input: [noisy, truth]
    with: {on: [bin]}
  errs:
    kind: frame.derive
    input: joined
    with:
      columns:
        abs_err: "abs(noisy - truth)"
        sq: "abs_err * abs_err"
  by_mech:
    kind: frame.group
    input: errs
    with:
      by: [mechanism, eps]
      aggregates: {n: "count(*)", mean_err: "mean(abs_err)", q90: "quantile(abs_err, 0.9)", worst: "max(abs_err)", rmse: "sqrt(mean(sq))"}
"#;

fn csv(dir: &Path, stage: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(dir.join(format!("{stage}.csv"))).unwrap();
    let mut lines = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect());
    (lines.next().unwrap(), lines.collect())
}

fn at(header: &[String], name: &str) -> usize {
    header
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

/// The grouped errors equal those computed here from the noisy releases: per (mechanism, ε),
/// 4 bins × 5 repetitions, the mean, the 0.9-quantile (linear interpolation), the maximum and
/// the root mean square of |noisy − count|; groups in order of first appearance.
#[test]
fn errors_derived_grouped_and_joined_in_yaml() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "derived.yaml", PIPELINE);
    let out = dir.path().join("out");
    common::run_ok(&out, &p);
    let res = out.join("derived");
    let (h, rows) = csv(&res, "noisy");
    let (m, e, c, n) = (
        at(&h, "mechanism"),
        at(&h, "eps"),
        at(&h, "count"),
        at(&h, "noisy"),
    );
    let mut errs: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for r in &rows {
        let key = (r[m].clone(), r[e].clone());
        if !order.contains(&key) {
            order.push(key.clone());
        }
        let (noisy, count): (f64, f64) = (r[n].parse().unwrap(), r[c].parse().unwrap());
        errs.entry(key).or_default().push((noisy - count).abs());
    }
    let (gh, groups) = csv(&res, "by_mech");
    assert_eq!(
        gh,
        ["mechanism", "eps", "n", "mean_err", "q90", "worst", "rmse"]
    );
    assert_eq!(groups.len(), 4);
    for (g, key) in groups.iter().zip(&order) {
        assert_eq!((&g[0], &g[1]), (&key.0, &key.1));
        let mut xs = errs[key].clone();
        assert_eq!(g[2], "20");
        let mean = xs.iter().sum::<f64>() / 20.0;
        xs.sort_by(f64::total_cmp);
        let h = 19.0 * 0.9;
        let q90 = xs[17] + (h - 17.0) * (xs[18] - xs[17]);
        let rmse = (xs.iter().map(|x| x * x).sum::<f64>() / 20.0).sqrt();
        for (col, want) in [(3, mean), (4, q90), (5, xs[19]), (6, rmse)] {
            let got: f64 = g[col].parse().unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "{key:?} {}: {got} vs {want}",
                gh[col]
            );
        }
    }
    // The join kept the first input's rows and added `truth`, equal to `count` bin by bin.
    let (jh, joined) = csv(&res, "joined");
    assert_eq!(joined.len(), rows.len());
    let (c, t) = (at(&jh, "count"), at(&jh, "truth"));
    assert!(joined.iter().all(|r| r[c] == r[t]), "{jh:?}");
}

/// Where a text starts in the file, as (line, column), 1-based.
fn position(file: &str, needle: &str) -> (usize, usize) {
    let at = file.find(needle).unwrap();
    let line = file[..at].matches('\n').count() + 1;
    let col = at - file[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A misspelt column in an expression is found by `validate`, at the expression, with the
/// nearest column; a misspelt function at the character inside it.
#[test]
fn validate_finds_a_misspelt_column_in_an_expression() {
    let dir = TempDir::new().unwrap();
    let bad = PIPELINE.replace("\"abs(noisy - truth)\"", "\"abs(noisy - truht)\"");
    let p = write(dir.path(), "derived.yaml", &bad);
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    let (line, col) = position(&bad, "\"abs(noisy - truht)\"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "derived.yaml:{line}:{col}: stage `errs` (frame.derive): `columns.abs_err`: no column `truht` in its input"
        )) && err.contains("did you mean `truth`?"),
        "{err}"
    );
    let bad = PIPELINE.replace("\"max(abs_err)\"", "\"maxx(abs_err)\"");
    let p = write(dir.path(), "derived.yaml", &bad);
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    // At the aggregate's name, and at the character inside its expression.
    let (line, col) = position(&bad, "worst: \"maxx(abs_err)\"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "derived.yaml:{line}:{col}: stage `by_mech` (frame.group): `aggregates.worst`: at character 1: no function `maxx`; did you mean `max`?"
        )),
        "{err}"
    );
}

/// A hostile expression — parentheses nested 200 deep, CASE nested 45 deep, 10 000 nested
/// parentheses — is refused by `validate` and by `run` with its limit and exit code 2, not a
/// stack overflow.
#[test]
fn a_deeply_nested_expression_is_refused() {
    let dir = TempDir::new().unwrap();
    let depth = "the expression nests deeper than the limit of 40 levels";
    for (deep, why) in [
        (
            format!("{}noisy{}", "(".repeat(200), ")".repeat(200)),
            depth,
        ),
        (
            format!(
                "{}1{}",
                "CASE WHEN noisy > 0 THEN ".repeat(45),
                " END".repeat(45)
            ),
            depth,
        ),
        (
            format!("{}noisy{}", "(".repeat(10_000), ")".repeat(10_000)),
            "characters long, more than the limit of 4000",
        ),
    ] {
        let bad = PIPELINE.replace("\"abs_err * abs_err\"", &format!("\"{deep}\""));
        let p = write(dir.path(), "derived.yaml", &bad);
        let out = dir.path().join("out");
        for args in [
            vec!["validate"],
            vec!["run", "-q", "--out", out.to_str().unwrap()],
        ] {
            let o = dplab().args(&args).arg(&p).output().unwrap();
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            let (line, col) = position(&bad, "sq: ");
            assert!(
                err.contains(&format!(
                    "derived.yaml:{line}:{col}: stage `errs` (frame.derive): "
                )) && err.contains(why),
                "{args:?}: {}",
                &err[..err.len().min(2000)]
            );
        }
    }
}
