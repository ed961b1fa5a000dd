//! The data layer: a registry of public datasets (`data/datasets.toml`), where their files
//! live (a download cache and an offline mirror), checksum verification, fetching, and
//! readers that turn a registered table into a frame.
//!
//! Nothing here knows about pipelines: stages (`load.dataset`) call [`load_table`], the CLI
//! calls [`fetch`], [`verify_bytes`], [`status`] and [`need::obtain`] (given the tables a
//! pipeline reads). A file is only ever used after its bytes hash to the registered sha256,
//! so a result can always be traced back to exact inputs.

mod fetch;
pub mod need;
pub mod read;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::text::hex;
use indexmap::IndexMap;
use serde::Deserialize;
use sha2::{Digest, Sha256};

pub use fetch::{fetch, FetchOutcome};

/// The registry compiled into the binary.
const BUILTIN: &str = include_str!("../../data/datasets.toml");

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{0}")]
    Registry(String),
    #[error("{0}")]
    Missing(String),
    #[error("{0}")]
    Integrity(String),
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    Io(String),
}

/// One registered dataset.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Dataset {
    pub title: String,
    pub homepage: String,
    pub licence: String,
    #[serde(default)]
    pub citation: Option<String>,
    /// `false` when the licence forbids passing the files on (MovieLens).
    #[serde(default = "yes")]
    pub redistribution: bool,
    #[serde(default)]
    pub notes: Option<String>,
    pub files: Vec<FileEntry>,
    #[serde(default)]
    pub tables: IndexMap<String, read::TableSpec>,
}

fn yes() -> bool {
    true
}

/// One file of a dataset, as published upstream.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    pub name: String,
    pub url: String,
    /// Absent when no trustworthy checksum is known: such a file is never used silently.
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
}

/// All datasets, in registry order.
#[derive(Debug, Clone)]
pub struct Registry {
    pub datasets: IndexMap<String, Dataset>,
    /// Where it was read from, for messages.
    pub origin: String,
}

impl Registry {
    /// Parses a registry; errors carry the line and column of the bad entry.
    pub fn parse(text: &str, origin: &str) -> Result<Registry, DataError> {
        let datasets: IndexMap<String, Dataset> = toml::from_str(text)
            .map_err(|e| DataError::Registry(format!("{origin}: {}", e.to_string().trim_end())))?;
        let reg = Registry {
            datasets,
            origin: origin.to_string(),
        };
        reg.check()?;
        Ok(reg)
    }

