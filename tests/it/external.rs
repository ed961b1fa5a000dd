//! External stages through the whole command line: consent, keys on the code's content,
//! failures that lose nothing, and the same bytes for any `--jobs` and any number of shards.
//! (The runner's own hostile-program list is tested beside it, in `src/program/`.)

use crate::common::{dplab, manifest_counts, text, write};

use std::path::Path;

/// A pipeline whose stage `ext` runs `prog.sh` once per value of `x`: the program appends a
/// line to `ran.txt` beside the pipeline (so a test counts the programs started) and writes
/// its seed's low half and `x` (failing with exit 3 when `x` is `fail_at`).
fn pipeline(dir: &Path, fail_at: i64) -> std::path::PathBuf {
    write(
        dir,
        "code/prog.sh",
        &format!(
            r#"#!/bin/sh
set -eu
v() {{ sed -n "s/^ *\"$1\": *\"\{{0,1\}}\([^\",]*\)\"\{{0,1\}},\{{0,1\}}\$/\1/p" "$DPLAB_JSON" | head -n 1; }}
x=$(v x)
echo "$x" >> {ran}
if [ "$x" = "{fail_at}" ]; then echo "no good at $x" >&2; exit 3; fi
printf 'x,lo,note\n%s,seed-%s,%s\n' "$x" "$(v lo)" "$(v note)" > output/out.csv
"#,
            ran = dir.join("ran.txt").display()
        ),
    );
    write(
        dir,
        "p.yaml",
        r#"name: ext
title: T
source: {paper: p, item: i}
description: d
seed: 7
axes:
  x: [1, 2, 3, 4]
stages:
  ext:
    kind: external
    with:
      command: [sh, code/prog.sh]
      code: [code]
      params: {x: $x, note: "$(touch pwned); reboot"}
      columns: [x, lo, note]
  all:
    kind: frame.stack
    input: [ext]
"#,
    )
}

fn started(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("ran.txt"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Without consent nothing runs: exit 2 with every command listed; `validate` and
/// `--dry-run` list the commands and start nothing; `--allow-exec` and `DPLAB_ALLOW_EXEC=1`
/// run them; a value that looks like shell arrives as text.
#[test]
fn a_pipeline_that_runs_programs_runs_only_with_consent() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), -1);
    let out = d.path().join("out");
    let store = d.path().join("store");
    let run = |extra: &[&str], env: Option<&str>| {
        let mut c = dplab();
        c.arg("run")
            .arg(&p)
            .arg("--out")
            .arg(&out)
            .arg("--store")
            .arg(&store);
        c.args(extra);
        if let Some(v) = env {
            c.env("DPLAB_ALLOW_EXEC", v);
        } else {
            c.env_remove("DPLAB_ALLOW_EXEC");
        }
        c.output().unwrap()
    };
    let o = run(&[], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("ext: stage `ext`: sh code/prog.sh") && text(&o).contains("--allow-exec"),
        "{}",
        text(&o)
    );
    assert_eq!(started(d.path()), 0);
    assert!(!out.exists());
    // Any other value of the variable is not consent.
    let o = run(&[], Some("yes"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for args in [vec!["validate"], vec!["run", "--dry-run"]] {
        let o = dplab()
            .args(&args)
            .arg(&p)
            .env_remove("DPLAB_ALLOW_EXEC")
            .args(if args[0] == "run" {
                vec!["--out", "o"]
            } else {
                vec![]
            })
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("runs (with --allow-exec): ext: stage `ext`: sh code/prog.sh"),
            "{args:?}: {}",
            text(&o)
        );
    }
    assert_eq!(started(d.path()), 0);
    let o = run(&["--allow-exec"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 4);
    let frame = std::fs::read_to_string(out.join("ext/all.csv")).unwrap();
    assert!(frame.contains("$(touch pwned); reboot"), "{frame}");
    assert!(!d.path().join("pwned").exists() && !out.join("ext/pwned").exists());
    let o = run(&["--force"], Some("1"));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 8);
}

