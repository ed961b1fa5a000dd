//! The command line on good and bad input: messages, positions, exit codes, determinism,
//! atomic outputs.

use std::fs;
use std::path::Path;

use predicates::prelude::*;
use tempfile::TempDir;

use crate::common;
use crate::hay::TINY as GOOD;
use common::{dplab, stable, write};

/// GOOD's inline counts, and the same as a CSV file: a pipeline reading the file has columns
/// known only at run time (so a misspelt column fails the run, not `validate`).
const INLINE: &str = "with: {columns: {candidate: [a, b, c], utility: [1, 5, 2]}}";
const CSV: &str = "candidate,utility\na,1\nb,5\nc,2\n";

/// Runs `dplab validate` on GOOD with a bad edit and returns the whole of stderr, the
/// temporary directory written `[TMP]`; asserts exit code 2 and nothing on stdout.
fn bad(edit: impl Fn(&str) -> String) -> String {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "bad.yaml", &edit(GOOD));
    let out = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "{}", common::text(&out));
    stable(&String::from_utf8(out.stderr).unwrap(), dir.path())
}

/// `dplab validate ARGS FILE` that fails: the whole of stderr as a snapshot shows it, one
/// block per command.
fn refusals(dir: &Path, file: &Path, commands: &[&[&str]]) -> String {
    let mut all = String::new();
    for args in commands {
        let o = dplab()
            .arg("validate")
            .args(*args)
            .arg(file)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::text(&o));
        let name = file.file_name().unwrap().to_string_lossy();
        let command: Vec<&str> = args.iter().copied().chain([&*name]).collect();
        all += &format!(
            "$ dplab validate {}\n{}\n",
            command.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    stable(&all, dir)
}

#[test]
fn a_good_pipeline_validates() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "good.yaml", GOOD);
    dplab()
        .arg("validate")
        .arg(&p)
        .assert()
        .success()
        .stdout(predicate::str::contains("4 stages"));
}

#[test]
fn unknown_key_is_located_with_a_suggestion() {
    insta::assert_snapshot!(bad(|s| s.replace("    repeat: 4", "    repeet: 4")));
}

#[test]
fn unknown_parameter_is_located_with_a_suggestion() {
    let e = bad(|s| {
        s.replace(
            "epsilon: $eps, samples: 100000",
            "epsilom: $eps, samples: 100000",
        )
    });
    // The value is not from an axis, so no axis is blamed.
    assert!(!e.contains("comes from axis"), "{e}");
    insta::assert_snapshot!(e);
}

#[test]
fn wrong_type_is_reported() {
    insta::assert_snapshot!(bad(|s| s.replace("seed: 7", "seed: seven")));
}

#[test]
fn dangling_input_names_the_stage_and_suggests() {
    insta::assert_snapshot!(bad(|s| {
        s.replace(
            "    input: counts\n    repeat",
            "    input: count\n    repeat",
        )
    }));
}

#[test]
fn cycles_are_printed() {
    insta::assert_snapshot!(bad(|s| {
        s.replace(
            "    input: counts\n    repeat",
            "    input: summary\n    repeat",
        )
    }));
}

#[test]
fn unknown_axis_reference() {
    insta::assert_snapshot!(bad(|s| {
        s.replace(
            "epsilon: $eps, samples: 300000",
            "epsilon: $esp, samples: 300000",
        )
    }));
}

#[test]
fn non_positive_epsilon_from_an_axis_names_the_value_and_range() {
    insta::assert_snapshot!(bad(|s| s.replace("eps: [0.5, 1.0]", "eps: [0.5, -1.0]")));
}

#[test]
fn delta_out_of_range() {
    insta::assert_snapshot!(bad(|s| {
        s.replace(
            "noise: laplace, epsilon: $eps",
            "noise: gaussian, delta: 1.5, epsilon: 0.5",
        )
    }));
}

#[test]
fn probabilities_must_sum_to_one() {
    insta::assert_snapshot!(bad(|s| {
        s.replace(
            "    with: {columns: {candidate: [a, b, c], utility: [1, 5, 2]}}",
            "    with: {columns: {candidate: [a, b, c], utility: [1, 5, 2]}}\n  dist:\n    kind: load.distribution\n    with: {probabilities: [0.5, 0.6]}",
        )
    }));
}

#[test]
fn empty_grid_and_bad_range() {
    insta::assert_snapshot!(
        "empty_grid",
        bad(|s| s.replace("eps: [0.5, 1.0]", "eps: []"))
    );
    insta::assert_snapshot!(
        "bad_range",
        bad(|s| s.replace("eps: [0.5, 1.0]", "eps: {from: 1, to: 0, step: 0.5}"))
    );
}

