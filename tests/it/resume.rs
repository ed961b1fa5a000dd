//! `dplab run` killed with SIGKILL at seeded random moments, then resumed on the same store.
//!
//! The pipeline has a few hundred instances of a millisecond or a few each over four stages,
//! so a kill lands before any instance is stored, in the middle of a stage, while the results
//! are written, or after they are in place. Uninterrupted runs give the reference bytes, the
//! plan's instance keys and the duration `d` of a run (the median of three). Each kill of the
//! first test falls at a seeded moment in [0, 1.2·d) on a fresh store (one per equal slice of
//! that span, so they cover it all) and is followed by a run to the end. The second test kills
//! run after run on one store (early, so each gets a little further), runs to the end, then
//! kills runs that have every instance stored and runs to the end again. No assertion is
//! about time: after each kill the test checks bytes and counts only —
//!
//! * the store only grows, holds nothing under `objects/` but entries, and every entry stays
//!   the file it was (a new file for a stored key would mean its instance was computed again);
//! * results, where a killed run left any, are complete (the same bytes as the reference);
//! * the run that completes writes the reference bytes (every file but its run records, `manifest.json` and `instances.parquet`, whose
//!   wall times differ) and the same instance keys, computes exactly the instances whose key
//!   was not in the store when it started and takes every other one from the store (per
//!   stage: `instances_run` and `instances_cached`), and leaves every key in the store and no
//!   staging directory beside the results. A corrupt entry a kill left would change the bytes
//!   of the run that took it, or be computed again and counted by the run that refused it.
//!
//! `DPLAB_RESUME_SEED=<u64>` replays other moments; `--nocapture` shows where each kill
//! landed.

use crate::common;
use common::{manifest_counts, text, write};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// 1 table, 5 ε × 24 repetitions of Laplace noise (200 draws per row), a summary of each
/// repetition, a figure per ε: 246 instances, stored by stage level as they finish.
const PIPELINE: &str = r#"name: resume
title: Resume test
source: {paper: test, item: none}
description: Noise per epsilon, repeated, summarised per repetition, a figure per epsilon.
seed: 11
axes:
  eps: [0.5, 1.0, 2.0, 4.0, 8.0]
stages:
  counts:
    kind: load.table
    with: {columns: {utility: [1, 5, 2, 7]}}
  noisy:
    kind: mechanism.noise
    input: counts
    repeat: 24
    with: {column: utility, noise: laplace, epsilon: $eps, samples: 200}
  summary:
    kind: aggregate.summary
    input: noisy
    with: {values: [noisy], by: [row], quantiles: [0.1, 0.5, 0.9]}
  figure:
    kind: plot.lines
    input: summary
    over: [rep]
    with: {x: row, y: mean, series: rep, title: "mean per repetition", x_label: row, y_label: mean}
"#;
const NAME: &str = "resume";

const SEED: u64 = 0x5eed_d91a;
/// Kills on fresh stores, at moments in [0, 1.2·d).
const KILLS: usize = 20;
/// Kills on one store of runs with work left, at moments in [0, 0.3·d): each run starts over
/// with what the last one stored and gets a little further (a later moment would let the
/// first run finish and leave nothing to kill but runs with every instance stored).
const CREEPING_KILLS: usize = 12;
const CREEPING_SPAN: f64 = 0.3;
/// Then kills of runs with every instance stored, at moments in [0, 1.2·d'), d' the duration
/// of such a run.
const CACHED_KILLS: usize = 8;

/// The two tests take turns, so neither's runs slow the other's.
static SERIAL: Mutex<()> = Mutex::new(());

fn seed() -> u64 {
    std::env::var("DPLAB_RESUME_SEED")
        .ok()
        .map(|s| s.parse().expect("DPLAB_RESUME_SEED is a u64"))
        .unwrap_or(SEED)
}

/// The project's generator (PCG): the moments depend on the seed alone.
fn rng(seed: u64) -> rand_pcg::Pcg64Mcg {
    rand::SeedableRng::seed_from_u64(seed)
}

/// `n` kill moments as fractions of `d`: one uniform in each of `n` equal slices of
/// [0, span), in shuffled order.
fn moments(rng: &mut rand_pcg::Pcg64Mcg, n: usize, span: f64) -> Vec<f64> {
    use rand::seq::SliceRandom;
    use rand::Rng as _;
    let mut m: Vec<f64> = (0..n)
        .map(|i| span * (i as f64 + rng.random::<f64>()) / n as f64)
        .collect();
    m.shuffle(rng);
    m
}

