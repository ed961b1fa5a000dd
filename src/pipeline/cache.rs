//! The instance store: finished stage instances (frame and artifacts) by store key, so a run
//! computes only what no earlier run — of this pipeline or another — already computed.
//!
//! Layout under the store root: `objects/<k0k1>/<key>/` holding `frame.parquet`, the
//! artifacts `artifact-<i>.<ext>` and `meta.json` (written last). An entry is written into a
//! uniquely named directory under `tmp/` and renamed into place in one step, so a reader sees
//! a whole entry or none, a killed writer leaves only a `tmp/` directory, and two processes
//! storing one key at once (also over NFS, where rename is atomic too) both end with one
//! complete entry: the loser's rename fails because the directory exists, and since the key
//! fixes the output, the bytes in place are the bytes it had.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use polars::prelude::*;
use serde::{Deserialize, Serialize};

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
    /// Whether `frame.parquet` exists (a frame with no columns is not written).
    frame: bool,
    height: usize,
    artifacts: Vec<String>,
}

const FORMAT: u32 = 1;

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
        self.entry(key).join("meta.json").is_file()
    }

    /// The stored result of `key`, or `None` when there is none (or it cannot be read: a
    /// damaged entry is a miss, and is replaced when the instance is stored again).
    pub fn get(&self, key: &str) -> Option<InstanceResult> {
        let dir = self.entry(key);
        let meta: Meta = serde_json::from_slice(&fs::read(dir.join("meta.json")).ok()?).ok()?;
        if meta.format != FORMAT {
            return None;
        }
        let frame = if meta.frame {
            let f = fs::File::open(dir.join("frame.parquet")).ok()?;
            ParquetReader::new(f).finish().ok()?
        } else {
            DataFrame::empty_with_height(meta.height)
        };
        let mut artifacts = Vec::new();
        for (i, ext) in meta.artifacts.iter().enumerate() {
            let bytes = fs::read(dir.join(format!("artifact-{i}.{ext}"))).ok()?;
            artifacts.push(Artifact {
                ext: static_ext(ext)?,
                bytes,
            });
        }
        Some(InstanceResult {
            frame,
            artifacts,
            seconds: meta.seconds,
        })
    }

    /// Stores `result` under `key`, atomically; an existing entry is kept.
    pub fn put(&self, key: &str, kind: &str, result: &InstanceResult) -> Result<()> {
        let final_dir = self.entry(key);
        if final_dir.join("meta.json").is_file() {
            return Ok(());
        }
        let tmp_root = self.root.join("tmp");
        fs::create_dir_all(&tmp_root)
            .with_context(|| format!("creating {}", tmp_root.display()))?;
        let tmp = tmp_root.join(format!("{key}.{}.{}", std::process::id(), unique_suffix()));
        fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let written = (|| -> Result<()> {
            let has_frame = result.frame.width() > 0;
            if has_frame {
                let mut buf = Vec::new();
                ParquetWriter::new(&mut buf).finish(&mut result.frame.clone())?;
                write_synced(&tmp.join("frame.parquet"), &buf)?;
            }
            for (i, a) in result.artifacts.iter().enumerate() {
                write_synced(&tmp.join(format!("artifact-{i}.{}", a.ext)), &a.bytes)?;
            }
            let meta = Meta {
                format: FORMAT,
                kind: kind.to_string(),
                seconds: result.seconds,
                frame: has_frame,
                height: result.frame.height(),
                artifacts: result.artifacts.iter().map(|a| a.ext.to_string()).collect(),
            };
            write_synced(&tmp.join("meta.json"), &serde_json::to_vec(&meta)?)?;
            Ok(())
        })();
        if let Err(e) = written {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
        let parent = final_dir.parent().expect("entry has a parent");
        fs::create_dir_all(parent)?;
        if final_dir.exists() && !final_dir.join("meta.json").is_file() {
            // A damaged entry (no meta.json: never published whole by this code): replace it.
            let _ = fs::remove_dir_all(&final_dir);
        }
        match fs::rename(&tmp, &final_dir) {
            Ok(()) => Ok(()),
            // Another process stored the same key first: its bytes are these bytes.
            Err(_) if final_dir.join("meta.json").is_file() => {
                let _ = fs::remove_dir_all(&tmp);
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                Err(e).with_context(|| format!("storing {}", final_dir.display()))
            }
        }
    }
}

/// Artifact extensions are `&'static str` in the stage contract; the store maps the ones it
/// reads back to them (an unknown one is a miss, so the instance simply runs again).
fn static_ext(ext: &str) -> Option<&'static str> {
    ["svg", "md", "html", "csv", "txt", "json", "png"]
        .into_iter()
        .find(|e| *e == ext)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
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