    /// Cross-references the registry: every table's files are registered.
    fn check(&self) -> Result<(), DataError> {
        for (name, ds) in &self.datasets {
            for (tname, t) in &ds.tables {
                let mut needed = vec![t.file.as_str()];
                if let Some(n) = &t.names {
                    needed.push(n.file.as_str());
                }
                for f in needed {
                    if !ds.files.iter().any(|e| e.name == f) {
                        return Err(DataError::Registry(format!(
                            "{}: dataset `{name}`, table `{tname}` reads `{f}`, which is not among its files",
                            self.origin
                        )));
                    }
                }
                t.check().map_err(|m| {
                    DataError::Registry(format!(
                        "{}: dataset `{name}`, table `{tname}`: {m}",
                        self.origin
                    ))
                })?;
            }
            for f in &ds.files {
                if let Some(h) = &f.sha256 {
                    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(DataError::Registry(format!(
                            "{}: dataset `{name}`, file `{}`: sha256 must be 64 hex digits",
                            self.origin, f.name
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The registry in use: `DPLAB_REGISTRY` if set, else the built-in one.
    pub fn current() -> Result<&'static Registry, DataError> {
        static REG: OnceLock<Result<Registry, String>> = OnceLock::new();
        REG.get_or_init(|| {
            let r = match std::env::var_os("DPLAB_REGISTRY") {
                Some(p) => crate::regular::read_regular_file(Path::new(&p), 16 << 20)
                    .and_then(|b| String::from_utf8(b).map_err(|e| e.to_string()))
                    .map_err(|e| DataError::Registry(format!("{}: {e}", Path::new(&p).display())))
                    .and_then(|t| Registry::parse(&t, &Path::new(&p).display().to_string())),
                None => Registry::parse(BUILTIN, "data/datasets.toml (built in)"),
            };
            r.map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|m| DataError::Registry(m.clone()))
    }

    pub fn dataset(&self, name: &str) -> Result<&Dataset, DataError> {
        self.datasets.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.datasets.keys().map(String::as_str).collect();
            DataError::Registry(format!(
                "unknown dataset `{name}`{}; registered: {}",
                did_you_mean(name, &names),
                names.join(", ")
            ))
        })
    }
}

impl Dataset {
    pub fn table(
        &self,
        dataset: &str,
        table: Option<&str>,
    ) -> Result<(&str, &read::TableSpec), DataError> {
        let names: Vec<&str> = self.tables.keys().map(String::as_str).collect();
        match table {
            Some(t) => self
                .tables
                .get_key_value(t)
                .map(|(k, v)| (k.as_str(), v))
                .ok_or_else(|| {
                    DataError::Registry(format!(
                        "dataset `{dataset}` has no table `{t}`{}; its tables: {}",
                        did_you_mean(t, &names),
                        if names.is_empty() {
                            "none".into()
                        } else {
                            names.join(", ")
                        }
                    ))
                }),
            None => match self.tables.len() {
                1 => {
                    let (k, v) = self.tables.first().expect("one table");
                    Ok((k.as_str(), v))
                }
                // Registered but not obtainable here (pamap2): as good as a missing file.
                0 => Err(DataError::Missing(format!(
                    "dataset `{dataset}` has no readable table yet ({})",
                    self.notes.as_deref().unwrap_or("see data/datasets.toml")
                ))),
                _ => Err(DataError::Registry(format!(
                    "dataset `{dataset}` has several tables ({}): say which with `table`",
                    names.join(", ")
                ))),
            },
        }
    }

    pub fn file(&self, name: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.name == name)
    }
}

fn did_you_mean(name: &str, options: &[&str]) -> String {
    crate::text::suggest(name, options.iter().copied())
        .map(|o| format!(" (did you mean `{o}`?)"))
        .unwrap_or_default()
}

/// Where dataset files are looked for: the download cache first, then the offline mirror.
#[derive(Debug, Clone)]
pub struct Locations {
    /// `DPLAB_DATA_DIR`, else `$XDG_CACHE_HOME/dplab/datasets`, else `~/.cache/dplab/datasets`.
    pub cache: PathBuf,
    /// `DPLAB_DATA_MIRROR` (or `--mirror`): a directory laid out as `<dataset>/<file>`.
    pub mirror: Option<PathBuf>,
}

static LOCATIONS: OnceLock<Locations> = OnceLock::new();

impl Locations {
    pub fn from_env() -> Locations {
        let cache = std::env::var_os("DPLAB_DATA_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("dplab/datasets"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/dplab/datasets"))
            })
            .unwrap_or_else(|| PathBuf::from(".dplab-datasets"));
        let mirror = std::env::var_os("DPLAB_DATA_MIRROR")
            .filter(|m| !m.is_empty())
            .map(PathBuf::from);
        Locations { cache, mirror }
    }

    /// Sets the locations for this process (the CLI's `--mirror`/`--data-dir`); first call wins.
    pub fn install(l: Locations) {
        let _ = LOCATIONS.set(l);
    }

    pub fn current() -> &'static Locations {
        LOCATIONS.get_or_init(Locations::from_env)
    }

    pub fn cached(&self, dataset: &str, file: &str) -> PathBuf {
        self.cache.join(dataset).join(file)
    }

    pub fn mirrored(&self, dataset: &str, file: &str) -> Option<PathBuf> {
        self.mirror.as_ref().map(|m| m.join(dataset).join(file))
    }
}