/// The store key covers the code's content: touching a file reruns nothing, editing one
/// reruns exactly the instances that run it (and `--dry-run` says why), and a program that
/// fails for one instance fails the run (exit 1, its stderr in the message) while the others
/// are stored, so the next run starts only the failed one.
#[test]
fn the_code_is_keyed_by_content_and_a_failure_loses_only_its_instance() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 3);
    let out = d.path().join("out");
    let store = d.path().join("store");
    let run = || {
        dplab()
            .arg("run")
            .arg(&p)
            .arg("--out")
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .arg("--allow-exec")
            .output()
            .unwrap()
    };
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("no good at 3") && text(&o).contains("exit"),
        "{}",
        text(&o)
    );
    assert_eq!(started(d.path()), 4);
    // The program fixed: only the failed instance runs again.
    let prog = d.path().join("code/prog.sh");
    let fixed = std::fs::read_to_string(&prog)
        .unwrap()
        .replace("= \"3\"", "= \"-1\"");
    std::fs::write(&prog, &fixed).unwrap();
    // An edit changes every instance's key: all four run. (The first edit is the fix.)
    let o = run();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 8);
    // Touched, the same bytes: nothing runs.
    std::fs::write(&prog, &fixed).unwrap();
    let o = run();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 8);
    assert_eq!(
        manifest_counts(&out.join("ext"))
            .into_iter()
            .find(|(s, _, _)| s == "ext")
            .unwrap(),
        ("ext".to_string(), 0, 4)
    );
    // A new file in the code folder is an edit of the code.
    write(d.path(), "code/lib/helper.sh", "# nothing yet\n");
    let o = dplab()
        .args(["run", "--dry-run"])
        .arg(&p)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(" 4 to run") && text(&o).contains("file `code/lib/helper.sh` changed"),
        "{}",
        text(&o)
    );
    let o = run();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 12);

    // A failure of one instance, the others stored: the next run starts only it.
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), 2);
    let run = |store: &Path| {
        dplab()
            .arg("run")
            .arg(&p)
            .arg("--out")
            .arg(d.path().join("out"))
            .arg("--store")
            .arg(store)
            .arg("--allow-exec")
            .output()
            .unwrap()
    };
    let store = d.path().join("store");
    assert_eq!(run(&store).status.code(), Some(1));
    assert_eq!(started(d.path()), 4);
    assert_eq!(run(&store).status.code(), Some(1));
    assert_eq!(
        started(d.path()),
        5,
        "only the failed instance starts again"
    );
}

