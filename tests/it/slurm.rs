//! `dplab slurm` without a cluster: the scripts `--dry-run` writes, the checks that refuse bad
//! input before anything is submitted (exit 2), and submission and `--wait` against stand-ins
//! for `sbatch` and `squeue` (tests/slurm/fake/) put first on PATH. The stand-in sbatch records
//! its arguments and runs each job script at once, so the shards and the merge really run and
//! their results are compared with a local run. `make test-slurm` does the same on a real Slurm.

use crate::common;
use common::{manifest_counts, text};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use tempfile::TempDir;

/// The store tests' pipeline (a shared input, noise per repetition, a gather over repetitions
/// and a figure) at three ε, with a `ci` profile of fewer draws.
fn pipeline() -> String {
    let p = crate::hay::FIGURED
        .replace("name: cached", "name: onslurm")
        .replace("eps: [0.5, 1.0]", "eps: [0.5, 1.0, 2.0]");
    assert!(p.contains("name: onslurm") && p.contains("2.0]"));
    p + "profiles:\n  ci:\n    description: fewer draws\n    with:\n      noisy: {samples: 40}\n"
}

/// A directory holding a pipeline, a store, results and the fake cluster's state.
struct Site {
    dir: TempDir,
}

impl Site {
    fn new() -> Self {
        let site = Site {
            dir: TempDir::new().unwrap(),
        };
        common::write(site.path(), "p/onslurm.yaml", &pipeline());
        fs::create_dir(site.path().join("fake")).unwrap();
        fs::create_dir(site.path().join("empty")).unwrap();
        site
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn pipeline(&self) -> PathBuf {
        self.path().join("p/onslurm.yaml")
    }
    fn store(&self) -> PathBuf {
        self.path().join("store")
    }
    /// `dplab slurm PIPELINE --store S --out R` with the fake sbatch and squeue first on PATH.
    fn slurm(&self) -> Command {
        self.slurm_in(&self.store())
    }
    /// `dplab slurm --shards 2 --wait` with the stand-ins behaving as `env` says.
    fn wait_two(&self, env: &[(&str, &str)]) -> Output {
        let mut c = self.slurm();
        c.args(["--shards", "2", "--wait", "--poll", "0.1"]);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }
    /// The same with another store.
    fn slurm_in(&self, store: &Path) -> Command {
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/fake");
        let path = std::env::join_paths(
            std::iter::once(fake).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
        )
        .unwrap();
        let mut c = Command::cargo_bin("dplab").unwrap();
        // Data locations of the site's own, not the environment's.
        c.env_remove("DPLAB_STORE")
            .env_remove("DPLAB_DATA_MIRROR")
            .env("DPLAB_DATA_DIR", self.path().join("cache"))
            .env("PATH", path)
            .env("FAKE_SLURM", self.path().join("fake"))
            .arg("slurm")
            .arg(self.pipeline())
            .arg("--store")
            .arg(store)
            .arg("--out")
            .arg(self.path().join("results"));
        for knob in [
            "FAKE_SLURM_CANCEL",
            "FAKE_SLURM_REFUSE",
            "FAKE_SLURM_MERGE_FAIL",
            "FAKE_SLURM_CLUSTER",
            "FAKE_SLURM_BUSY",
            "FAKE_SLURM_FORGET",
            "FAKE_SLURM_DOWN",
        ] {
            c.env_remove(knob);
        }
        c
    }
    /// The same with nothing on PATH: no sbatch to be found.
    fn slurm_without_sbatch(&self) -> Command {
        let mut c = self.slurm();
        c.env("PATH", self.path().join("empty"));
        c
    }
    /// Every command the fake cluster was given, one line each (arguments as `printf %q`).
    fn calls(&self) -> Vec<String> {
        fs::read_to_string(self.path().join("fake/calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
    /// The one STORE/slurm/<time>/ directory (panics unless there is exactly one).
    fn run_dir(&self) -> PathBuf {
        let dirs = self.run_dirs();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs[0].clone()
    }
    fn run_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(self.store().join("slurm"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
    /// A local `dplab run --jobs 2` of the pipeline into `out`, with a store of its own.
    fn local(&self, out: &str, extra: &[&str]) -> PathBuf {
        let o = Command::cargo_bin("dplab")
            .unwrap()
            .env_remove("DPLAB_STORE")
            .args(["run", "-q", "--jobs", "2", "--store"])
            .arg(self.path().join("local-store"))
            .arg("--out")
            .arg(self.path().join(out))
            .args(extra)
            .arg(self.pipeline())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        self.path().join(out)
    }
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Asserts that `dplab compare A B` finds every frame identical (tolerance 0).
fn identical(a: &Path, b: &Path) {
    let o = Command::cargo_bin("dplab")
        .unwrap()
        .args(["compare", "--rtol", "0", "--atol", "0"])
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// The arguments a script's `dplab run` line passes, as a shell parses them: the script runs
/// under bash with `printf '%s\0'` in place of the dplab binary.
fn script_argv(script: &str, env: &[(&str, &str)], dir: &Path) -> Vec<String> {
    let bin = assert_cmd::cargo::cargo_bin("dplab")
        .canonicalize()
        .unwrap();
    let bin = bin.to_str().unwrap();
    assert!(script.contains(&format!("\n{bin} run")), "{script}");
    let argv = dir.join("argv");
    let probe = script.replace(
        &format!("\n{bin} run"),
        &format!("\nprintf '%s\\0' >{} run", argv.display()),
    );
    let path = dir.join("probe.sh");
    fs::write(&path, probe).unwrap();
    let o = std::process::Command::new("bash")
        .arg(&path)
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8(fs::read(argv).unwrap())
        .unwrap()
        .split_terminator('\0')
        .map(str::to_string)
        .collect()
}

#[test]
fn dry_run_writes_scripts_that_name_everything_and_submits_nothing() {
    let site = Site::new();
    let o = site
        .slurm_without_sbatch()
        .args(["--shards", "3", "--dry-run", "--profile", "ci"])
        .args(["--set", "eps=[0.5, 1]", "--cpus-per-task", "2"])
        .args(["--partition", "debug", "--time", "0:10:00", "--mem", "1G"])
        .args(["--account", "lab", "--sbatch-arg=--qos=low"])
        .args(["--sbatch-arg", "--comment=two words"])
        .arg("--mirror")
        .arg(site.path().join("mirror"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(site.calls().is_empty(), "{:?}", site.calls());
    let dir = site.run_dir();
    let shards = fs::read_to_string(dir.join("shards.sbatch")).unwrap();
    let merge = fs::read_to_string(dir.join("merge.sbatch")).unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&shards) && stdout.contains(&merge),
        "{stdout}"
    );
    assert!(stdout.contains("Not submitted (--dry-run)"), "{stdout}");
    for d in ["logs", "status"] {
        assert!(dir.join(d).is_dir(), "{d}");
    }
    let store = site.store().canonicalize().unwrap();
    let pipeline = site.pipeline().canonicalize().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("dplab")
        .canonicalize()
        .unwrap();
    // The whole of what `--dry-run` prints: both scripts (the dplab, pipeline, profile,
    // `--set` and store they name, every #SBATCH option given) and how to submit them, with
    // what changes from run to run named: paths, the time written, the binary's version and
    // digest.
    let named = |text: &str| {
        let run = common::stable(text, &dir).replace("[TMP]", "[RUN]");
        let bin = run.replace(&*bin.to_string_lossy(), "[DPLAB]");
        let site = common::stable(&bin, site.path())
            .replace("[TMP]", "[SITE]")
            .replace(env!("CARGO_PKG_VERSION"), "[VERSION]");
        site.lines()
            .map(
                |l| match (l.split_once("` at "), l.split_once(", sha256 ")) {
                    (Some((head, _)), _) if l.starts_with("# Written by") => {
                        format!("{head}` at [TIME].")
                    }
                    (_, Some((head, _))) => format!("{head}, sha256 [SHA256])"),
                    _ => l.to_string(),
                },
            )
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!(named(&stdout));
    for script in [&shards, &merge] {
        assert!(script.starts_with("#!/bin/bash\n"), "{script}");
        // sbatch reads #SBATCH lines only up to the first command.
        let first_command = script
            .lines()
            .position(|l| !l.starts_with('#') && !l.trim().is_empty())
            .unwrap();
        let lines: Vec<&str> = script.lines().collect();
        let last_sbatch = lines
            .iter()
            .rposition(|l| l.starts_with("#SBATCH"))
            .unwrap();
        assert!(last_sbatch < first_command, "{script}");
        let syntax = std::process::Command::new("bash")
            .arg("-n")
            .arg(dir.join("shards.sbatch"))
            .output()
            .unwrap();
        assert!(syntax.status.success(), "{}", text(&syntax));
    }
    assert!(shards.contains("#SBATCH --array=0-2\n"), "{shards}");
    assert!(
        shards.contains(&format!(
            "#SBATCH --output={}/logs/shard-%A_%a.out",
            dir.display()
        )),
        "{shards}"
    );
    assert!(!merge.contains("--array"), "{merge}");
    assert!(
        merge.contains(&format!(
            "#SBATCH --output={}/logs/merge-%j.out",
            dir.display()
        )),
        "{merge}"
    );

    let shard_argv = script_argv(&shards, &[("SLURM_ARRAY_TASK_ID", "1")], site.path());
    let (p, s) = (pipeline.to_str().unwrap(), store.to_str().unwrap());
    let mirror = site.path().join("mirror");
    let cache = site.path().join("cache");
    let (mirror, cache) = (mirror.to_str().unwrap(), cache.to_str().unwrap());
    assert_eq!(
        shard_argv,
        [
            "run",
            p,
            "--shard",
            "auto/3",
            "--jobs",
            "2",
            "--store",
            s,
            "--profile",
            "ci",
            "--set",
            "eps=[0.5, 1]",
            "--mirror",
            mirror,
            "--data-dir",
            cache
        ]
    );
    // The exit code is recorded for --wait, per array task.
    assert_eq!(
        fs::read_to_string(dir.join("status/shard-1")).unwrap(),
        "0\n"
    );
    let results = site.path().join("results");
    let merge_argv = script_argv(&merge, &[], site.path());
    assert_eq!(
        merge_argv,
        [
            "run",
            p,
            "--jobs",
            "2",
            "--store",
            s,
            "--out",
            results.to_str().unwrap(),
            "--profile",
            "ci",
            "--set",
            "eps=[0.5, 1]",
            "--mirror",
            mirror,
            "--data-dir",
            cache
        ]
    );
    assert_eq!(fs::read_to_string(dir.join("status/merge")).unwrap(), "0\n");
}

#[test]
fn hostile_values_reach_dplab_intact_and_run_nothing() {
    let site = Site::new();
    // A store path with a space, a dollar, a quote and Slurm's `%`; a --set value that would
    // run commands if it were not quoted, and that ends a comment line if it were not escaped.
    let store = site.path().join("my store $HOME %j");
    let set = "eps=[0.5,\n 1] # $(touch pwned1) `touch pwned2` ';touch pwned3;' \"\\";
    let o = site
        .slurm_in(&store)
        .env("PATH", site.path().join("empty"))
        .args(["--shards", "2", "--dry-run", "--set", set])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let dirs: Vec<PathBuf> = fs::read_dir(store.join("slurm"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let shards = fs::read_to_string(dirs[0].join("shards.sbatch")).unwrap();
    // Every header line is a comment: the newline of the --set value is shown as `\n`.
    let header: Vec<&str> = shards.lines().take_while(|l| !l.is_empty()).collect();
    assert!(header.iter().all(|l| l.starts_with('#')), "{shards}");
    assert!(
        shards.contains("# --set:     eps=[0.5,\\n 1] # $(touch pwned1)"),
        "{shards}"
    );
    // `%` is Slurm's pattern character: the log path doubles it.
    assert!(shards.contains("%%j/slurm/"), "{shards}");
    let argv = script_argv(&shards, &[("SLURM_ARRAY_TASK_ID", "0")], site.path());
    let store = store.canonicalize().unwrap();
    assert_eq!(
        argv[argv.iter().position(|a| a == "--store").unwrap() + 1],
        store.to_str().unwrap()
    );
    assert_eq!(
        argv[argv.iter().position(|a| a == "--set").unwrap() + 1],
        set
    );
    for canary in ["pwned1", "pwned2", "pwned3"] {
        assert!(!site.path().join(canary).exists(), "{canary} was created");
    }
    assert!(dirs[0].join("status/shard-0").is_file());
}

/// `dplab slurm` with `args` exits 2, says `message`, submits nothing.
fn refused(site: &Site, mut cmd: Command, args: &[&str], message: &str) {
    let o = cmd.args(args).output().unwrap();
    assert_eq!(code(&o), 2, "{args:?}: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(message), "{args:?}: no `{message}` in {err}");
    assert!(site.calls().is_empty(), "{args:?}: {:?}", site.calls());
}

#[test]
fn bad_input_is_refused_before_anything_is_submitted() {
    let site = Site::new();
    let s = || site.slurm();
    refused(&site, s(), &["--shards", "0"], "--shards");
    refused(
        &site,
        s(),
        &["--shards", "2", "--wait", "--dry-run"],
        "--dry-run",
    );
    refused(
        &site,
        s(),
        &["--shards", "2", "--poll", "0"],
        "seconds from 0.1",
    );
    refused(
        &site,
        s(),
        &["--shards", "2", "--cpus-per-task", "0"],
        "--cpus-per-task",
    );
    for own in [
        "--array=0-9",
        "--arr=1",
        "-a1-3",
        "--dependency=afterany:1",
        "--kill-on-invalid-dep=no",
        "--output=/tmp/x",
        "-o",
        "--error=x",
        "--parsable",
        "--wait",
    ] {
        refused(
            &site,
            s(),
            &["--shards", "2", &format!("--sbatch-arg={own}")],
            "dplab slurm sets --array",
        );
    }
    refused(
        &site,
        s(),
        &["--shards", "2", "--sbatch-arg", "qos=low"],
        "not an option",
    );
    for bad in [
        "--comment=a\"b",
        "--comment=a'b",
        "--comment=a\\b",
        "--comment=a#b",
        "--comment=a\nb",
    ] {
        refused(
            &site,
            s(),
            &["--shards", "2", "--sbatch-arg", bad],
            "cannot carry reliably",
        );
    }
    refused(
        &site,
        s(),
        &["--shards", "2", "--partition", "a#b"],
        "--partition",
    );
    refused(&site, s(), &["--shards", "2", "--time", ""], "is empty");
    refused(
        &site,
        site.slurm_without_sbatch(),
        &["--shards", "2"],
        "`sbatch` is not on PATH",
    );
    refused(&site, s(), &["--shards", "2", "--profile", "nope"], "nope");
    assert!(
        !site.store().exists(),
        "a refused submission created the store"
    );

    // A store that cannot be a directory.
    let file = common::write(site.path(), "a-file", "x");
    let c = site.slurm_in(&file);
    refused(&site, c, &["--shards", "2"], "is not a directory");
    let c = site.slurm_in(&file.join("store"));
    refused(
        &site,
        c,
        &["--shards", "2"],
        "cannot create the store directory",
    );
    let hash = site.path().join("st#ore");
    refused(
        &site,
        site.slurm_in(&hash),
        &["--shards", "2"],
        "cannot carry reliably",
    );
    assert!(!hash.exists(), "a store sbatch cannot name was created");
    // A results directory that is not dplab's to replace.
    common::write(site.path(), "results/onslurm/notes.txt", "mine");
    refused(&site, s(), &["--shards", "2"], "onslurm");

    // An invalid pipeline names its file; nothing is written.
    let bad = common::write(
        site.path(),
        "bad/b.yaml",
        &pipeline().replace("seed: 5", "sed: 5"),
    );
    let other = Site::new();
    let mut c = other.slurm();
    c.arg(&bad);
    refused(&other, c, &["--shards", "2"], "b.yaml");
    assert!(!other.store().exists());
}

#[test]
fn submits_the_array_then_the_merge_after_it_and_says_how_to_watch() {
    let site = Site::new();
    let o = site
        .slurm()
        .args(["--shards", "3", "--profile", "ci"])
        .env("FAKE_SLURM_CLUSTER", "cluster1")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let dir = site.run_dir();
    let q = |p: &Path| {
        // Paths as the fake's `printf %q` writes them (no special characters here).
        p.to_str().unwrap().to_string()
    };
    assert_eq!(
        site.calls(),
        [
            format!("sbatch --parsable {}", q(&dir.join("shards.sbatch"))),
            format!(
                "sbatch --parsable --dependency=afterok:1001 --kill-on-invalid-dep=yes {}",
                q(&dir.join("merge.sbatch"))
            ),
        ]
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    for s in [
        "array job 1001 (3 shard task(s))",
        "merge job 1002",
        "squeue -j 1001,1002",
        &format!("logs:    {}", dir.join("logs").display()),
    ] {
        assert!(stdout.contains(s), "no `{s}` in {stdout}");
    }
    assert_eq!(
        fs::read_to_string(dir.join("jobs")).unwrap(),
        "array 1001\nmerge 1002\n"
    );
    // The fake ran the jobs: their logs are where the scripts said.
    for log in ["shard-1001_0.out", "shard-1001_2.out", "merge-1002.out"] {
        assert!(dir.join("logs").join(log).is_file(), "{log}");
    }
}

#[test]
fn sbatch_refusals_say_what_was_and_was_not_submitted() {
    let site = Site::new();
    let o = site
        .slurm()
        .args(["--shards", "2"])
        .env("FAKE_SLURM_REFUSE", "array")
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    insta::assert_snapshot!(
        "the_array_refused",
        common::stable(&String::from_utf8_lossy(&o.stderr), site.path())
    );
    assert_eq!(site.calls().len(), 1);

    let site = Site::new();
    let o = site
        .slurm()
        .args(["--shards", "2"])
        .env("FAKE_SLURM_REFUSE", "merge")
        .output()
        .unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    // The run's directory is named by the time it was made.
    let err =
        String::from_utf8_lossy(&o.stderr).replace(&*site.run_dir().to_string_lossy(), "[RUN]");
    insta::assert_snapshot!("the_merge_refused", common::stable(&err, site.path()));
}

#[test]
fn wait_follows_the_queue_and_the_results_equal_a_local_run() {
    let site = Site::new();
    let o = site
        .slurm()
        .args([
            "--shards",
            "3",
            "--profile",
            "ci",
            "--wait",
            "--poll",
            "0.1",
        ])
        .env("FAKE_SLURM_BUSY", "2")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let looks: Vec<String> = site
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("squeue"))
        .collect();
    assert!(looks.len() >= 3, "{looks:?}");
    assert!(looks[0].contains("--jobs=1001\\,1002"), "{looks:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("shards: 3 running; merge: pending (Dependency)"),
        "{err}"
    );
    assert!(
        err.contains("shards: 3 completed; merge: completed"),
        "{err}"
    );

    let local = site.local("local", &["--profile", "ci"]);
    identical(&site.path().join("results"), &local);
    // The merge computed only what gathers; the shards computed the rest.
    let counts = manifest_counts(&site.path().join("results/onslurm"));
    let run: Vec<(&str, u64)> = counts.iter().map(|(s, r, _)| (s.as_str(), *r)).collect();
    assert_eq!(
        run,
        [("counts", 0), ("noisy", 0), ("summary", 3), ("figure", 1)]
    );
}

#[test]
fn a_cancelled_shard_fails_the_wait_and_the_same_command_runs_only_what_is_missing() {
    let site = Site::new();
    let args = ["--shards", "3", "--wait", "--poll", "0.1"];
    let o = site
        .slurm()
        .args(args)
        .env("FAKE_SLURM_CANCEL", "1")
        .output()
        .unwrap();
    assert_eq!(code(&o), 3, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 of 3 shard(s) did not succeed"), "{err}");
    assert!(err.contains("shard 1: CANCELLED"), "{err}");
    assert!(err.contains("submit the same command again"), "{err}");
    assert!(!site.path().join("results").exists(), "the merge ran");

    std::thread::sleep(std::time::Duration::from_millis(1100));
    let o = site.slurm().args(args).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let dirs = site.run_dirs();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let log =
        |i: usize| fs::read_to_string(dirs[1].join(format!("logs/shard-1003_{i}.out"))).unwrap();
    for i in [0, 2] {
        assert!(
            log(i).contains("computed 0 "),
            "shard {i} ran again:\n{}",
            log(i)
        );
    }
    assert!(log(1).contains("(0 already stored)"), "{}", log(1));
    assert!(!log(1).contains("computed 0 "), "{}", log(1));
    identical(&site.path().join("results"), &site.local("local", &[]));
}

#[test]
fn a_failed_merge_is_told_apart_from_failed_shards() {
    let site = Site::new();
    let o = site.wait_two(&[("FAKE_SLURM_MERGE_FAIL", "1")]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("every shard succeeded, but the merge job 1002 ended NODE_FAIL"),
        "{err}"
    );
}

#[test]
fn jobs_the_controller_forgot_are_judged_by_their_recorded_exit_codes() {
    let site = Site::new();
    let o = site.wait_two(&[("FAKE_SLURM_FORGET", "1")]);
    assert_eq!(code(&o), 0, "{}", text(&o));

    let site = Site::new();
    let o = site.wait_two(&[("FAKE_SLURM_FORGET", "1"), ("FAKE_SLURM_CANCEL", "0")]);
    assert_eq!(code(&o), 3, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("shard 0: no record: it did not finish"),
        "{err}"
    );
}

#[test]
fn wait_gives_up_when_squeue_keeps_failing_and_the_jobs_go_on() {
    let site = Site::new();
    let o = site.wait_two(&[("FAKE_SLURM_DOWN", "1")]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Unable to contact slurm controller"), "{err}");
    assert!(err.contains("the jobs go on: squeue -j 1001,1002"), "{err}");
    let looks = site
        .calls()
        .iter()
        .filter(|c| c.starts_with("squeue"))
        .count();
    assert_eq!(looks, 5);
}
