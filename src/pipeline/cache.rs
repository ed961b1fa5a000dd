//! The instance store: finished stage instances (frame and artifacts) by store key, so a run
//! computes only what no earlier run — of this pipeline or another — already computed.
//!
//! Layout under the store root: one file per entry, `objects/<k0k1>/<key>`: a line of JSON
//! (what the entry holds, the sizes of its parts and the sha256 of the rest), then the frame
//! as Parquet and the artifacts' bytes. An entry is written under a unique name in `tmp/` and
//! renamed into place, so a reader sees a whole entry or none; a killed writer leaves only a
//! file in `tmp/`; two processes storing one key at once (also over NFS, where rename is
//! atomic too) leave one complete entry, and since the key fixes the output the bytes are the
//! same whichever rename lands last. Entries are not fsynced (a cache, and one instance costs
//! a few syscalls this way): a reader checks the sha256, so an entry a crash left short or
//! garbled is a miss, and is replaced when the instance runs again.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::exec::InstanceResult;
use crate::kind::Artifact;

/// A store directory.
#[derive(Clone, Debug)]
pub struct InstanceStore {
    root: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    /// The format of an entry; entries of another format are misses.
    format: u32,
    kind: String,
    seconds: f64,
    /// Bytes of the Parquet frame (0: a frame with no columns, of `height` rows).
    frame: usize,
    height: usize,
    /// Each artifact's extension and size, in order after the frame.
    artifacts: Vec<(String, usize)>,
    /// sha256 of everything after the JSON line.
    sha256: String,
}

const FORMAT: u32 = 2;

impl InstanceStore {
    /// The store at `root` (created when first written to).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        InstanceStore { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn entry(&self, key: &str) -> PathBuf {
        self.root.join("objects").join(&key[..2]).join(key)
    }

    /// Whether an entry for `key` exists (without reading it).
    pub fn contains(&self, key: &str) -> bool {
        self.entry(key).is_file()
    }

    /// The stored result of `key`, or `None` when there is none or it does not check out.
    pub fn get(&self, key: &str) -> Option<InstanceResult> {
        let bytes = fs::read(self.entry(key)).ok()?;
        let nl = bytes.iter().position(|&b| b == b'\n')?;
        let meta: Meta = serde_json::from_slice(&bytes[..nl]).ok()?;
        let body = &bytes[nl + 1..];
        if meta.format != FORMAT || crate::pipeline::plan::hex(&Sha256::digest(body)) != meta.sha256
        {
            return None;
        }
        let frame = if meta.frame > 0 {
            ParquetReader::new(std::io::Cursor::new(body.get(..meta.frame)?))
                .read_parallel(ParallelStrategy::None)
                .finish()
                .ok()?
        } else {
            DataFrame::empty_with_height(meta.height)
        };
        let mut at = meta.frame;
        let mut artifacts = Vec::new();
        for (ext, len) in &meta.artifacts {
            artifacts.push(Artifact {
                ext: static_ext(ext)?,
                bytes: body.get(at..at + len)?.to_vec(),
            });
            at += len;
        }
        Some(InstanceResult {
            frame,
            artifacts,
            seconds: meta.seconds,
        })
    }

    /// Stores `result` under `key` (tmp + rename).
    pub fn put(&self, key: &str, kind: &str, result: &InstanceResult) -> Result<()> {
        let mut body = Vec::new();
        if result.frame.width() > 0 {
            let mut frame = result.frame.clone();
            // One chunk per column: a gathered frame can hold one chunk per instance.
            frame.rechunk_mut();
            // Not parallel: this runs on a worker of dplab's pool, and waiting for polars'
            // pool there lets the worker take up more instances, each waiting in turn, until
            // the stack overflows (seen at 10⁵ instances).
            ParquetWriter::new(&mut body)
                .set_parallel(false)
                .finish(&mut frame)?;
        }
        let frame_len = body.len();
        for a in &result.artifacts {
            body.extend_from_slice(&a.bytes);
        }
        let meta = Meta {
            format: FORMAT,
            kind: kind.to_string(),
            seconds: result.seconds,
            frame: frame_len,
            height: result.frame.height(),
            artifacts: result
                .artifacts
                .iter()
                .map(|a| (a.ext.to_string(), a.bytes.len()))
                .collect(),
            sha256: crate::pipeline::plan::hex(&Sha256::digest(&body)),
        };
        let tmp_root = self.root.join("tmp");
        fs::create_dir_all(&tmp_root)
            .with_context(|| format!("creating {}", tmp_root.display()))?;
        let tmp = tmp_root.join(format!("{key}.{}.{}", std::process::id(), unique_suffix()));
        let written = (|| -> Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&serde_json::to_vec(&meta)?)?;
            f.write_all(b"\n")?;
            f.write_all(&body)?;
            Ok(())
        })();
        let final_path = self.entry(key);
        let placed = written.and_then(|()| {
            fs::create_dir_all(final_path.parent().expect("entry has a parent"))?;
            fs::rename(&tmp, &final_path)?;
            Ok(())
        });
        if placed.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        placed.with_context(|| format!("storing {}", final_path.display()))
    }
}