struct Lab {
    dir: TempDir,
    pipeline: PathBuf,
}

impl Lab {
    fn new() -> Self {
        let dir = TempDir::new().unwrap();
        let pipeline = write(dir.path(), "resume.yaml", PIPELINE);
        Lab { dir, pipeline }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `dplab run -q` of the pipeline with this store and results root.
    fn run(&self, store: &Path, out: &Path) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("dplab"));
        c.env_remove("DPLAB_STORE")
            .args(["run", "-q", "--store"])
            .arg(store)
            .arg("--out")
            .arg(out)
            .arg(&self.pipeline);
        c
    }
    /// A run to its end (it must succeed).
    fn complete(&self, store: &Path, out: &Path, what: &str) {
        let o = self.run(store, out).output().unwrap();
        assert!(o.status.success(), "{what}: {}", text(&o));
    }
}

/// The files of a results directory but its run records, by name.
type Files = Vec<(String, Vec<u8>)>;
/// Per stage (in plan order), its instances' keys (in plan order).
type Keys = Vec<(String, Vec<String>)>;

/// Uninterrupted runs: their bytes, keys and duration.
struct Reference {
    files: Files,
    keys: Keys,
    total: usize,
    /// Store entries of an uninterrupted run: an entry per key, and per key by content.
    entries: usize,
    /// The median duration of three uninterrupted runs (one can be slowed by a busy machine).
    d: Duration,
}

/// The reference, measured once for both tests.
fn reference() -> &'static Reference {
    static REFERENCE: OnceLock<Reference> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let lab = Lab::new();
        let mut runs: Vec<(Duration, Files, Keys, usize)> = (0..3)
            .map(|i| {
                let (store, out) = (lab.path(&format!("s{i}")), lab.path(&format!("o{i}")));
                let t = Instant::now();
                lab.complete(&store, &out, "an uninterrupted run");
                let d = t.elapsed();
                let results = out.join(NAME);
                let keys = manifest_keys(&results);
                // Each instance is filed under its key and, when it reads others, its key
                // by content (early cutoff) too.
                let all: BTreeSet<String> = keys
                    .iter()
                    .flat_map(|(_, k)| k.clone())
                    .chain(content_keys(&results))
                    .collect();
                let keys_stored: BTreeSet<String> = stored(&store).into_keys().collect();
                assert_eq!(keys_stored, all, "an uninterrupted run's store");
                (d, files(&results), keys, all.len())
            })
            .collect();
        for (_, files, keys, _) in &runs[1..] {
            assert!(
                files == &runs[0].1 && keys == &runs[0].2,
                "uninterrupted runs differ"
            );
        }
        runs.sort_by_key(|(d, _, _, _)| *d);
        let (d, files, keys, entries) = runs.swap_remove(1);
        let total = keys.iter().map(|(_, k)| k.len()).sum();
        let distinct: BTreeSet<&String> = keys.iter().flat_map(|(_, k)| k).collect();
        assert_eq!(distinct.len(), total, "two instances share a key");
        assert!(total > 200, "{total} instances");
        Reference {
            files,
            keys,
            total,
            entries,
            d,
        }
    })
}

fn manifest(results: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(results.join("manifest.json")).unwrap()).unwrap()
}