#[test]
fn unknown_kind_suggests() {
    insta::assert_snapshot!(bad(
        |s| s.replace("kind: aggregate.summary", "kind: aggregate.sumary")
    ));
}

#[test]
fn yaml_syntax_error_is_located() {
    insta::assert_snapshot!(bad(|s| s.replace("eps: [0.5, 1.0]", "eps: [0.5, 1.0")));
}

#[test]
fn unknown_profile_and_set() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "good.yaml", GOOD);
    insta::assert_snapshot!(refusals(
        dir.path(),
        &p,
        &[
            &["--profile", "smal"],
            &["--set", "esp=[1]"],
            &["--set", "eps=[0, 1]"],
        ]
    ));
}

/// `--set STAGE.PARAM=VALUE` and `--set seed=N`: refused with the argument, the value and
/// what is valid; applied after the profile; changing the results exactly as an edit would.
#[test]
fn set_overrides_any_parameter_and_the_seed() {
    let dir = TempDir::new().unwrap();
    let with_fast = format!("{GOOD}  fast:\n    with: {{noisy: {{samples: 50}}}}\n");
    let p = write(dir.path(), "good.yaml", &with_fast);
    let sets: Vec<[&str; 2]> = [
        "noisy.sampels=5",
        "nosy.samples=5",
        "noisy.samples=-3",
        "noisy.epsilon=0",
        "noisy.column.x=1",
        "noisy.=1",
        "seed=-1",
        "sed=1",
        "noisy.samples=[1",
    ]
    .map(|a| ["--set", a])
    .to_vec();
    let commands: Vec<&[&str]> = sets.iter().map(|a| &a[..]).collect();
    insta::assert_snapshot!(refusals(dir.path(), &p, &commands));
    // Nesting is bounded (planning walks it recursively: 60 000 levels overflowed the stack).
    // A substring: the whole message repeats the 120 000-character argument.
    let deep = format!("counts.columns{}=1", ".a".repeat(60_000));
    dplab()
        .args(["validate", "--set", &deep])
        .arg(&p)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "it nests 60001 keys deep: give at most 16",
        ));
    // A profile replacing what the file sets says so (an edit there would otherwise go
    // unnoticed under the profile).
    dplab()
        .args(["validate", "--profile", "fast"])
        .arg(&p)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "tiny: profile `fast` replaces what the file sets for `noisy.samples` (100000 → 50)",
        ));
    // The same results as the edited file, with the profile applied first.
    let edited = write(
        dir.path(),
        "edited.yaml",
        &GOOD
            .replace("samples: 100000", "samples: 321")
            .replace("seed: 7", "seed: 8"),
    );
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    run(&p, &a, &["--set", "noisy.samples=321", "--set", "seed=8"]).success();
    run(&edited, &b, &[]).success();
    let csv = |d: &Path| read(&d.join("tiny"), "noisy.csv");
    assert_eq!(csv(&a), csv(&b));
    let c = dir.path().join("c");
    run(
        &p,
        &c,
        &[
            "--profile",
            "fast",
            "--set",
            "noisy.samples=321",
            "--set",
            "seed=8",
        ],
    )
    .success();
    assert_eq!(csv(&c), csv(&b), "--set applies after the profile");
}

fn run(p: &Path, out: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    dplab()
        .arg("run")
        .arg(p)
        .arg("--out")
        .arg(out)
        .arg("-q")
        .args(extra)
        .assert()
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

#[test]
fn results_are_bit_identical_for_any_jobs() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "good.yaml", GOOD);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run(&p, &a, &["--jobs", "1"]).success();
    run(&p, &b, &["--jobs", "2"]).success();
    for f in [
        "summary.csv",
        "summary.parquet",
        "pick.csv",
        "pick.parquet",
        "counts.csv",
    ] {
        assert_eq!(read(&a.join("tiny"), f), read(&b.join("tiny"), f), "{f}");
    }
}

#[test]
fn adding_an_axis_value_leaves_other_points_unchanged() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "good.yaml", GOOD);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run(&p, &a, &["--set", "eps=[0.5, 1.0]"]).success();
    run(&p, &b, &["--set", "eps=[0.5, 0.7, 1.0]"]).success();
    for f in ["summary.csv", "pick.csv"] {
        let rows = |d: &Path| -> Vec<String> {
            String::from_utf8(read(&d.join("tiny"), f))
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("0.7,"))
                .map(String::from)
                .collect()
        };
        let (ra, rb) = (rows(&a), rows(&b));
        assert!(ra.len() > 2);
        assert_eq!(ra, rb, "{f}");
    }
}