/// The largest file read when the registry gives no size (every registered file with a checksum
/// has one today); it keeps a wrong file from filling memory.
pub(crate) const MAX_UNSIZED_BYTES: u64 = 1 << 30;

/// The bytes of one registered file, read once and checked against its size and sha256.
///
/// Parsers take this, never a path: what is parsed is exactly what was hashed, so replacing
/// the file on disk after verification cannot change the data (the old code hashed on one
/// open and parsed from a second). The only ways to build one check the registry entry.
#[derive(Clone)]
pub struct Verified {
    bytes: Vec<u8>,
    path: PathBuf,
    sha256: String,
}

impl Verified {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Where the bytes were read from (for messages only: never reopen it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The file's name, for messages.
    pub(crate) fn display_name(&self) -> String {
        self.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Verified({}, {} bytes, sha256 {})",
            self.path.display(),
            self.bytes.len(),
            self.sha256
        )
    }
}

/// Hex sha256 of bytes.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Reads a file once, bounded by its registered size, and verifies those bytes.
///
/// A file whose length on disk exceeds the registered size is refused before it is read; the
/// read itself stops one byte past the registered size, so a file that grows meanwhile is
/// refused too rather than read whole.
pub(crate) fn read_verified(entry: &FileEntry, path: &Path) -> Result<Verified, DataError> {
    let io = |e: std::io::Error| DataError::Io(format!("{}: {e}", path.display()));
    let (file, meta) = crate::regular::open_regular(path)
        .map_err(|e| DataError::Io(format!("{}: {e}", path.display())))?;
    let limit = entry.size.unwrap_or(MAX_UNSIZED_BYTES);
    let on_disk = meta.len();
    if on_disk > limit {
        return Err(DataError::Integrity(format!(
            "{}: size {on_disk} bytes, expected {} (not read)",
            path.display(),
            match entry.size {
                Some(s) => format!("{s}"),
                None => format!("at most {limit} when no size is registered"),
            }
        )));
    }
    let mut bytes = Vec::with_capacity(on_disk as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    verify_bytes(entry, bytes, path)
}

/// Verifies bytes already in memory against a registry entry (`origin` names them in
/// messages); the message says expected vs got.
pub(crate) fn verify_bytes(
    entry: &FileEntry,
    bytes: Vec<u8>,
    origin: &Path,
) -> Result<Verified, DataError> {
    let len = bytes.len() as u64;
    match entry.size {
        // `read_verified` reads at most one byte past the size, so `len` may be short of the
        // file's length: say "larger", not a length.
        Some(size) if len > size => {
            return Err(DataError::Integrity(format!(
                "{}: larger than the registered {size} bytes",
                origin.display()
            )))
        }
        Some(size) if len < size => {
            return Err(DataError::Integrity(format!(
                "{}: size {len} bytes, expected {size} (sha256 {})",
                origin.display(),
                sha256_hex(&bytes)
            )))
        }
        None if len > MAX_UNSIZED_BYTES => {
            return Err(DataError::Integrity(format!(
                "{}: larger than {MAX_UNSIZED_BYTES} bytes and no size is registered",
                origin.display()
            )))
        }
        _ => {}
    }
    let got = sha256_hex(&bytes);
    match &entry.sha256 {
        Some(want) if !want.eq_ignore_ascii_case(&got) => Err(DataError::Integrity(format!(
            "{}: sha256 {got}, expected {want}",
            origin.display()
        ))),
        Some(_) => Ok(Verified {
            bytes,
            path: origin.to_path_buf(),
            sha256: got,
        }),
        None => Err(DataError::Integrity(format!(
            "{}: no checksum is registered for `{}`, so its contents cannot be trusted (sha256 {got}); record it in data/datasets.toml after checking it",
            origin.display(),
            entry.name
        ))),
    }
}

/// Checks a file against its registry entry; the message says expected vs got.
pub fn check_file(entry: &FileEntry, path: &Path) -> Result<(), DataError> {
    read_verified(entry, path).map(|_| ())
}

/// Where a file is, and whether it passed verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    Cached(PathBuf),
    Mirrored(PathBuf),
    Missing,
    /// Present but does not match the registry (the message says how).
    Bad(String),
}