/// Every instance's key by content the manifest lists (see `key::content_key`).
fn content_keys(results: &Path) -> BTreeSet<String> {
    manifest(results)["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["seeds"].as_array().unwrap().iter())
        .filter_map(|i| i["content_key"].as_str().map(str::to_string))
        .collect()
}

fn manifest_keys(results: &Path) -> Keys {
    manifest(results)["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let keys = s["seeds"].as_array().unwrap().iter();
            (
                s["name"].as_str().unwrap().to_string(),
                keys.map(|i| i["key"].as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

/// Every file of a results directory but its run records, by name.
fn files(dir: &Path) -> Files {
    crate::common::result_files(dir)
}

/// The store's entries: key → where each copy is (inode, offset). Entries are files
/// `objects/<2 hex>/<64 hex>` (offset 0) or parts of packs `packs/<name>.pack` listed by
/// `<name>.idx` (`DPI1`, then per entry 32 key bytes, offset and length as u64 LE). Files and
/// packs are written under other names and renamed into place, so a new copy of a key means
/// its instance was computed and stored again. Anything else under `objects/` would be a
/// half-written file where a run looks for entries; a pack without an index (its writer was
/// killed before it closed it) is read by its entry headers, as runs read it.
type Stored = BTreeMap<String, BTreeSet<(u64, u64)>>;

fn stored(store: &Path) -> Stored {
    let mut keys = Stored::new();
    if let Ok(packs) = fs::read_dir(store.join("packs")) {
        for f in packs {
            let p = f.unwrap().path();
            let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
            assert!(ext == "pack" || ext == "idx", "not a pack: {}", p.display());
            if ext == "pack" && !p.with_extension("idx").exists() {
                // Its writer was killed: runs read it by its entry headers (magic, key,
                // length), and so does this.
                let bytes = fs::read(&p).unwrap();
                let ino = fs::metadata(&p).unwrap().ino();
                let mut at = 0;
                while let Some(h) = bytes.get(at..at + 44) {
                    if &h[..4] != b"DPE1" {
                        break;
                    }
                    let len = u64::from_le_bytes(h[36..44].try_into().unwrap()) as usize;
                    if at + 44 + len > bytes.len() {
                        break;
                    }
                    let key: String = h[4..36].iter().map(|b| format!("{b:02x}")).collect();
                    keys.entry(key).or_default().insert((ino, (at + 44) as u64));
                    at += 44 + len;
                }
                continue;
            }
            if ext != "idx" {
                continue;
            }
            let idx = fs::read(&p).unwrap();
            let ino = fs::metadata(p.with_extension("pack")).unwrap().ino();
            let body = idx.strip_prefix(b"DPI1".as_slice()).expect("an index");
            assert_eq!(body.len() % 48, 0, "{}", p.display());
            for rec in body.chunks_exact(48) {
                let key: String = rec[..32].iter().map(|b| format!("{b:02x}")).collect();
                let off = u64::from_le_bytes(rec[32..40].try_into().unwrap());
                keys.entry(key).or_default().insert((ino, off));
            }
        }
    }
    let Ok(shards) = fs::read_dir(store.join("objects")) else {
        return keys;
    };
    for shard in shards {
        let shard = shard.unwrap();
        let prefix = shard.file_name().into_string().unwrap();
        for f in fs::read_dir(shard.path()).unwrap() {
            let f = f.unwrap();
            let name = f.file_name().into_string().unwrap();
            let entry = name.len() == 64
                && name.bytes().all(|b| b.is_ascii_hexdigit())
                && name[..2] == prefix
                && f.file_type().unwrap().is_file();
            assert!(entry, "not a store entry: {}", f.path().display());
            keys.entry(name)
                .or_default()
                .insert((f.metadata().unwrap().ino(), 0));
        }
    }
    keys
}

/// Per stage: how many of its instances have their key in `keys`.
fn stored_per_stage(r: &Reference, keys: &Stored) -> Vec<usize> {
    r.keys
        .iter()
        .map(|(_, k)| k.iter().filter(|k| keys.contains_key(*k)).count())
        .collect()
}

/// Every entry stored `before` is still there `after`, the same file: nothing was lost and
/// nothing stored was computed again.
fn kept(before: &Stored, after: &Stored, what: &str) {
    for (key, copies) in before {
        match after.get(key) {
            None => panic!("{what}: the store lost {key}"),
            Some(c) => assert_eq!(c, copies, "{what}: {key} was stored again"),
        }
    }
}

/// Results a run left in `results` are the reference's, whole.
fn check_bytes(r: &Reference, results: &Path, what: &str) {
    let got = files(results);
    let names = |v: &Files| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&got), names(&r.files), "{what}: result files");
    for ((name, a), (_, b)) in got.iter().zip(&r.files) {
        assert!(
            a == b,
            "{what}: {name} differs from the uninterrupted run's"
        );
    }
    assert_eq!(manifest_keys(results), r.keys, "{what}: instance keys");
}

/// The run that completed into `out` with `before` stored when it started (and `after` once
/// it ended): the reference bytes, exactly the missing instances computed, nothing left over.
fn check_completed(r: &Reference, out: &Path, before: &Stored, after: &Stored, what: &str) {
    let results = out.join(NAME);
    check_bytes(r, &results, what);
    let hits = stored_per_stage(r, before);
    let want: Vec<(String, u64, u64)> = r
        .keys
        .iter()
        .zip(&hits)
        .map(|((s, k), &h)| (s.clone(), (k.len() - h) as u64, h as u64))
        .collect();
    assert_eq!(
        manifest_counts(&results),
        want,
        "{what}: per stage (run, from the store) with {} of {} keys stored before",
        hits.iter().sum::<usize>(),
        r.total
    );
    kept(before, after, what);
    assert_eq!(
        stored_per_stage(r, after).iter().sum::<usize>(),
        r.total,
        "{what}: not every instance is stored"
    );
    let mut left: Vec<String> = fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, [NAME], "{what}: left beside the results");
}

/// How a run that was to be killed ended.
enum End {
    Killed,
    /// It finished before the kill.
    Finished,
}

/// Starts a run, sends SIGKILL `at` after the start, and reaps it.
fn run_and_kill(mut cmd: Command, at: Duration, log: &Path, what: &str) -> End {
    let t0 = Instant::now();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let left = at.saturating_sub(t0.elapsed());
        if left.is_zero() {
            child.kill().unwrap(); // SIGKILL
            break child.wait().unwrap();
        }
        std::thread::sleep(left.min(Duration::from_millis(2)));
    };
    match status.signal() {
        Some(libc::SIGKILL) => End::Killed,
        _ if status.success() => End::Finished,
        _ => panic!(
            "{what}: the run failed ({status}): {}",
            fs::read_to_string(log).unwrap_or_default()
        ),
    }
}

/// What a results root shows of the runs into it: the staging directories there (named by
/// the writer's process id) and the manifest of the results in place.
#[derive(Default)]
struct Root {
    staging: BTreeSet<String>,
    manifest: Option<Vec<u8>>,
}

fn root(out: &Path) -> Root {
    let staging = fs::read_dir(out)
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(&format!(".{NAME}.partial-")))
        .collect();
    let manifest = fs::read(out.join(NAME).join("manifest.json")).ok();
    Root { staging, manifest }
}

