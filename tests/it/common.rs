//! What the integration-test modules share.

use assert_cmd::Command;

/// `dplab` with a fresh, empty instance store: no test passes because of work an earlier
/// command stored (tests of the store pass `--store` themselves).
///
/// The stores live under `target/tmp/test-stores/<test binary>/`, which the first call of a
/// test process empties: the space a test run takes is bounded by one run, not left behind in
/// the system's temporary directory run after run (each store is a few MB to a few hundred).
pub fn dplab() -> Command {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let root = ROOT.get_or_init(|| {
        // The test binary's name: the executable is `<name>-<hash>`; cargo never runs one
        // test binary twice at once.
        let exe = std::env::current_exe().expect("the test executable");
        let stem = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let file = stem.rsplit_once('-').map_or(stem.as_str(), |(f, _)| f);
        let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("test-stores")
            .join(file);
        let _ = std::fs::remove_dir_all(&root);
        root
    });
    let store = root.join(N.fetch_add(1, Ordering::Relaxed).to_string());
    let mut c = Command::cargo_bin("dplab").expect("binary built");
    c.env("DPLAB_STORE", store);
    c
}

/// Writes `text` to `dir/name` (creating parent directories) and returns the path.
pub fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// `dplab run -q --out OUT FILE`, which must succeed (its output is the assertion's message).
pub fn run_ok(out: &std::path::Path, file: &std::path::Path) -> std::process::Output {
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(out)
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    o
}

/// A command's stdout and stderr, for assertion messages.
pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Per stage of a results directory's manifest: (name, instances run, instances from the
/// store).
pub fn manifest_counts(results: &std::path::Path) -> Vec<(String, u64, u64)> {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("manifest.json")).unwrap()).unwrap();
    m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["instances_run"].as_u64().unwrap(),
                s["instances_cached"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `text` with `dir` (a test's temporary directory, as given and as the system resolves it)
/// written as `[TMP]`: a snapshot of a whole output must not hold a path that changes from
/// run to run.
pub fn stable(text: &str, dir: &std::path::Path) -> String {
    let mut s = text.to_string();
    if let Ok(real) = dir.canonicalize() {
        s = s.replace(&*real.to_string_lossy(), "[TMP]");
    }
    s.replace(&*dir.to_string_lossy(), "[TMP]")
}

/// The files of a results directory that record how its run went (times, counts, what came
/// from the store), not what it computed: two runs of the same pipeline differ in them.
pub const RUN_RECORDS: [&str; 2] = ["manifest.json", "instances.parquet"];

/// Every file of a results directory but its run records ([`RUN_RECORDS`]: times and
/// counts), by path below it (`rerun/` included), with its bytes, in path order. Each must be
/// a plain file or a folder.
pub fn result_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            if t.is_dir() {
                walk(root, &e.path(), out);
            } else if !RUN_RECORDS.contains(&rel.as_str()) {
                assert!(t.is_file(), "{}", e.path().display());
                out.push((rel, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}
