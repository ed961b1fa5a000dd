//! Mutated real pipelines never crash `dplab validate` (issue 10, "safety and correctness").
//!
//! Every pipeline under `pipelines/` is mutated with a fixed seed — lines deleted, duplicated,
//! swapped or re-indented; a value replaced by a hostile one (`-1`, `1e300`, `.nan`, `''`,
//! `~`, `[]`, a 20 000-character string, `../x`, `/etc/passwd`, an alias, a huge grid…); a
//! stage given another kind; the file truncated; a NUL or an invalid UTF-8 byte inserted —
//! and each mutant is validated by the built binary, in a directory holding the original's
//! sibling files (the `*.paper.csv` tables some pipelines name), under a 20 s timeout and a
//! 4 GiB address-space limit. The answer must be a clean one: exit 0, 1 or 2, no panic,
//! no signal (an abort on a failed allocation is one), no timeout.
//!
//! `DPLAB_MUTATE_COUNT` (default [`DEFAULT_COUNT`]) and `DPLAB_MUTATE_SEED` run more or other
//! mutants; a failing mutant is kept under `target/mutate-failures/`, and the failure message
//! says which pipeline it came from and what was done to it.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Mutants per run: `cargo test --release --test it mutate::` stays well under a minute on two
/// shared cores.
const DEFAULT_COUNT: usize = 4000;
const DEFAULT_SEED: u64 = 0x6d75_7461_7465; // "mutate"
const TIMEOUT: Duration = Duration::from_secs(20);
/// Address space of one `dplab validate` (RLIMIT_AS).
const MEMORY: u64 = 4 << 30;

/// The project's generator (PCG, from `rand_pcg`): the mutants are a function of the seed
/// alone.
struct Rng(rand_pcg::Pcg64Mcg);

impl Rng {
    fn new(seed: u64) -> Self {
        use rand::SeedableRng;
        Rng(rand_pcg::Pcg64Mcg::seed_from_u64(seed))
    }

    fn below(&mut self, n: usize) -> usize {
        use rand::Rng as _;
        self.0.random_range(0..n.max(1))
    }

