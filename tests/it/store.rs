//! The instance store through the command line: a rerun computes nothing and writes the same
//! bytes; an edit recomputes only the instances it changes and what reads them; `--force`,
//! `--no-store`, a killed run, and two runs sharing one store at once.

use crate::common;
use common::{manifest_counts as counts, text};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use tempfile::TempDir;

use crate::hay::FIGURED as PIPELINE;

struct Env {
    dir: TempDir,
}

impl Env {
    fn new() -> Self {
        Env {
            dir: TempDir::new().unwrap(),
        }
    }
    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }
    fn write(&self, text: &str) -> PathBuf {
        let p = self.dir.path().join("p.yaml");
        fs::write(&p, text).unwrap();
        p
    }
    /// `dplab run` of `text` into `out` with this store and `extra` arguments.
    fn run(&self, text: &str, out: &str, extra: &[&str]) -> Output {
        let p = self.write(text);
        Command::cargo_bin("dplab")
            .unwrap()
            .env_remove("DPLAB_STORE")
            .args(["run", "-q", "--store"])
            .arg(self.store())
            .arg("--out")
            .arg(self.dir.path().join(out))
            .args(extra)
            .arg(&p)
            .output()
            .unwrap()
    }
    fn results(&self, out: &str) -> PathBuf {
        self.dir.path().join(out).join("cached")
    }
}

fn run_counts(results: &Path) -> Vec<(String, u64)> {
    counts(results)
        .into_iter()
        .map(|(s, r, _)| (s, r))
        .collect()
}

/// Every result file but the manifest (which records times and counts), by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    crate::common::result_files(dir)
}

