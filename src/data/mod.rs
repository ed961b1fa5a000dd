//! The data layer: a registry of public datasets (`data/datasets.toml`), where their files
//! live (a download cache and an offline mirror), checksum verification, fetching, and
//! readers that turn a registered table into a frame.
//!
//! Nothing here knows about pipelines: stages (`load.dataset`) call [`load_table`], the CLI
//! calls [`fetch`], [`verify`] and [`status`]. A file is only ever used after its bytes hash to
//! the registered sha256, so a result can always be traced back to exact inputs.

mod fetch;
pub mod read;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
                Some(p) => fs::read_to_string(&p)
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

/// Hex sha256 and length of a file, streamed.
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((hex(&h.finalize()), n))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks a file against its registry entry; the message says expected vs got.
pub fn check_file(entry: &FileEntry, path: &Path) -> Result<(), DataError> {
    let (got, len) =
        hash_file(path).map_err(|e| DataError::Io(format!("{}: {e}", path.display())))?;
    if let Some(size) = entry.size {
        if size != len {
            return Err(DataError::Integrity(format!(
                "{}: size {len} bytes, expected {size} (sha256 {got})",
                path.display()
            )));
        }
    }
    match &entry.sha256 {
        Some(want) if !want.eq_ignore_ascii_case(&got) => Err(DataError::Integrity(format!(
            "{}: sha256 {got}, expected {want}",
            path.display()
        ))),
        Some(_) => Ok(()),
        None => Err(DataError::Integrity(format!(
            "{}: no checksum is registered for `{}`, so its contents cannot be trusted (sha256 {got}); record it in data/datasets.toml after checking it",
            path.display(),
            entry.name
        ))),
    }
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
    let mut bad = None;
    for (path, cached) in [
        (Some(loc.cached(dataset, &entry.name)), true),
        (loc.mirrored(dataset, &entry.name), false),
    ] {
        let Some(path) = path else { continue };
        if !path.is_file() {
            continue;
        }
        match check_file(entry, &path) {
            Ok(()) if cached => return FileState::Cached(path),
            Ok(()) => return FileState::Mirrored(path),
            Err(e) => bad = Some(e.to_string()),
        }
    }
    bad.map(FileState::Bad).unwrap_or(FileState::Missing)
}

/// The verified path of a file, or one line saying what is missing and what to do.
pub fn resolve(dataset: &str, file: &str) -> Result<PathBuf, DataError> {
    let reg = Registry::current()?;
    let ds = reg.dataset(dataset)?;
    let entry = ds
        .file(file)
        .ok_or_else(|| DataError::Registry(format!("dataset `{dataset}` has no file `{file}`")))?;
    let loc = Locations::current();
    match locate(dataset, entry, loc) {
        FileState::Cached(p) | FileState::Mirrored(p) => Ok(p),
        FileState::Bad(m) => Err(DataError::Integrity(m)),
        FileState::Missing => Err(DataError::Missing(format!(
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

/// Reads one registered table into a frame, after verifying every file it touches.
pub fn load_table(
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
    read::read_table(spec, &data, names.as_deref())
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