    fn choose<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values a careless or hostile author might write in place of any scalar.
const HOSTILE: &[&str] = &[
    "-1",
    "0",
    "-0",
    "1",
    "1e300",
    "-1e300",
    "1e-300",
    "5e-324",
    ".nan",
    ".inf",
    "-.inf",
    "''",
    "\"\"",
    "~",
    "[]",
    "{}",
    "[[]]",
    "true",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "-9223372036854775809",
    "9007199254740993",
    "1e6",
    "1e9",
    "1e12",
    "0x7fffffff",
    "../x",
    "../../../../../../etc/passwd",
    "/etc/passwd",
    "/dev/zero",
    "/proc/self/mem",
    ".",
    "*a",
    "&a [1, 2]",
    "!!binary aGVsbG8=",
    "!custom 1",
    "$eps",
    "$nope",
    "all",
    "rep",
    "é",
    "'a: b'",
    "{from: 0, to: 1, step: 1e-9}",
    "{from: 0, to: 1e300, step: 1}",
    "{from: 0, to: 1000, step: 1}",
    "{linspace: {from: 0, to: 1, num: 1000000}}",
    "{logspace: {from: 1e-300, to: 1e300, num: 1000}}",
    "[0.1, 0.1]",
    "[1, a]",
];

/// Where a value sits on a line: after `key: ` or `- `, up to the end of the line.
fn value_start(line: &str) -> Option<usize> {
    let body = line.trim_start();
    let indent = line.len() - body.len();
    if body.starts_with('#') {
        return None;
    }
    if let Some(rest) = body.strip_prefix("- ") {
        return Some(indent + 2 + (rest.len() - rest.trim_start().len()));
    }
    let colon = body.find(": ")?;
    let after = &body[colon + 2..];
    (!after.trim().is_empty())
        .then(|| indent + colon + 2 + (after.len() - after.trim_start().len()))
}

/// Byte ranges of the scalars inside flow collections and plain values on a line: runs of
/// characters other than `[]{},:` and spaces (so `{from: 0.1, to: 5}` gives `from`, `0.1`,
/// `to`, `5`).
fn tokens(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line
        .char_indices()
        .chain(std::iter::once((line.len(), ' ')))
    {
        let sep = matches!(
            c,
            '[' | ']' | '{' | '}' | ',' | ':' | ' ' | '#' | '"' | '\''
        );
        match (start, sep) {
            (None, false) => start = Some(i),
            (Some(s), true) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// One mutation of `bytes`; returns what it did.
fn mutate(bytes: &mut Vec<u8>, rng: &mut Rng, kinds: &[String]) -> String {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let n = lines.len();
    let i = rng.below(n);
    // Weights: most mutations keep the YAML well-formed, so that they reach the parameter
    // checks of the stage kinds instead of stopping at the parser.
    let what = match rng.below(20) {
        0 => {
            lines.remove(i);
            format!("deleted line {}", i + 1)
        }
        1 => {
            let l = lines[i].clone();
            lines.insert(i, l);
            format!("duplicated line {}", i + 1)
        }
        2 => {
            let j = rng.below(n);
            lines.swap(i, j);
            format!("swapped lines {} and {}", i + 1, j + 1)
        }
        3 => {
            let l = &mut lines[i];
            match rng.below(3) {
                0 => l.insert(0, ' '),
                1 => l.insert_str(0, "  "),
                _ => {
                    let k = l.len() - l.trim_start().len();
                    l.drain(..k.min(1 + rng.below(2)));
                }
            }
            format!("re-indented line {}", i + 1)
        }
        // A whole value after `key: ` or `- `.
        4..=9 => {
            let h = hostile(rng);
            let what = match value_start(&lines[i]) {
                Some(at) => {
                    lines[i].replace_range(at.., &h);
                    format!("line {}: value replaced by {}", i + 1, short(&h))
                }
                None if lines[i].trim_end().ends_with(':') => {
                    // `key:` and the block under it become `key: <value>`.
                    let indent = |l: &str| l.len() - l.trim_start().len();
                    let own = indent(&lines[i]);
                    let end = (i + 1..lines.len())
                        .find(|&j| !lines[j].trim().is_empty() && indent(&lines[j]) <= own)
                        .unwrap_or(lines.len());
                    lines.drain(i + 1..end);
                    lines[i] = format!("{} {h}", lines[i].trim_end());
                    format!("line {}: block replaced by {}", i + 1, short(&h))
                }
                None => {
                    lines[i] = format!("{} {h}", lines[i].trim_end());
                    format!("line {}: appended {}", i + 1, short(&h))
                }
            };
            // An alias refers to the value of an earlier line, anchored.
            if h == "*a" {
                if let Some((j, at)) = (0..i)
                    .rev()
                    .find_map(|j| Some((j, value_start(&lines[j])?)))
                {
                    lines[j].insert_str(at, "&a ");
                }
            }
            what
        }
        // One scalar inside a line (a number of a flow list, a key…).
        10..=15 => {
            let h = hostile(rng);
            let toks = tokens(&lines[i]);
            if toks.is_empty() {
                lines.insert(i, h.clone());
                format!("inserted line {}: {}", i + 1, short(&h))
            } else {
                let (a, b) = *rng.choose(&toks);
                let old = lines[i][a..b].to_string();
                lines[i].replace_range(a..b, &h);
                format!(
                    "line {}: `{}` replaced by {}",
                    i + 1,
                    short(&old),
                    short(&h)
                )
            }
        }
        // Another stage kind.
        16 | 17 => {
            let ks: Vec<usize> = (0..n)
                .filter(|&j| lines[j].trim_start().starts_with("kind: "))
                .collect();
            let k = rng.choose(kinds).clone();
            if ks.is_empty() {
                lines[i] = format!("{}kind: {k}", lines[i]);
                format!("line {}: appended kind {k}", i + 1)
            } else {
                let j = *rng.choose(&ks);
                let at = lines[j].find("kind: ").expect("found") + 6;
                lines[j].replace_range(at.., &k);
                format!("line {}: kind {k}", j + 1)
            }
        }
        // Bytes: truncation, NUL, invalid UTF-8.
        18 => {
            let at = rng.below(bytes.len() + 1);
            bytes.truncate(at);
            return format!("truncated at byte {at}");
        }
        _ => {
            let at = rng.below(bytes.len() + 1);
            const BYTES: [&[u8]; 5] = [b"\0", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf"];
            let b = *rng.choose(&BYTES);
            bytes.splice(at..at, b.iter().copied());
            return format!("inserted {b:02x?} at byte {at}");
        }
    };
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    *bytes = out.into_bytes();
    what
}

fn hostile(rng: &mut Rng) -> String {
    match rng.below(20) {
        0 => "x".repeat(20_000),
        1 => format!("{}1", "9".repeat(400)),
        _ => rng.choose(HOSTILE).to_string(),
    }
}

fn short(s: &str) -> String {
    if s.len() > 40 {
        let cut = (0..=30).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        format!("`{}…` ({} bytes)", &s[..cut], s.len())
    } else {
        format!("`{s}`")
    }
}

fn pipelines(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read pipelines/")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            pipelines(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// What went wrong with one run, if anything.
fn verdict(status: std::process::ExitStatus, stderr: &str, took: Duration) -> Option<String> {
    if took >= TIMEOUT {
        return Some(format!("timed out after {took:?}"));
    }
    if let Some(sig) = status.signal() {
        return Some(format!("killed by signal {sig}"));
    }
    if !matches!(status.code(), Some(0..=2)) {
        return Some(format!("exit code {:?}", status.code()));
    }
    if stderr.contains("panicked") {
        return Some("panicked".into());
    }
    None
}

/// `program` with its address space limited to [`MEMORY`].
fn limited(program: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    // SAFETY: only setrlimit, which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MEMORY,
                rlim_max: MEMORY,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// `dplab validate file` under the timeout and the address-space limit: what went wrong (if
/// anything), the exit code, stderr.
fn validate(file: &Path) -> (Option<String>, Option<i32>, String) {
    let mut cmd = limited(&assert_cmd::cargo::cargo_bin("dplab"));
    cmd.arg("validate")
        .arg(file)
        .env("NO_COLOR", "1")
        .env("RUST_BACKTRACE", "0");
    let t0 = Instant::now();
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(TIMEOUT)
        .output()
        .expect("run dplab");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        verdict(out.status, &stderr, t0.elapsed()),
        out.status.code(),
        stderr,
    )
}

#[test]
fn mutated_pipelines_never_crash_validate() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let count = env("DPLAB_MUTATE_COUNT").map_or(DEFAULT_COUNT, |n| n as usize);
    let seed = env("DPLAB_MUTATE_SEED").unwrap_or(DEFAULT_SEED);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    pipelines(&root.join("pipelines"), &mut files);
    assert!(files.len() >= 10, "found only {} pipelines", files.len());
    let originals: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let mut kinds: Vec<String> = originals
        .iter()
        .flat_map(|b| {
            String::from_utf8_lossy(b)
                .lines()
                .filter_map(|l| l.trim_start().strip_prefix("kind: ").map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    kinds.sort();
    kinds.dedup();

    // One directory per pipeline directory, holding copies of its non-YAML files (the paper
    // tables pipelines name with `paper:` / `path:`), so that a mutant reads what the original does.
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for f in &files {
        let rel = f.parent().unwrap().strip_prefix(root).unwrap();
        let d = tmp.path().join(rel);
        if !d.exists() {
            std::fs::create_dir_all(&d).unwrap();
            for e in std::fs::read_dir(f.parent().unwrap()).unwrap() {
                let p = e.unwrap().path();
                if p.is_file() && !p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    std::fs::copy(&p, d.join(p.file_name().unwrap())).unwrap();
                }
            }
        }
        dirs.push(d);
    }

    // The mutants, all made up front from the seed (so the worker count cannot change them).
    let mut rng = Rng::new(seed);
    let mutants: Vec<(usize, Vec<u8>, Vec<String>)> = (0..count)
        .map(|m| {
            let which = m % files.len();
            let mut bytes = originals[which].clone();
            let steps = (0..1 + rng.below(3))
                .map(|_| mutate(&mut bytes, &mut rng, &kinds))
                .collect();
            (which, bytes, steps)
        })
        .collect();

    let t0 = Instant::now();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let next = std::sync::atomic::AtomicUsize::new(0);
    // Runs by exit code: 0 valid, 1 (not expected from validate, but clean), 2 refused.
    let codes = std::sync::Mutex::new([0usize; 3]);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let m = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((which, bytes, steps)) = mutants.get(m) else {
                    break;
                };
                let file = dirs[*which].join(format!("mutant-{m}.yaml"));
                std::fs::write(&file, bytes).unwrap();
                let (bad, code, stderr) = validate(&file);
                match bad {
                    None => {
                        codes.lock().unwrap()[code.unwrap_or(1) as usize] += 1;
                        std::fs::remove_file(&file).unwrap();
                    }
                    Some(why) => failures.lock().unwrap().push((
                        m,
                        files[*which].clone(),
                        steps.clone(),
                        why,
                        stderr,
                        bytes.clone(),
                    )),
                }
            });
        }
    });
    let took = t0.elapsed();
    let codes = codes.into_inner().unwrap();
    let mut failures = failures.into_inner().unwrap();
    failures.sort_by_key(|f| f.0);
    println!(
        "{count} mutants of {} pipelines (seed {seed:#x}) validated in {:.1} s with {workers} workers: \
{} accepted (exit 0), {} refused (exit 2), {} exit 1, {} failures",
        files.len(),
        took.as_secs_f64(),
        codes[0],
        codes[2],
        codes[1],
        failures.len()
    );
    if failures.is_empty() {
        return;
    }
    let keep = root.join("target/mutate-failures");
    std::fs::create_dir_all(&keep).unwrap();
    let mut report = String::new();
    for (m, orig, steps, why, stderr, bytes) in &failures {
        let kept = keep.join(format!("mutant-{m}.yaml"));
        std::fs::write(&kept, bytes).unwrap();
        // The panic message if there is one, else the last lines.
        let lines: Vec<&str> = stderr.lines().collect();
        let from = lines
            .iter()
            .position(|l| l.contains("panicked"))
            .unwrap_or(lines.len().saturating_sub(6));
        let tail = lines[from..lines.len().min(from + 6)].join("\n    ");
        report.push_str(&format!(
            "\nmutant {m} of {} ({}): {why}\n  kept as {}\n  stderr:\n    {tail}\n",
            orig.strip_prefix(root).unwrap_or(orig).display(),
            steps.join("; "),
            kept.display()
        ));
    }
    panic!(
        "{} of {count} mutants crashed `dplab validate` (copy a kept file next to its original \
pipeline to reproduce):{report}",
        failures.len()
    );
}

/// The checks themselves: a signal, an exit code outside 0–2, a panic message or a timeout is
/// a failure, and the address-space limit reaches the child.
#[test]
fn the_harness_catches_crashes() {
    use std::process::ExitStatus;
    let quick = Duration::from_millis(5);
    assert!(verdict(ExitStatus::from_raw(0), "", quick).is_none());
    assert!(verdict(ExitStatus::from_raw(2 << 8), "error: x", quick).is_none());
    assert!(verdict(ExitStatus::from_raw(101 << 8), "", quick).is_some());
    assert!(verdict(ExitStatus::from_raw(libc::SIGABRT), "", quick).is_some());
    assert!(verdict(ExitStatus::from_raw(libc::SIGKILL), "", quick).is_some());
    assert!(verdict(
        ExitStatus::from_raw(2 << 8),
        "thread 'main' panicked at",
        quick
    )
    .is_some());
    assert!(verdict(ExitStatus::from_raw(0), "", TIMEOUT).is_some());
    let out = limited(Path::new("/bin/sh"))
        .args(["-c", "ulimit -v"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        (MEMORY / 1024).to_string()
    );
}
