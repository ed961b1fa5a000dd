//! Putting a verified copy of a dataset file into the cache: from the offline mirror when it has
//! the file, else over HTTP(S). Bytes go to a fresh temporary file beside the target, and the
//! bytes hashed are the bytes written: a mirror copy is read once into memory, verified, and
//! that buffer written; a download is hashed as it is written (and cut off past the registered
//! size). Only a copy whose size and sha256 match the registry is renamed into place, atomically,
//! so the cache never holds a partial or wrong file.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{find_verified, DataError, FileEntry, Found, Locations, MAX_UNSIZED_BYTES};
use crate::text::hex;

/// What `fetch` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// A verified copy was already in the cache.
    Present(PathBuf),
    /// Copied from the mirror.
    Mirrored(PathBuf),
    /// Downloaded and verified (`verified` is false only with `accept_unverified` for a file
    /// without a registered checksum; the message then carries the sha256 to record).
    Downloaded {
        path: PathBuf,
        sha256: String,
        verified: bool,
    },
}

/// Fetches one file of `dataset` into the cache.
pub fn fetch(
    dataset: &str,
    entry: &FileEntry,
    loc: &Locations,
    accept_unverified: bool,
) -> Result<FetchOutcome, DataError> {
    let target = loc.cached(dataset, &entry.name);
    if entry.sha256.is_some() {
        match find_verified(dataset, entry, loc) {
            Found::Cached(v) => return Ok(FetchOutcome::Present(v.path)),
            Found::Mirrored(v) => {
                write_atomically(&v.bytes, &target)?;
                return Ok(FetchOutcome::Mirrored(target));
            }
            Found::Bad(m) => {
                tracing::warn!("{m}; fetching a fresh copy");
            }
            Found::Missing => {}
        }
    } else if !accept_unverified {
        return Err(DataError::Integrity(format!(
            "dataset `{dataset}`: no checksum is registered for `{}`, so a download could not be verified; pass --accept-unverified to fetch it anyway and print its sha256",
            entry.name
        )));
    }
    let (sha256, _) = download(&entry.url, entry, &target)?;
    Ok(FetchOutcome::Downloaded {
        path: target,
        verified: entry.sha256.is_some(),
        sha256,
    })
}

fn partial_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// A new temporary file beside `target` (never an existing file or a link planted there).
// Creates (create_new) a temporary file dplab names beside the target; never reads a path.
#[expect(clippy::disallowed_methods)]
fn create_partial(target: &Path) -> Result<(PathBuf, fs::File), DataError> {
    let io = |e: std::io::Error, p: &Path| DataError::Io(format!("{}: {e}", p.display()));
    let dir = target
        .parent()
        .ok_or_else(|| DataError::Io(format!("{}: no parent directory", target.display())))?;
    fs::create_dir_all(dir).map_err(|e| io(e, dir))?;
    let tmp = partial_path(target);
    // Left over from an earlier process with the same id.
    let _ = fs::remove_file(&tmp);
    let f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io(e, &tmp))?;
    Ok((tmp, f))
}

/// Writes bytes that were verified in memory to `target` through a temporary file and an
/// atomic rename: the cache gets exactly those bytes or nothing.
fn write_atomically(bytes: &[u8], target: &Path) -> Result<(), DataError> {
    let (tmp, mut f) = create_partial(target)?;
    let result = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| fs::rename(&tmp, target));
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        DataError::Io(format!("{}: {e}", target.display()))
    })
}

/// Streams `url` into a temporary file while hashing, checks size and sha256, then renames.
fn download(url: &str, entry: &FileEntry, target: &Path) -> Result<(String, u64), DataError> {
    let (tmp, mut out) = create_partial(target)?;
    let limit = entry.size.unwrap_or(MAX_UNSIZED_BYTES);
    let result = (|| {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_body(Some(Duration::from_secs(600)))
            .build()
            .into();
        let resp = agent.get(url).call().map_err(|e| match e {
            ureq::Error::StatusCode(code) => DataError::Missing(format!("{url}: HTTP {code}")),
            other => DataError::Io(format!("{url}: {other}")),
        })?;
        let mut body = resp.into_body().into_reader();
        let mut h = Sha256::new();
        let mut n = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let k = body.read(&mut buf).map_err(|e| {
                DataError::Io(format!("{url}: transfer failed after {n} bytes: {e}"))
            })?;
            if k == 0 {
                break;
            }
            n += k as u64;
            if n > limit {
                return Err(DataError::Integrity(format!(
                    "{url}: more than the {limit} bytes expected; transfer stopped"
                )));
            }
            // The bytes hashed are the bytes written.
            h.update(&buf[..k]);
            out.write_all(&buf[..k])
                .map_err(|e| DataError::Io(format!("{}: {e}", tmp.display())))?;
        }
        out.sync_all()
            .map_err(|e| DataError::Io(format!("{}: {e}", tmp.display())))?;
        let got = hex(&h.finalize());
        if let Some(size) = entry.size {
            if size != n {
                return Err(DataError::Integrity(format!(
                    "{url}: got {n} bytes, expected {size} (sha256 {got})"
                )));
            }
        }
        if let Some(want) = &entry.sha256 {
            if !want.eq_ignore_ascii_case(&got) {
                return Err(DataError::Integrity(format!(
                    "{url}: sha256 {got}, expected {want}"
                )));
            }
        }
        Ok((got, n))
    })();
    let result = result.and_then(|r| {
        fs::rename(&tmp, target)
            .map(|()| r)
            .map_err(|e| DataError::Io(format!("{}: {e}", target.display())))
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
