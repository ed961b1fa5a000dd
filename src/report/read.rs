//! Reading a results directory without trusting it: only real directories and regular files
//! (never a link, a FIFO or a device), bounded sizes, names that are one plain path component,
//! and every file the report shows checked against the sha256 its manifest recorded.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::pipeline::manifest::OutputFile;
use crate::stages::report::layout::Layout;

/// Largest manifest read (a sweep of 10⁶ instances writes about 200 MB of seeds).
const MAX_MANIFEST: u64 = 1 << 30;
/// Largest table frame read.
pub(crate) const MAX_CSV: u64 = 64 << 20;
/// Largest table layout or Markdown read.
const MAX_SMALL: u64 = 4 << 20;
/// Most rows of one table counted.
pub(crate) const MAX_ROWS: usize = 1_000_000;

/// A `manifest.json` as the report reads it: everything but the per-instance seeds, which are
/// skipped as they are read.
pub type Manifest = crate::pipeline::manifest::WithoutSeeds;

/// Whether `name` may be used as one file name inside a results directory: a plain
/// component, not hidden, no separators or control characters.
pub(crate) fn plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

/// The entry at `path`, refusing anything but a regular file (a link is refused, not followed).
fn regular(path: &Path) -> Result<std::fs::Metadata, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.file_type().is_symlink() {
        return Err(format!(
            "{}: a symbolic link (dplab writes none; not followed)",
            path.display()
        ));
    }
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    Ok(meta)
}

/// Reads the manifest of a results directory.
pub fn manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join("manifest.json");
    let meta = regular(&path)?;
    if meta.len() > MAX_MANIFEST {
        return Err(format!(
            "{}: {} bytes, more than the {} a manifest may have",
            path.display(),
            meta.len(),
            MAX_MANIFEST
        ));
    }
    let (f, _) =
        crate::regular::open_regular(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let reader = std::io::BufReader::new(f.take(MAX_MANIFEST));
    let m: Manifest = serde_json::from_reader(reader)
        .map_err(|e| format!("{}: not a dplab manifest: {e}", path.display()))?;
    if !m.is_dplab() {
        return Err(format!(
            "{}: not a dplab manifest (no dplab_version or pipeline name)",
            path.display()
        ));
    }
    Ok(m)
}

/// The files a manifest lists, by name, with what it recorded of them.
pub(crate) struct Outputs<'m> {
    dir: PathBuf,
    listed: HashMap<&'m str, &'m OutputFile>,
    order: Vec<&'m str>,
}

impl<'m> Outputs<'m> {
    pub fn new(dir: &Path, m: &'m Manifest) -> Outputs<'m> {
        let mut listed = HashMap::new();
        let mut order = Vec::new();
        for o in &m.outputs {
            if listed.insert(o.file.as_str(), o).is_none() {
                order.push(o.file.as_str());
            }
        }
        Outputs {
            dir: dir.to_path_buf(),
            listed,
            order,
        }
    }

    /// Listed file names ending in `.ext`, in the manifest's order: the directory's own
    /// files, not those of its `rerun/` folder (a copy of the pipeline's inputs).
    pub(crate) fn with_ext(&self, ext: &str) -> Vec<&'m str> {
        let suffix = format!(".{ext}");
        self.order
            .iter()
            .copied()
            .filter(|n| n.ends_with(&suffix) && plain_file_name(n))
            .collect()
    }

    pub fn has(&self, name: &str) -> bool {
        self.listed.contains_key(name)
    }

    /// A listed CSV frame of experiment `exp`, checked ([`Outputs::check`]) and parsed; the
    /// error names the file.
    pub fn frame(&self, exp: &str, name: &str) -> Result<Csv, String> {
        self.check(name, MAX_CSV, true)
            .and_then(|b| Csv::parse(&b).map_err(|e| format!("{exp}/{name}: {e}")))
    }

    /// Checks a listed file (plain name, regular file, size and sha256 as recorded) and
    /// returns its bytes when `keep` is true (at most `max`), else nothing.
    pub fn check(&self, name: &str, max: u64, keep: bool) -> Result<Vec<u8>, String> {
        let o = self
            .listed
            .get(name)
            .ok_or_else(|| format!("{name}: not listed in the manifest"))?;
        if !plain_file_name(name) {
            return Err(format!("{name:?}: not a plain file name"));
        }
        let path = self.dir.join(name);
        let meta = regular(&path)?;
        if meta.len() != o.bytes {
            return Err(format!(
                "{}: {} bytes, the manifest says {} (changed after the run)",
                path.display(),
                meta.len(),
                o.bytes
            ));
        }
        if keep && meta.len() > max {
            return Err(format!(
                "{}: {} bytes, more than the report reads ({max})",
                path.display(),
                meta.len()
            ));
        }
        let (f, _) =
            crate::regular::open_regular(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut sha = Sha256::new();
        let mut kept = Vec::new();
        let mut r = std::io::BufReader::new(f.take(o.bytes));
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = r
                .read(&mut buf)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            sha.update(&buf[..n]);
            if keep {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        let got = crate::text::hex(&sha.finalize());
        if !got.eq_ignore_ascii_case(&o.sha256) {
            return Err(format!(
                "{}: sha256 {got}, the manifest says {} (changed after the run)",
                path.display(),
                o.sha256
            ));
        }
        Ok(kept)
    }

    /// A small listed text file (table layout, Markdown).
    pub fn text(&self, name: &str) -> Result<String, String> {
        let bytes = self.check(name, MAX_SMALL, true)?;
        String::from_utf8(bytes).map_err(|_| format!("{name}: not UTF-8"))
    }
}

/// The layout of each stage that wrote one (`<stage>.json` beside its `<stage>.csv`), read
/// once per experiment for every section that asks: the tables show a layout's stage as it
/// says, the Audits section takes the stages whose layout says [`Show::Audit`]. A layout that
/// cannot be read is kept as its error (naming the file), reported once, by the tables.
///
/// [`Show::Audit`]: crate::stages::report::layout::Show::Audit
pub(crate) fn layouts(
    exp: &str,
    outputs: &Outputs,
    m: &Manifest,
) -> Vec<(String, Result<Layout, String>)> {
    m.stages
        .iter()
        .filter(|st| {
            outputs.has(&format!("{}.csv", st.name)) && outputs.has(&format!("{}.json", st.name))
        })
        .map(|st| {
            let json_name = format!("{}.json", st.name);
            let layout = outputs.text(&json_name).and_then(|s| {
                serde_json::from_str::<Layout>(&s).map_err(|e| format!("{exp}/{json_name}: {e}"))
            });
            (st.name.clone(), layout)
        })
        .collect()
}

/// A frame as text: its column names and rows.
pub(crate) struct Csv {
    pub names: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Csv {
    pub fn parse(bytes: &[u8]) -> Result<Csv, String> {
        let mut r = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .from_reader(bytes);
        let names: Vec<String> = r
            .headers()
            .map_err(|e| e.to_string())?
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows = Vec::new();
        for rec in r.records() {
            let rec = rec.map_err(|e| e.to_string())?;
            if rows.len() == MAX_ROWS {
                return Err(format!("more than {MAX_ROWS} rows"));
            }
            rows.push(rec.iter().map(str::to_string).collect());
        }
        Ok(Csv { names, rows })
    }

    pub fn col(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
}
