//! The lock of the golden frames, `tests/golden/VERSIONS`: which kind, at which `version`, made
//! each golden CSV, and the file's sha256. One line per frame:
//!
//! ```text
//! <pipeline>/<stage>.csv <kind> <version> <sha256 of tests/golden/<pipeline>/<stage>.csv>
//! ```
//!
//! The instance store keys results by kind version, so a kind whose output changes while its
//! version does not would have stored results of the old code served as its output. The lock
//! makes that change impossible to commit unnoticed:
//!
//! - **Update mode** (`make golden`, which sets `DPLAB_GOLDEN_UPDATE` to the fresh `--profile ci`
//!   run in `target/golden`): each frame of the run is compared with its committed golden frame
//!   the way `dplab compare` does (so wall times in `*_seconds` cells and differences within the
//!   default tolerance do not count). A frame that changed is accepted only when the
//!   `kind_version` its run's manifest records is greater than the lock's; otherwise nothing is
//!   written and the message names the frame, the kind and the file that declares its version.
//!   Versions never go down. New frames are added, frames the run no longer makes are removed,
//!   unchanged frames keep their committed bytes, and the lock is rewritten.
//! - **Normal mode** (`cargo test`, hence `make test`): cheap, reads only `tests/golden` and the
//!   registry. Every golden CSV has a lock line with its sha256 (else it was edited outside
//!   `make golden`), every lock line's version is its kind's current version (else a kind was
//!   bumped and `make golden` not run), and no lock line names a frame that does not exist.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use dplab::pipeline::compare::{compare_dirs, Tolerance};
use sha2::{Digest, Sha256};

/// Set by `make golden` to the results root of its fresh run: update mode.
const UPDATE_VAR: &str = "DPLAB_GOLDEN_UPDATE";

/// `dplab compare`'s default tolerance, which `make test` uses against `tests/golden`.
const RTOL: f64 = 1e-9;
const ATOL: f64 = 1e-12;

const LOCK_HEADER: &str = "\
# The golden frames and the kind versions that made them (see README, \"The instance store\"):
# <pipeline>/<stage>.csv <kind> <version> <sha256 of the file>
# Written by `make golden`, checked by `cargo test --test golden_versions`. Do not edit by hand.
";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------
// The lock file.

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    kind: String,
    version: u32,
    sha256: String,
}

/// Frame (`<pipeline>/<stage>.csv`) → what made it.
type Lock = BTreeMap<String, Entry>;

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A frame's name in the lock: two path components, the second a `.csv` file.
fn is_frame(s: &str) -> bool {
    let ok = |c: &str| !c.is_empty() && !c.starts_with('.') && !c.contains('\\');
    match s.split_once('/') {
        Some((p, f)) => ok(p) && ok(f) && !f.contains('/') && f.ends_with(".csv"),
        None => false,
    }
}

fn parse_lock(text: &str) -> Result<Lock, String> {
    let mut lock = Lock::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |m: String| format!("line {}: {m}", i + 1);
        let f: Vec<&str> = line.split_whitespace().collect();
        let [frame, kind, version, sha256] = f[..] else {
            return Err(at(format!(
                "expected `<pipeline>/<stage>.csv <kind> <version> <sha256>`, got `{line}`"
            )));
        };
        if !is_frame(frame) {
            return Err(at(format!("`{frame}` is not `<pipeline>/<stage>.csv`")));
        }
        let version: u32 = version
            .parse()
            .map_err(|_| at(format!("version `{version}` is not an integer")))?;
        if !is_sha256(sha256) {
            return Err(at(format!("`{sha256}` is not a lowercase hex sha256")));
        }
        let entry = Entry {
            kind: kind.to_string(),
            version,
            sha256: sha256.to_string(),
        };
        if lock.insert(frame.to_string(), entry).is_some() {
            return Err(at(format!("{frame} is listed twice")));
        }
    }
    Ok(lock)
}

