//! An experiment of one's own in YAML (issue "Your own experiment"): a stage that runs on part
//! of an axis (`only:`), a pipeline without a paper, every missing key reported at once.

use crate::common::{dplab, text, write};

const NARROWED: &str = r#"name: narrow
title: T
description: d
seed: 5
axes:
  eps: [0.1, 0.5, 1, 2]
stages:
  t: {kind: load.table, with: {columns: {bin: [0, 1], value: [10, 20]}}}
  laplace:
    kind: mechanism.noise
    input: t
    with: {column: value, noise: laplace, epsilon: $eps}
  gaussian:
    kind: mechanism.noise
    input: t
    only: {eps: {lt: 1}}
    with: {column: value, noise: gaussian, epsilon: $eps, delta: 1.0e-5}
  gaussian_again:
    kind: frame.stack
    input: gaussian
  both:
    kind: frame.stack
    input: [laplace, gaussian]
    over: all
"#;

fn manifest(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn seeds(m: &serde_json::Value, stage: &str) -> Vec<(String, String)> {
    m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == stage)
        .unwrap()["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["instance"].as_str().unwrap().to_string(),
                s["seed"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `only: {eps: {lt: 1}}` runs the classic Gaussian where it is defined: its instances (and
/// those of a stage that reads only it) exist at ε < 1 alone, a stack of both mechanisms has
/// Laplace's rows at every ε and the Gaussian's where it ran, and the instances that remain
/// have the seeds they have without `only:`.
#[test]
fn a_stage_runs_on_part_of_an_axis() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "narrow.yaml", NARROWED);
    let out = d.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let m = manifest(&out.join("narrow"));
    let labels =
        |stage: &str| -> Vec<String> { seeds(&m, stage).into_iter().map(|(l, _)| l).collect() };
    assert_eq!(labels("gaussian"), ["eps=0.1", "eps=0.5"]);
    assert_eq!(labels("gaussian_again"), ["eps=0.1", "eps=0.5"]);
    assert_eq!(labels("laplace").len(), 4);
    let both = std::fs::read_to_string(out.join("narrow/both.csv")).unwrap();
    let rows: Vec<&str> = both.lines().skip(1).collect();
    let count = |source: &str, eps: &str| {
        rows.iter()
            .filter(|r| r.contains(source) && r.split(',').any(|c| c == eps))
            .count()
    };
    assert_eq!(
        (count("laplace", "2.0"), count("gaussian", "2.0")),
        (2, 0),
        "{both}"
    );
    assert_eq!(
        (count("laplace", "0.5"), count("gaussian", "0.5")),
        (2, 2),
        "{both}"
    );

    // Without `only:` (and without the Gaussian's refusal at ε ≥ 1, by a smaller axis), the
    // same instances have the same seeds.
    let wide = NARROWED
        .replace("    only: {eps: {lt: 1}}\n", "")
        .replace("eps: [0.1, 0.5, 1, 2]", "eps: [0.1, 0.5]");
    let p = write(d.path(), "narrow.yaml", &wide);
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(d.path().join("wide"))
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let w = manifest(&d.path().join("wide/narrow"));
    assert_eq!(seeds(&w, "gaussian"), seeds(&m, "gaussian"));
}

/// A wrong `only:` is a located error at `validate`: an axis the stage does not vary over
/// (with the nearest one), a value the axis does not have, an unknown bound, bounds on text.
#[test]
fn a_wrong_only_is_located() {
    let d = tempfile::tempdir().unwrap();
    for (only, said) in [
        (
            "{epz: {lt: 1}}",
            "does not vary over `epz`: did you mean `eps`?",
        ),
        ("{eps: [0.1, 3]}", "`eps` has no value 3"),
        (
            "{eps: {below: 1}}",
            "unknown bound `below` (valid: lt, le, gt, ge)",
        ),
        ("{eps: []}", "an empty list keeps no instance"),
    ] {
        let p = write(
            d.path(),
            "narrow.yaml",
            &NARROWED.replace("{eps: {lt: 1}}", only),
        );
        let o = dplab().arg("validate").arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{only}: {}", text(&o));
        assert!(
            text(&o).contains("narrow.yaml:16:") && text(&o).contains(said),
            "{only}: {}",
            text(&o)
        );
    }
}

/// An experiment of one's own names no paper: `source:` may be left out. Every missing
/// required key is named at once, with a skeleton to copy.
#[test]
fn no_paper_is_needed_and_missing_keys_come_at_once() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "mine.yaml",
        "name: mine\ntitle: T\ndescription: d\nseed: 1\nstages:\n  t: {kind: load.table, with: {columns: {x: [1]}}}\n",
    );
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let p = write(d.path(), "bare.yaml", "name: bare\nstages: {}\n");
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("bare.yaml:1:1: missing required keys `title`, `description`, `seed`")
            && t.contains("seed: 1")
            && t.contains("dplab new"),
        "{t}"
    );
}