/// The shipped example gives the same bytes for `--jobs 1`, `--jobs 2` and 3 shards plus a
/// merge: every frame of its results directory.
#[test]
fn the_example_gives_the_same_bytes_for_any_jobs_and_shards() {
    let d = tempfile::tempdir().unwrap();
    let pipe =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/examples/ex-permute-and-flip.yaml");
    let run = |out: &str, store: &str, extra: &[&str]| {
        let o = dplab()
            .arg("run")
            .arg(&pipe)
            .args(["--profile", "ci", "--allow-exec", "--out"])
            .arg(d.path().join(out))
            .arg("--store")
            .arg(d.path().join(store))
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{extra:?}: {}", text(&o));
    };
    run("j1", "s1", &["--jobs", "1"]);
    run("j2", "s2", &["--jobs", "2"]);
    for i in 0..3 {
        run(
            "unused",
            "s3",
            &["--jobs", "1", "--shard", &format!("{i}/3")],
        );
    }
    run("sh", "s3", &["--jobs", "2"]);
    let frames = |dir: &str| -> Vec<(String, Vec<u8>)> {
        let root = d.path().join(dir).join("ex-permute-and-flip");
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "csv" || x == "parquet"))
            .filter(|p| p.file_name().is_some_and(|n| n != "instances.parquet"))
            .map(|p| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let one = frames("j1");
    assert!(one.iter().any(|(n, _)| n == "permute_and_flip.csv"));
    assert!(
        one.len() >= 10,
        "{:?}",
        one.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for other in ["j2", "sh"] {
        let f = frames(other);
        assert_eq!(
            one.iter().map(|x| &x.0).collect::<Vec<_>>(),
            f.iter().map(|x| &x.0).collect::<Vec<_>>()
        );
        for ((name, a), (_, b)) in one.iter().zip(&f) {
            assert!(a == b, "{other}: {name} differs from --jobs 1");
        }
    }
}

/// Permute-and-flip's error probability with two candidates is ½e^(−εc/2): each Monte-Carlo
/// frequency of the shipped example (Python and sh/awk) lies within its 99.9% interval.
#[test]
fn the_example_permute_and_flip_has_its_known_error_probability() {
    let d = tempfile::tempdir().unwrap();
    let pipe =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/examples/ex-permute-and-flip.yaml");
    let o = dplab()
        .arg("run")
        .arg(&pipe)
        .args(["--profile", "ci", "--allow-exec", "--out"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let csv = std::fs::read_to_string(d.path().join("ex-permute-and-flip/errors.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let mut checked = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if !f[col("source")].starts_with("permute-and-flip") {
            continue;
        }
        let (eps, c): (f64, f64) = (f[col("eps")].parse().unwrap(), f[col("c")].parse().unwrap());
        let want = 0.5 * (-eps * c / 2.0).exp();
        let (lo, hi): (f64, f64) = (
            f[col("pr_ci_lo")].parse().unwrap(),
            f[col("pr_ci_hi")].parse().unwrap(),
        );
        assert!(lo <= want && want <= hi, "{l}: ½e^(−εc/2) = {want}");
        if f[col("source")].contains("Python") {
            let exact: f64 = f[col("pr_exact")].parse().unwrap();
            assert!(
                (exact - want).abs() <= 1e-12 * want,
                "{l}: exact {exact} vs {want}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 16, "two programs × 8 (ε, c) of the ci profile");
}

/// Ctrl-C (SIGINT), SIGTERM or SIGHUP of `dplab run` ends every program it started, with the
/// programs' own children: they run in process groups of their own, which the terminal's
/// signal does not reach. dplab still dies of the signal, as a shell expects.
#[test]
fn a_signal_to_dplab_ends_its_programs_and_their_children() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let d = tempfile::tempdir().unwrap();
        let pids = d.path().join("pids");
        write(
            d.path(),
            "code/hang.sh",
            &format!(
                "#!/bin/sh\nread -r me _ < /proc/self/stat\n(read -r p _ < /proc/self/stat; echo $me $p >> {}; exec sleep 300) &\nwait\n",
                pids.display()
            ),
        );
        let p = write(
            d.path(),
            "p.yaml",
            r#"name: hang
title: T
description: d
source: {paper: p, item: i}
seed: 1
axes:
  x: [1, 2]
stages:
  ext:
    kind: external
    with:
      command: [sh, code/hang.sh]
      code: [code]
      params: {x: $x}
"#,
        );
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dplab"))
            .args(["run", "--allow-exec", "--jobs", "2", "--out"])
            .arg(d.path().join("out"))
            .arg("--store")
            .arg(d.path().join("store"))
            .arg(&p)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Both programs have started a child of their own.
        let started = std::time::Instant::now();
        let listed = loop {
            let s = std::fs::read_to_string(&pids).unwrap_or_default();
            let listed: Vec<i32> = s.split_whitespace().map(|p| p.parse().unwrap()).collect();
            if listed.len() == 4 {
                break listed;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("dplab ended before its programs started: {status:?}");
            }
            assert!(
                started.elapsed().as_secs() < 60,
                "the programs did not start: {s:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // SAFETY: signalling the dplab process this test started.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(signal), "{status:?}");
        // Every program and child is gone (a zombie waiting for an init that reaps nothing
        // is gone too: it runs no more).
        let gone = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.rsplit(')').next().unwrap().trim_start().starts_with('Z'))
                .unwrap_or(true)
        };
        let started = std::time::Instant::now();
        while !listed.iter().all(|&p| gone(p)) {
            assert!(
                started.elapsed().as_secs() < 10,
                "signal {signal}: still running: {:?}",
                listed.iter().filter(|&&p| !gone(p)).collect::<Vec<_>>()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// `--verify N` computes N instances of stages that run programs a second time: a program
/// that is deterministic given its seed passes (and its stored instances are checked too), one
/// that reads another source of randomness fails the run (exit 1) with the first difference.
#[test]
fn verify_computes_instances_again_and_catches_a_program_that_ignores_its_seed() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), -1);
    let run = |extra: &[&str]| {
        dplab()
            .args(["run", "--allow-exec", "--out"])
            .arg(d.path().join("out"))
            .arg("--store")
            .arg(d.path().join("store"))
            .args(extra)
            .arg(&p)
            .output()
            .unwrap()
    };
    let o = run(&["--verify", "10"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("--verify: 4 instance(s) of stages that run programs computed again, each gave the same bytes (that is all it has)"),
        "{}",
        text(&o)
    );
    assert_eq!(started(d.path()), 8, "each of the 4 instances twice");
    // Stored instances are checked too: only the chosen ones start a program.
    let o = run(&["--verify", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 11);
    let o = run(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(started(d.path()), 11);

    // A program that draws from /dev/urandom instead of its seed.
    let prog = std::fs::read_to_string(d.path().join("code/prog.sh")).unwrap();
    let unseeded = prog.replace(
        r#""$(v lo)""#,
        r#""$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')""#,
    );
    assert_ne!(prog, unseeded);
    write(d.path(), "code/prog.sh", &unseeded);
    let o = run(&["--verify", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("stage `ext`")
            && t.contains(
                "--verify: computed again, it differs from its first run (column `lo`, row 0:"
            )
            && t.contains("not deterministic given its seed"),
        "{t}"
    );
}

/// A `probe:` runs once at planning (with consent) and its output joins every instance's key:
/// another "interpreter version" reruns the stage, the same one reruns nothing, `--dry-run`
/// names the probe, consent lists it, and a failing probe is a located error before anything
/// runs.
#[test]
fn a_probe_s_output_joins_the_key() {
    let d = tempfile::tempdir().unwrap();
    let p = pipeline(d.path(), -1);
    let version = d.path().join("version.txt");
    std::fs::write(&version, "Interpreter 1.0\n").unwrap();
    let yaml = std::fs::read_to_string(&p).unwrap().replace(
        "      code: [code]\n",
        &format!(
            "      code: [code]\n      probe: [cat, {}]\n",
            version.display()
        ),
    );
    std::fs::write(&p, yaml).unwrap();
    let store = d.path().join("store");
    let run = |extra: &[&str]| {
        dplab()
            .arg("run")
            .arg(&p)
            .arg("--out")
            .arg(d.path().join("out"))
            .arg("--store")
            .arg(&store)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("cat {}", version.display())),
        "{}",
        text(&o)
    );
    assert!(run(&["--allow-exec"]).status.success());
    assert_eq!(started(d.path()), 4);
    assert!(run(&["--allow-exec"]).status.success());
    assert_eq!(started(d.path()), 4, "the same probe output reruns nothing");
    std::fs::write(&version, "Interpreter 1.1\n").unwrap();
    let o = run(&["--dry-run", "--allow-exec"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(" 4 to run") && text(&o).contains("probe: cat"),
        "{}",
        text(&o)
    );
    assert!(run(&["--allow-exec"]).status.success());
    assert_eq!(
        started(d.path()),
        8,
        "another version reruns every instance"
    );

    std::fs::remove_file(&version).unwrap();
    let o = run(&["--allow-exec"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("p.yaml:") && t.contains("stage `ext`: the probe `cat") && t.contains("failed"),
        "{t}"
    );
    assert_eq!(started(d.path()), 8);
}

/// A pipeline whose stage `ext` runs the sh program `body` once for each `x` in [1, 2] (its
/// parameter `x`), declaring `columns`; `dplab run --allow-exec` of it with `extra` arguments.
fn run_program(dir: &Path, body: &str, columns: &str, extra: &[&str]) -> std::process::Output {
    write(dir, "prog.sh", &format!("#!/bin/sh\nset -eu\n{body}\n"));
    let p = write(
        dir,
        "p.yaml",
        &format!(
            "name: ext\ntitle: T\nsource: {{paper: p, item: i}}\ndescription: d\nseed: 7\naxes:\n  x: [1, 2]\nstages:\n  ext:\n    kind: external\n    with: {{command: [sh, prog.sh], code: [prog.sh], params: {{x: $x}}, columns: {columns}}}\n"
        ),
    );
    dplab()
        .arg("run")
        .arg(&p)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--no-store")
        .arg("--allow-exec")
        .args(extra)
        .output()
        .unwrap()
}

/// Columns other than the declared ones are the program's error, named as such (not "a bug
/// in the kind"), with the columns that differ; the axis columns the engine adds are not the
/// program's to write or to leave out.
#[test]
fn columns_other_than_declared_are_blamed_on_the_program() {
    let d = tempfile::tempdir().unwrap();
    // A frame of one row with columns `header`: `x` holds the instance's `x`, the others 1.
    let body = |header: &str| {
        let row: Vec<&str> = header
            .split(',')
            .map(|c| if c == "x" { "$x" } else { "1" })
            .collect();
        format!(
            "x=$(sed -n 's/^ *\"x\": \\([0-9]*\\).*/\\1/p' \"$DPLAB_JSON\" | head -n 1)\nprintf '%s\\n' '{header}' \"{}\" > output/out.csv",
            row.join(",")
        )
    };
    for (header, columns, says) in [
        ("x,a,c", "[x, a, b]", "the program wrote columns [x, a, c] but the stage declares `columns: [x, a, b]`: missing b, not declared c"),
        ("b,a", "[a, b]", "the program wrote columns [b, a] but the stage declares `columns: [a, b]`: the same columns in another order"),
    ] {
        let o = run_program(d.path(), &body(header), columns, &[]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains(says), "{}", text(&o));
        assert!(!text(&o).contains("bug in the kind"), "{}", text(&o));
    }
    for (header, columns) in [("a,b", "[x, a, b]"), ("a,x,b", "[a, b]"), ("a,b", "[a, b]")] {
        let o = run_program(d.path(), &body(header), columns, &[]);
        assert!(o.status.success(), "{header} for {columns}: {}", text(&o));
    }
}

/// A program's frame of more columns than `--max-cells` allows (a column costs as much as
/// 1000 cells: 10⁶ allows 1000) is refused, as CSV from its header and as Parquet from its
/// footer, before it is parsed.
#[test]
fn a_program_s_frame_of_too_many_columns_is_refused() {
    use polars::prelude::{Column, DataFrame, ParquetWriter};
    let d = tempfile::tempdir().unwrap();
    for n in [1001usize, 1000] {
        let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
        let csv = d.path().join("wide.csv");
        std::fs::write(
            &csv,
            format!("{}\n{}\n", names.join(","), vec!["1"; n].join(",")),
        )
        .unwrap();
        let columns: Vec<Column> = names
            .iter()
            .map(|c| Column::new(c.into(), [1i64]))
            .collect();
        let mut df = DataFrame::new(1, columns).unwrap();
        let parquet = d.path().join("wide.parquet");
        ParquetWriter::new(std::fs::File::create(&parquet).unwrap())
            .finish(&mut df)
            .unwrap();
        let declared = format!("[{}]", names.join(", "));
        for (from, to) in [(&csv, "out.csv"), (&parquet, "out.parquet")] {
            let body = format!("cp '{}' output/{to}", from.display());
            let o = run_program(d.path(), &body, &declared, &["--max-cells", "1000000"]);
            if n == 1000 {
                assert!(o.status.success(), "{to}: {}", text(&o));
                continue;
            }
            assert_eq!(o.status.code(), Some(1), "{}", text(&o));
            let says = format!("the program's frame output/{to}: ");
            assert!(
                text(&o).contains(&says)
                    && text(&o).contains("1001 columns, more than the limit of 1000")
                    && text(&o).contains("raise it with --max-cells"),
                "{to}: {}",
                text(&o)
            );
        }
    }
}