fn format_lock(lock: &Lock) -> String {
    let mut s = LOCK_HEADER.to_string();
    for (frame, e) in lock {
        s.push_str(&format!("{frame} {} {} {}\n", e.kind, e.version, e.sha256));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Normal mode.

/// Everything wrong between the committed golden frames (frame → sha256 of the file), the lock
/// and the current versions of the kinds (`None`: no such kind). Empty when all agree.
fn check(
    lock: &Lock,
    golden: &BTreeMap<String, String>,
    version_of: &dyn Fn(&str) -> Option<u32>,
    locate: &dyn Fn(&str) -> String,
) -> Vec<String> {
    let mut errors = Vec::new();
    for (frame, sha) in golden {
        match lock.get(frame) {
            None => errors.push(format!(
                "tests/golden/{frame}: golden frame edited outside make golden (it has no line \
                 in tests/golden/VERSIONS): run make golden, which checks kind versions"
            )),
            Some(e) if &e.sha256 != sha => errors.push(format!(
                "tests/golden/{frame}: golden frame edited outside make golden (sha256 {sha}, \
                 tests/golden/VERSIONS says {}): restore it (git checkout) or run make golden, \
                 which checks that kind `{}`'s version was raised",
                e.sha256, e.kind
            )),
            Some(_) => {}
        }
    }
    for frame in lock.keys() {
        if !golden.contains_key(frame) {
            errors.push(format!(
                "tests/golden/VERSIONS: stale line for {frame}, which is not in tests/golden: \
                 run make golden"
            ));
        }
    }
    // One message per kind, naming its frames.
    let mut by_kind: BTreeMap<(&str, u32), Vec<&str>> = BTreeMap::new();
    for (frame, e) in lock {
        by_kind
            .entry((e.kind.as_str(), e.version))
            .or_default()
            .push(frame);
    }
    for ((kind, locked), frames) in by_kind {
        let frames = frames.join(", ");
        match version_of(kind) {
            None => errors.push(format!(
                "tests/golden/VERSIONS: kind `{kind}` no longer exists (frames {frames}): run \
                 make golden"
            )),
            Some(v) if v > locked => errors.push(format!(
                "tests/golden/VERSIONS: version of kind `{kind}` bumped ({locked} → {v} in {}): \
                 run make golden to regenerate its frames ({frames})",
                locate(kind)
            )),
            Some(v) if v < locked => errors.push(format!(
                "tests/golden/VERSIONS: version of kind `{kind}` went down ({locked} → {v} in \
                 {}): versions only go up, since stores may hold results of every version \
                 below {locked}; set it above {locked}",
                locate(kind)
            )),
            Some(_) => {}
        }
    }
    errors
}

// ---------------------------------------------------------------------------------------------
// Update mode: the decision.

/// A frame of the fresh run.
#[derive(Clone, Debug)]
struct Fresh {
    kind: String,
    /// `kind_version` in the run's manifest.
    version: u32,
    sha256: String,
    /// The sha256 of the committed golden file when that file holds the same frame: identical
    /// bytes, or equal for `dplab compare` (only wall times, or numbers within the tolerance,
    /// differ). The committed bytes are then kept.
    same_as_committed: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// The committed file stays as it is.
    Keep,
    /// The fresh file replaces (or becomes) the golden one.
    Write,
    /// The run no longer makes this frame.
    Remove,
}

#[derive(Debug)]
struct Update {
    lock: Lock,
    actions: BTreeMap<String, Action>,
}

/// Why `make golden` refuses a frame.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// The frame changed and its kind's version did not rise.
    NotBumped {
        frame: String,
        kind: String,
        version: u32,
    },
    /// The kind's version is lower than the one that made the locked frame.
    WentDown {
        frame: String,
        kind: String,
        locked: u32,
        now: u32,
    },
}

impl Refusal {
    /// One line naming the frame, the kind and where its version is declared (`locate`).
    fn line(&self, locate: &dyn Fn(&str) -> String) -> String {
        match self {
            Refusal::NotBumped {
                frame,
                kind,
                version,
            } => format!(
                "{frame} changed, but kind `{kind}` is still version {version}: bump `version` \
                 of `{kind}` in {}",
                locate(kind)
            ),
            Refusal::WentDown {
                frame,
                kind,
                locked,
                now,
            } => format!(
                "{frame}: the version of kind `{kind}` went down from {locked} to {now}: versions \
                 only go up (stores may hold results of every version up to {locked}); set it \
                 above {locked} in {}",
                locate(kind)
            ),
        }
    }

    fn frame(&self) -> &str {
        match self {
            Refusal::NotBumped { frame, .. } | Refusal::WentDown { frame, .. } => frame,
        }
    }
}

/// Everything `make golden` says when it refuses: one line per frame, why a bump is needed, and
/// per pipeline its stages without a golden frame (`hidden`: pipeline → `stage (kind, where)`).
fn refusal_report(
    refusals: &[Refusal],
    locate: &dyn Fn(&str) -> String,
    hidden: &dyn Fn(&str) -> Vec<String>,
) -> String {
    let mut s = String::from(
        "make golden refused; tests/golden and tests/golden/VERSIONS are unchanged.\n\n",
    );
    for r in refusals {
        s.push_str(&format!("  {}\n", r.line(locate)));
    }
    if refusals
        .iter()
        .any(|r| matches!(r, Refusal::NotBumped { .. }))
    {
        s.push_str(
            "\nThen rerun make golden. The instance store keys results by kind version: without \
             the bump, stores keep serving the old code's results as these kinds' output. The \
             rule is per frame, so a frame that changed only through its pipeline file or an \
             upstream stage needs its kind bumped too (a harmless recomputation).\n",
        );
        let pipelines: BTreeSet<&str> = refusals
            .iter()
            .map(|r| r.frame().split_once('/').map_or(r.frame(), |(p, _)| p))
            .collect();
        let mut first = true;
        for p in pipelines {
            let h = hidden(p);
            if h.is_empty() {
                continue;
            }
            if first {
                s.push_str(
                    "\nStages without a golden frame, whose changes show only in the frames that \
                     read them (bump the kind of any whose output changed):\n",
                );
                first = false;
            }
            s.push_str(&format!("  {p}: {}\n", h.join(", ")));
        }
    }
    s
}

/// What `make golden` does with the fresh run's frames, given the lock: the new lock and what
/// happens to each golden file, or every frame it refuses. `committed` is the set of golden
/// files present before (a frame the run no longer makes is removed).
fn decide(
    lock: &Lock,
    fresh: &BTreeMap<String, Fresh>,
    committed: &BTreeSet<String>,
) -> Result<Update, Vec<Refusal>> {
    let mut refusals = Vec::new();
    let mut new_lock = Lock::new();
    let mut actions = BTreeMap::new();
    for (frame, f) in fresh {
        if let Some(old) = lock.get(frame).filter(|old| old.kind == f.kind) {
            let unchanged = f.sha256 == old.sha256
                || f.same_as_committed.as_deref() == Some(old.sha256.as_str());
            if f.version < old.version {
                refusals.push(Refusal::WentDown {
                    frame: frame.clone(),
                    kind: f.kind.clone(),
                    locked: old.version,
                    now: f.version,
                });
                continue;
            }
            if !unchanged && f.version == old.version {
                refusals.push(Refusal::NotBumped {
                    frame: frame.clone(),
                    kind: f.kind.clone(),
                    version: f.version,
                });
                continue;
            }
        }
        // Unchanged, or changed with a raised version, or new (no line, or the stage now has
        // another kind: its instances have other store keys).
        let (action, sha256) = match &f.same_as_committed {
            Some(sha) => (Action::Keep, sha.clone()),
            None => (Action::Write, f.sha256.clone()),
        };
        actions.insert(frame.clone(), action);
        new_lock.insert(
            frame.clone(),
            Entry {
                kind: f.kind.clone(),
                version: f.version,
                sha256,
            },
        );
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    for frame in committed {
        if !fresh.contains_key(frame) {
            actions.insert(frame.clone(), Action::Remove);
        }
    }
    Ok(Update {
        lock: new_lock,
        actions,
    })
}

// ---------------------------------------------------------------------------------------------
// Files.

fn sha256_file(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn visible(name: &str) -> bool {
    !name.starts_with('.')
}

/// The frames of a results root (or of `tests/golden`): `<pipeline>/<stage>.csv` → path.
fn frames_under(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut frames = BTreeMap::new();
    let Ok(pipelines) = fs::read_dir(dir) else {
        return frames;
    };
    for p in pipelines {
        let p = p.expect("listing a directory");
        let pname = p.file_name().to_string_lossy().to_string();
        if !visible(&pname) || !p.path().is_dir() {
            continue;
        }
        for f in fs::read_dir(p.path()).expect("listing a pipeline directory") {
            let f = f.expect("listing a pipeline directory");
            let fname = f.file_name().to_string_lossy().to_string();
            if visible(&fname) && fname.ends_with(".csv") && f.path().is_file() {
                frames.insert(format!("{pname}/{fname}"), f.path());
            }
        }
    }
    frames
}

/// Whether two CSV frames are equal for `dplab compare` (A is the fresh one, as in `make test`).
fn same_frame(fresh: &Path, golden: &Path) -> bool {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for (dir, src) in [(&a, fresh), (&b, golden)] {
        fs::create_dir(dir).expect("a temporary directory");
        fs::copy(src, dir.join("frame.csv"))
            .unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
    }
    let tol = Tolerance::new(RTOL, ATOL).expect("a valid tolerance");
    let c = compare_dirs(&a, &b, tol).expect("comparing two frames");
    c.frames == 1 && c.report.is_empty()
}

/// Where a kind declares its version: the `name: "<kind>",` line of its `KindInfo` followed
/// by `version:`, found in `src/`; as `src/stages/x.rs:LINE` of the `version:` line.
fn locate_in(src: &Path, kind: &str) -> Option<String> {
    let needle = format!("name: \"{kind}\",");
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    for p in files {
        let text = fs::read_to_string(&p).ok()?;
        let lines: Vec<&str> = text.lines().collect();
        for (i, pair) in lines.windows(2).enumerate() {
            if pair[0].trim() == needle && pair[1].trim_start().starts_with("version:") {
                let rel = p.strip_prefix(root()).unwrap_or(&p);
                return Some(format!("{}:{}", rel.display(), i + 2));
            }
        }
    }
    None
}

fn locate(kind: &str) -> String {
    locate_in(&root().join("src"), kind)
        .unwrap_or_else(|| format!("its `KindInfo` (src/stages/, `name: \"{kind}\"`)"))
}

fn registry_version(kind: &str) -> Option<u32> {
    dplab::stages::find(kind).map(|k| k.version)
}

/// Normal mode on a golden directory and its lock.
fn check_dir(golden: &Path, lock_path: &Path) -> Vec<String> {
    let text = match fs::read_to_string(lock_path) {
        Ok(t) => t,
        Err(e) => {
            return vec![format!(
                "{}: {e}: the lock of the golden frames is missing; restore it (git checkout) \
                 or run make golden",
                lock_path.display()
            )]
        }
    };
    let lock = match parse_lock(&text) {
        Ok(l) => l,
        Err(e) => return vec![format!("{}: {e}", lock_path.display())],
    };
    let golden: BTreeMap<String, String> = frames_under(golden)
        .into_iter()
        .map(|(f, p)| (f, sha256_file(&p)))
        .collect();
    check(&lock, &golden, &registry_version, &locate)
}

/// A results directory's manifest, as much of it as the lock needs: stage → (kind, version,
/// stored).
fn read_manifest(dir: &Path) -> Result<BTreeMap<String, (String, u32, bool)>, String> {
    let path = dir.join("manifest.json");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let stages = v["stages"]
        .as_array()
        .ok_or_else(|| format!("{}: no `stages` list", path.display()))?;
    let mut out = BTreeMap::new();
    for s in stages {
        let name = s["name"].as_str();
        let kind = s["kind"].as_str();
        let version = s["kind_version"]
            .as_u64()
            .and_then(|v| u32::try_from(v).ok());
        let (Some(name), Some(kind), Some(version)) = (name, kind, version) else {
            return Err(format!(
                "{}: a stage without `name`, `kind` or `kind_version` ({s}): written by an older \
                 dplab? rerun make golden",
                path.display()
            ));
        };
        let stored = s["stored"].as_bool().unwrap_or(true);
        out.insert(name.to_string(), (kind.to_string(), version, stored));
    }
    Ok(out)
}

/// Update mode: checks the fresh run in `run` against `golden` and its lock, then (only when
/// nothing is refused) brings `golden` and the lock up to date. Returns what it did, one line
/// per frame written, removed or relocked; `Err` is the whole report.
fn update(run: &Path, golden: &Path, lock_path: &Path) -> Result<Vec<String>, String> {
    let stopped = |errors: Vec<String>| {
        format!(
            "make golden stopped; tests/golden and its lock are unchanged:\n\n{}\n",
            errors.join("\n")
        )
    };
    let committed: BTreeMap<String, PathBuf> = frames_under(golden);
    let lock = match fs::read_to_string(lock_path) {
        Ok(t) => {
            parse_lock(&t).map_err(|e| stopped(vec![format!("{}: {e}", lock_path.display())]))?
        }
        Err(_) if committed.is_empty() => Lock::new(),
        Err(e) => {
            return Err(stopped(vec![format!(
                "{}: {e}: without the lock the golden frames' versions cannot be checked. \
                 Restore it (git checkout {0}); to start a new lock on purpose, create it empty",
                lock_path.display()
            )]))
        }
    };
    // The committed frames must be the locked ones: they are what the run is compared with.
    let mut errors = Vec::new();
    for (frame, e) in &lock {
        match committed.get(frame) {
            Some(p) if sha256_file(p) == e.sha256 => {}
            _ => errors.push(format!(
                "{}/{frame} is missing or differs from {}: restore the committed golden frames \
                 (git checkout {}) before make golden",
                golden.display(),
                lock_path.display(),
                golden.display()
            )),
        }
    }
    // The fresh frames, with their kinds from the manifests.
    let run_frames = frames_under(run);
    let mut manifests = BTreeMap::new();
    for frame in run_frames.keys() {
        let pipeline = frame.split_once('/').expect("a frame name").0;
        if !manifests.contains_key(pipeline) {
            match read_manifest(&run.join(pipeline)) {
                Ok(m) => {
                    manifests.insert(pipeline.to_string(), m);
                }
                Err(e) => errors.push(e),
            }
        }
    }
    if run_frames.is_empty() {
        errors.push(format!("{}: no frames (did the run fail?)", run.display()));
    }
    if !errors.is_empty() {
        return Err(stopped(errors));
    }
    let mut fresh = BTreeMap::new();
    for (frame, path) in &run_frames {
        let (pipeline, file) = frame.split_once('/').expect("a frame name");
        let stage = file.strip_suffix(".csv").expect("a .csv name");
        let Some((kind, version, _)) = manifests[pipeline].get(stage) else {
            errors.push(format!(
                "{}: no stage `{stage}` in its manifest.json",
                path.display()
            ));
            continue;
        };
        if registry_version(kind) != Some(*version) {
            errors.push(format!(
                "{}: kind `{kind}` version {version} in the manifest, {:?} in this build: \
                 {} was made by another build; rerun make golden",
                path.display(),
                registry_version(kind),
                run.display()
            ));
            continue;
        }
        let sha256 = sha256_file(path);
        let same_as_committed = committed.get(frame).and_then(|g| {
            let g_sha = sha256_file(g);
            (g_sha == sha256 || same_frame(path, g)).then_some(g_sha)
        });
        fresh.insert(
            frame.clone(),
            Fresh {
                kind: kind.clone(),
                version: *version,
                sha256,
                same_as_committed,
            },
        );
    }
    if !errors.is_empty() {
        return Err(stopped(errors));
    }
    let committed_set: BTreeSet<String> = committed.keys().cloned().collect();
    let up = decide(&lock, &fresh, &committed_set).map_err(|refusals| {
        let hidden = |p: &str| manifests.get(p).map(hidden_stages).unwrap_or_default();
        refusal_report(&refusals, &locate, &hidden)
    })?;
    // Apply: files first, the lock last (a failure in between leaves a lock that normal mode
    // finds out of date).
    let mut done = Vec::new();
    for (frame, action) in &up.actions {
        let dest = golden.join(frame);
        match action {
            Action::Keep => {
                let e = &up.lock[frame];
                if let Some(old) = lock.get(frame).filter(|old| old.version != e.version) {
                    done.push(format!(
                        "kept {frame} (unchanged; `{}` {} → {})",
                        e.kind, old.version, e.version
                    ));
                }
            }
            Action::Write => {
                let e = up.lock[frame].clone();
                let what = match lock.get(frame) {
                    None => "new".to_string(),
                    Some(old) if old.kind != e.kind => {
                        format!("new: stage's kind was `{}`", old.kind)
                    }
                    Some(old) => format!("changed: `{}` {} → {}", e.kind, old.version, e.version),
                };
                fs::create_dir_all(dest.parent().expect("a pipeline directory"))
                    .and_then(|_| fs::copy(&run_frames[frame], &dest))
                    .unwrap_or_else(|err| panic!("writing {}: {err}", dest.display()));
                done.push(format!("written {frame} ({what})"));
            }
            Action::Remove => {
                fs::remove_file(&dest)
                    .unwrap_or_else(|err| panic!("removing {}: {err}", dest.display()));
                let dir = dest.parent().expect("a pipeline directory");
                if fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none()) {
                    let _ = fs::remove_dir(dir);
                }
                done.push(format!("removed {frame}"));
            }
        }
    }
    let tmp = lock_path.with_extension("tmp");
    fs::write(&tmp, format_lock(&up.lock))
        .and_then(|_| fs::rename(&tmp, lock_path))
        .unwrap_or_else(|err| panic!("writing {}: {err}", lock_path.display()));
    Ok(done)
}

/// The stages of a pipeline that keep no golden frame (`store: false`), as `stage (kind, where)`.
fn hidden_stages(manifest: &BTreeMap<String, (String, u32, bool)>) -> Vec<String> {
    manifest
        .iter()
        .filter(|(_, (_, _, stored))| !stored)
        .map(|(name, (kind, _, _))| format!("{name} (`{kind}`, {})", locate(kind)))
        .collect()
}

/// `cargo test`: checks `tests/golden` against its lock. `make golden`: first updates both from
/// the fresh run named by `DPLAB_GOLDEN_UPDATE`, refusing frames changed without a version bump.
#[test]
fn golden_frames_match_their_lock() {
    let golden = root().join("tests/golden");
    let lock_path = golden.join("VERSIONS");
    if let Some(run) = std::env::var_os(UPDATE_VAR) {
        let run = root().join(run);
        match update(&run, &golden, &lock_path) {
            Ok(done) => {
                println!(
                    "tests/golden/VERSIONS updated from {}; {} golden frame(s) written, removed or \
                     relocked{}",
                    run.display(),
                    done.len(),
                    if done.is_empty() { "" } else { ":" }
                );
                for line in done {
                    println!("  {line}");
                }
            }
            Err(report) => panic!("\n{report}"),
        }
    }
    let errors = check_dir(&golden, &lock_path);
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n\n"));
}

// ---------------------------------------------------------------------------------------------
// The decision logic.

mod logic {
    use super::*;

    fn sha(c: char) -> String {
        c.to_string().repeat(64)
    }

    fn entry(kind: &str, version: u32, s: char) -> Entry {
        Entry {
            kind: kind.into(),
            version,
            sha256: sha(s),
        }
    }

    fn fresh(kind: &str, version: u32, s: char, same_as_committed: Option<char>) -> Fresh {
        Fresh {
            kind: kind.into(),
            version,
            sha256: sha(s),
            same_as_committed: same_as_committed.map(sha),
        }
    }

    fn one(frame: &str, e: Entry) -> Lock {
        Lock::from([(frame.to_string(), e)])
    }

    fn run(frame: &str, f: Fresh) -> BTreeMap<String, Fresh> {
        BTreeMap::from([(frame.to_string(), f)])
    }

    fn committed(frames: &[&str]) -> BTreeSet<String> {
        frames.iter().map(|f| f.to_string()).collect()
    }

    const F: &str = "p/summary.csv";

    #[test]
    fn a_changed_frame_whose_version_did_not_rise_is_refused() {
        let lock = one(F, entry("aggregate.summary", 3, 'a'));
        let r = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 3, 'b', None)),
            &committed(&[F]),
        )
        .unwrap_err();
        assert_eq!(
            r,
            vec![Refusal::NotBumped {
                frame: F.into(),
                kind: "aggregate.summary".into(),
                version: 3
            }]
        );
        let m = refusal_report(&r, &|_| "src/stages/aggregate.rs:30".into(), &|p| {
            assert_eq!(p, "p");
            vec!["data (`load.sample`, src/stages/smooth.rs:27)".into()]
        });
        assert!(m.contains(&format!("{F} changed")), "{m}");
        assert!(
            m.contains("kind `aggregate.summary` is still version 3"),
            "{m}"
        );
        assert!(m.contains("bump `version` of `aggregate.summary` in src/stages/aggregate.rs:30"));
        assert!(m.contains("  p: data (`load.sample`"), "{m}");
    }

    #[test]
    fn a_changed_frame_with_a_raised_version_is_written() {
        let lock = one(F, entry("aggregate.summary", 1, 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 2, 'b', None)),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.actions[F], Action::Write);
        assert_eq!(up.lock, one(F, entry("aggregate.summary", 2, 'b')));
    }

    #[test]
    fn an_unchanged_frame_with_a_raised_version_is_kept_and_relocked() {
        let lock = one(F, entry("report.table", 1, 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("report.table", 4, 'a', Some('a'))),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.actions[F], Action::Keep);
        assert_eq!(up.lock, one(F, entry("report.table", 4, 'a')));
    }

    #[test]
    fn a_frame_equal_but_for_wall_times_is_unchanged_and_keeps_its_bytes() {
        // Other bytes (measured seconds), but `dplab compare` finds it equal to the golden one.
        let lock = one(F, entry("aggregate.summary", 1, 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 1, 'b', Some('a'))),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.actions[F], Action::Keep);
        assert_eq!(up.lock, lock);
    }

    #[test]
    fn a_version_that_went_down_is_refused_even_for_an_unchanged_frame() {
        let lock = one(F, entry("aggregate.summary", 2, 'a'));
        let r = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 1, 'a', Some('a'))),
            &committed(&[F]),
        )
        .unwrap_err();
        assert!(matches!(
            &r[..],
            [Refusal::WentDown {
                locked: 2,
                now: 1,
                ..
            }]
        ));
    }

    #[test]
    fn new_frames_are_added_and_vanished_ones_removed() {
        let lock = Lock::from([
            ("p/old.csv".to_string(), entry("report.table", 1, 'a')),
            ("gone/t.csv".to_string(), entry("report.table", 1, 'c')),
        ]);
        let fresh = BTreeMap::from([
            (
                "p/old.csv".to_string(),
                fresh("report.table", 1, 'a', Some('a')),
            ),
            ("p/new.csv".to_string(), fresh("frame.stack", 1, 'b', None)),
        ]);
        let up = decide(&lock, &fresh, &committed(&["p/old.csv", "gone/t.csv"])).unwrap();
        assert_eq!(up.actions["p/new.csv"], Action::Write);
        assert_eq!(up.actions["gone/t.csv"], Action::Remove);
        assert_eq!(up.actions["p/old.csv"], Action::Keep);
        assert_eq!(
            up.lock.keys().collect::<Vec<_>>(),
            vec!["p/new.csv", "p/old.csv"]
        );
    }

    #[test]
    fn a_stage_that_changed_kind_is_a_new_frame() {
        let lock = one(F, entry("aggregate.summary", 5, 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("frame.stack", 1, 'b', None)),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.lock, one(F, entry("frame.stack", 1, 'b')));
    }

    #[test]
    fn every_refusal_is_reported_at_once() {
        let lock = Lock::from([
            ("p/a.csv".to_string(), entry("k.one", 1, 'a')),
            ("p/b.csv".to_string(), entry("k.two", 1, 'a')),
        ]);
        let fresh = BTreeMap::from([
            ("p/a.csv".to_string(), fresh("k.one", 1, 'b', None)),
            ("p/b.csv".to_string(), fresh("k.two", 1, 'c', None)),
        ]);
        let r = decide(&lock, &fresh, &committed(&["p/a.csv", "p/b.csv"])).unwrap_err();
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn the_lock_reads_what_it_writes_and_refuses_malformed_lines() {
        let lock = Lock::from([
            ("p/a.csv".to_string(), entry("k.one", 1, 'a')),
            ("q/b.csv".to_string(), entry("k.two", 12, 'f')),
        ]);
        assert_eq!(parse_lock(&format_lock(&lock)).unwrap(), lock);
        let good = format!("p/a.csv k 1 {}", sha('a'));
        for bad in [
            "p/a.csv k 1".to_string(),
            format!("p/a.csv k one {}", sha('a')),
            format!("p/a.csv k 1 {}", "A".repeat(64)),
            format!("a.csv k 1 {}", sha('a')),
            format!("p/a.txt k 1 {}", sha('a')),
            format!("{good}\n{good}"),
        ] {
            assert!(parse_lock(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn normal_mode_names_edited_frames_bumped_kinds_and_stale_lines() {
        let lock = Lock::from([
            ("p/a.csv".to_string(), entry("k.one", 1, 'a')),
            ("p/b.csv".to_string(), entry("k.two", 1, 'b')),
            ("p/gone.csv".to_string(), entry("k.one", 1, 'c')),
        ]);
        let golden = BTreeMap::from([
            ("p/a.csv".to_string(), sha('e')),
            ("p/b.csv".to_string(), sha('b')),
            ("p/extra.csv".to_string(), sha('d')),
        ]);
        let versions = |k: &str| match k {
            "k.one" => Some(1),
            "k.two" => Some(2),
            _ => None,
        };
        let errors = check(&lock, &golden, &versions, &|_| "src/x.rs:1".into());
        let all = errors.join("\n");
        assert_eq!(errors.len(), 4, "{all}");
        assert!(
            all.contains("p/a.csv: golden frame edited outside make golden"),
            "{all}"
        );
        assert!(
            all.contains("p/extra.csv: golden frame edited outside make golden"),
            "{all}"
        );
        assert!(
            all.contains("version of kind `k.two` bumped (1 → 2"),
            "{all}"
        );
        assert!(all.contains("run make golden"), "{all}");
        assert!(all.contains("stale line for p/gone.csv"), "{all}");
        // All in order: nothing to say.
        let golden = BTreeMap::from([("p/a.csv".to_string(), sha('a'))]);
        let lock = one("p/a.csv", entry("k.one", 1, 'a'));
        assert!(check(&lock, &golden, &versions, &|_| String::new()).is_empty());
        // A kind removed, a version lowered.
        let lock = one("p/a.csv", entry("k.gone", 1, 'a'));
        let e = check(&lock, &golden, &versions, &|_| String::new());
        assert!(e[0].contains("`k.gone` no longer exists"), "{e:?}");
        let lock = one("p/a.csv", entry("k.one", 3, 'a'));
        let e = check(&lock, &golden, &versions, &|_| String::new());
        assert!(e[0].contains("went down"), "{e:?}");
    }

    #[test]
    fn every_registered_kind_is_located_in_src() {
        for k in dplab::stages::registry() {
            let at = locate_in(&root().join("src"), k.name)
                .unwrap_or_else(|| panic!("kind `{}`: no `name:` + `version:` in src/", k.name));
            assert!(at.starts_with("src/") && at.contains(".rs:"), "{at}");
        }
    }

    #[test]
    fn only_wall_times_may_differ_between_equal_frames() {
        let tmp = tempfile::tempdir().unwrap();
        let w = |name: &str, text: &str| {
            let p = tmp.path().join(name);
            fs::write(&p, text).unwrap();
            p
        };
        let golden = w("g.csv", "x,mean,lp_seconds\n1,0.5,0.01\n");
        let timing = w("t.csv", "x,mean,lp_seconds\n1,0.5,0.07\n");
        let value = w("v.csv", "x,mean,lp_seconds\n1,0.6,0.01\n");
        let rows = w("r.csv", "x,mean,lp_seconds\n1,0.5,0.01\n2,0.5,0.01\n");
        assert!(same_frame(&timing, &golden));
        assert!(!same_frame(&value, &golden));
        assert!(!same_frame(&rows, &golden));
    }

    /// The whole of update mode on a made-up run: refused without touching anything, then
    /// accepted once the version in the manifest rises; normal mode agrees afterwards.
    #[test]
    fn update_mode_writes_nothing_when_it_refuses() {
        let tmp = tempfile::tempdir().unwrap();
        let (run, golden) = (tmp.path().join("run"), tmp.path().join("golden"));
        let lock_path = golden.join("VERSIONS");
        let kind = "aggregate.summary";
        let v = registry_version(kind).unwrap();
        let manifest = |version: u32| {
            serde_json::json!({"stages": [
                {"name": "summary", "kind": kind, "kind_version": version, "stored": true},
                {"name": "data", "kind": "load.sample", "kind_version": 1, "stored": false},
            ]})
            .to_string()
        };
        fs::create_dir_all(run.join("p")).unwrap();
        fs::create_dir_all(golden.join("p")).unwrap();
        fs::write(run.join("p/manifest.json"), manifest(v)).unwrap();
        fs::write(run.join("p/summary.csv"), "a,b_seconds\n1,0.2\n").unwrap();
        fs::write(golden.join("p/summary.csv"), "a,b_seconds\n1,0.1\n").unwrap();
        fs::write(golden.join("p/old.csv"), "a\n1\n").unwrap();
        // A committed golden frame but no lock: refused.
        assert!(update(&run, &golden, &lock_path)
            .unwrap_err()
            .contains("create it empty"));
        // An empty lock starts one: the frame equal but for wall times keeps its bytes.
        fs::write(&lock_path, "").unwrap();
        let done = update(&run, &golden, &lock_path).unwrap();
        assert_eq!(done, vec!["removed p/old.csv"]);
        assert_eq!(
            fs::read_to_string(golden.join("p/summary.csv")).unwrap(),
            "a,b_seconds\n1,0.1\n"
        );
        let locked = fs::read_to_string(&lock_path).unwrap();
        assert!(
            locked.contains(&format!("p/summary.csv {kind} {v} ")),
            "{locked}"
        );
        // The output changes, the version does not: refused, nothing written.
        fs::write(run.join("p/summary.csv"), "a,b_seconds\n2,0.2\n").unwrap();
        let e = update(&run, &golden, &lock_path).unwrap_err();
        assert!(
            e.contains("p/summary.csv changed") && e.contains(kind),
            "{e}"
        );
        assert!(e.contains("src/stages/aggregate.rs:"), "{e}");
        assert!(e.contains("data (`load.sample`"), "{e}");
        assert_eq!(fs::read_to_string(&lock_path).unwrap(), locked);
        assert_eq!(
            fs::read_to_string(golden.join("p/summary.csv")).unwrap(),
            "a,b_seconds\n1,0.1\n"
        );
        // A golden frame edited by hand is refused before anything is compared.
        fs::write(golden.join("p/summary.csv"), "a,b_seconds\n1,0.3\n").unwrap();
        let e = update(&run, &golden, &lock_path).unwrap_err();
        assert!(e.contains("git checkout"), "{e}");
        fs::write(golden.join("p/summary.csv"), "a,b_seconds\n1,0.1\n").unwrap();
        // A manifest from another build (its version is not this build's) is refused.
        fs::write(run.join("p/manifest.json"), manifest(v + 1)).unwrap();
        let e = update(&run, &golden, &lock_path).unwrap_err();
        assert!(e.contains("another build"), "{e}");
        // With the version raised the change is accepted. This build's registry cannot be
        // raised here, so the lock is lowered instead, which is the same decision.
        fs::write(run.join("p/manifest.json"), manifest(v)).unwrap();
        fs::write(
            &lock_path,
            locked.replace(&format!(" {v} "), &format!(" {} ", v - 1)),
        )
        .unwrap();
        let done = update(&run, &golden, &lock_path).unwrap();
        assert_eq!(
            done,
            vec![format!(
                "written p/summary.csv (changed: `{kind}` {} → {v})",
                v - 1
            )]
        );
        assert_eq!(
            fs::read_to_string(golden.join("p/summary.csv")).unwrap(),
            "a,b_seconds\n2,0.2\n"
        );
        assert!(check_dir(&golden, &lock_path).is_empty());
    }
}