/// The verified copy of one file, looked up in the cache, then the mirror.
pub fn locate(dataset: &str, entry: &FileEntry, loc: &Locations) -> FileState {
    match find_verified(dataset, entry, loc) {
        Found::Cached(v) => FileState::Cached(v.path),
        Found::Mirrored(v) => FileState::Mirrored(v.path),
        Found::Missing => FileState::Missing,
        Found::Bad(m) => FileState::Bad(m),
    }
}

/// Like [`FileState`], with the verified bytes.
pub(crate) enum Found {
    Cached(Verified),
    Mirrored(Verified),
    Missing,
    Bad(String),
}

/// Reads and verifies the copy in the cache, else the one in the mirror.
pub(crate) fn find_verified(dataset: &str, entry: &FileEntry, loc: &Locations) -> Found {
    let mut bad = None;
    for (path, cached) in [
        (Some(loc.cached(dataset, &entry.name)), true),
        (loc.mirrored(dataset, &entry.name), false),
    ] {
        let Some(path) = path else { continue };
        if !path.is_file() {
            continue;
        }
        match read_verified(entry, &path) {
            Ok(v) if cached => return Found::Cached(v),
            Ok(v) => return Found::Mirrored(v),
            Err(e) => bad = Some(e.to_string()),
        }
    }
    bad.map(Found::Bad).unwrap_or(Found::Missing)
}

/// The verified bytes of a file, or one line saying what is missing and what to do.
pub fn resolve(dataset: &str, file: &str) -> Result<Verified, DataError> {
    let reg = Registry::current()?;
    let ds = reg.dataset(dataset)?;
    let entry = ds
        .file(file)
        .ok_or_else(|| DataError::Registry(format!("dataset `{dataset}` has no file `{file}`")))?;
    let loc = Locations::current();
    match find_verified(dataset, entry, loc) {
        Found::Cached(v) | Found::Mirrored(v) => Ok(v),
        Found::Bad(m) => Err(DataError::Integrity(m)),
        Found::Missing => Err(DataError::Missing(format!(
            "dataset `{dataset}`: `{file}` is not in the cache ({}) {}; run `dplab data fetch {dataset}` (needs internet, {})",
            loc.cache.join(dataset).display(),
            match &loc.mirror {
                Some(m) => format!("nor in the mirror ({})", m.join(dataset).display()),
                None => "and no mirror is set (DPLAB_DATA_MIRROR)".to_string(),
            },
            entry.url
        ))),
    }
}

/// Reads one registered table into a frame, parsing exactly the bytes that were verified.
pub(crate) fn load_table(
    dataset: &str,
    table: Option<&str>,
) -> Result<polars::prelude::DataFrame, DataError> {
    let reg = Registry::current()?;
    let ds = reg.dataset(dataset)?;
    let (_, spec) = ds.table(dataset, table)?;
    let data = resolve(dataset, &spec.file)?;
    let names = match &spec.names {
        Some(n) => Some(resolve(dataset, &n.file)?),
        None => None,
    };
    read::read_table(spec, &data, names.as_ref())
}

/// One line per file for `dplab data list` / `verify`.
pub struct FileStatus {
    pub dataset: String,
    pub file: String,
    pub size: Option<u64>,
    pub state: FileState,
}

