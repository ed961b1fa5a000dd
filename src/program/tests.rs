//! Real programs under the protocol: well-behaved ones in sh, awk and Python, and the hostile
//! list of issue 25. Every test that runs a program checks afterwards that its working
//! directory is gone and that no process it started (the program, its children) is left,
//! zombies included (`kill -0` succeeds on a zombie).

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use polars::prelude::*;
use serde_json::{json, Map, Value};

use super::process::{check_pass_env, kill_running};
use super::protocol::ProgramArtifact;
use super::runner::Produced;
use super::*;

/// [`kill_running`] kills every program of this process: its test runs alone.
static SERIAL: RwLock<()> = RwLock::new(());

const SEED: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;

/// Shell functions for a program that records process ids this test can look up: a program
/// runs in a PID namespace of its own (see `contain`), where `$$` and `$!` are its own
/// numbers. `/proc` is the system's, so `/proc/self/stat` read by the shell itself (a
/// builtin `read`, no fork) starts with its id as this test sees it. `hostpid` prints the
/// shell's; `( hostpid > f; exec cmd ) &` records a child's.
pub(super) const HOST_PID: &str = "hostpid() { read -r p _ < /proc/self/stat; echo \"$p\"; }\n";

/// A test's own directory for its scripts and the files they leave as evidence.
struct T {
    dir: PathBuf,
}

