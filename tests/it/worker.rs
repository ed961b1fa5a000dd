//! Worker mode of the `external` kind (`worker: true`, worker protocol 1): a program that
//! serves instances one after another gives the bytes it gives one instance per process,
//! starts at most once per dplab thread, fails only the instance that failed (an exception,
//! an exit, a timeout: the next one gets a new worker), leaves no process behind, and a
//! program that keeps state across instances is caught by `--verify`.

use crate::common::{dplab, text, write};

use std::path::Path;

/// A pipeline of `n` instances (axis `x` = 1..n) of `code/prog.py`, in worker mode or not.
/// The program is `body`, a Python function `compute(job)` body's lines, served with
/// `serve`; each process that starts appends its pid to `starts.txt` beside the pipeline.
fn pipeline(dir: &Path, n: usize, worker: bool, body: &str, timeout: f64) -> std::path::PathBuf {
    let starts = dir.join("starts.txt");
    write(
        dir,
        "code/prog.py",
        &format!(
            "import os\nfrom dplab_external import serve\nwith open({starts:?}, 'a') as f:\n    f.write(str(os.getpid()) + '\\n')\nstate = {{'served': 0}}\n\ndef compute(job):\n    x = job.params['x']\n    state['served'] += 1\n{body}\n\nserve(compute)\n",
            starts = starts.display().to_string(),
            body = body
                .lines()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    );
    write(
        dir,
        "p.yaml",
        &format!(
            r#"name: w
title: T
description: d
seed: 3
axes:
  x: {{from: 1, to: {n}, step: 1}}
stages:
  ext:
    kind: external
    with:
      command: [python3, code/prog.py]
      code: [code]
      params: {{x: $x}}
      columns: [x2, u]
      worker: {worker}
      timeout: {timeout}
"#
        ),
    )
}

/// The usual body: a draw from the instance's generator, and x².
const PURE: &str = "job.write({'x2': [x * x], 'u': [job.random.random()]})";

fn run(p: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    dplab()
        .args(["run", "-q", "--allow-exec", "--no-store", "--out"])
        .arg(out)
        .arg(p)
        .args(extra)
        .output()
        .unwrap()
}

fn starts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("starts.txt"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// The same bytes in worker mode as one process per instance, for any `--jobs`, from at most
/// one worker per thread.
#[test]
fn a_worker_gives_the_bytes_of_one_process_per_instance() {
    let d = tempfile::tempdir().unwrap();
    let plain = pipeline(d.path(), 12, false, PURE, 60.0);
    let o = run(&plain, &d.path().join("plain"), &["--jobs", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(starts(d.path()), 12, "one process per instance");
    let want = std::fs::read(d.path().join("plain/w/ext.csv")).unwrap();
    for jobs in ["1", "2"] {
        std::fs::remove_file(d.path().join("starts.txt")).unwrap();
        let p = pipeline(d.path(), 12, true, PURE, 60.0);
        let out = d.path().join(format!("worker{jobs}"));
        let o = run(&p, &out, &["--jobs", jobs]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read(out.join("w/ext.csv")).unwrap(),
            want,
            "--jobs {jobs}"
        );
        let n = starts(d.path());
        assert!(
            (1..=jobs.parse().unwrap()).contains(&n),
            "{n} workers for --jobs {jobs}"
        );
    }
}

/// An exception fails its instance, which says why; the worker serves the others. An exit
/// fails the instance it was serving, and the next one gets a new worker.
#[test]
fn a_failure_in_a_worker_fails_only_its_instance() {
    let d = tempfile::tempdir().unwrap();
    let body = "if x == 3:\n    raise ValueError('no third')\nif x == 5:\n    os._exit(7)\njob.write({'x2': [x * x], 'u': [0.5]})";
    let p = pipeline(d.path(), 8, true, body, 60.0);
    let out = d.path().join("out");
    let o = run(&p, &out, &["--jobs", "1", "--max-failures", "all"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("ValueError: no third"), "{t}");
    assert!(t.contains("exited (exit status 7) before answering"), "{t}");
    assert!(
        t.contains("2 instance(s) failed") || t.contains("x=3") && t.contains("x=5"),
        "{t}"
    );
    // The worker that exited was replaced once.
    assert_eq!(starts(d.path()), 2, "{t}");
    let csv = std::fs::read_to_string(out.join("w/ext.csv")).unwrap_or_default();
    assert!(
        csv.is_empty(),
        "a stage with failed instances writes no frame: {csv}"
    );
}

/// The timeout is per instance: the instance that overruns it fails, its worker is killed,
/// and the others are served by a new one.
#[test]
fn a_worker_that_overruns_its_timeout_is_replaced() {
    let d = tempfile::tempdir().unwrap();
    let body =
        "if x == 2:\n    import time\n    time.sleep(30)\njob.write({'x2': [x * x], 'u': [0.5]})";
    let p = pipeline(d.path(), 4, true, body, 1.0);
    let t0 = std::time::Instant::now();
    let o = run(&p, &d.path().join("out"), &["--jobs", "1"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("timed out after 1 s"), "{t}");
    assert!(t.contains("x=2"), "{t}");
    assert_eq!(starts(d.path()), 2, "{t}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(20), "{t}");
}

/// A daemon a worker starts in a session of its own ends with the worker: nothing is left
/// once dplab is done.
#[test]
fn nothing_a_worker_starts_outlives_the_run() {
    let d = tempfile::tempdir().unwrap();
    let pids = d.path().join("daemons.txt");
    let body = format!(
        "import subprocess\np = subprocess.Popen(['setsid', 'sleep', '297.31'], start_new_session=True)\nwith open({:?}, 'a') as f:\n    f.write(str(p.pid) + '\\n')\njob.write({{'x2': [x * x], 'u': [0.5]}})",
        pids.display().to_string()
    );
    let p = pipeline(d.path(), 4, true, &body, 60.0);
    let o = run(&p, &d.path().join("out"), &["--jobs", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    let pids = std::fs::read_to_string(&pids).unwrap();
    assert_eq!(pids.lines().count(), 4, "{pids}");
    // A PID namespace's pids are its own: the `sleep 297.31`s are found by their command line
    // (as this test's own process sees them: `/proc` of the machine); a duration no other test
    // sleeps, since tests running beside this one start `sleep 300`s of their own.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x00297.31\x00")
        })
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

/// The shipped example of a worker that keeps state across instances
/// (`src/program/examples/stateful.py`) gives other bytes in a worker than alone;
/// `--verify` computes instances again in a fresh worker and catches it.
#[test]
fn verify_catches_a_worker_that_keeps_state() {
    let d = tempfile::tempdir().unwrap();
    pipeline(d.path(), 6, true, PURE, 60.0);
    write(
        d.path(),
        "code/prog.py",
        include_str!("../../src/program/examples/stateful.py"),
    );
    let p = d.path().join("p.yaml");
    let o = run(&p, &d.path().join("out"), &["--jobs", "1"]);
    assert!(o.status.success(), "unseen without --verify: {}", text(&o));
    let o = run(&p, &d.path().join("out"), &["--jobs", "1", "--verify", "6"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("--verify: computed again, it differs"), "{t}");
    // Without state, --verify passes.
    let p = pipeline(d.path(), 6, true, PURE, 60.0);
    let o = run(
        &p,
        &d.path().join("out2"),
        &["--jobs", "1", "--verify", "6"],
    );
    assert!(o.status.success(), "{}", text(&o));
}