pub fn status(reg: &Registry, loc: &Locations, only: Option<&str>) -> Vec<FileStatus> {
    reg.datasets
        .iter()
        .filter(|(n, _)| only.is_none_or(|o| o == n.as_str()))
        .flat_map(|(n, ds)| {
            ds.files.iter().map(move |f| FileStatus {
                dataset: n.clone(),
                file: f.name.clone(),
                size: f.size,
                state: locate(n, f, loc),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_registry_parses_and_cross_references() {
        let reg = Registry::parse(BUILTIN, "builtin").unwrap();
        for name in [
            "adult",
            "census-kdd",
            "communities",
            "cardiotocography",
            "parkinsons",
            "wdbc",
            "movielens-100k",
            "pamap2",
        ] {
            assert!(reg.datasets.contains_key(name), "{name}");
        }
        assert!(!reg.datasets["movielens-100k"].redistribution);
    }

    #[test]
    fn registry_errors_are_located() {
        let e = Registry::parse("[x]\ntitle = 3\n", "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.toml") && e.contains("line 2"), "{e}");
        let e = Registry::parse(
            "[x]\ntitle='a'\nhomepage='h'\nlicence='l'\nfiles=[]\n[x.tables.t]\nfile='nope'\n",
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`nope`"), "{e}");
    }

    fn entry(bytes: &[u8]) -> FileEntry {
        FileEntry {
            name: "t.csv".into(),
            url: "https://example.invalid/t.csv".into(),
            sha256: Some(sha256_hex(bytes)),
            size: Some(bytes.len() as u64),
        }
    }

    #[test]
    fn verification_reads_once_and_checks_size_and_hash() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        let good = b"a,b\n1,2\n";
        std::fs::write(&p, good).unwrap();
        let v = read_verified(&entry(good), &p).unwrap();
        assert_eq!(v.bytes(), good);
        assert_eq!(v.sha256(), sha256_hex(good));
        // Same size, other bytes.
        std::fs::write(&p, b"a,b\n9,2\n").unwrap();
        let e = read_verified(&entry(good), &p).unwrap_err().to_string();
        assert!(e.contains("sha256") && e.contains("expected"), "{e}");
        // Larger than registered: refused from its length on disk, before reading it.
        std::fs::write(&p, vec![b'x'; 1 << 20]).unwrap();
        let e = read_verified(&entry(good), &p).unwrap_err().to_string();
        assert!(
            e.contains("size 1048576 bytes, expected 8 (not read)"),
            "{e}"
        );
        // Shorter: refused.
        std::fs::write(&p, b"a,b\n").unwrap();
        let e = read_verified(&entry(good), &p).unwrap_err().to_string();
        assert!(e.contains("size 4 bytes, expected 8"), "{e}");
        // In memory, more bytes than registered (a file that grew while being read).
        let e = verify_bytes(&entry(good), b"a,b\n1,2\n3,4\n".to_vec(), &p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than the registered 8 bytes"), "{e}");
        // No checksum registered: never trusted.
        let mut unsure = entry(good);
        unsure.sha256 = None;
        std::fs::write(&p, good).unwrap();
        assert!(read_verified(&unsure, &p).is_err());
        // A FIFO in the cache or mirror is refused at once, not waited on; a sparse file
        // claiming terabytes is refused from its length, unread.
        let fifo = dir.path().join("f.csv");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = read_verified(&entry(good), &fifo).unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
        let sparse = std::fs::File::create(dir.path().join("s.csv")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        let e = read_verified(&entry(good), &dir.path().join("s.csv"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("(not read)"), "{e}");
    }

    /// Every registered checksum against the mirror, when this machine has one.
    #[test]
    fn registry_hashes_match_the_mirror() {
        let Some(mirror) = std::env::var_os("DPLAB_DATA_MIRROR")
            .filter(|m| !m.is_empty())
            .map(PathBuf::from)
        else {
            eprintln!("skipped: DPLAB_DATA_MIRROR is not set (no offline mirror on this machine)");
            return;
        };
        let reg = Registry::parse(BUILTIN, "builtin").unwrap();
        let mut checked = 0;
        for (name, ds) in &reg.datasets {
            for f in &ds.files {
                let p = mirror.join(name).join(&f.name);
                if f.sha256.is_some() && p.is_file() {
                    check_file(f, &p).unwrap();
                    checked += 1;
                }
            }
        }
        assert!(
            checked >= 12,
            "only {checked} files checked in {}",
            mirror.display()
        );
    }
}