impl T {
    fn new(name: &str) -> T {
        let dir =
            std::env::temp_dir().join(format!("dplab-external-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        T { dir }
    }

    /// An executable sh script `name` whose body runs after a prelude that records the
    /// program's working directory and process id (as this test sees it: see [`HOST_PID`]).
    fn script(&self, name: &str, body: &str) -> String {
        let path = self.dir.join(name);
        let t = self.dir.display();
        std::fs::write(
            &path,
            format!("#!/bin/sh\n{HOST_PID}pwd > '{t}/cwd'\nhostpid > '{t}/pid'\n{body}\n"),
        )
        .unwrap();
        chmod(&path, 0o755);
        path.display().to_string()
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// Nothing left: the working directory the program reported is removed, and the
    /// program and the children whose pids it wrote (`child`, `child2`) are gone.
    fn nothing_left(&self) {
        let cwd = self.read("cwd");
        assert!(!cwd.trim().is_empty(), "the program never ran");
        assert!(
            !Path::new(cwd.trim()).exists(),
            "working directory {cwd} left behind"
        );
        for f in ["pid", "child", "child2"] {
            if let Ok(pid) = self.read(f).trim().parse::<i32>() {
                assert!(gone(pid), "process {pid} ({f}) is still there");
            }
        }
    }
}

impl Drop for T {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Whether no process (not even a zombie) has this pid. Killed processes take a moment to
/// be reaped by whoever is their parent, so this waits up to a second.
fn gone(pid: i32) -> bool {
    let end = Instant::now() + Duration::from_secs(1);
    loop {
        // SAFETY: signal 0 only probes.
        if unsafe { libc::kill(pid, 0) } != 0 {
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn program(argv: &[&str]) -> Program {
    Program {
        command: argv.iter().map(|s| s.to_string()).collect(),
        pass_env: vec![],
        threads: 2,
        timeout: Duration::from_secs(60),
    }
}

fn bounds() -> Bounds {
    Bounds {
        grace: Duration::from_secs(1),
        ..Bounds::current()
    }
}

fn counts() -> DataFrame {
    DataFrame::new(
        3,
        vec![
            Column::new("candidate".into(), ["a,b", "ü \"q\"", "c"]),
            Column::new("count".into(), [3i64, -1, 40]),
            Column::new("p".into(), [Some(0.1f64), None, Some(1e-300)]),
        ],
    )
    .unwrap()
}

/// Runs `program` on `inputs` (named `counts`, `other`, …) with `params` and `seed`.
fn run_on(
    program: &Program,
    inputs: &[DataFrame],
    params: Value,
    seed: u128,
    bounds: &Bounds,
) -> Result<Produced, ProgramError> {
    let _shared = SERIAL.read().unwrap_or_else(|e| e.into_inner());
    let names: Vec<String> = ["counts", "other"][..inputs.len()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut axes = Map::new();
    axes.insert("eps".into(), json!(0.5));
    axes.insert("rep".into(), json!(0));
    run(
        program,
        &Instance {
            stage: "pf",
            label: "eps=0.5 rep=0",
            params: &params,
            axes: &axes,
            seed,
            inputs,
            input_names: &names,
            code: &[],
        },
        bounds,
    )
}

fn same_frame(a: &DataFrame, b: &DataFrame) {
    assert_eq!(a.schema(), b.schema());
    assert!(a.equals_missing(b), "{a}\n≠\n{b}");
}

/// A sh program that copies its input to its output gives back the same frame, from the
/// Parquet file (types and all) and from the CSV file; the description holds exactly the
/// protocol's fields; the directory is private; the environment holds only what the
/// protocol lists and what `pass_env` names.
#[test]
fn a_shell_program_copies_its_input_back() {
    let t = T::new("copy");
    let vars: Vec<String> = std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| {
            check_pass_env(k).is_ok()
                && !["PATH", "HOME", "LANG", "PYTHONPATH"].contains(&k.as_str())
        })
        .collect();
    assert!(
        vars.len() >= 2,
        "the test needs two variables in its environment"
    );
    for ext in ["parquet", "csv"] {
        let script = t.script(
            "copy.sh",
            &format!(
                "cp inputs/counts.{ext} output/out.{ext}\n\
                 cp \"$DPLAB_JSON\" artifacts/description.json\n\
                 env > artifacts/env.txt\n\
                 stat -c %a . > artifacts/mode.txt"
            ),
        );
        let mut p = program(&["sh", &script]);
        p.pass_env = vec![vars[0].clone()];
        let params = json!({"epsilon": 0.5, "candidates": ["a", "b"], "nested": {"k": null}});
        let got = run_on(&p, &[counts()], params.clone(), SEED, &bounds()).unwrap();
        same_frame(&got.frame, &counts());
        let names: Vec<&str> = got.artifacts.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["description.json", "env.txt", "mode.txt"]);
        let text = |i: usize| String::from_utf8(got.artifacts[i].bytes.clone()).unwrap();

        let d: Value = serde_json::from_str(&text(0)).unwrap();
        let work = Path::new(t.read("cwd").trim()).to_path_buf();
        let at = |p: &str| work.join(p).display().to_string();
        let expected = json!({
            "protocol": 1,
            "stage": "pf",
            "instance": "eps=0.5 rep=0",
            "params": params,
            "axes": {"eps": 0.5, "rep": 0},
            "seed": {"hex": "0123456789abcdeffedcba9876543210",
                     "hi": 0x0123_4567_89ab_cdef_u64, "lo": 0xfedc_ba98_7654_3210_u64},
            "threads": 2,
            "inputs": [{"name": "counts", "parquet": at("inputs/counts.parquet"),
                        "csv": at("inputs/counts.csv"), "rows": 3,
                        "columns": [{"name": "candidate", "type": "str"},
                                    {"name": "count", "type": "int"},
                                    {"name": "p", "type": "float"}]}],
            "output": {"dir": at("output"), "frame": "out",
                       "parquet": at("output/out.parquet"), "csv": at("output/out.csv"),
                       "cols": at("output/out.cols")},
            "artifacts_dir": at("artifacts"),
        });
        assert_eq!(d, expected);
        let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(&text(0))
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys[0], "protocol", "the version comes first");

        let env = text(1);
        let mut names: Vec<&str> = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k)
            .collect();
        names.sort();
        let mut allowed = vec![
            "DPLAB_JSON",
            "DPLAB_THREADS",
            "HOME",
            "LANG",
            "MKL_NUM_THREADS",
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "PATH",
            "PYTHONPATH",
            "TMPDIR",
            vars[0].as_str(),
            // Set by sh itself.
            "PWD",
            "OLDPWD",
            "SHLVL",
            "_",
        ];
        allowed.sort();
        for n in &names {
            assert!(allowed.contains(n), "`{n}` reached the program:\n{env}");
        }
        assert!(
            names.contains(&vars[0].as_str()),
            "pass_env `{}` did not",
            vars[0]
        );
        assert!(!names.contains(&vars[1].as_str()));
        assert!(env.contains(&format!("TMPDIR={}\n", work.display())));
        assert!(env.contains("OMP_NUM_THREADS=2\n") && env.contains("DPLAB_THREADS=2\n"));
        assert_eq!(text(2).trim(), "700");
        t.nothing_left();
    }
}

/// The Python helper end to end: a five-line stage reads its input with its types, draws
/// from the seeded `random.Random`, writes its frame. The same seed gives the same frame,
/// another seed another one.
#[test]
fn the_python_helper_makes_a_five_line_stage() {
    let t = T::new("python");
    let script = t.path("stage.py");
    std::fs::write(
        &script,
        format!(
            "open('{}/pid', 'w').write(open('/proc/self/stat').read().split()[0])\n\
             open('{}/cwd', 'w').write(__import__('os').getcwd())\n\
             from dplab_external import load\n\
             job = load()\n\
             r = job.random\n\
             job.write([dict(row, u=r.random(), eps=job.params['epsilon']) for row in job.rows()])\n\
             open(job.artifact('seed.txt'), 'w').write(str(job.seed))\n",
            t.dir.display(),
            t.dir.display()
        ),
    )
    .unwrap();
    let p = program(&["python3", &script]);
    let go = |seed| run_on(&p, &[counts()], json!({"epsilon": 0.25}), seed, &bounds()).unwrap();
    let a = go(SEED);
    t.nothing_left();
    let b = go(SEED);
    let c = go(SEED + 1);
    same_frame(&a.frame, &b.frame);
    assert_eq!(a.artifacts[0].bytes, SEED.to_string().as_bytes());
    // Its input came back with its types and values (text with a comma, quotes, a null).
    same_frame(
        &a.frame.select(["candidate", "count", "p"]).unwrap(),
        &counts(),
    );
    let eps = a.frame.column("eps").unwrap().f64().unwrap();
    assert!(eps.iter().all(|x| x == Some(0.25)));
    let u = |f: &Produced| f.frame.column("u").unwrap().f64().unwrap().to_vec();
    assert_ne!(u(&a), u(&c), "another seed, other draws");
    assert!(u(&a)
        .iter()
        .all(|x| x.is_some_and(|x| (0.0..1.0).contains(&x))));
    t.nothing_left();
}

/// The same protocol in POSIX sh and awk (the shipped example `examples/laplace.sh`):
/// Laplace noise of scale 1/ε, seeded, with its mean |noise| near the scale.
#[test]
fn a_shell_and_awk_stage_speaks_the_same_protocol() {
    let t = T::new("awk");
    let script = t.script("laplace.sh", include_str!("examples/laplace.sh"));
    let n = 4000;
    let input = DataFrame::new(
        n,
        vec![Column::new(
            "count".into(),
            (0..n as i64).collect::<Vec<_>>(),
        )],
    )
    .unwrap();
    let p = program(&["sh", &script]);
    let go = |seed| {
        run_on(
            &p,
            std::slice::from_ref(&input),
            json!({"epsilon": 2, "sensitivity": 1}),
            seed,
            &bounds(),
        )
        .unwrap()
    };
    let a = go(SEED);
    let b = go(SEED);
    let c = go(SEED + 1);
    same_frame(&a.frame, &b.frame);
    assert_ne!(
        a.frame.column("noisy").unwrap(),
        c.frame.column("noisy").unwrap()
    );
    let count = a.frame.column("count").unwrap().i64().unwrap().to_vec();
    let noisy = a.frame.column("noisy").unwrap().f64().unwrap().to_vec();
    let mean_abs: f64 = count
        .iter()
        .zip(&noisy)
        .map(|(c, y)| (y.unwrap() - c.unwrap() as f64).abs())
        .sum::<f64>()
        / n as f64;
    // E|Laplace(b)| = b = 0.5, sd of the mean 0.5/√4000 ≈ 0.008: ±0.05 is 6 sd.
    assert!((mean_abs - 0.5).abs() < 0.05, "mean |noise| {mean_abs}");
    assert_eq!(a.artifacts[0].name, "summary.txt");
    t.nothing_left();
}

/// Values reach the program only as data: a parameter, an axis value, the instance label
/// and an argument that look like shell commands arrive as that text, and nothing runs.
#[test]
fn shell_syntax_in_values_is_only_text() {
    let t = T::new("quoting");
    let pwned = t.path("pwned-XYZ");
    let attack = format!("$(touch {pwned}); reboot `touch {pwned}` \"'\n");
    let script = t.script(
        "echo.sh",
        "printf '%s' \"$1\" > artifacts/arg.txt\ncp \"$DPLAB_JSON\" artifacts/d.json\nprintf 'a\\n1\\n' > output/out.csv",
    );
    let p = program(&["sh", &script, &attack]);
    let mut axes = Map::new();
    axes.insert("who".into(), json!(attack));
    let params = json!({"note": attack, attack.clone(): 1});
    let names = ["counts".to_string()];
    let got = {
        let _shared = SERIAL.read().unwrap_or_else(|e| e.into_inner());
        run(
            &p,
            &Instance {
                stage: "pf",
                label: &attack,
                params: &params,
                axes: &axes,
                seed: 7,
                inputs: &[counts()],
                input_names: &names,
                code: &[],
            },
            &bounds(),
        )
        .unwrap()
    };
    assert_eq!(got.artifacts[0].bytes, attack.as_bytes());
    let d: Value = serde_json::from_slice(&got.artifacts[1].bytes).unwrap();
    assert_eq!(d["params"]["note"], json!(attack));
    assert_eq!(d["params"][&attack], json!(1));
    assert_eq!(d["axes"]["who"], json!(attack));
    assert_eq!(d["instance"], json!(attack));
    assert!(!Path::new(&pwned).exists(), "a value was executed");
    t.nothing_left();
}

fn fails(p: &Program, b: &Bounds) -> (ProgramError, String) {
    let e = run_on(p, &[counts()], json!({}), SEED, b).unwrap_err();
    let m = e.to_string();
    (e, m)
}

/// The working directories of this process's runs that exist now.
fn working_directories() -> Vec<PathBuf> {
    let prefix = format!("dplab-external-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

#[test]
fn a_missing_command_is_named_with_the_path_searched() {
    {
        // Alone, so that no other test's directory exists meanwhile: a program that never
        // started leaves no working directory either.
        let _alone = SERIAL.write().unwrap_or_else(|e| e.into_inner());
        let names = ["counts".to_string()];
        let e = run(
            &program(&["dplab-no-such-program-xyz"]),
            &Instance {
                stage: "pf",
                label: "",
                params: &json!({}),
                axes: &Map::new(),
                seed: 1,
                inputs: &[counts()],
                input_names: &names,
                code: &[],
            },
            &bounds(),
        )
        .unwrap_err();
        assert!(matches!(e, ProgramError::NotFound { .. }), "{e}");
        assert_eq!(working_directories(), Vec::<PathBuf>::new());
    }
    let (e, m) = fails(&program(&["dplab-no-such-program-xyz", "a"]), &bounds());
    assert!(matches!(e, ProgramError::NotFound { .. }), "{m}");
    assert!(
        m.starts_with("command not found: `dplab-no-such-program-xyz` (PATH=/"),
        "{m}"
    );
    let (e, m) = fails(&program(&["/nonexistent/dir/prog"]), &bounds());
    assert!(
        matches!(e, ProgramError::NotFound { path: None, .. }),
        "{m}"
    );
}

#[test]
fn a_file_that_cannot_be_executed_says_why() {
    let t = T::new("noexec");
    let script = t.script("stage.sh", "exit 0");
    chmod(Path::new(&script), 0o644);
    let (e, m) = fails(&program(&[&script]), &bounds());
    assert!(matches!(e, ProgramError::NotExecutable { .. }), "{m}");
    assert!(
        m.contains("no execute permission") && m.contains("chmod +x"),
        "{m}"
    );
    let (_, m) = fails(&program(&[&t.dir.display().to_string()]), &bounds());
    assert!(m.contains("is a directory"), "{m}");
    let bad = t.path("interp.sh");
    std::fs::write(&bad, "#!/nonexistent/python9\nprint(1)\n").unwrap();
    chmod(Path::new(&bad), 0o755);
    let (e, m) = fails(&program(&[&bad]), &bounds());
    assert!(matches!(e, ProgramError::NotExecutable { .. }), "{m}");
    assert!(
        m.contains("`#!/nonexistent/python9` names an interpreter"),
        "{m}"
    );
}

/// A failing program's message has its status and the last 20 lines of its output (not
/// the earlier ones, not a megabyte of them).
#[test]
fn a_failing_program_shows_its_status_and_last_lines() {
    let t = T::new("exit1");
    let script = t.script(
        "fail.sh",
        "head -c 300000 /dev/zero | tr '\\0' x\necho\nfor i in $(seq 1 30); do echo line$i >&2; done\nexit 3",
    );
    let (e, m) = fails(&program(&["sh", &script]), &bounds());
    assert!(matches!(e, ProgramError::Exit { code: 3, .. }), "{m}");
    assert!(m.contains("exited with status 3"), "{m}");
    assert!(m.contains("\nline11\n") && m.ends_with("line30"), "{m}");
    assert!(!m.contains("line10\n") && !m.contains("xxx"), "{m}");
    t.nothing_left();
}

/// The log keeps the last `log_bytes` of a long output.
#[test]
fn the_log_keeps_the_end_of_a_long_output() {
    let t = T::new("log");
    let script = t.script(
        "talk.sh",
        "head -c 300000 /dev/zero | tr '\\0' x\necho the-end >&2\nprintf 'a\\n1\\n' > output/out.csv",
    );
    let got = run_on(&program(&["sh", &script]), &[], json!({}), SEED, &bounds()).unwrap();
    let log = got.log.bytes();
    assert_eq!(log.len(), bounds().log_bytes);
    assert!(log.ends_with(b"xxthe-end\n"));
    assert_eq!(got.log.dropped(), 300_000 + 8 - bounds().log_bytes as u64);
    t.nothing_left();
}

#[test]
fn a_program_killed_by_a_signal_is_said_so() {
    let t = T::new("signal");
    let script = t.script("die.sh", "echo dying >&2\nkill -9 $$");
    let (e, m) = fails(&program(&["sh", &script]), &bounds());
    assert!(matches!(e, ProgramError::Signal { signal: 9, .. }), "{m}");
    assert!(
        m.contains("signal 9 (SIGKILL") && m.contains("dying"),
        "{m}"
    );
    t.nothing_left();
}

/// A program that never ends is stopped at its timeout, with its whole process group:
/// a child in the background too, and one that ignores SIGTERM gets SIGKILL after the grace.
#[test]
fn a_program_that_never_ends_is_killed_with_its_group() {
    for ignore_term in [false, true] {
        let t = T::new(&format!("timeout-{ignore_term}"));
        let trap = if ignore_term { "trap '' TERM" } else { "" };
        let script = t.script(
            "forever.sh",
            &format!(
                "{trap}\n(hostpid > '{0}/child'; exec sleep 1000) &\n(hostpid > '{0}/child2'; sleep 1000; :) &\necho started\nwhile :; do sleep 1; done",
                t.dir.display()
            ),
        );
        let mut p = program(&["sh", &script]);
        p.timeout = Duration::from_secs(1);
        let start = Instant::now();
        let (e, m) = fails(&p, &bounds());
        let took = start.elapsed();
        assert!(matches!(e, ProgramError::Timeout { .. }), "{m}");
        assert!(
            m.contains("timed out after 1 s (its process group was killed)"),
            "{m}"
        );
        assert!(m.contains("started"), "{m}");
        // 1 s of timeout, up to 1 s of grace, and slack for a loaded machine.
        assert!(took < Duration::from_secs(4), "took {took:?}");
        t.nothing_left();
    }
}

/// Children that outlive a program that succeeded are killed and reaped.
#[test]
fn children_that_outlive_the_program_are_killed() {
    let t = T::new("orphan");
    let script = t.script(
        "fork.sh",
        &format!(
            "(hostpid > '{0}/child'; exec sleep 1000) &\n(hostpid > '{0}/child2'; trap '' TERM HUP; exec sleep 1000) &\nwhile [ ! -s '{0}/child' ] || [ ! -s '{0}/child2' ]; do sleep 0.01; done\nprintf 'a\\n1\\n' > output/out.csv",
            t.dir.display()
        ),
    );
    let got = run_on(&program(&["sh", &script]), &[], json!({}), SEED, &bounds()).unwrap();
    assert_eq!(got.frame.height(), 1);
    t.nothing_left();
}

#[test]
fn no_frame_or_two_frames_are_errors() {
    let t = T::new("noframe");
    let script = t.script(
        "none.sh",
        "echo x > output/result.parquet\necho 'wrote result.parquet' >&2",
    );
    let (e, m) = fails(&program(&["sh", &script]), &bounds());
    assert!(matches!(e, ProgramError::NoFrame { .. }), "{m}");
    assert!(
        m.contains("holds: result.parquet") && m.contains("wrote result.parquet"),
        "{m}"
    );
    t.nothing_left();
    let script = t.script(
        "both.sh",
        "printf 'a\\n1\\n' > output/out.csv\ncp inputs/counts.parquet output/out.parquet",
    );
    let (e, m) = fails(&program(&["sh", &script]), &bounds());
    assert!(matches!(e, ProgramError::BothFrames), "{m}");
    t.nothing_left();
}

#[test]
fn a_malformed_frame_is_an_error_with_the_readers_message() {
    let t = T::new("malformed");
    let script = t.script("bad.sh", "printf 'not parquet at all' > output/out.parquet");
    let (e, m) = fails(&program(&["sh", &script]), &bounds());
    assert!(matches!(e, ProgramError::MalformedFrame { .. }), "{m}");
    assert!(
        m.starts_with("the program's frame output/out.parquet cannot be read: "),
        "{m}"
    );
    t.nothing_left();
}

#[test]
fn a_frame_over_the_limit_is_refused() {
    let t = T::new("huge");
    let script = t.script("huge.sh", "{ echo x; seq 1 1000; } > output/out.csv");
    let b = Bounds {
        frame_bytes: 1000,
        ..bounds()
    };
    let (e, m) = fails(&program(&["sh", &script]), &b);
    assert!(matches!(e, ProgramError::TooLarge(_)), "{m}");
    assert!(
        m.contains("has 3895 bytes, more than the limit of 1000"),
        "{m}"
    );
    t.nothing_left();
}

/// The frame is found however many other files the output directory holds (a listing cut at
/// 20 names missed `out.csv` among 50 others); without one, the message names a few of them,
/// not thousands.
#[test]
fn a_frame_among_thousands_of_other_files_is_found() {
    let t = T::new("crowded");
    let crowd = "i=0; while [ $i -lt 2000 ]; do : > output/f$i; i=$((i+1)); done";
    for frame in [
        "printf 'a\\n1\\n' > output/out.csv",
        "cp inputs/counts.parquet output/out.parquet",
    ] {
        // The frame written first and last: a directory lists its names in no set order.
        for body in [format!("{frame}\n{crowd}"), format!("{crowd}\n{frame}")] {
            let script = t.script("crowd.sh", &body);
            let got = run_on(
                &program(&["sh", &script]),
                &[counts()],
                json!({}),
                SEED,
                &bounds(),
            )
            .unwrap_or_else(|e| panic!("{body}: {e}"));
            assert_eq!(got.frame.width(), if frame.contains("csv") { 1 } else { 3 });
            t.nothing_left();
        }
    }
    let script = t.script("none.sh", crowd);
    let (e, m) = fails(&program(&["sh", &script]), &bounds());
    assert!(matches!(e, ProgramError::NoFrame { more: true, .. }), "{m}");
    let held = m.split("that directory holds: ").nth(1).unwrap_or_default();
    let held = held
        .split(" (it printed nothing)")
        .next()
        .unwrap_or_default();
    assert_eq!(held.matches(", ").count(), 20, "{m}");
    assert!(held.ends_with(", …"), "{m}");
    t.nothing_left();
}

/// Control characters a program prints or puts in a name reach the message escaped (a
/// carriage return would overwrite the line before it on a terminal, an escape sequence
/// would be obeyed), newlines and tabs as they are.
#[test]
fn control_characters_from_a_program_are_escaped_in_messages() {
    let t = T::new("control");
    let print = "printf 'abc\\rXYZ\\033[31m\\tend\\n' >&2";
    let escaped = "abc\\u{d}XYZ\\u{1b}[31m\tend";
    for (body, expect) in [
        (format!("{print}\nexit 1"), "exited with status 1"),
        (format!("{print}\nsleep 10"), "timed out after 1 s"),
        (
            format!("{print}\n: > \"$(printf 'output/x\\ry')\""),
            "that directory holds: x\\u{d}y",
        ),
    ] {
        let script = t.script("ctl.sh", &body);
        let mut p = program(&["sh", &script]);
        p.timeout = Duration::from_secs(1);
        let (_, m) = fails(&p, &bounds());
        assert!(m.contains(expect) && m.contains(escaped), "{body}: {m}");
        assert!(!m.contains(['\r', '\x1b']), "{body}: {m:?}");
        t.nothing_left();
    }
}

/// A probe that does not return is told that its limit is fixed (it has no `timeout` to
/// raise) and what a probe is for; here under a limit of a fifth of a second, not 60 s.
#[test]
fn a_probe_that_does_not_return_is_told_its_limit_is_fixed() {
    let _shared = SERIAL.read().unwrap_or_else(|e| e.into_inner());
    let argv = ["sh", "-c", "echo starting; sleep 10"].map(String::from);
    let start = Instant::now();
    let e = run_probe(&argv, &[], Duration::from_millis(200)).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let m = e.to_string();
    assert!(matches!(e, ProgramError::ProbeTimeout { .. }), "{m}");
    assert!(
        m.contains("did not finish within 0.2 s, the fixed limit of a probe")
            && m.contains("prints a version")
            && m.contains("starting"),
        "{m}"
    );
    assert!(!m.contains("raise `timeout`"), "{m}");
}

/// A Parquet frame of too many columns is refused from the first bytes of its footer, before
/// the rest is decoded: this footer says 10⁶ + 1 schema elements and holds nothing else a
/// reader could decode.
#[test]
fn a_parquet_frame_of_too_many_columns_is_refused_from_its_footer() {
    let t = T::new("wide");
    // Field 1 (version = 1), then field 2: a list of 1 000 001 structs, and no more.
    let mut footer = vec![0x15, 0x02, 0x19, 0xfc];
    let mut n = 1_000_001u32;
    while n >= 0x80 {
        footer.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    footer.push(n as u8);
    let mut file = b"PAR1".to_vec();
    file.extend(&footer);
    file.extend((footer.len() as u32).to_le_bytes());
    file.extend(b"PAR1");
    std::fs::write(t.dir.join("wide.parquet"), &file).unwrap();
    let script = t.script(
        "wide.sh",
        &format!("cp '{}' output/out.parquet", t.path("wide.parquet")),
    );
    let (e, m) = fails(&program(&["sh", &script]), &bounds());
    assert!(matches!(e, ProgramError::TooLarge(_)), "{m}");
    let max = crate::limits::max_columns();
    assert!(
        m.contains(&format!(
            "the program's frame output/out.parquet: 1000000 columns, more than the limit of {max}"
        )) && m.contains("--max-cells"),
        "{m}"
    );
    t.nothing_left();
}

/// Links the program planted are refused, never followed: an artifact or a frame that is a
/// symbolic link to /etc/passwd, an output directory replaced by a link to a directory
/// holding a valid frame, a hard link; and a subdirectory, a bad name, too many artifacts.
#[test]
fn planted_links_and_bad_artifacts_are_refused() {
    let t = T::new("links");
    let frame = "printf 'a\\n1\\n' > output/out.csv\n";
    let evil = t.path("evil");
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::write(t.dir.join("evil/out.csv"), "a\n1\n").unwrap();
    let cases: &[(&str, &str)] = &[
        (
            "ln -s /etc/passwd artifacts/passwd.txt",
            "artifacts/passwd.txt, a symbolic link",
        ),
        (
            "rm output/out.csv; ln -s /etc/passwd output/out.csv",
            "output/out.csv, a symbolic link",
        ),
        (
            &format!("rm -r output; ln -s '{evil}' output"),
            "output/, a symbolic link where dplab made a directory",
        ),
        (
            &format!("ln '{evil}/out.csv' artifacts/x.csv"),
            "artifacts/x.csv, a hard link (2 names)",
        ),
        ("mkdir artifacts/figs", "artifacts/figs, a directory"),
        (
            "mkfifo artifacts/pipe",
            "artifacts/pipe, not a regular file",
        ),
        (
            "echo 1 > 'artifacts/my figure.svg'",
            "artifact \"my figure.svg\"",
        ),
        ("echo 1 > artifacts/.hidden", "artifact \".hidden\""),
        (
            "touch artifacts/a artifacts/b artifacts/c",
            "more than 2 artifacts",
        ),
    ];
    let b = Bounds {
        artifacts: 2,
        ..bounds()
    };
    for (body, expected) in cases {
        let script = t.script("plant.sh", &format!("{frame}{body}"));
        let (_, m) = fails(&program(&["sh", &script]), &b);
        assert!(m.contains(expected), "{body}: {m}");
        assert!(!m.contains("root:"), "{body}: read /etc/passwd: {m}");
        t.nothing_left();
    }
    // Artifacts that pass come back whole, sorted by name.
    let script = t.script(
        "ok.sh",
        &format!("{frame}printf '<svg/>' > artifacts/figure.svg\necho hi > artifacts/a-1_b.txt"),
    );
    let got = run_on(&program(&["sh", &script]), &[], json!({}), SEED, &bounds()).unwrap();
    assert_eq!(
        got.artifacts,
        [
            ProgramArtifact {
                name: "a-1_b.txt".into(),
                bytes: b"hi\n".to_vec()
            },
            ProgramArtifact {
                name: "figure.svg".into(),
                bytes: b"<svg/>".to_vec()
            },
        ]
    );
}

/// A program that takes away its own permissions still has its directory removed.
#[test]
fn a_locked_working_directory_is_still_removed() {
    let t = T::new("locked");
    let script = t.script(
        "lock.sh",
        "printf 'a\\n1\\n' > output/out.csv\nmkdir -p deep/er && touch deep/er/f && chmod 000 deep/er deep inputs",
    );
    run_on(
        &program(&["sh", &script]),
        &[counts()],
        json!({}),
        SEED,
        &bounds(),
    )
    .unwrap();
    t.nothing_left();
}

/// `kill_running` (the engine's Ctrl-C) ends a running program and its group at once.
#[test]
fn kill_running_ends_every_program() {
    let _alone = SERIAL.write().unwrap_or_else(|e| e.into_inner());
    let t = T::new("interrupt");
    let script = t.script(
        "long.sh",
        &format!(
            "(hostpid > '{}/child'; exec sleep 1000) &\nwait",
            t.dir.display()
        ),
    );
    let p = program(&["sh", &script]);
    let names: Vec<String> = vec![];
    let start = Instant::now();
    let handle = std::thread::spawn(move || {
        run(
            &p,
            &Instance {
                stage: "pf",
                label: "",
                params: &json!({}),
                axes: &Map::new(),
                seed: 1,
                inputs: &[],
                input_names: &names,
                code: &[],
            },
            &bounds(),
        )
    });
    while t.read("child").trim().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the program never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_running();
    let e = handle.join().unwrap().unwrap_err();
    assert!(matches!(e, ProgramError::Signal { signal: 9, .. }), "{e}");
    t.nothing_left();
}

#[test]
fn pass_env_names_are_checked() {
    assert!(check_pass_env("CUDA_VISIBLE_DEVICES").is_ok());
    for bad in ["DPLAB_JSON", "TMPDIR", "OMP_NUM_THREADS", "", "A=B"] {
        assert!(check_pass_env(bad).is_err(), "{bad}");
    }
}

/// Not a test: what the runner adds to a program's own start-up, measured side by side
/// (`cargo test --release --lib program::tests::overhead -- --ignored --nocapture`).
#[test]
#[ignore]
fn overhead() {
    let t = T::new("overhead");
    let script = t.path("copy.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncp inputs/counts.parquet output/out.parquet\n",
    )
    .unwrap();
    chmod(Path::new(&script), 0o755);
    let n = 200;
    let bare = Instant::now();
    for _ in 0..n {
        let d = t.dir.join("bare");
        std::fs::create_dir_all(d.join("inputs")).unwrap();
        std::fs::create_dir_all(d.join("output")).unwrap();
        std::fs::write(d.join("inputs/counts.parquet"), b"x").unwrap();
        let s = std::process::Command::new("sh")
            .arg(&script)
            .current_dir(&d)
            .status()
            .unwrap();
        assert!(s.success());
        std::fs::remove_dir_all(&d).unwrap();
    }
    let bare = bare.elapsed() / n;
    let p = program(&["sh", &script]);
    let ours = Instant::now();
    for _ in 0..n {
        run_on(&p, &[counts()], json!({}), SEED, &bounds()).unwrap();
    }
    let ours = ours.elapsed() / n;
    println!("per instance: sh copy program started directly {bare:?}, through the runner {ours:?}, overhead {:?}", ours.saturating_sub(bare));
}

/// The helper's CSV writer gives dplab back exactly the floats it was handed, the special
/// ones included, and its reader the exact values dplab wrote.
#[test]
fn the_python_helper_writes_exact_floats() {
    let t = T::new("floats");
    let script = t.path("floats.py");
    std::fs::write(
        &script,
        format!(
            "open('{0}/pid', 'w').write(open('/proc/self/stat').read().split()[0])\n\
             open('{0}/cwd', 'w').write(__import__('os').getcwd())\n\
             from dplab_external import load\n\
             job = load()\n\
             p = job.columns()['p']\n\
             job.write({{'z': [float('inf'), float('nan'), -0.0, 0.1 + 0.2, p[2]], 'b': [True, None, False, True, True]}}, format='csv')\n",
            t.dir.display()
        ),
    )
    .unwrap();
    let got = run_on(
        &program(&["python3", &script]),
        &[counts()],
        json!({}),
        SEED,
        &bounds(),
    )
    .unwrap();
    let z = got.frame.column("z").unwrap().f64().unwrap().to_vec();
    assert_eq!(z[0], Some(f64::INFINITY));
    assert!(z[1].unwrap().is_nan());
    assert!(z[2] == Some(0.0) && z[2].unwrap().is_sign_negative());
    assert_eq!(z[3], Some(0.1 + 0.2));
    assert_eq!(z[4], Some(1e-300));
    let b: Vec<_> = got
        .frame
        .column("b")
        .unwrap()
        .bool()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(b, [Some(true), None, Some(false), Some(true), Some(true)]);
    t.nothing_left();
}

/// Permute-and-flip written twice (the shipped example `pipelines/examples/ex-permute-and-flip`),
/// in Python with the helper and in sh with awk, gives the
/// exact distribution: Pr[r] = p_r ∫₀¹ Π_{j≠r}(1 − p_j t) dt with p_r = e^(ε(q_r − q*)/2Δ),
/// each frequency within its 99.9% interval (the seeds are fixed: this passes or fails
/// for good).
#[test]
fn permute_and_flip_in_two_languages_has_its_exact_distribution() {
    let python = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/pipelines/examples/permute-and-flip/pf.py"
    );
    let sh = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/pipelines/examples/permute-and-flip/pf.sh"
    );
    let input = DataFrame::new(
        3,
        vec![
            Column::new("candidate".into(), ["a", "b", "c"]),
            Column::new("utility".into(), [2.0, 1.0, 0.0]),
        ],
    )
    .unwrap();
    let (eps, n) = (1.0f64, 20_000u32);
    let p: Vec<f64> = [2.0f64, 1.0, 0.0]
        .iter()
        .map(|q| (eps * (q - 2.0) / 2.0).exp())
        .collect();
    // With three candidates the integrand is (1 − a t)(1 − b t): its integral is exact.
    let exact: Vec<f64> = (0..3)
        .map(|r| {
            let o: Vec<f64> = (0..3).filter(|&j| j != r).map(|j| p[j]).collect();
            p[r] * (1.0 - (o[0] + o[1]) / 2.0 + o[0] * o[1] / 3.0)
        })
        .collect();
    assert!((exact.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    for argv in [["python3", python], ["sh", sh]] {
        let got = run_on(
            &program(&argv),
            std::slice::from_ref(&input),
            json!({"epsilon": eps, "sensitivity": 1, "samples": n}),
            SEED,
            &bounds(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", argv[0]));
        let counts = got.frame.column("count").unwrap().i64().unwrap().to_vec();
        assert_eq!(counts.iter().map(|c| c.unwrap()).sum::<i64>(), n as i64);
        for (r, c) in counts.iter().enumerate() {
            let f = c.unwrap() as f64 / n as f64;
            let half = 3.29 * (exact[r] * (1.0 - exact[r]) / n as f64).sqrt();
            assert!(
                (f - exact[r]).abs() <= half,
                "{}: candidate {r}: frequency {f}, exact {} ± {half}",
                argv[0],
                exact[r]
            );
        }
    }
}
