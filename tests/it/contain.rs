//! What a program run by dplab cannot do, through the whole command line (issue: "Contain
//! every program, keep every finished result"): leave anything running after its instance
//! or after dplab (a daemon in a new session, a new process group, a double fork, a `kill -9`
//! of dplab), run a file outside the pipeline's `code:` or `PATH`, take an axis value as
//! code, make a finished instance wait unstored behind a slow one, leave its directory
//! behind, or leave results a later run would trust after `--verify` caught it.
//!
//! Processes are named by their ids as this test sees them: a program runs in a PID namespace
//! of its own, so its scripts read their id from `/proc/self/stat` (the system's `/proc`),
//! not from `$$`.

use crate::common::{dplab, manifest_counts, text, write};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The containments this machine can test: each is forced with `DPLAB_CONTAIN`. The PID
/// namespace made directly needs root; the user namespace needs a kernel that allows it
/// (every machine of this project does: it is what dplab uses when not root).
fn modes() -> Vec<&'static str> {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut m = vec!["group"];
    // util-linux's `unshare` says whether this kernel (or sandbox) allows the user namespace.
    let user = Command::new("unshare")
        .args(["--user", "--pid", "--fork", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if user {
        m.push("user");
    } else {
        eprintln!("no user namespace on this machine: its containment is not tested");
    }
    if root {
        m.push("pid");
    }
    m
}

/// Whether process `pid` has ended (gone, or a zombie: it runs no more).
fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().unwrap().trim_start().starts_with('Z'))
        .unwrap_or(true)
}

