//! The lock of the golden frames, `tests/golden/VERSIONS`: for each golden CSV, the kind and
//! `version` of its stage, a digest of its stage's instance store keys, and the file's sha256.
//! One line per frame:
//!
//! ```text
//! <pipeline>/<stage>.csv <kind> <version> <keys> <sha256 of tests/golden/<pipeline>/<stage>.csv>
//! ```
//!
//! `<keys>` is the sha256 (64 hex digits) of the stage's instance store keys as its run's
//! `manifest.json` lists them (`stages[].seeds[].key`, in manifest order), joined by `\n` with no
//! trailing newline.
//!
//! The danger is a stale instance store: the store reuses an instance whose key is unchanged, and
//! a key covers the kind and its version, the stage's and its inputs' names, the canonical
//! parameters, the seed, the axis values, the upstream instances' keys, file hashes and dataset
//! checksums, but not the kind's code. So a frame whose output changed while its stage's keys did
//! not is exactly a result a store would serve stale: some kind's code (the stage's own, or an
//! upstream one) changed what it outputs without a `version` bump. The lock makes that change
//! impossible to commit unnoticed:
//!
//! - **Update mode** (`make golden`, which sets `DPLAB_GOLDEN_UPDATE` to the fresh `--profile ci`
//!   run in `target/golden`): each frame of the run is compared with its committed golden frame
//!   the way `dplab compare` does (so wall times in `*_seconds` cells and differences within the
//!   default tolerance do not count). A frame that changed is refused when its keys digest is the
//!   lock's; one whose keys changed (its kind's or an upstream kind's version rose, or its
//!   parameters, inputs or files changed) is accepted. Versions never go down. When anything is
//!   refused nothing is written and the message names each frame, its kind and the file:line of
//!   its `version`. Otherwise new frames are added, frames the run no longer makes are removed,
//!   unchanged frames keep their committed bytes, and the lock is rewritten.
//! - **Normal mode** (`cargo test`, hence `make test`): cheap, reads only `tests/golden` and the
//!   registry (so it cannot check keys). Every golden CSV has a lock line with its sha256 (else
//!   it was edited outside `make golden`), every lock line's version is its kind's current
//!   version (else a kind was bumped and `make golden` not run), and no lock line names a frame
//!   that does not exist.

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
# The golden frames and what made them (see docs/src/store.md):
# <pipeline>/<stage>.csv <kind> <version> <keys> <sha256 of the file>
# <keys>: sha256 of the stage's instance store keys, as its run's manifest.json lists them
# (stages[].seeds[].key, in manifest order), joined by newlines (no trailing newline).
# make golden refuses a changed frame whose <keys> did not change: a store would serve it stale.
# Written by `make golden`, checked by `cargo test --test it golden_versions`. Do not edit by hand.
";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `<keys>` of a lock line: sha256 of a stage's instance store keys joined by `\n`.
fn keys_digest<S: AsRef<str>>(keys: &[S]) -> String {
    let joined: Vec<&str> = keys.iter().map(AsRef::as_ref).collect();
    hex(&Sha256::digest(joined.join("\n").as_bytes()))
}