fn pairs(v: &[(&str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|(s, n)| (s.to_string(), *n)).collect()
}

#[test]
fn a_rerun_computes_nothing_and_writes_the_same_bytes() {
    let env = Env::new();
    let o = env.run(PIPELINE, "a", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        run_counts(&env.results("a")),
        pairs(&[("counts", 1), ("noisy", 6), ("summary", 2), ("figure", 1)])
    );
    let o = env.run(PIPELINE, "b", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(counts(&env.results("b"))
        .iter()
        .all(|(_, run, _)| *run == 0));
    assert_eq!(files(&env.results("a")), files(&env.results("b")));
    // Without the store everything runs, and the bytes are still the same.
    let o = env.run(PIPELINE, "c", &["--no-store"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(counts(&env.results("c"))[1], ("noisy".to_string(), 6, 0));
    assert_eq!(files(&env.results("a")), files(&env.results("c")));
}

#[test]
fn an_edit_recomputes_only_what_it_changes() {
    let env = Env::new();
    assert!(env.run(PIPELINE, "a", &[]).status.success());
    // A plot's title: only the plot.
    let retitled = PIPELINE.replace("first title", "second title");
    let o = env.run(&retitled, "a", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        run_counts(&env.results("a")),
        pairs(&[("counts", 0), ("noisy", 0), ("summary", 0), ("figure", 1)])
    );
    // One more axis value: its instances and nothing else.
    let o = env.run(&retitled, "a", &["--set", "eps=[0.5, 1.0, 2.0]"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        run_counts(&env.results("a")),
        pairs(&[("counts", 0), ("noisy", 3), ("summary", 1), ("figure", 1)])
    );
    // A parameter upstream: everything that reads it.
    let o = env.run(&retitled.replace("samples: 200", "samples: 300"), "a", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        run_counts(&env.results("a")),
        pairs(&[("counts", 0), ("noisy", 6), ("summary", 2), ("figure", 1)])
    );
}

#[test]
fn force_recomputes_all_or_the_stages_named() {
    let env = Env::new();
    assert!(env.run(PIPELINE, "a", &[]).status.success());
    let o = env.run(PIPELINE, "b", &["--force"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(counts(&env.results("b"))
        .iter()
        .all(|(_, _, hit)| *hit == 0));
    assert_eq!(files(&env.results("a")), files(&env.results("b")));
    let o = env.run(PIPELINE, "c", &["--force=summary,figure"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        run_counts(&env.results("c")),
        pairs(&[("counts", 0), ("noisy", 0), ("summary", 2), ("figure", 1)])
    );
}

#[test]
fn a_failed_run_keeps_what_finished() {
    let env = Env::new();
    // The figure plots a text column: the run fails in its last stage (a column that does not
    // exist would fail `validate`, before anything ran).
    let broken = PIPELINE.replace("y: mean,", "y: value,");
    let o = env.run(&broken, "a", &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = env.run(PIPELINE, "a", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        run_counts(&env.results("a")),
        pairs(&[("counts", 0), ("noisy", 0), ("summary", 0), ("figure", 1)])
    );
}

/// A failure early in one branch does not stop the other: its stages, deeper in the graph than
/// the failed one, still run and are stored, and the error names the failed instance.
#[test]
fn stages_that_do_not_depend_on_a_failed_one_finish_and_are_stored() {
    let env = Env::new();
    // `bad` summarises a text column (which fails when it runs), `after_bad` cannot run, and
    // the branch `noisy → summary → figure`, deeper in the graph than `bad`, depends on neither.
    let broken = PIPELINE.replace(
        "  figure:\n",
        "  bad:\n    kind: aggregate.summary\n    input: counts\n    with: {values: [candidate]}\n  after_bad:\n    kind: aggregate.summary\n    input: bad\n    with: {values: [mean]}\n  figure:\n",
    );
    let o = env.run(&broken, "a", &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = text(&o);
    assert!(
        err.contains("stage `bad`")
            && err.contains("candidate")
            && err.contains("1 instance(s) not run because an input failed"),
        "{err}"
    );
    // Everything of the other branch is in the store: the repaired pipeline (without `bad`)
    // computes nothing.
    let o = env.run(PIPELINE, "a", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        run_counts(&env.results("a")),
        pairs(&[("counts", 0), ("noisy", 0), ("summary", 0), ("figure", 0)])
    );
}

/// Deterministic work is one entry across pipelines, whatever their seeds: a kind that draws
/// no randomness gets seed 0 and its keys leave the seed out; a random kind's do not.
#[test]
fn deterministic_work_is_shared_across_pipelines_of_different_seeds() {
    let env = Env::new();
    let o = env.run(PIPELINE, "a", &[]);
    assert!(o.status.success(), "{}", text(&o));
    let other = PIPELINE.replace("seed: 5", "seed: 6");
    assert_ne!(other, PIPELINE);
    let o = env.run(&other, "b", &[]);
    assert!(o.status.success(), "{}", text(&o));
    // `counts` (load.table) is taken from the first pipeline's run; the noise, drawn from
    // another seed, and everything that reads it are computed.
    assert_eq!(
        run_counts(&env.dir.path().join("b").join("cached")),
        pairs(&[("counts", 0), ("noisy", 6), ("summary", 2), ("figure", 1)])
    );
}

#[test]
fn runs_sharing_one_store_at_once_agree() {
    let env = Env::new();
    let p = env.write(PIPELINE);
    let children: Vec<_> = (0..4)
        .map(|i| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("dplab"))
                .env_remove("DPLAB_STORE")
                .args(["run", "-q", "--store"])
                .arg(env.store())
                .arg("--out")
                .arg(env.dir.path().join(format!("o{i}")))
                .arg(&p)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    let first = files(&env.dir.path().join("o0/cached"));
    for i in 1..4 {
        assert_eq!(first, files(&env.dir.path().join(format!("o{i}/cached"))));
    }
    // Nothing half-written is left, and the store serves a later run whole.
    let tmp = env.store().join("tmp");
    assert!(
        !tmp.exists() || fs::read_dir(&tmp).unwrap().next().is_none(),
        "left in tmp/"
    );
    let o = env.run(PIPELINE, "later", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(counts(&env.results("later"))
        .iter()
        .all(|(_, r, _)| *r == 0));
    assert_eq!(first, files(&env.results("later")));
}

#[test]
fn a_dry_run_says_what_would_run_and_why() {
    let env = Env::new();
    let dry = |text: &str, extra: &[&str]| -> String {
        let p = env.write(text);
        let o = Command::cargo_bin("dplab")
            .unwrap()
            .env_remove("DPLAB_STORE")
            .args(["run", "--dry-run", "--store"])
            .arg(env.store())
            .args(extra)
            .arg(&p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text_of(&o));
        common::stable(&String::from_utf8_lossy(&o.stdout), env.dir.path())
    };
    fn text_of(o: &Output) -> String {
        text(o)
    }
    // The whole plan of each dry run: per stage what would run, what the store holds, and
    // why each instance would run.
    insta::assert_snapshot!("dry_run_on_an_empty_store", dry(PIPELINE, &[]));
    assert!(env.run(PIPELINE, "a", &[]).status.success());
    // Nothing ran: the store is as the real run left it.
    insta::assert_snapshot!("dry_run_after_a_run", dry(PIPELINE, &[]));
    let edited = PIPELINE
        .replace("samples: 200", "samples: 400")
        .replace("first title", "other");
    insta::assert_snapshot!(
        "dry_run_after_edits",
        dry(&edited, &["--set", "eps=[0.5, 1.0, 2.0]"])
    );
    insta::assert_snapshot!("dry_run_forced", dry(PIPELINE, &["--force=summary"]));
    assert!(!env.results("b").exists());
}

/// A kind's version is part of every key: raising it makes every stored instance of the kind
/// a miss (stale results are never reused), and so does any other part changing.
#[test]
fn keys_change_with_the_kind_version_and_every_part() {
    use dplab::axis::AxisValue;
    use dplab::pipeline::key::{store_key, Key, KeyParts};
    let axes: Vec<(std::sync::Arc<str>, AxisValue)> = vec![("eps".into(), AxisValue::Num(0.5))];
    let up = vec![vec![Key([1; 32])]];
    let base = KeyParts {
        kind: "mechanism.noise",
        version: 1,
        stage: "noisy",
        inputs: &["counts"],
        params: "{\"samples\":200}",
        seed: 7,
        axes: &axes,
        upstream: &up,
        files: &[],
        sources: &[],
    };
    let k = store_key(&base);
    assert_eq!(k.to_string().len(), 64);
    assert_eq!(Key::parse(&k.to_string()), Some(k));
    assert_eq!(k, store_key(&base));
    let axes2: Vec<(std::sync::Arc<str>, AxisValue)> = vec![("eps".into(), AxisValue::Num(1.0))];
    let up2 = vec![vec![Key([2; 32])]];
    let files = vec!["f".to_string()];
    let sources = vec![serde_json::json!({"dataset": "d"})];
    let variants = [
        KeyParts { version: 2, ..base },
        KeyParts {
            kind: "mechanism.select",
            ..base
        },
        KeyParts {
            stage: "other",
            ..base
        },
        KeyParts {
            inputs: &["c2"],
            ..base
        },
        KeyParts {
            params: "{\"samples\":300}",
            ..base
        },
        KeyParts { seed: 8, ..base },
        KeyParts {
            axes: &axes2,
            ..base
        },
        KeyParts {
            upstream: &up2,
            ..base
        },
        KeyParts {
            files: &files,
            ..base
        },
        KeyParts {
            sources: &sources,
            ..base
        },
    ];
    for v in variants {
        assert_ne!(store_key(&v), k);
    }
}

#[test]
fn gc_removes_exactly_what_no_results_directory_uses() {
    let env = Env::new();
    assert!(env.run(PIPELINE, "a", &[]).status.success());
    // The retitled figure replaces the old one in `a`: the old figure's entry is unused.
    let retitled = PIPELINE.replace("first title", "second title");
    assert!(env.run(&retitled, "a", &[]).status.success());
    let store_cmd = |args: &[&str]| -> String {
        let o = Command::cargo_bin("dplab")
            .unwrap()
            .arg("store")
            .args(args)
            .arg("--store")
            .arg(env.store())
            .arg("--keep")
            .arg(env.dir.path().join("a"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    // The old figure's entry is filed twice: under its key and its key by content (it reads
    // `summary`); the other 9 entries that read others too.
    let s = store_cmd(&["gc", "--dry-run"]);
    assert!(s.contains("would remove 2 of 21 entries"), "{s}");
    let s = store_cmd(&["gc"]);
    assert!(s.contains("removed 2 of 21 entries"), "{s}");
    let o = env.run(&retitled, "b", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(counts(&env.results("b")).iter().all(|(_, r, _)| *r == 0));
    let o = Command::cargo_bin("dplab")
        .unwrap()
        .args(["store", "info", "--store"])
        .arg(env.store())
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(
        info.contains("10 entries") && info.contains("cached"),
        "{info}"
    );
}

/// The Huang 2014 pipelines that answer CSN's 10⁴ queries (h14-table3.2, h14-table3.3 and
/// h14-fig3.1) write its loading, normalising and true answers alike, so that each is one
/// store entry: a run of all pipelines computes the most expensive instance of the three
/// (14 s of the table's 35) once. After table 3.2's `truth` alone, the other two find every
/// instance of theirs in the store. Needs the dataset mirror.
#[test]
fn the_huang_pipelines_share_csn_s_true_answers() {
    let Some(mirror) = std::env::var_os("DPLAB_DATA_MIRROR").filter(|m| !m.is_empty()) else {
        eprintln!("skipped: DPLAB_DATA_MIRROR is not set");
        return;
    };
    let dir = TempDir::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/huang2014");
    let store = dir.path().join("store");
    let o = common::dplab()
        .env("DPLAB_DATA_MIRROR", &mirror)
        .args([
            "run",
            "-q",
            "--profile",
            "ci",
            "--stages",
            "truth",
            "--store",
        ])
        .arg(&store)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg(root.join("h14-table3.2.yaml"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    for p in ["h14-table3.3.yaml", "h14-fig3.1.yaml"] {
        let o = common::dplab()
            .env("DPLAB_DATA_MIRROR", &mirror)
            .args([
                "run",
                "--dry-run",
                "--message-format",
                "json",
                "--profile",
                "ci",
            ])
            .arg("--store")
            .arg(&store)
            .arg(root.join(p))
            .output()
            .unwrap();
        assert!(o.status.success(), "{p}: {}", text(&o));
        let plan: serde_json::Value = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == "plan")
            .unwrap_or_else(|| panic!("{p}: no plan event: {}", text(&o)));
        for stage in ["raw", "clean", "truth"] {
            let s = plan["stages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["stage"] == stage)
                .unwrap_or_else(|| panic!("{p}: no stage {stage}"));
            assert!(s["instances"].as_u64().unwrap() > 0, "{p} {stage}: {s}");
            assert_eq!(
                s["in_store"], s["instances"],
                "{p}: stage {stage} is not table 3.2's: {s}"
            );
        }
    }
}