/// Where a kill landed, judged by what the run left: keys stored (`before` it started and
/// `after` the kill), its own staging directory, new results.
fn phase(
    r: &Reference,
    (before, after): (&Stored, &Stored),
    (was_root, root): (&Root, &Root),
) -> String {
    let (was, now) = (stored_per_stage(r, before), stored_per_stage(r, after));
    if root.manifest != was_root.manifest {
        return "after its results were in place".into();
    }
    if !root.staging.is_subset(&was_root.staging) {
        return "writing the results".into();
    }
    match (0..r.keys.len()).find(|&si| now[si] < r.keys[si].1.len()) {
        Some(_) if was == now => "before it stored an instance".into(),
        Some(si) => format!("in stage `{}`", r.keys[si].0),
        None => "every instance stored, before writing the results".into(),
    }
}

fn report(test: &str, r: &Reference, seed: u64, phases: &BTreeMap<String, usize>, t: Duration) {
    eprintln!(
        "{test}: seed {seed}, d = {:.3} s, {} instances, {:.1} s in all; kills landed:",
        r.d.as_secs_f64(),
        r.total,
        t.as_secs_f64()
    );
    for (p, n) in phases {
        eprintln!("  {n:3} {p}");
    }
}

/// Each kill on a fresh store, then one run to the end on what it left.
#[test]
fn a_run_killed_anywhere_resumes_to_the_same_bytes_computing_only_what_is_missing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let r = reference();
    let lab = Lab::new();
    let seed = seed();
    let mut phases = BTreeMap::new();
    for (i, f) in moments(&mut rng(seed), KILLS, 1.2).into_iter().enumerate() {
        let what = format!("seed {seed}, kill {i} at {f:.3}·d");
        let dir = lab.path(&format!("k{i}"));
        let (store, out) = (dir.join("store"), dir.join("out"));
        let end = run_and_kill(
            lab.run(&store, &out),
            r.d.mul_f64(f),
            &lab.path("killed.log"),
            &what,
        );
        let left = stored(&store);
        let results = out.join(NAME);
        let p = match end {
            End::Finished => {
                check_completed(r, &out, &Stored::new(), &left, &what);
                "finished before the kill".to_string()
            }
            End::Killed => {
                // A killed run leaves no results or whole ones.
                if results.exists() {
                    check_bytes(r, &results, &format!("{what}, killed run"));
                }
                let no = (&Stored::new(), &left);
                phase(r, no, (&Root::default(), &root(&out)))
            }
        };
        eprintln!("{what}: {p}");
        *phases.entry(p).or_insert(0) += 1;
        lab.complete(&store, &out, &format!("{what}, resumed"));
        let after = stored(&store);
        check_completed(r, &out, &left, &after, &format!("{what}, resumed"));
        fs::remove_dir_all(&dir).unwrap();
    }
    report("independent kills", r, seed, &phases, started.elapsed());
}