#[test]
fn manifest_records_seeds_hashes_and_timings() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "good.yaml", GOOD);
    let out = dir.path().join("r");
    run(&p, &out, &["--profile", "small"]).success();
    let m: serde_json::Value =
        serde_json::from_slice(&read(&out.join("tiny"), "manifest.json")).unwrap();
    assert_eq!(m["profile"], "small");
    assert_eq!(m["axes"]["eps"], serde_json::json!(["1"]));
    assert_eq!(m["pipeline"]["sha256"].as_str().unwrap().len(), 64);
    let noisy = m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "noisy")
        .unwrap();
    assert_eq!(noisy["instances"], 4);
    assert_eq!(noisy["seeds"].as_array().unwrap().len(), 4);
    assert!(noisy["seconds_total"].as_f64().unwrap() >= 0.0);
    let outputs = m["outputs"].as_array().unwrap();
    let csv = outputs.iter().find(|o| o["file"] == "summary.csv").unwrap();
    use sha2::Digest;
    let digest = sha2::Sha256::digest(read(&out.join("tiny"), "summary.csv"));
    assert_eq!(
        csv["sha256"].as_str().unwrap(),
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
}

#[test]
fn a_failed_run_writes_what_succeeded_and_names_the_instance() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "good.yaml", GOOD);
    let out = dir.path().join("r");
    run(&p, &out, &[]).success();
    let before = read(&out.join("tiny"), "summary.csv");
    // Same pipeline, but the noise reads a column that does not exist, and the counts come
    // from a CSV file (so their columns are known only once read): fails at run time.
    fs::write(dir.path().join("counts.csv"), CSV).unwrap();
    let broken = write(
        dir.path(),
        "good.yaml",
        &GOOD
            .replace("column: utility,", "column: utility_typo,")
            .replace(INLINE, "with: {path: counts.csv}"),
    );
    run(&broken, &out, &[]).code(1).stderr(
        predicate::str::contains("stage `noisy` instance {eps=0.5, rep=0} failed")
            .and(predicate::str::contains("no column `utility_typo`")),
    );
    // What succeeded replaces the previous results, marked incomplete: what failed (and
    // what reads it) keeps its earlier outputs, marked stale, and the manifest says so.
    assert!(!before.is_empty());
    assert_eq!(read(&out.join("tiny"), "summary.csv"), before);
    let m: serde_json::Value =
        serde_json::from_slice(&read(&out.join("tiny"), "manifest.json")).unwrap();
    let failed = m["incomplete"]["failed"].to_string();
    assert!(failed.contains("stage `noisy`"), "{m}");
    assert!(
        m["incomplete"]["stale"]
            .to_string()
            .contains("stage `summary`"),
        "{m}"
    );
    let leftovers: Vec<_> = fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn one_failed_pipeline_does_not_stop_the_others() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "a_bad.yaml",
        &GOOD
            .replace("name: tiny", "name: broken")
            .replace("column: utility,", "column: nope,")
            .replace(INLINE, "with: {path: counts.csv}"),
    );
    fs::write(dir.path().join("counts.csv"), CSV).unwrap();
    write(dir.path(), "b_good.yaml", GOOD);
    let out = dir.path().join("r");
    dplab()
        .arg("run")
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .arg("-q")
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("1 of 2 pipeline(s) failed")
                .and(predicate::str::contains("a_bad.yaml")),
        );
    assert!(out.join("tiny/summary.csv").exists());
    let out2 = dir.path().join("r2");
    dplab()
        .arg("run")
        .arg(dir.path())
        .arg("--out")
        .arg(&out2)
        .args(["-q", "--fail-fast"])
        .assert()
        .code(1);
    assert!(!out2.join("tiny").exists());
}

#[test]
fn compare_reports_differences_readably() {
    let dir = TempDir::new().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    fs::create_dir_all(&a).unwrap();
    fs::create_dir_all(&b).unwrap();
    fs::write(a.join("t.csv"), "method,eps,value\nx,0.5,1.0\nx,1,2.0\n").unwrap();
    fs::write(b.join("t.csv"), "method,eps,value\nx,0.5,1.0\nx,1,2.5\n").unwrap();
    dplab()
        .arg("compare")
        .arg(&a)
        .arg(&a)
        .assert()
        .success()
        .stdout(predicate::str::contains("ok: 1 frames"));
    dplab()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "t.csv: row 2 [method=x, eps=1] column `value`: A = 2.0, B = 2.5",
        ));
    dplab()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .args(["--rtol", "0.3"])
        .assert()
        .success();
}