/// `--sweep STAGE.PARAM=VALUES` makes a constant an axis from the command line: the stage
/// and its readers vary over it (new seeds), the stages above keep theirs; a sweep whose axis
/// name is taken, or of a parameter the kind lacks, is refused.
#[test]
fn a_parameter_is_swept_from_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "narrow.yaml", NARROWED);
    let run = |out: &str, extra: &[&str]| {
        let o = dplab()
            .args(["run", "-q", "--out"])
            .arg(d.path().join(out))
            .args(extra)
            .arg(&p)
            .output()
            .unwrap();
        (o.status.code(), text(&o))
    };
    assert_eq!(run("plain", &[]).0, Some(0));
    let (code, msg) = run("swept", &["--sweep", "laplace.samples=[1, 3]"]);
    assert_eq!(code, Some(0), "{msg}");
    let plain = manifest(&d.path().join("plain/narrow"));
    let swept = manifest(&d.path().join("swept/narrow"));
    let labels: Vec<String> = seeds(&swept, "laplace")
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    assert_eq!(labels.len(), 8, "{labels:?}");
    assert!(
        labels.contains(&"eps=2, samples=3".to_string()),
        "{labels:?}"
    );
    assert_eq!(seeds(&swept, "t"), seeds(&plain, "t"));
    assert_eq!(seeds(&swept, "gaussian"), seeds(&plain, "gaussian"));
    let rows = std::fs::read_to_string(d.path().join("swept/narrow/laplace.csv")).unwrap();
    assert_eq!(rows.lines().count(), 1 + 4 * (2 + 2 * 3), "{rows}");
    assert_eq!(swept["set"][0], "+laplace.samples=[1, 3]");

    let (code, msg) = run("bad", &["--sweep", "laplace.sample=[1, 3]"]);
    assert_eq!(code, Some(2), "{msg}");
    assert!(msg.contains("did you mean `laplace.samples`?"), "{msg}");
    let (code, msg) = run("bad", &["--sweep", "laplace.eps=[1]"]);
    assert_eq!(code, Some(2), "{msg}");
    let (code, msg) = run(
        "bad",
        &[
            "--sweep",
            "gaussian.samples=[1]",
            "--sweep",
            "laplace.samples=[2]",
        ],
    );
    assert_eq!(code, Some(2), "{msg}");
    assert!(msg.contains("which the pipeline has already"), "{msg}");
}

/// `dplab new NAME` writes the shipped example under NAME, which runs as it is: a stage
/// `errors` with `l1` and `linf` per (mechanism, ε, repetition), and their summary. It never
/// writes over a file, and refuses a name that cannot be a results directory.
#[test]
fn new_writes_a_pipeline_that_runs() {
    let d = tempfile::tempdir().unwrap();
    let o = dplab()
        .args(["new", "my-study", "--dir"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let written = std::fs::read_to_string(d.path().join("my-study.yaml")).unwrap();
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("pipelines/examples/histogram-noise.yaml"),
    )
    .unwrap();
    assert_eq!(
        written,
        example
            .lines()
            .filter(|l| !l.starts_with("# yaml-language-server"))
            .map(|l| if l == "name: histogram-noise" {
                "name: my-study"
            } else {
                l
            })
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    let again = dplab()
        .args(["new", "my-study", "--dir"])
        .arg(d.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("not overwritten"), "{}", text(&again));
    let bad = dplab().args(["new", "../x"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));

    let out = d.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--profile", "ci", "--out"])
        .arg(&out)
        .arg(d.path().join("my-study.yaml"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let errors = std::fs::read_to_string(out.join("my-study/errors.csv")).unwrap();
    let header: Vec<&str> = errors.lines().next().unwrap().split(',').collect();
    for c in ["mechanism", "eps", "rep", "l1", "linf"] {
        assert!(header.contains(&c), "{header:?}");
    }
    // 3 mechanisms × 2 ε × 10 repetitions under the ci profile.
    assert_eq!(errors.lines().count(), 1 + 3 * 2 * 10, "{errors}");
    assert!(out.join("my-study/figure.svg").exists());
}
