//! Sizes a user controls in stage parameters: an absurd value is refused by `validate` with
//! exit 2, the location, the value and the flag that raises the limit, within 4 GB of
//! address space; raising the flag lets a large (but not absurd) value validate.

use crate::common;
use common::text;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use tempfile::TempDir;

/// A pipeline with one stage under test (`with:` on line 10) fed by a small table.
fn pipeline(kind: &str, with: &str) -> String {
    format!(
        r#"name: sizes
title: Sizes
source: {{paper: test, item: none}}
description: One stage with a large parameter.
seed: 1
stages:
  data:
    kind: load.table
    with: {{columns: {{candidate: [a, b, c], utility: [1, 5, 2], probability: [0.2, 0.3, 0.5], label: [x, y, z]}}}}
  under_test:
    kind: {kind}
    input: data
    with: {with}
"#
    )
}

/// The same without an input (kinds that load).
fn source_pipeline(kind: &str, with: &str) -> String {
    format!(
        r#"name: sizes
title: Sizes
source: {{paper: test, item: none}}
description: One stage with a large parameter.
seed: 1
stages:
  under_test:
    kind: {kind}
    with: {with}
"#
    )
}

fn write(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("p.yaml");
    fs::write(&p, text).unwrap();
    p
}

/// `dplab validate` under a 4 GB address-space cap, with extra flags.
fn validate_capped(yaml: &str, flags: &[&str]) -> Output {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), yaml);
    std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4000000; exec {} validate {} {}",
            assert_cmd::cargo::cargo_bin("dplab").display(),
            p.display(),
            flags.join(" ")
        ))
        .output()
        .unwrap()
}

/// Refused with exit 2 at the stage's `with:` line, naming `value` and `flag`.
fn refused(yaml: &str, flags: &[&str], line: usize, value: &str, flag: &str) {
    let o = validate_capped(yaml, flags);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains(&format!("p.yaml:{line}:")), "location: {t}");
    assert!(t.contains(value), "value {value}: {t}");
    assert!(t.contains(flag) && t.contains("limit"), "flag {flag}: {t}");
}

fn accepted(yaml: &str, flags: &[&str]) {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), yaml);
    let o = Command::cargo_bin("dplab")
        .unwrap()
        .arg("validate")
        .arg(&p)
        .args(flags)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// (kind, absurd `with:`, value shown, flag, a `with:` that a lowered flag refuses, that
/// flag, the flags (raised or default) that accept it).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

const WITH_INPUT: &[Case] = &[
    (
        "mechanism.noise",
        "{column: utility, noise: laplace, epsilon: 1, samples: 1e15}",
        "1000000000000000",
        "--max-draws",
        "{column: utility, noise: laplace, epsilon: 1, samples: 1e8}",
        &[],
        &["--max-cells", "1e9"],
    ),
    (
        "mechanism.select",
        "{method: exponential, epsilon: 1, samples: 1e15}",
        "1000000000000000",
        "--max-draws",
        "{method: exponential, epsilon: 1, samples: 1e11}",
        &[],
        &["--max-draws", "1e12"],
    ),
    (
        "mechanism.rate_distortion",
        "{lambda: 1, z_size: 1e15}",
        "1000000000000000",
        "--max-cells",
        "{lambda: 1, z_size: 1e9}",
        &[],
        &["--max-cells", "1e10"],
    ),
    (
        "evaluate.tv_distance",
        "{null_replicates: 1e15}",
        "1000000000000000",
        "--max-draws",
        "{null_replicates: 1e9}",
        &[],
        &["--max-cells", "1e10"],
    ),
    (
        "evaluate.privacy_loss",
        "{method: exponential, epsilon: 1, random_pairs: 1e15}",
        "1000000000000000",
        "--max-draws",
        "{method: exponential, epsilon: 1, random_pairs: 1e11}",
        &[],
        &["--max-draws", "1e12"],
    ),
    (
        "evaluate.utility_tail",
        "{epsilon: 1, t: {from: 0, to: 1, step: 1e-15}}",
        "1000000000000000",
        "--max-cells",
        "{epsilon: 1, t: {linspace: {from: 0, to: 1, num: 1000}}}",
        &["--max-cells", "999"],
        &["--max-cells", "1000"],
    ),
    (
        "plot.histogram",
        "{column: utility, bins: 1e15, title: t, x_label: x}",
        "2000000000000000",
        "--max-cells",
        "{column: utility, bins: 1e9, title: t, x_label: x}",
        &[],
        &["--max-cells", "1e10"],
    ),
];