// ---------------------------------------------------------------------------------------------
// The lock file.

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    kind: String,
    version: u32,
    /// [`keys_digest`] of the stage's instance store keys.
    keys: String,
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
        let [frame, kind, version, keys, sha256] = f[..] else {
            return Err(at(format!(
                "expected `<pipeline>/<stage>.csv <kind> <version> <keys> <sha256>`, got `{line}`"
            )));
        };
        if !is_frame(frame) {
            return Err(at(format!("`{frame}` is not `<pipeline>/<stage>.csv`")));
        }
        let version: u32 = version
            .parse()
            .map_err(|_| at(format!("version `{version}` is not an integer")))?;
        for h in [keys, sha256] {
            if !is_sha256(h) {
                return Err(at(format!("`{h}` is not a lowercase hex sha256")));
            }
        }
        let entry = Entry {
            kind: kind.to_string(),
            version,
            keys: keys.to_string(),
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
        s.push_str(&format!(
            "{frame} {} {} {} {}\n",
            e.kind, e.version, e.keys, e.sha256
        ));
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
                 in tests/golden/VERSIONS): remove it, or run make golden"
            )),
            Some(e) if &e.sha256 != sha => errors.push(format!(
                "tests/golden/{frame}: golden frame edited outside make golden (sha256 {sha}, \
                 tests/golden/VERSIONS says {}): restore it (git checkout) or run make golden, \
                 which checks that its output changed only under new store keys (kind `{}`)",
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
    /// [`keys_digest`] of its stage's `seeds[].key` in the run's manifest.
    keys: String,
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
    /// The frame changed while its stage's store keys did not: a store holding the old results
    /// would serve them.
    SameKeys {
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
            Refusal::SameKeys {
                frame,
                kind,
                version,
            } => format!(
                "{frame} changed, its store keys did not: kind `{kind}`, version {version} in {}",
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
            Refusal::SameKeys { frame, .. } | Refusal::WentDown { frame, .. } => frame,
        }
    }
}

/// Everything `make golden` says when it refuses: one line per frame, why, and per pipeline its
/// stages without a golden frame (`hidden`: pipeline → `stage (kind, where)`).
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
        .any(|r| matches!(r, Refusal::SameKeys { .. }))
    {
        s.push_str(
            "\nThese frames have the store keys of their locked versions (same kind versions, \
             parameters, seeds, inputs and upstream keys) but other output: a kind's code \
             changed what it outputs without a version bump, and a store holding the old \
             results would keep serving them under these keys. The kind whose code changed is \
             the frame's own or one upstream of it: raise `version` of each kind whose output \
             changed, where named. A raised version changes the keys of its stages and of every \
             stage downstream, so frames that changed only through it need no bump of their \
             own. Then rerun make golden.\n",
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
                     read them (their kinds may be the ones to bump):\n",
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
            if !unchanged && f.keys == old.keys {
                refusals.push(Refusal::SameKeys {
                    frame: frame.clone(),
                    kind: f.kind.clone(),
                    version: f.version,
                });
                continue;
            }
        }
        // Unchanged, or changed under new keys, or new (no line, or the stage now has another
        // kind: its instances have other store keys).
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
                keys: f.keys.clone(),
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
    hex(&Sha256::digest(&bytes))
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

/// Whether two CSV frames are equal for `dplab compare` (A is the fresh one, as in `make test`):
/// within the tolerance, or not compared at all because the fresh run's manifest (beside the
/// frame) says its stage is not reproducible bit for bit (a library dplab cannot seed: its
/// frames differ from run to run, and `make test` does not compare them).
fn same_frame(fresh: &Path, golden: &Path) -> bool {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let name = fresh.file_name().expect("a frame's file name");
    for (dir, src) in [(&a, fresh), (&b, golden)] {
        fs::create_dir(dir).expect("a temporary directory");
        fs::copy(src, dir.join(name)).unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
    }
    if let Some(m) = fresh
        .parent()
        .map(|d| d.join("manifest.json"))
        .filter(|m| m.exists())
    {
        fs::copy(&m, a.join("manifest.json"))
            .unwrap_or_else(|e| panic!("copying {}: {e}", m.display()));
    }
    let tol = Tolerance::new(RTOL, ATOL).expect("a valid tolerance");
    let c = compare_dirs(&a, &b, tol).expect("comparing two frames");
    c.report.is_empty() && c.frames + c.unreproducible.len() == 1
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
    dplab::stages::registry::find(kind).map(|k| k.version)
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

/// What the lock needs of one stage in a run's manifest.
#[derive(Clone, Debug)]
struct StageInfo {
    kind: String,
    version: u32,
    /// Whether it writes a frame (`store: false` in the pipeline file: no).
    stored: bool,
    /// [`keys_digest`] of its `seeds[].key`.
    keys: String,
}

/// A results directory's manifest, as much of it as the lock needs: stage → what made it.
fn read_manifest(dir: &Path) -> Result<BTreeMap<String, StageInfo>, String> {
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
        let keys: Option<Vec<&str>> = s["seeds"].as_array().and_then(|seeds| {
            seeds
                .iter()
                .map(|i| i["key"].as_str().filter(|k| is_sha256(k)))
                .collect()
        });
        let (Some(name), Some(kind), Some(version), Some(keys)) = (name, kind, version, keys)
        else {
            return Err(format!(
                "{}: a stage without `name`, `kind`, `kind_version` or a sha256 `key` for each \
                 of its `seeds` ({s}): written by an older dplab? rerun make golden",
                path.display()
            ));
        };
        let stored = s["stored"].as_bool().unwrap_or(true);
        out.insert(
            name.to_string(),
            StageInfo {
                kind: kind.to_string(),
                version,
                stored,
                keys: keys_digest(&keys),
            },
        );
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
                "{}: {e}: without the lock the golden frames cannot be checked against a stale \
                 store. Restore it (git checkout {0}); to start a new lock on purpose, create it \
                 empty",
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
    // The fresh frames, with their kinds and keys from the manifests.
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
        let Some(info) = manifests[pipeline].get(stage) else {
            errors.push(format!(
                "{}: no stage `{stage}` in its manifest.json",
                path.display()
            ));
            continue;
        };
        if registry_version(&info.kind) != Some(info.version) {
            errors.push(format!(
                "{}: kind `{}` version {} in the manifest, {:?} in this build: {} was made by \
                 another build; rerun make golden",
                path.display(),
                info.kind,
                info.version,
                registry_version(&info.kind),
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
                kind: info.kind.clone(),
                version: info.version,
                keys: info.keys.clone(),
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
        let why = |e: &Entry| match lock.get(frame) {
            Some(old) if old.version != e.version => {
                format!("`{}` {} → {}", e.kind, old.version, e.version)
            }
            _ => format!(
                "`{}` still {}; new keys from upstream versions or parameters",
                e.kind, e.version
            ),
        };
        match action {
            Action::Keep => {
                let e = &up.lock[frame];
                match lock.get(frame) {
                    None => done.push(format!("locked {frame} (unchanged, had no line)")),
                    Some(old) if old.kind != e.kind => done.push(format!(
                        "relocked {frame} (unchanged; stage's kind was `{}`, now `{}`)",
                        old.kind, e.kind
                    )),
                    Some(old) if old.keys != e.keys => {
                        done.push(format!("relocked {frame} (unchanged; {})", why(e)))
                    }
                    Some(_) => {}
                }
            }
            Action::Write => {
                let e = up.lock[frame].clone();
                let what = match lock.get(frame) {
                    None => "new".to_string(),
                    Some(old) if old.kind != e.kind => {
                        format!("new: stage's kind was `{}`", old.kind)
                    }
                    Some(_) => format!("changed; {}", why(&e)),
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
    // Beside the frames, what `dplab compare` needs of the run that made them: its profile and
    // axes (a row is keyed by its axis values; different profiles are said first).
    for pipeline in manifests.keys() {
        let dir = golden.join(pipeline);
        if !frames_under(golden)
            .keys()
            .any(|f| f.starts_with(&format!("{pipeline}/")))
        {
            continue;
        }
        let src = run.join(pipeline).join("manifest.json");
        let v: serde_json::Value = fs::read_to_string(&src)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        let short = serde_json::json!({
            "written_by": "make golden: the profile and axes of the run that made these frames, for dplab compare",
            "pipeline": {"name": pipeline},
            "profile": v["profile"],
            "axes": v["axes"],
        });
        let mut bytes = serde_json::to_vec_pretty(&short).expect("JSON");
        bytes.push(b'\n');
        fs::write(dir.join("manifest.json"), bytes)
            .unwrap_or_else(|err| panic!("writing {}: {err}", dir.display()));
    }
    let tmp = lock_path.with_extension("tmp");
    fs::write(&tmp, format_lock(&up.lock))
        .and_then(|_| fs::rename(&tmp, lock_path))
        .unwrap_or_else(|err| panic!("writing {}: {err}", lock_path.display()));
    Ok(done)
}

/// The stages of a pipeline that keep no golden frame (`store: false`), as `stage (kind, where)`.
fn hidden_stages(manifest: &BTreeMap<String, StageInfo>) -> Vec<String> {
    manifest
        .iter()
        .filter(|(_, s)| !s.stored)
        .map(|(name, s)| format!("{name} (`{}`, {})", s.kind, locate(&s.kind)))
        .collect()
}

/// `cargo test`: checks `tests/golden` against its lock. `make golden`: first updates both from
/// the fresh run named by `DPLAB_GOLDEN_UPDATE`, refusing frames changed under unchanged store
/// keys.
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

    /// A lock line; `k` stands for its keys digest, `s` for its file's sha256.
    fn entry(kind: &str, version: u32, k: char, s: char) -> Entry {
        Entry {
            kind: kind.into(),
            version,
            keys: sha(k),
            sha256: sha(s),
        }
    }

    fn fresh(kind: &str, version: u32, k: char, s: char, same_as_committed: Option<char>) -> Fresh {
        Fresh {
            kind: kind.into(),
            version,
            keys: sha(k),
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
    fn the_keys_digest_is_sha256_of_the_keys_joined_by_newlines() {
        let (a, b) = (sha('a'), sha('b'));
        assert_eq!(
            keys_digest(&[&a, &b]),
            hex(&Sha256::digest(format!("{a}\n{b}").as_bytes()))
        );
        assert_ne!(keys_digest(&[&a, &b]), keys_digest(&[&b, &a]));
        assert!(is_sha256(&keys_digest::<&str>(&[])));
    }

    #[test]
    fn a_changed_frame_under_the_same_keys_is_refused() {
        let lock = one(F, entry("aggregate.summary", 3, 'k', 'a'));
        let r = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 3, 'k', 'b', None)),
            &committed(&[F]),
        )
        .unwrap_err();
        assert_eq!(
            r,
            vec![Refusal::SameKeys {
                frame: F.into(),
                kind: "aggregate.summary".into(),
                version: 3
            }]
        );
        let m = refusal_report(&r, &|_| "src/stages/aggregate/summary.rs:30".into(), &|p| {
            assert_eq!(p, "p");
            vec!["data (`load.sample`, src/stages/load/sample.rs:27)".into()]
        });
        assert!(
            m.contains(&format!(
                "{F} changed, its store keys did not: kind `aggregate.summary`, version 3 in \
                 src/stages/aggregate/summary.rs:30"
            )),
            "{m}"
        );
        assert!(
            m.contains("changed what it outputs without a version bump"),
            "{m}"
        );
        assert!(m.contains("  p: data (`load.sample`"), "{m}");
    }

    #[test]
    fn a_changed_frame_under_new_keys_is_written() {
        // Its own kind's version rose...
        let lock = one(F, entry("aggregate.summary", 1, 'k', 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 2, 'l', 'b', None)),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.actions[F], Action::Write);
        assert_eq!(up.lock, one(F, entry("aggregate.summary", 2, 'l', 'b')));
        // ... or only its keys changed (an upstream kind's version, or its parameters).
        let up = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 1, 'l', 'b', None)),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.actions[F], Action::Write);
        assert_eq!(up.lock, one(F, entry("aggregate.summary", 1, 'l', 'b')));
    }

    #[test]
    fn an_unchanged_frame_with_a_raised_version_is_kept_and_relocked() {
        let lock = one(F, entry("report.table", 1, 'k', 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("report.table", 4, 'l', 'a', Some('a'))),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.actions[F], Action::Keep);
        assert_eq!(up.lock, one(F, entry("report.table", 4, 'l', 'a')));
    }

    #[test]
    fn a_frame_equal_but_for_wall_times_is_unchanged_and_keeps_its_bytes() {
        // Other bytes (measured seconds), but `dplab compare` finds it equal to the golden one.
        let lock = one(F, entry("aggregate.summary", 1, 'k', 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 1, 'k', 'b', Some('a'))),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.actions[F], Action::Keep);
        assert_eq!(up.lock, lock);
    }

    #[test]
    fn a_version_that_went_down_is_refused_even_for_an_unchanged_frame() {
        let lock = one(F, entry("aggregate.summary", 2, 'k', 'a'));
        let r = decide(
            &lock,
            &run(F, fresh("aggregate.summary", 1, 'l', 'a', Some('a'))),
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
            ("p/old.csv".to_string(), entry("report.table", 1, 'k', 'a')),
            ("gone/t.csv".to_string(), entry("report.table", 1, 'k', 'c')),
        ]);
        let fresh = BTreeMap::from([
            (
                "p/old.csv".to_string(),
                fresh("report.table", 1, 'k', 'a', Some('a')),
            ),
            (
                "p/new.csv".to_string(),
                fresh("frame.stack", 1, 'l', 'b', None),
            ),
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
        let lock = one(F, entry("aggregate.summary", 5, 'k', 'a'));
        let up = decide(
            &lock,
            &run(F, fresh("frame.stack", 1, 'l', 'b', None)),
            &committed(&[F]),
        )
        .unwrap();
        assert_eq!(up.lock, one(F, entry("frame.stack", 1, 'l', 'b')));
    }

    #[test]
    fn every_refusal_is_reported_at_once() {
        let lock = Lock::from([
            ("p/a.csv".to_string(), entry("k.one", 1, 'k', 'a')),
            ("p/b.csv".to_string(), entry("k.two", 1, 'l', 'a')),
        ]);
        let fresh = BTreeMap::from([
            ("p/a.csv".to_string(), fresh("k.one", 1, 'k', 'b', None)),
            ("p/b.csv".to_string(), fresh("k.two", 1, 'l', 'c', None)),
        ]);
        let r = decide(&lock, &fresh, &committed(&["p/a.csv", "p/b.csv"])).unwrap_err();
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn the_lock_reads_what_it_writes_and_refuses_malformed_lines() {
        let lock = Lock::from([
            ("p/a.csv".to_string(), entry("k.one", 1, 'e', 'a')),
            ("q/b.csv".to_string(), entry("k.two", 12, 'd', 'f')),
        ]);
        let text = format_lock(&lock);
        assert_eq!(parse_lock(&text).unwrap(), lock);
        assert!(text.contains(&format!("p/a.csv k.one 1 {} {}\n", sha('e'), sha('a'))));
        let good = format!("p/a.csv k 1 {} {}", sha('e'), sha('a'));
        assert!(parse_lock(&good).is_ok());
        for bad in [
            format!("p/a.csv k 1 {}", sha('a')),
            format!("p/a.csv k one {} {}", sha('e'), sha('a')),
            format!("p/a.csv k 1 {} {}", sha('e'), "A".repeat(64)),
            format!("p/a.csv k 1 {} {}", "e".repeat(63), sha('a')),
            format!("a.csv k 1 {} {}", sha('e'), sha('a')),
            format!("p/a.txt k 1 {} {}", sha('e'), sha('a')),
            format!("{good}\n{good}"),
        ] {
            assert!(parse_lock(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn normal_mode_names_edited_frames_bumped_kinds_and_stale_lines() {
        let lock = Lock::from([
            ("p/a.csv".to_string(), entry("k.one", 1, 'k', 'a')),
            ("p/b.csv".to_string(), entry("k.two", 1, 'k', 'b')),
            ("p/gone.csv".to_string(), entry("k.one", 1, 'k', 'c')),
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
        let lock = one("p/a.csv", entry("k.one", 1, 'k', 'a'));
        assert!(check(&lock, &golden, &versions, &|_| String::new()).is_empty());
        // A kind removed, a version lowered.
        let lock = one("p/a.csv", entry("k.gone", 1, 'k', 'a'));
        let e = check(&lock, &golden, &versions, &|_| String::new());
        assert!(e[0].contains("`k.gone` no longer exists"), "{e:?}");
        let lock = one("p/a.csv", entry("k.one", 3, 'k', 'a'));
        let e = check(&lock, &golden, &versions, &|_| String::new());
        assert!(e[0].contains("went down"), "{e:?}");
    }

    #[test]
    fn every_registered_kind_is_located_in_src() {
        for k in dplab::stages::registry::all() {
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

    /// The whole of update mode on a made-up run: refused without touching anything while the
    /// store keys stay, accepted once they change; normal mode agrees afterwards.
    #[test]
    fn update_mode_writes_nothing_when_it_refuses() {
        let tmp = tempfile::tempdir().unwrap();
        let (run, golden) = (tmp.path().join("run"), tmp.path().join("golden"));
        let lock_path = golden.join("VERSIONS");
        let kind = "aggregate.summary";
        let v = registry_version(kind).unwrap();
        let manifest = |version: u32, keys: &[String]| {
            let seeds: Vec<_> = keys
                .iter()
                .map(|k| serde_json::json!({"instance": "", "seed": "0", "key": k}))
                .collect();
            serde_json::json!({"stages": [
                {"name": "data", "kind": "load.sample", "kind_version": 1, "stored": false,
                 "seeds": [{"instance": "", "seed": "0", "key": sha('d')}]},
                {"name": "summary", "kind": kind, "kind_version": version, "stored": true,
                 "seeds": seeds},
            ]})
            .to_string()
        };
        let (keys, other_keys) = ([sha('1'), sha('2')], [sha('1'), sha('3')]);
        fs::create_dir_all(run.join("p")).unwrap();
        fs::create_dir_all(golden.join("p")).unwrap();
        fs::write(run.join("p/manifest.json"), manifest(v, &keys)).unwrap();
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
        assert_eq!(
            done,
            vec![
                "removed p/old.csv",
                "locked p/summary.csv (unchanged, had no line)"
            ]
        );
        assert_eq!(
            fs::read_to_string(golden.join("p/summary.csv")).unwrap(),
            "a,b_seconds\n1,0.1\n"
        );
        let locked = fs::read_to_string(&lock_path).unwrap();
        assert!(
            locked.contains(&format!("p/summary.csv {kind} {v} {} ", keys_digest(&keys))),
            "{locked}"
        );
        // The output changes, the keys do not: refused, nothing written.
        fs::write(run.join("p/summary.csv"), "a,b_seconds\n2,0.2\n").unwrap();
        let e = update(&run, &golden, &lock_path).unwrap_err();
        assert!(
            e.contains("p/summary.csv changed, its store keys did not") && e.contains(kind),
            "{e}"
        );
        assert!(e.contains("src/stages/aggregate/summary.rs:"), "{e}");
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
        fs::write(run.join("p/manifest.json"), manifest(v + 1, &other_keys)).unwrap();
        let e = update(&run, &golden, &lock_path).unwrap_err();
        assert!(e.contains("another build"), "{e}");
        // A manifest without keys (an older dplab) is refused.
        fs::write(
            run.join("p/manifest.json"),
            manifest(v, &keys).replace("\"key\"", "\"k\""),
        )
        .unwrap();
        let e = update(&run, &golden, &lock_path).unwrap_err();
        assert!(e.contains("a sha256 `key`"), "{e}");
        // Under new keys (here: an upstream version or the parameters changed, the kind's own
        // version did not) the change is accepted.
        fs::write(run.join("p/manifest.json"), manifest(v, &other_keys)).unwrap();
        let done = update(&run, &golden, &lock_path).unwrap();
        assert_eq!(
            done,
            vec![format!(
                "written p/summary.csv (changed; `{kind}` still {v}; new keys from upstream \
                 versions or parameters)"
            )]
        );
        assert_eq!(
            fs::read_to_string(golden.join("p/summary.csv")).unwrap(),
            "a,b_seconds\n2,0.2\n"
        );
        assert!(fs::read_to_string(&lock_path)
            .unwrap()
            .contains(&keys_digest(&other_keys)));
        assert!(check_dir(&golden, &lock_path).is_empty());
        // Rerun on the same run: nothing to do.
        assert!(update(&run, &golden, &lock_path).unwrap().is_empty());
    }
}