/// One store and one results root that run after run is killed on.
struct OneStore<'a> {
    lab: &'a Lab,
    r: &'static Reference,
    store: PathBuf,
    out: PathBuf,
    /// What the store held before the next run.
    before: Stored,
    phases: BTreeMap<String, usize>,
}

impl OneStore<'_> {
    /// A run killed `at` after its start.
    fn kill(&mut self, at: Duration, what: &str) {
        let r = self.r;
        let was_root = root(&self.out);
        let cmd = self.lab.run(&self.store, &self.out);
        let end = run_and_kill(cmd, at, &self.lab.path("killed.log"), what);
        let left = stored(&self.store);
        kept(&self.before, &left, what);
        let results = self.out.join(NAME);
        let p = match end {
            End::Finished => {
                check_completed(r, &self.out, &self.before, &left, what);
                "finished before the kill".to_string()
            }
            End::Killed => {
                // Results in place are always whole: an earlier run's or this one's.
                if results.exists() {
                    check_bytes(r, &results, &format!("{what}, killed run"));
                }
                phase(r, (&self.before, &left), (&was_root, &root(&self.out)))
            }
        };
        eprintln!("{what}: {p} ({} of {} stored)", left.len(), r.total);
        *self.phases.entry(p).or_insert(0) += 1;
        self.before = left;
    }

    /// A run to the end, checked; returns how long it took.
    fn finish(&mut self, what: &str) -> Duration {
        let t = Instant::now();
        self.lab.complete(&self.store, &self.out, what);
        let d = t.elapsed();
        let after = stored(&self.store);
        check_completed(self.r, &self.out, &self.before, &after, what);
        self.before = after;
        d
    }
}

/// Kill after kill on one store and one results root: first runs with work left, each killed
/// early so it gets a little further than the last, then a run to the end; then runs with
/// every instance stored, killed anywhere in such a run (reading the store, replacing the
/// results in place, after), then a run to the end.
#[test]
fn repeated_kills_on_one_store_lose_nothing_and_redo_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let r = reference();
    let lab = Lab::new();
    let seed = seed().wrapping_add(1);
    let mut rng = rng(seed);
    let mut one = OneStore {
        lab: &lab,
        r,
        store: lab.path("store"),
        out: lab.path("out"),
        before: Stored::new(),
        phases: BTreeMap::new(),
    };
    for (i, f) in moments(&mut rng, CREEPING_KILLS, CREEPING_SPAN)
        .into_iter()
        .enumerate()
    {
        one.kill(
            r.d.mul_f64(f),
            &format!("seed {seed}, cumulative kill {i} at {f:.3}·d"),
        );
    }
    one.finish("the run after the kills");
    report(
        "kills with work left",
        r,
        seed,
        &one.phases,
        started.elapsed(),
    );
    // Every instance is stored: a run reads them all, then replaces the results.
    let cached = one.finish("a run with every instance stored");
    one.phases.clear();
    for (i, f) in moments(&mut rng, CACHED_KILLS, 1.2).into_iter().enumerate() {
        one.kill(
            cached.mul_f64(f),
            &format!("seed {seed}, kill {i} of a run with every instance stored at {f:.3}·d'"),
        );
    }
    one.finish("the run after the kills of runs with every instance stored");
    // `dplab store info` counts the entries, not what killed writers left in `tmp/`.
    let o = Command::new(assert_cmd::cargo::cargo_bin("dplab"))
        .args(["store", "info", "--store"])
        .arg(&one.store)
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && info.contains(&format!(": {} entries,", r.entries)),
        "{}",
        text(&o)
    );
    eprintln!("(d' = {:.3} s)", cached.as_secs_f64());
    report(
        "kills with every instance stored",
        r,
        seed,
        &one.phases,
        started.elapsed(),
    );
}
