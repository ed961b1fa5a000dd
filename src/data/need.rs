//! What a set of readers needs from the registry, and getting it: the files behind the tables
//! they read (a table's data file and its names file, not every file of the dataset: the
//! census-kdd training split has no known checksum and no pipeline reads it), each found
//! verified in the cache or the mirror, else downloaded and verified. A file without a
//! registered checksum is never fetched here: it could not be verified.
//!
//! Callers (the CLI's `data fetch --pipelines`, the report) say which tables they read; this
//! module knows nothing about where the needs come from.

use std::path::PathBuf;

use super::{fetch, locate, DataError, FetchOutcome, FileEntry, FileState, Locations, Registry};

/// One dataset read by a reader, through the tables it names (`None`: the only table).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Need {
    pub dataset: String,
    pub tables: Vec<Option<String>>,
    /// The reader can go on without it (`if_missing: empty`).
    pub optional: bool,
}

/// The registry entries of the files `need` reads, in registry order, without repeats.
/// Errors when the dataset or a table is unknown, or when the dataset has no readable table.
pub fn files<'r>(reg: &'r Registry, need: &Need) -> Result<Vec<&'r FileEntry>, DataError> {
    let ds = reg.dataset(&need.dataset)?;
    let mut names: Vec<&str> = Vec::new();
    for t in &need.tables {
        let (_, spec) = ds.table(&need.dataset, t.as_deref())?;
        names.push(spec.file.as_str());
        if let Some(n) = &spec.names {
            names.push(n.file.as_str());
        }
    }
    Ok(ds
        .files
        .iter()
        .filter(|f| names.contains(&f.name.as_str()))
        .collect())
}

/// Where one needed file ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Obtained {
    /// A verified copy was in the cache already.
    Cached(PathBuf),
    /// A verified copy is in the mirror (used from there; nothing copied).
    Mirror(PathBuf),
    /// Downloaded from its upstream URL and verified.
    Downloaded(PathBuf),
    /// Not obtained: why, in one sentence.
    Failed(String),
}

/// Makes one needed file available: the cache, else the mirror, else its URL. A file with no
/// registered checksum is refused (with the command that downloads it to be checked).
pub fn obtain(dataset: &str, entry: &FileEntry, loc: &Locations) -> Obtained {
    match locate(dataset, entry, loc) {
        FileState::Cached(p) => return Obtained::Cached(p),
        FileState::Mirrored(p) => return Obtained::Mirror(p),
        FileState::Missing | FileState::Bad(_) => {}
    }
    if entry.sha256.is_none() {
        return Obtained::Failed(format!(
            "no checksum is registered for it, so a download could not be verified and is not used; `dplab data fetch {dataset} --accept-unverified` downloads it and prints its sha256 to check and record in data/datasets.toml"
        ));
    }
    match fetch(dataset, entry, loc, false) {
        Ok(FetchOutcome::Present(p)) => Obtained::Cached(p),
        Ok(FetchOutcome::Mirrored(p)) => Obtained::Mirror(p),
        Ok(FetchOutcome::Downloaded { path, .. }) => Obtained::Downloaded(path),
        Err(e) => Obtained::Failed(format!("{e}; {}", where_tried(loc))),
    }
}

/// Whether every file `need` reads is here and verified, without fetching anything; `Err`
/// says what is missing or wrong.
pub fn available(reg: &Registry, loc: &Locations, need: &Need) -> Result<(), String> {
    let files = files(reg, need).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    for f in files {
        match locate(&need.dataset, f, loc) {
            FileState::Cached(_) | FileState::Mirrored(_) => {}
            FileState::Missing => problems.push(format!("{} is missing", f.name)),
            FileState::Bad(m) => problems.push(m),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn where_tried(loc: &Locations) -> String {
    match &loc.mirror {
        Some(m) => format!("not in the cache or the mirror {}", m.display()),
        None => "not in the cache, and no mirror is set (DPLAB_DATA_MIRROR)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg() -> Registry {
        Registry::parse(super::super::BUILTIN, "builtin").unwrap()
    }

    fn need(dataset: &str, tables: &[Option<&str>]) -> Need {
        Need {
            dataset: dataset.into(),
            tables: tables.iter().map(|t| t.map(String::from)).collect(),
            optional: false,
        }
    }

    fn names(files: Vec<&FileEntry>) -> Vec<&str> {
        files.into_iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn a_table_needs_its_data_and_names_files_only() {
        let reg = reg();
        assert_eq!(
            names(files(&reg, &need("census-kdd", &[Some("test")])).unwrap()),
            ["census-income.test.gz", "census-income.names"]
        );
        assert_eq!(
            names(files(&reg, &need("adult", &[Some("train"), Some("test")])).unwrap()),
            ["adult.data", "adult.test", "adult.names"]
        );
        assert_eq!(
            names(files(&reg, &need("wdbc", &[None])).unwrap()),
            ["wdbc.data"]
        );
        let e = files(&reg, &need("pamap2", &[None])).unwrap_err();
        assert!(e.to_string().contains("no readable table"), "{e}");
        let e = files(&reg, &need("adult", &[Some("tset")])).unwrap_err();
        assert!(e.to_string().contains("did you mean `test`"), "{e}");
    }

    #[test]
    fn a_file_without_checksum_is_never_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let loc = Locations {
            cache: dir.path().join("cache"),
            mirror: None,
        };
        let entry = FileEntry {
            name: "x.csv".into(),
            // Unreachable: the refusal must come before any connection.
            url: "http://127.0.0.1:9/x.csv".into(),
            sha256: None,
            size: None,
        };
        match obtain("t", &entry, &loc) {
            Obtained::Failed(m) => assert!(m.contains("no checksum"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(!dir.path().join("cache").exists());
    }
}