#[test]
fn list_and_graph() {
    // The whole of `dplab list`: every kind, parameter, type, default and meaning, so a
    // changed word of any of them shows as a diff.
    let o = dplab().arg("list").output().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    insta::assert_snapshot!("list", String::from_utf8(o.stdout).unwrap());
    let o = dplab().args(["list", "mechanism.select"]).output().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    insta::assert_snapshot!("list_one_kind", String::from_utf8(o.stdout).unwrap());
    let o = dplab().args(["list", "mechanism.selct"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    insta::assert_snapshot!("list_unknown_kind", common::text(&o));
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "good.yaml", GOOD);
    dplab()
        .arg("graph")
        .arg(&p)
        .assert()
        .success()
        .stdout(predicate::str::contains("\"counts\" -> \"noisy\""));
    dplab()
        .arg("graph")
        .arg(&p)
        .args(["--format", "mermaid"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("s0 --> s1")
                .and(predicate::str::contains("s0[\"counts<br/>load.table")),
        );
    // Names that would map to one id, or a Mermaid keyword, stay distinct nodes.
    let p = write(
        dir.path(),
        "ids.yaml",
        &GOOD
            .replace("  noisy:", "  end:")
            .replace("input: noisy", "input: end"),
    );
    let o = dplab()
        .arg("graph")
        .arg(&p)
        .args(["--format", "mermaid"])
        .output()
        .unwrap();
    let chart = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{chart}");
    assert!(
        !chart.contains("  end[") && chart.contains("[\"end<br/>"),
        "{chart}"
    );
}

#[test]
fn every_shipped_pipeline_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
    dplab().arg("validate").arg(&root).assert().success();
    dplab()
        .arg("validate")
        .arg(&root)
        .args(["--profile", "ci"])
        .assert()
        .success();
}

/// A Monte-Carlo zero on a logarithmic axis is a gap in the line, not a failed figure.
#[test]
fn zeros_on_a_log_axis_leave_a_gap() {
    let dir = TempDir::new().unwrap();
    let p = write(
        dir.path(),
        "logzero.yaml",
        r#"name: logzero
title: zeros on a log axis
source: {paper: test, item: none}
description: One series has an exact zero.
seed: 1
stages:
  t:
    kind: load.table
    with: {columns: {x: [1, 2, 3, 4], y: [0.5, 0.01, 0.0, 0.001]}}
  figure:
    kind: plot.lines
    input: t
    with: {x: x, y: y, log_y: true, title: t, x_label: x, y_label: y}
"#,
    );
    let out = dir.path().join("out");
    run(&p, &out, &[]).success();
    let svg = String::from_utf8(read(&out.join("logzero"), "figure.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
}

/// `dplab report` on real results (ci runs of dr-pumpkin and w20-movielens), an experiment whose
/// data is missing, then damage: exit 1 with the damage named, the page still written.
#[test]
fn report_writes_the_page_and_names_damage() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("res");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pipelines = Vec::new();
    for p in [
        "pipelines/dwork-roth/dr-pumpkin.yaml",
        "pipelines/wu2020/w20-movielens.yaml",
    ] {
        pipelines.push(root.join(p));
    }
    dplab()
        .args(["run", "--profile", "ci", "-q", "--out"])
        .arg(&out)
        .args(&pipelines)
        .assert()
        .success();
    let report = |extra: &[&std::ffi::OsStr]| {
        dplab()
            .arg("report")
            .arg(&out)
            .args(extra)
            .env("DPLAB_DATA_MIRROR", dir.path().join("no-mirror"))
            .env("DPLAB_DATA_DIR", dir.path().join("no-cache"))
            .output()
            .unwrap()
    };
    let o = report(&[]);
    assert!(o.status.success(), "{}", common::text(&o));
    let html = fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains(r#"id="exp-dr-pumpkin""#) && html.contains(r#"id="exp-w20-movielens""#));
    assert!(
        common::text(&o).contains("2 experiments (2 with results"),
        "{}",
        common::text(&o)
    );
    // With the pipelines named, one whose dataset is not on this machine says how to get it.
    let adult = root.join("pipelines/wu2020/w20-adult.yaml");
    let o = report(&["--pipelines".as_ref(), adult.as_os_str()]);
    assert!(o.status.success(), "{}", common::text(&o));
    let html = fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains("data not available")
            && html.contains("adult not on this machine")
            && html.contains("dplab data fetch --pipelines"),
        "{html}"
    );
    // A figure changed after the run: named, exit 1, the page still there.
    let svg = out.join("dr-pumpkin/figure.svg");
    let mut bytes = fs::read(&svg).unwrap();
    bytes[0] ^= 1;
    fs::write(&svg, bytes).unwrap();
    let o = report(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    assert!(
        common::text(&o).contains("figure.svg")
            && common::text(&o).contains("changed after the run")
    );
    // Not a directory: bad input.
    let o = dplab().arg("report").arg(&svg).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
}

/// Completions and manual pages come from the command definitions, so they know every
/// command and flag (`show`, `--shard`) without being written by hand.
#[test]
fn completions_and_manual_pages_are_generated() {
    let dir = TempDir::new().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let o = dplab().args(["completions", shell]).output().unwrap();
        assert!(o.status.success(), "{shell}");
        let script = String::from_utf8(o.stdout).unwrap();
        assert!(
            script.contains("show") && script.contains("shard"),
            "{shell}: {script}"
        );
        if shell == "bash" {
            let f = write(dir.path(), "dplab.bash", &script);
            let check = std::process::Command::new("bash")
                .arg("-n")
                .arg(&f)
                .output()
                .unwrap();
            assert!(check.status.success(), "bash -n: {check:?}");
        }
    }
    dplab()
        .args(["completions", "tcsh"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("possible values: bash"));
    dplab()
        .arg("man")
        .assert()
        .success()
        .stdout(predicate::str::contains(".TH dplab 1"));
    let pages = dir.path().join("man");
    dplab().arg("man").arg(&pages).assert().success();
    let run = fs::read_to_string(pages.join("dplab-run.1")).unwrap();
    assert!(run.contains("shard"), "{run}");
}

/// A parameter naming a column its input lacks: `validate` finds it when the columns above
/// are known (inline tables, kinds that declare their output), pointing at the parameter
/// (file:line:col, or the profile's line, or the `--set` argument) with the nearest column;
/// otherwise (a CSV file) the run finds it as soon as the input exists, pointing there too.
#[test]
fn a_misspelt_column_is_located_before_or_as_soon_as_the_input_exists() {
    let dir = TempDir::new().unwrap();
    let pipeline = |load: &str| {
        format!(
            r#"name: cols
title: Columns
source: {{paper: test, item: none}}
description: misspelt columns
seed: 1
stages:
  counts:
    kind: load.table
    with: {load}
  summary:
    kind: aggregate.summary
    input: counts
    with: {{values: [utility], by: [candidat]}}
  figure:
    kind: plot.lines
    input: summary
    with: {{x: candidate, y: [mean, men], title: t, x_label: x, y_label: y}}
profiles:
  ci:
    with:
      summary: {{values: [utilty]}}
"#
        )
    };
    let inline = write(
        dir.path(),
        "inline.yaml",
        &pipeline("{columns: {candidate: [a, b, c], utility: [1, 5, 2]}}"),
    );
    fs::write(
        dir.path().join("t.csv"),
        "candidate,utility\na,1\nb,5\nc,2\n",
    )
    .unwrap();
    // Without the figure: the summary's columns are known from its parameters whatever its
    // input, so the figure's would still be checked before the run.
    let with_csv = pipeline("{path: t.csv}");
    let csv = write(
        dir.path(),
        "csv.yaml",
        &with_csv[..with_csv.find("  figure:").unwrap()],
    );
    let run = |cmd: &str, p: &Path, extra: &[&str], code: i32| {
        let mut c = dplab();
        c.arg(cmd);
        if cmd == "run" {
            c.args(["--no-store", "-q", "--out"])
                .arg(dir.path().join("out"));
        }
        let o = c.args(extra).arg(p).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{}", common::text(&o));
        common::text(&o)
    };
    // Before anything runs: every misspelt column of the file, located (in the file, in the
    // profile, in a `--set` argument). The summary's columns follow from its parameters, so
    // the figure's `men` is found with `by` corrected; while the summary fails, the figure is
    // not checked against it.
    let e = run("validate", &inline, &[], 2);
    assert!(
        !e.contains("`x`: no column"),
        "the summary failed, so the figure is not checked: {e}"
    );
    insta::assert_snapshot!(refusals(
        dir.path(),
        &inline,
        &[
            &[],
            &["--profile", "ci", "--set", "summary.by=[candidate]"],
            &["--set", "summary.by=[candidate]"],
            &["--set", "summary.by=[candidat, utility]"],
        ]
    ));
    // A CSV's columns are known once it is read: the run finds it there, located all the same.
    run("validate", &csv, &[], 0);
    let file = csv.display().to_string();
    let e = run("run", &csv, &[], 1);
    assert!(
        e.contains(&format!("{file}:13:36: `by.0`: no column `candidat` in its input (columns: candidate, utility); did you mean `candidate`?")),
        "{e}"
    );
    let e = run("run", &csv, &["--set", "summary.by=[candidat, utility]"], 1);
    assert!(
        e.contains("--set summary.by=[candidat, utility]: `by.0`: no column `candidat`"),
        "{e}"
    );
}

/// `--pipelines` takes several paths after one flag (and the flag repeated), for `report` and
/// `data fetch` alike.
#[test]
fn pipelines_take_several_paths_after_one_flag() {
    let dir = TempDir::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/dwork-roth");
    let (a, b) = (
        root.join("dr-pumpkin.yaml"),
        root.join("dr-two-diseases.yaml"),
    );
    let o = dplab()
        .arg("report")
        .arg(dir.path())
        .arg("--pipelines")
        .args([&a, &b])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(
        common::text(&o).contains("2 experiments (0 with results, 0 without data, 2 not run"),
        "{}",
        common::text(&o)
    );
    // Pipelines that read no dataset need nothing fetched: exit 0 either way of giving them.
    for args in [
        vec!["--pipelines".as_ref(), a.as_os_str(), b.as_os_str()],
        vec![
            "--pipelines".as_ref(),
            a.as_os_str(),
            "--pipelines".as_ref(),
            b.as_os_str(),
        ],
    ] {
        let o = dplab()
            .args(["data", "fetch"])
            .args(args)
            .env("DPLAB_DATA_DIR", dir.path().join("cache"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::text(&o));
    }
}

/// `aggregate.summary`'s `bounds`: the interval of a bounded value's mean stays inside its
/// bounds (a t-interval over two runs of a share near 1 reaches 1.12), and a value outside them
/// fails the run, located at the bound.
#[test]
fn a_bounded_value_keeps_its_interval_inside_its_bounds() {
    let dir = TempDir::new().unwrap();
    let pipeline = |bounds: &str| {
        format!(
            "name: bounded
title: Bounds
source: {{paper: test, item: none}}
description: a share near 1 over two runs
seed: 1
stages:
  runs: {{kind: load.table, with: {{columns: {{share: [0.98, 1.0]}}}}}}
  summary: {{kind: aggregate.summary, input: runs, with: {{values: [share]{bounds}}}}}
"
        )
    };
    let out = dir.path().join("out");
    let run = |name: &str, bounds: &str, code: i32| {
        let p = write(dir.path(), name, &pipeline(bounds));
        let o = dplab()
            .args(["run", "--no-store", "-q", "--out"])
            .arg(&out)
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(code), "{}", common::text(&o));
        (p, common::text(&o))
    };
    let hi = |csv: &str| -> f64 {
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        let at = head.iter().position(|c| *c == "ci_hi").unwrap();
        row[at].parse().unwrap()
    };
    run("free.yaml", "", 0);
    let free = fs::read_to_string(out.join("bounded/summary.csv")).unwrap();
    assert!(hi(&free) > 1.1, "{free}");
    run("bounded.yaml", ", bounds: {share: [0, 1]}", 0);
    let cut = fs::read_to_string(out.join("bounded/summary.csv")).unwrap();
    assert_eq!(hi(&cut), 1.0, "{cut}");
    let (p, e) = run("tight.yaml", ", bounds: {share: [0, 0.99]}", 1);
    assert!(
        e.contains(&format!(
            "{}:8:91: `bounds.share`: a value of `share` is 1, outside its bounds [0, 0.99]",
            p.display()
        )),
        "{e}"
    );
}

/// A stage may not take the name of a file dplab writes in its results directory itself: it is
/// refused when the file is read, not after the whole run.
#[test]
fn a_stage_named_as_dplab_s_instances_table_is_refused() {
    let e = bad(|s| {
        s.replace("  counts:", "  instances:")
            .replace("input: counts", "input: instances")
    });
    assert!(
        e.contains("\"instances\" is not allowed: dplab writes a file of that name itself (the results directory's instances.parquet)"),
        "{e}"
    );
}