const WITHOUT_INPUT: &[Case] = &[
    (
        "load.grid",
        "{column: x, values: {from: 0, to: 1, step: 1e-15}}",
        "1000000000000000",
        "--max-cells",
        "{column: x, values: {linspace: {from: 0, to: 1, num: 1000}}}",
        &["--max-cells", "999"],
        &["--max-cells", "1000"],
    ),
    (
        "near_optimal.rate",
        r#"{neighbour_set: "[0, 1]", delta: [1, 2], epsilon: {linspace: {from: 0.1, to: 1, num: 1e15}}}"#,
        "1000000000000000",
        "--max-cells",
        r#"{neighbour_set: "[0, 1]", delta: [1, 2], epsilon: {linspace: {from: 0.1, to: 1, num: 1000}}}"#,
        &["--max-cells", "23999"],
        &["--max-cells", "24000"],
    ),
    (
        "near_optimal.density",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, points: 1e15}"#,
        "1000000000000000",
        "--max-cells",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, points: 1e9}"#,
        &[],
        &["--max-cells", "1e10"],
    ),
    (
        "near_optimal.density",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, range: 1e300}"#,
        "1e300",
        "--max-cells",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, range: 1e9}"#,
        &[],
        &["--max-cells", "1e10"],
    ),
    (
        "near_optimal.sample_mean",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, samples: 1e15}"#,
        "1000000000000000",
        "--max-draws",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, samples: 1e11}"#,
        &[],
        &["--max-draws", "1e12"],
    ),
    (
        "near_optimal.privacy",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, random_points: 1e15}"#,
        "1000000000000000",
        "--max-cells",
        r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, random_points: 1e9}"#,
        &[],
        &["--max-cells", "1e10", "--max-draws", "1e11"],
    ),
];

#[test]
fn absurd_sizes_are_refused_and_raising_the_flag_accepts_large_ones() {
    for (inputs, cases) in [(true, WITH_INPUT), (false, WITHOUT_INPUT)] {
        for &(kind, absurd, value, flag, large, low, high) in cases {
            let (make, line): (fn(&str, &str) -> String, usize) = if inputs {
                (pipeline, 13)
            } else {
                (source_pipeline, 9)
            };
            refused(&make(kind, absurd), &[], line, value, flag);
            // The large value is refused below its size, accepted at (or above) it.
            let o = validate_capped(&make(kind, large), low);
            assert_eq!(o.status.code(), Some(2), "{kind} {large}: {}", text(&o));
            accepted(&make(kind, large), high);
        }
    }
}

#[test]
fn products_of_parameters_are_checked() {
    // 1e8 samples are within --max-draws, but 4 output columns of 1e8 rows are not within
    // --max-cells.
    refused(
        &pipeline(
            "mechanism.noise",
            "{column: utility, noise: laplace, epsilon: 1, samples: 1e8}",
        ),
        &[],
        13,
        "400000000",
        "--max-cells",
    );
    // δ × ε × columns of a rate table.
    refused(
        &source_pipeline(
            "near_optimal.rate",
            r#"{neighbour_set: "[0, 1]", delta: {linspace: {from: 0, to: 1, num: 1e6}}, epsilon: {linspace: {from: 0.1, to: 1, num: 1e6}}}"#,
        ),
        &[],
        9,
        "12000000000000",
        "--max-cells",
    );
    // 6 × boundary points + random points, times the shifts.
    refused(
        &source_pipeline(
            "near_optimal.privacy",
            r#"{neighbour_set: "[0, 1]", delta: 1, epsilon: 1, random_points: 1e8, random_shifts: 1e8}"#,
        ),
        &[],
        9,
        "level evaluations",
        "--max-draws",
    );
}

#[test]
fn inline_tables_and_convergence_grids_count_cells() {
    // 3 rows × 2 columns.
    let table = source_pipeline("load.table", "{columns: {a: [1, 2, 3], b: [x, y, z]}}");
    refused(&table, &["--max-cells", "5"], 9, "6", "--max-cells");
    accepted(&table, &["--max-cells", "6"]);
    // 100 δ values × 10 columns.
    let conv = source_pipeline(
        "near_optimal.convergence",
        r#"{neighbour_set: "[0, 1]", delta: {linspace: {from: 0, to: 1, num: 100}}}"#,
    );
    refused(&conv, &["--max-cells", "999"], 9, "1000", "--max-cells");
    accepted(&conv, &["--max-cells", "1000"]);
}

#[test]
fn a_repeated_dataset_table_is_refused() {
    let o = validate_capped(
        &source_pipeline(
            "load.dataset",
            "{dataset: adult, table: [train, test, train], if_missing: empty}",
        ),
        &[],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("p.yaml:9:") && t.contains("listed twice"), "{t}");
}