/// Waits until every process in `pids` has ended, failing after `limit`.
fn all_gone(pids: &[i32], limit: Duration, what: &str) {
    let t0 = Instant::now();
    while !pids.iter().all(|&p| gone(p)) {
        assert!(
            t0.elapsed() < limit,
            "{what}: still running: {:?}",
            pids.iter().filter(|&&p| !gone(p)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The ids the programs wrote into `file` (one or more per line), once there are `n`.
fn wait_for_pids(file: &Path, n: usize, child: &mut Child) -> Vec<i32> {
    let t0 = Instant::now();
    loop {
        let s = std::fs::read_to_string(file).unwrap_or_default();
        let pids: Vec<i32> = s
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("dplab ended before its programs started: {status:?}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never started: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A pipeline of one external stage running `code/prog.sh` (whose body is `body`) once per
/// value of `x`.
fn one_stage(dir: &Path, body: &str, xs: &str) -> PathBuf {
    write(
        dir,
        "code/prog.sh",
        &format!(
            "#!/bin/sh\nhostpid() {{ read -r p _ < /proc/self/stat; echo \"$p\"; }}\nx=$(sed -n 's/^ *\"x\": *\\([0-9]*\\).*/\\1/p' \"$DPLAB_JSON\" | head -n 1)\n{body}\n"
        ),
    );
    write(
        dir,
        "p.yaml",
        &format!(
            r#"name: contain
title: T
source: {{paper: p, item: i}}
description: d
seed: 1
axes:
  x: {xs}
stages:
  ext:
    kind: external
    with:
      command: [sh, code/prog.sh]
      code: [code]
      params: {{x: $x}}
"#
        ),
    )
}

/// `dplab run` of `p` in the background, with the containment `mode` forced (or dplab's
/// own choice), its programs' directories in [`tmp`].
fn spawn_run(dir: &Path, p: &Path, mode: Option<&str>, jobs: &str) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dplab"));
    c.args(["run", "-q", "--allow-exec", "--jobs", jobs, "--out"])
        .arg(dir.join("out"))
        .arg("--store")
        .arg(dir.join("store"))
        .arg(p)
        .env("TMPDIR", tmp(dir))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(m) = mode {
        c.env("DPLAB_CONTAIN", m);
    }
    c.spawn().unwrap()
}

/// The temporary directory dplab gets in these tests (its programs' directories go there).
fn tmp(dir: &Path) -> PathBuf {
    let t = dir.join("tmp");
    std::fs::create_dir_all(&t).unwrap();
    t
}

/// Programs that leave their process group on purpose — a daemon in a session of its own
/// (`setsid`), a process in a new group (`setpgid`), a double fork — end with their instance,
/// whatever the containment: dplab exits 0 and none of them runs on.
#[test]
fn a_program_s_daemons_end_with_its_instance() {
    for mode in modes() {
        let d = tempfile::tempdir().unwrap();
        let pids = d.path().join("pids");
        let body = format!(
            "setsid sh -c 'read -r p _ < /proc/self/stat; echo $p >> {0}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
             python3 -c 'import os; os.setpgid(0, 0); open(\"{0}\", \"a\").write(open(\"/proc/self/stat\").read().split()[0] + \"\\n\"); os.execvp(\"sleep\", [\"sleep\", \"300\"])' &\n\
             ( ( read -r p _ < /proc/self/stat; echo $p >> {0}; exec sleep 300 ) & ) &\n\
             touch {0}; while [ \"$(wc -l < {0})\" -lt $((3 * x)) ]; do sleep 0.01; done\n\
             printf 'y\\n%s\\n' \"$x\" > output/out.csv",
            pids.display()
        );
        let p = one_stage(d.path(), &body, "[1, 2]");
        let mut child = spawn_run(d.path(), &p, Some(mode), "1");
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{mode}: {err}");
        let listed: Vec<i32> = std::fs::read_to_string(&pids)
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(listed.len(), 6, "{mode}: three escapees per instance");
        all_gone(&listed, Duration::from_secs(5), mode);
        if mode == "group" {
            assert!(
                err.contains("only the weakest containment is available"),
                "{mode}: says so once: {err}"
            );
        }
    }
}

/// A `kill -9` of dplab ends every process its programs started — children, grandchildren,
/// a daemon in a session of its own — with the PID namespace (the containment dplab uses
/// wherever the kernel allows one; the fallback says that it cannot).
#[test]
fn kill_9_of_dplab_ends_every_process_its_programs_started() {
    for mode in modes().into_iter().filter(|&m| m != "group") {
        let d = tempfile::tempdir().unwrap();
        let pids = d.path().join("pids");
        let body = format!(
            "hostpid >> {0}\n\
             sh -c 'read -r p _ < /proc/self/stat; echo $p >> {0}; sh -c \"read -r q _ < /proc/self/stat; echo \\$q >> {0}; exec sleep 300\"' &\n\
             setsid sh -c 'read -r p _ < /proc/self/stat; echo $p >> {0}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
             wait",
            pids.display()
        );
        let p = one_stage(d.path(), &body, "[1, 2]");
        let mut child = spawn_run(d.path(), &p, Some(mode), "2");
        let listed = wait_for_pids(&pids, 8, &mut child);
        child.kill().unwrap();
        child.wait().unwrap();
        all_gone(&listed, Duration::from_secs(5), mode);
    }
}

/// `command[0]` is a bare name found on `PATH` (its absolute entries) or a file inside
/// `code:`; anything else — `..`, a path through `code/..`, an absolute path, a file outside
/// `code:`, a name found only through a relative `PATH` entry — is refused by `validate`
/// (exit 2, at its line and column), and so by `run`, which starts nothing. What is listed
/// for consent says what runs.
#[test]
fn a_program_path_outside_code_or_path_is_refused_before_anything_runs() {
    let d = tempfile::tempdir().unwrap();
    let planted = tmp(d.path()).join("x.sh");
    write(&tmp(d.path()), "x.sh", "#!/bin/sh\ntouch ran\n");
    chmod_x(&planted);
    write(&tmp(d.path()), "evil", "#!/bin/sh\ntouch ran\n");
    chmod_x(&tmp(d.path()).join("evil"));
    write(
        d.path(),
        "code/run.sh",
        "#!/bin/sh\nprintf 'a\\n1\\n' > output/out.csv\n",
    );
    write(d.path(), "other.sh", "#!/bin/sh\ntouch ran\n");
    let pipeline = |command: &str| {
        write(
            d.path(),
            "p.yaml",
            &format!(
                "name: paths\ntitle: T\nsource: {{paper: p, item: i}}\ndescription: d\nseed: 1\nstages:\n  ext:\n    kind: external\n    with:\n      command: {command}\n      code: [code]\n"
            ),
        )
    };
    for (command, says) in [
        ("[../x.sh]", "a path that leaves the pipeline's directory"),
        (
            "[./code/../../x.sh]",
            "a path that leaves the pipeline's directory",
        ),
        ("[/bin/sh]", "an absolute path"),
        ("[other.sh]", "other.sh: no such program on PATH"),
        ("[./other.sh]", "not inside `code:`"),
        ("[code/missing.sh]", "no such file among the `code:` files"),
        ("[evil]", "evil: no such program on PATH"),
        ("[..]", "not a program"),
    ] {
        let p = pipeline(command);
        // A relative PATH entry leads to the shared temporary directory's `evil`.
        let path = format!("..:{}", std::env::var("PATH").unwrap());
        let o = dplab()
            .arg("validate")
            .arg(&p)
            .env("PATH", &path)
            .output()
            .unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{command}: {t}");
        assert!(
            t.contains(says) && t.contains("p.yaml:10:"),
            "{command}: {t}"
        );
        let o = dplab()
            .args(["run", "--allow-exec", "--out"])
            .arg(d.path().join("out"))
            .arg(&p)
            .env("PATH", &path)
            .env("TMPDIR", tmp(d.path()))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{command}: {}", text(&o));
    }
    assert!(
        !d.path().join("ran").exists() && !tmp(d.path()).join("ran").exists(),
        "nothing ran"
    );
    // A file of `code:` runs (made executable in the instance's directory), and the
    // listing says what each first word is.
    let p = pipeline("[./code/run.sh]");
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(
            "./code/run.sh  [./code/run.sh is the pipeline's file, copied from `code:` as hashed]"
        ),
        "{}",
        text(&o)
    );
    let o = dplab()
        .args(["run", "--allow-exec", "--out"])
        .arg(d.path().join("out"))
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let p = pipeline("[sh, code/run.sh]");
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    let sh = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("sh"))
        .find(|p| p.is_file())
        .unwrap();
    assert!(
        text(&o).contains(&format!("sh code/run.sh  [sh is {}]", sh.display())),
        "{}",
        text(&o)
    );
}

fn chmod_x(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// An axis value never reaches a command line (`[sh, -c, $v]` would run it as a script), in
/// `command:` or `probe:`: refused at its line and column, before anything runs.
#[test]
fn an_axis_value_never_reaches_a_command_line() {
    let d = tempfile::tempdir().unwrap();
    for (with, at) in [
        ("{command: [sh, -c, $v]}", "p.yaml:12:"),
        ("{command: [sh], probe: [sh, $v]}", "p.yaml:12:"),
    ] {
        let p = write(
            d.path(),
            "p.yaml",
            &format!(
                "name: refs\ntitle: T\nsource: {{paper: p, item: i}}\ndescription: d\nseed: 1\naxes:\n  v: ['touch pwned']\nstages:\n  ext:\n    kind: external\n    with:\n      {with}\n"
            ),
        );
        let o = dplab().arg("validate").arg(&p).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(
            t.contains(at) && t.contains("`$v` in `") && t.contains("may not reach a command line"),
            "{with}: {t}"
        );
    }
}

/// Each instance is stored the moment it finishes, whatever the others are doing: with one
/// worker, a quick instance ahead of a slow one is in the store while the slow one runs, so
/// an interrupt — Ctrl-C, SIGTERM, SIGHUP or `kill -9` — loses only the one still running.
/// (Before, the quick instance waited, finished but unstored, until the slow one — which its
/// worker had taken up while it waited in polars' pool — ended.)
#[test]
fn a_finished_instance_is_stored_while_a_slow_one_runs() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGKILL] {
        let d = tempfile::tempdir().unwrap();
        let started = d.path().join("slow-started");
        let body = format!(
            "if [ \"$x\" = 30 ]; then touch {0}; sleep 30; fi\nprintf 'y\\n%s\\n' \"$x\" > output/out.csv",
            started.display()
        );
        let p = one_stage(d.path(), &body, "[0, 30]");
        let mut child = spawn_run(d.path(), &p, None, "1");
        wait_for(&started, &mut child);
        // SAFETY: signalling the dplab this test started.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(signal), "{status:?}");
        let o = dplab()
            .args(["run", "--dry-run", "--allow-exec", "--store"])
            .arg(d.path().join("store"))
            .arg(&p)
            .output()
            .unwrap();
        assert!(
            text(&o).contains("1 to run,       1 in the store"),
            "signal {signal}: {}",
            text(&o)
        );
        // The interrupted run's working directories are gone (the program's one with it),
        // or, after `kill -9`, removed by the next run as it starts a program.
        let left = || -> Vec<String> {
            std::fs::read_dir(tmp(d.path()))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("dplab-external-"))
                .collect()
        };
        if signal == libc::SIGKILL {
            let killed = left();
            assert_eq!(killed.len(), 1, "what kill -9 left");
            std::fs::remove_file(&started).unwrap();
            let mut again = spawn_run(d.path(), &p, None, "1");
            wait_for(&started, &mut again);
            let now = left();
            assert!(
                now.len() == 1 && now != killed,
                "the next run removed {killed:?}: {now:?}"
            );
            // SAFETY: signalling the dplab this test started.
            unsafe { libc::kill(again.id() as i32, libc::SIGINT) };
            again.wait().unwrap();
        }
        assert!(left().is_empty(), "signal {signal}: left {:?}", left());
    }
}

/// Waits until `file` exists, while `child` runs.
fn wait_for(file: &Path, child: &mut Child) {
    let t0 = Instant::now();
    while !file.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "never started");
        assert!(child.try_wait().unwrap().is_none(), "dplab ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// After `--verify` finds a stage's program not deterministic, nothing it stored of that
/// stage (nor what was computed from it) is left for a later run to take: the next plain
/// run computes every instance again.
#[test]
fn a_failed_verification_leaves_nothing_a_later_run_would_take() {
    let d = tempfile::tempdir().unwrap();
    let body = "printf 'y,r\\n%s,%s\\n' \"$x\" \"$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')\" > output/out.csv";
    let p = one_stage(d.path(), body, "[1, 2, 3, 4]");
    std::fs::write(
        &p,
        std::fs::read_to_string(&p).unwrap() + "  all:\n    kind: frame.stack\n    input: [ext]\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        dplab()
            .args(["run", "-q", "--allow-exec", "--jobs", "2", "--out"])
            .arg(d.path().join("out"))
            .arg("--store")
            .arg(d.path().join("store"))
            .args(extra)
            .arg(&p)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", text(&o));
    // Every instance stored; one computed again differs: the stage's entries all go.
    let o = run(&["--verify", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("not deterministic") && text(&o).contains("were removed from the store"),
        "{}",
        text(&o)
    );
    let o = run(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        manifest_counts(&d.path().join("out/contain")),
        [("ext".to_string(), 4, 0), ("all".to_string(), 4, 0)],
        "everything computed again"
    );
    // A first run that verifies: what it found not deterministic was never stored.
    let d2 = tempfile::tempdir().unwrap();
    let store = d2.path().join("store");
    let o = dplab()
        .args(["run", "-q", "--allow-exec", "--verify", "4", "--out"])
        .arg(d2.path().join("out"))
        .arg("--store")
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = dplab()
        .args(["run", "--dry-run", "--allow-exec", "--store"])
        .arg(&store)
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        text(&o).contains("4 to run,       0 in the store"),
        "{}",
        text(&o)
    );
}
