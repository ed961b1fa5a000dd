//! Putting a verified copy of a dataset file into the cache: from the offline mirror when it has
//! the file, else over HTTP(S). Bytes go to a temporary file beside the target while they are
//! hashed; only a copy whose size and sha256 match the registry is renamed into place, so the
//! cache never holds a partial or wrong file.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{check_file, hex, locate, DataError, FileEntry, FileState, Locations};

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
        match locate(dataset, entry, loc) {
            FileState::Cached(p) => return Ok(FetchOutcome::Present(p)),
            FileState::Mirrored(src) => {
                copy_verified(entry, &src, &target)?;
                return Ok(FetchOutcome::Mirrored(target));
            }
            FileState::Bad(m) => {
                tracing::warn!("{m}; fetching a fresh copy");
            }
            FileState::Missing => {}
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

fn copy_verified(entry: &FileEntry, src: &Path, target: &Path) -> Result<(), DataError> {
    let io = |e: std::io::Error, p: &Path| DataError::Io(format!("{}: {e}", p.display()));
    let dir = target.parent().expect("cache paths have a parent");
    fs::create_dir_all(dir).map_err(|e| io(e, dir))?;
    let tmp = partial_path(target);
    fs::copy(src, &tmp).map_err(|e| io(e, &tmp))?;
    if let Err(e) = check_file(entry, &tmp) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, target).map_err(|e| io(e, target))
}

/// Streams `url` into a temporary file while hashing, checks size and sha256, then renames.
fn download(url: &str, entry: &FileEntry, target: &Path) -> Result<(String, u64), DataError> {
    let dir = target.parent().expect("cache paths have a parent");
    fs::create_dir_all(dir).map_err(|e| DataError::Io(format!("{}: {e}", dir.display())))?;
    let tmp = partial_path(target);
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
        let mut out =
            fs::File::create(&tmp).map_err(|e| DataError::Io(format!("{}: {e}", tmp.display())))?;
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
            h.update(&buf[..k]);
            out.write_all(&buf[..k])
                .map_err(|e| DataError::Io(format!("{}: {e}", tmp.display())))?;
            n += k as u64;
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
    match result {
        Ok(r) => {
            fs::rename(&tmp, target)
                .map_err(|e| DataError::Io(format!("{}: {e}", target.display())))?;
            Ok(r)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}