/// Artifact extensions are `&'static str` in the stage contract; the store maps the ones it
/// reads back to them (an unknown one is a miss, so the instance simply runs again).
fn static_ext(ext: &str) -> Option<&'static str> {
    ["svg", "md", "html", "csv", "txt", "json", "png"]
        .into_iter()
        .find(|e| *e == ext)
}

/// A suffix no other writer in this process uses (with the PID: none on this host).
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// One entry on disk.
pub struct Entry {
    pub key: String,
    pub bytes: u64,
    pub path: PathBuf,
}

impl InstanceStore {
    /// Every entry (files named by a 64-hex-digit key under `objects/<2 hex>/`).
    pub fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        let Ok(shards) = fs::read_dir(self.root.join("objects")) else {
            return out;
        };
        for shard in shards.flatten() {
            let Ok(files) = fs::read_dir(shard.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                let is_key = name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
                let meta = f.metadata();
                if is_key && meta.as_ref().is_ok_and(|m| m.is_file()) {
                    out.push(Entry {
                        key: name,
                        bytes: meta.map_or(0, |m| m.len()),
                        path: f.path(),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// The keys the last run of each pipeline recorded (for `dplab store info`).
    pub fn keys_by_pipeline(&self) -> Vec<(String, std::collections::HashSet<String>)> {
        super::dryrun::recorded_keys(self)
    }

    /// Removes every entry whose key is not in `keep`, and files killed writers left in
    /// `tmp/` more than an hour ago. Returns (entries removed, bytes freed).
    pub fn gc(&self, keep: &std::collections::HashSet<String>) -> (usize, u64) {
        let (mut n, mut bytes) = (0, 0);
        for e in self.entries() {
            if !keep.contains(&e.key) && fs::remove_file(&e.path).is_ok() {
                n += 1;
                bytes += e.bytes;
            }
        }
        if let Ok(tmp) = fs::read_dir(self.root.join("tmp")) {
            for f in tmp.flatten() {
                let old = f
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age.as_secs() > 3600);
                if old && f.path().is_file() {
                    let _ = fs::remove_file(f.path());
                }
            }
        }
        (n, bytes)
    }
}

/// The instance keys a results directory's manifest references (empty if it has none).
pub fn manifest_keys(results_dir: &Path) -> std::collections::HashSet<String> {
    let mut keys = std::collections::HashSet::new();
    let Ok(bytes) = crate::regular::read_regular_file(&results_dir.join("manifest.json"), 1 << 32)
    else {
        return keys;
    };
    let Ok(m) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return keys;
    };
    for stage in m["stages"].as_array().into_iter().flatten() {
        for inst in stage["seeds"].as_array().into_iter().flatten() {
            if let Some(k) = inst["key"].as_str() {
                keys.insert(k.to_string());
            }
        }
    }
    keys
}
