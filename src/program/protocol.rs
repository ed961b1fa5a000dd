//! The hand-off between dplab and an external program, **protocol version 1**.
//!
//! For each instance, dplab creates a fresh private working directory (mode 0700, under the
//! system's temporary directory) and runs the program there:
//!
//! ```text
//! <work>/                      the program's current directory, and its TMPDIR
//!   dplab.json                 the description below; its path is also in $DPLAB_JSON
//!   dplab_external.py          the Python helper (its directory leads PYTHONPATH)
//!   inputs/<name>.parquet      each input frame, as Parquet …
//!   inputs/<name>.csv          … and as CSV (header row; empty cell = missing)
//!   output/                    the program writes exactly one of out.parquet, out.csv, out.cols here
//!   artifacts/                 files it writes here become the instance's artifacts
//! ```
//!
//! `dplab.json` (keys in this order, pretty-printed, UTF-8):
//!
//! ```json
//! {
//!   "protocol": 1,
//!   "stage": "pf",
//!   "instance": "eps=0.5 rep=0",
//!   "params": {"epsilon": 0.5, "samples": 20000},
//!   "axes": {"eps": 0.5, "rep": 0},
//!   "seed": {"hex": "0123456789abcdef0123456789abcdef", "hi": 81985529216486895, "lo": 81985529216486895},
//!   "threads": 1,
//!   "inputs": [
//!     {"name": "counts", "parquet": "<work>/inputs/counts.parquet", "csv": "<work>/inputs/counts.csv",
//!      "rows": 2, "columns": [{"name": "candidate", "type": "str"}, {"name": "count", "type": "int"}]}
//!   ],
//!   "output": {"dir": "<work>/output", "frame": "out",
//!              "parquet": "<work>/output/out.parquet", "csv": "<work>/output/out.csv",
//!              "cols": "<work>/output/out.cols"},
//!   "artifacts_dir": "<work>/artifacts"
//! }
//! ```
//!
//! - `params` is the stage's `params:` mapping after `$axis` substitution, as JSON; `axes`
//!   the instance's axis values (`rep` included when the stage repeats). Values arrive only
//!   here, never on the command line: a value `$(rm -rf ~)` is that text.
//! - `seed` is the instance's 128-bit seed, derived by dplab from the pipeline's seed, the
//!   stage and the axis values: `hex` is 32 lowercase hex digits, most significant first;
//!   `hi` is its upper 64 bits and `lo` its lower 64 bits (seed = hi·2⁶⁴ + lo). The same
//!   seed must give the same frame: a program draws all its randomness from it.
//! - `threads` is how many threads it may use (also in `DPLAB_THREADS`, `OMP_NUM_THREADS`,
//!   `OPENBLAS_NUM_THREADS`, `MKL_NUM_THREADS`).
//! - `inputs` are in the order of the stage's `input:`; each is written both as Parquet and
//!   as CSV. Column `type` is `int`, `float`, `str`, `bool`, `null` or polars' name of
//!   another type. Input names that are not plain file names are written as `input<i>`.
//! - All paths are absolute; the layout above is fixed, so a program may also use the
//!   relative paths (`inputs/counts.csv`, `output/out.csv`).
//!
//! The program writes its frame as `output/out.parquet`, `output/out.csv` (a header row) or
//! `output/out.cols` (binary columns, [`super::columns`]: what the Python helper writes for
//! numpy arrays and pyarrow tables);
//! writing neither or both is an error, and so is a frame larger than the bound the run
//! allows (in bytes, cells or columns) or, when its stage declares `columns:`, a frame of
//! other columns (the axis columns dplab adds aside). Other files in `output/` are ignored.
//! It may write plain files into `artifacts/` (names of letters, digits, `.`, `_`, `-`; no
//! directories), which dplab keeps with the instance (bounded in count and bytes).
//! It exits 0 on success; anything else fails the instance with the last lines of its output.
//!
//! Its environment holds only `PATH`, `HOME`, `LANG`, `TMPDIR` (= its directory),
//! `PYTHONPATH`, the `DPLAB_*` and thread variables above, and the variables its stage lists
//! in `pass_env`. stdin is empty; stdout and stderr go to the instance's log. It runs in a
//! process group of its own, which is killed when it exits (children it left), when it times
//! out, and when dplab stops. The directory is removed afterwards, whatever happened.
//!
//! dplab reads nothing but `output/out.*` and `artifacts/*` of the directory it created,
//! through descriptors it opened itself and without following symbolic links
//! (see `dir.rs`). It cannot stop a program from writing elsewhere, with the user's rights:
//! a pipeline that runs programs is code, and `--allow-exec` says the user trusts it.

use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::Serialize;

use super::dir::Dir;
use super::error::ProgramError;

/// The protocol version written into `dplab.json`.
pub(crate) const PROTOCOL: u32 = 1;

/// The Python helper, written into every working directory.
pub(crate) const PYTHON_HELPER: &str = include_str!("../../python/dplab/external.py");

/// The file name of the frame, without its extension.
pub(crate) const FRAME: &str = "out";

/// A fresh private working directory, removed (with everything in it) when dropped.
pub(crate) struct WorkDir {
    path: PathBuf,
    /// Opened when created: what dplab reads back is read through it ([`Dir`]).
    dir: Dir,
}

impl WorkDir {
    /// Creates `dplab-external-<pid>-s<start>-<n>-<time>` (mode 0700) in the system's
    /// temporary directory, with its `inputs`, `output` and `artifacts`. Creating a directory
    /// is atomic and fails if the name exists, so no other process can have prepared it. The
    /// process's id and start time in the name let a later run tell that its creator is gone
    /// ([`sweep_stale`]). It is registered until it is removed, so that a signal that stops
    /// dplab removes it too ([`remove_live`]).
    pub(crate) fn create() -> std::io::Result<WorkDir> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        let base = std::path::absolute(std::env::temp_dir())?;
        SWEPT.call_once(|| sweep_stale(&base));
        let mut attempt = 0;
        let path = loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let name = format!(
                "dplab-external-{}-s{}-{}-{nanos:08x}",
                std::process::id(),
                start_time(std::process::id()).unwrap_or(0),
                N.fetch_add(1, Ordering::Relaxed)
            );
            let path = base.join(name);
            let mut live = lock_live();
            if STOPPED.load(Ordering::SeqCst) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "dplab is stopping",
                ));
            }
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    live.push(path.clone());
                    break path;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => {
                    attempt += 1
                }
                Err(e) => return Err(e),
            }
        };
        let dir = match Dir::open(&path) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_dir(&path);
                lock_live().retain(|p| *p != path);
                return Err(e);
            }
        };
        let work = WorkDir { path, dir };
        for sub in ["inputs", "output", "artifacts"] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(work.path.join(sub))?;
        }
        Ok(work)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        remove_work_dir(&self.path);
        lock_live().retain(|p| *p != self.path);
    }
}

/// The working directories that exist now (see [`remove_live`]).
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
/// Set by [`remove_live`]: no working directory is created after it.
static STOPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn lock_live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// dplab is stopping (Ctrl-C, SIGTERM, SIGHUP; its programs were killed just before): removes
/// every working directory that exists now, and lets no new one be created.
pub(crate) fn remove_live() {
    let live = std::mem::take(&mut *lock_live());
    STOPPED.store(true, std::sync::atomic::Ordering::SeqCst);
    for p in live {
        // A killed program's last writes may land while the tree is removed: a few tries.
        for _ in 0..20 {
            remove_work_dir(&p);
            if std::fs::symlink_metadata(&p).is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }
}

// `remove_dir_all` removes a symbolic link planted in the tree, never its target.
fn remove_work_dir(path: &Path) {
    if std::fs::remove_dir_all(path).is_err() {
        // A program may have taken its own permissions away (`chmod 000 output`).
        unlock(path);
        if let Err(e) = std::fs::remove_dir_all(path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(
                    "could not remove an external program's working directory {}: {e}",
                    path.display()
                );
            }
        }
    }
}

/// When a process started, in clock ticks since boot (`/proc/<pid>/stat`, field 22): with
/// its id, it names the process across id reuse.
// The kernel's process table, not a path a user named.
#[expect(clippy::disallowed_methods)]
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After `(comm)`, which may hold spaces and `)`: state is field 3, start time field 22.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Removes the working directories in `base` that a dplab killed with `kill -9` left: those
/// named by a process that no longer runs (its id is gone, or now names a process that
/// started at another time). Only real directories of this user are touched, never a link.
fn sweep_stale(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix("dplab-external-"))
        else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(Ok(pid)), Some(start)) = (parts.next().map(str::parse::<u32>), parts.next())
        else {
            continue;
        };
        let Some(start) = start.strip_prefix('s').and_then(|t| t.parse::<u64>().ok()) else {
            continue;
        };
        if start_time(pid) == Some(start) {
            continue;
        }
        let path = e.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me) {
            tracing::debug!(
                "removing {}: left by a dplab that was killed",
                path.display()
            );
            remove_work_dir(&path);
        }
    }
}

/// Gives back owner access to every directory under `path` (not following links).
fn unlock(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(path) {
            for e in entries.flatten() {
                unlock(&e.path());
            }
        }
    }
}

/// The instance's seed as the description writes it.
#[derive(Serialize)]
struct Seed {
    hex: String,
    hi: u64,
    lo: u64,
}

#[derive(Serialize)]
struct ColumnInfo {
    name: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize)]
struct InputFile {
    name: String,
    parquet: PathBuf,
    csv: PathBuf,
    rows: usize,
    columns: Vec<ColumnInfo>,
}

#[derive(Serialize)]
struct OutputPlace {
    dir: PathBuf,
    frame: &'static str,
    parquet: PathBuf,
    csv: PathBuf,
    cols: PathBuf,
}

/// `dplab.json`, field for field (see the module doc).
#[derive(Serialize)]
struct Description<'a> {
    protocol: u32,
    stage: &'a str,
    instance: &'a str,
    params: &'a serde_json::Value,
    axes: &'a serde_json::Map<String, serde_json::Value>,
    seed: Seed,
    threads: u32,
    inputs: Vec<InputFile>,
    output: OutputPlace,
    artifacts_dir: PathBuf,
}

/// What the description says about one instance.
pub(crate) struct Facts<'a> {
    pub stage: &'a str,
    pub label: &'a str,
    pub params: &'a serde_json::Value,
    pub axes: &'a serde_json::Map<String, serde_json::Value>,
    pub seed: u128,
    pub threads: u32,
    pub inputs: &'a [DataFrame],
    pub input_names: &'a [String],
}

/// The protocol's name of a column type.
fn type_name(t: &DataType) -> String {
    match t {
        t if t.is_integer() => "int".into(),
        t if t.is_float() => "float".into(),
        DataType::String => "str".into(),
        DataType::Boolean => "bool".into(),
        DataType::Null => "null".into(),
        other => other.to_string(),
    }
}

fn setup(what: &str, e: impl std::fmt::Display) -> ProgramError {
    ProgramError::Setup(format!("{what}: {e}"))
}

/// Writes the inputs (Parquet and CSV), the helper and `dplab.json` into `work`; returns the
/// description's path and the helper's directory.
pub(crate) fn prepare(work: &WorkDir, facts: &Facts) -> Result<PathBuf, ProgramError> {
    let root = work.path();
    let mut inputs = Vec::new();
    let mut used = std::collections::HashSet::new();
    for (i, df) in facts.inputs.iter().enumerate() {
        let name = facts
            .input_names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("input{i}"));
        let stem = if crate::text::plain_file_name(&name) && used.insert(name.clone()) {
            name.clone()
        } else {
            format!("input{i}")
        };
        let parquet = root.join("inputs").join(format!("{stem}.parquet"));
        let csv = root.join("inputs").join(format!("{stem}.csv"));
        let mut frame = df.clone();
        write_file(&parquet, |w| {
            ParquetWriter::new(w).finish(&mut frame)?;
            Ok(())
        })?;
        write_file(&csv, |w| {
            CsvWriter::new(w).include_header(true).finish(&mut frame)?;
            Ok(())
        })?;
        inputs.push(InputFile {
            name,
            parquet,
            csv,
            rows: df.height(),
            columns: df
                .columns()
                .iter()
                .map(|c| ColumnInfo {
                    name: c.name().to_string(),
                    kind: type_name(c.dtype()),
                })
                .collect(),
        });
    }
    let out = root.join("output");
    let description = Description {
        protocol: PROTOCOL,
        stage: facts.stage,
        instance: facts.label,
        params: facts.params,
        axes: facts.axes,
        seed: Seed {
            hex: format!("{:032x}", facts.seed),
            hi: (facts.seed >> 64) as u64,
            lo: facts.seed as u64,
        },
        threads: facts.threads,
        inputs,
        output: OutputPlace {
            parquet: out.join(format!("{FRAME}.parquet")),
            csv: out.join(format!("{FRAME}.csv")),
            cols: out.join(format!("{FRAME}.cols")),
            dir: out,
            frame: FRAME,
        },
        artifacts_dir: root.join("artifacts"),
    };
    let json = serde_json::to_vec_pretty(&description)
        .map_err(|e| setup("writing dplab.json (a path that is not UTF-8?)", e))?;
    let path = root.join("dplab.json");
    write_file(&path, |w| Ok(w.write_all(&json)?))?;
    write_file(&root.join("dplab_external.py"), |w| {
        Ok(w.write_all(PYTHON_HELPER.as_bytes())?)
    })?;
    Ok(path)
}

fn write_file(
    path: &Path,
    body: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> Result<(), ProgramError> {
    let what = || format!("writing {}", path.display());
    let file = std::fs::File::create_new(path).map_err(|e| setup(&what(), e))?;
    let mut w = std::io::BufWriter::new(file);
    body(&mut w).map_err(|e| setup(&what(), e))?;
    w.flush().map_err(|e| setup(&what(), e))
}

/// The bounds on what dplab reads back from a program.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Bytes of the frame file. The table it holds is also checked against what
    /// `--max-cells` allows a table read (`limits::check_table_read`).
    pub frame_bytes: u64,
    /// Number of artifacts.
    pub artifacts: usize,
    /// Bytes of all artifacts together.
    pub artifact_bytes: u64,
    /// Bytes of output (stdout and stderr) kept in the log: the last ones.
    pub log_bytes: usize,
    /// Between SIGTERM and SIGKILL when the timeout passes.
    pub grace: std::time::Duration,
}

impl Bounds {
    /// The bounds in force: a frame file as large as a table read from text may be
    /// (`limits::table_bytes`, from `--max-cells`), 100 artifacts of 256 MiB together, the
    /// last 64 KiB of output, 5 s between SIGTERM and SIGKILL.
    pub fn current() -> Bounds {
        Bounds {
            frame_bytes: crate::limits::table_bytes(),
            artifacts: 100,
            artifact_bytes: 256 << 20,
            log_bytes: 64 << 10,
            grace: std::time::Duration::from_secs(5),
        }
    }
}

/// A file the program wrote into its artifacts directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgramArtifact {
    /// Its file name (checked: see [`artifact_name`]).
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Whether `name` is an artifact name dplab accepts: 1 to 100 letters, digits, `.`, `_`,
/// `-`, starting with a letter or digit (no hidden files, nothing a shell or a path could
/// read as more than a name).
pub(crate) fn artifact_name(name: &std::ffi::OsStr) -> Option<&str> {
    name.to_str().filter(|n| crate::text::plain_file_name(n))
}

/// Reads the program's frame and artifacts back from `work`. `tail` is the end of its
/// log, for the message when there is no frame.
pub(crate) fn collect(
    work: &WorkDir,
    bounds: &Bounds,
    tail: &str,
) -> Result<(DataFrame, Vec<ProgramArtifact>), ProgramError> {
    let bad = |file: &str, reason: String| ProgramError::BadFile {
        file: file.into(),
        reason,
    };
    let out = work.dir.dir("output").map_err(|r| bad("output/", r))?;
    // The two names are looked up, not looked for in a listing: the directory may hold any
    // number of other files (a listing cut at a few names missed `out.csv` among 50 others).
    let has = |n: &str| {
        out.has(std::ffi::OsStr::new(n)).map_err(|e| {
            bad(
                &format!("output/{n}"),
                format!("which cannot be examined ({e})"),
            )
        })
    };
    let names = [
        format!("{FRAME}.parquet"),
        format!("{FRAME}.csv"),
        format!("{FRAME}.cols"),
    ];
    let mut written = Vec::new();
    for n in names {
        if has(&n)? {
            written.push(n);
        }
    }
    let file = match written.len() {
        1 => written.remove(0),
        2.. => return Err(ProgramError::BothFrames),
        _ => {
            // For the message only, a few names: never a listing of a million files.
            const SHOWN: usize = 20;
            let names = out
                .names(SHOWN)
                .map_err(|e| bad("output/", format!("which cannot be listed ({e})")))?;
            return Err(ProgramError::NoFrame {
                found: names
                    .iter()
                    .take(SHOWN)
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect(),
                more: names.len() > SHOWN,
                tail: tail.into(),
            });
        }
    };
    let shown = format!("output/{file}");
    let (f, meta) = out
        .file(std::ffi::OsStr::new(&file))
        .map_err(|r| bad(&shown, r))?;
    let too_large = |size: u64| {
        ProgramError::TooLarge(format!(
            "the program's frame {shown} has {size} bytes, more than the limit of {} (a table read from text may take 8 bytes for each cell --max-cells allows; raise it with --max-cells if you mean it)",
            bounds.frame_bytes
        ))
    };
    if meta.len() > bounds.frame_bytes {
        return Err(too_large(meta.len()));
    }
    let bytes = read_bounded(f, bounds.frame_bytes).map_err(|e| match e {
        Some(size) => too_large(size),
        None => bad(&shown, "which cannot be read".into()),
    })?;
    let malformed = |message: String| ProgramError::MalformedFrame {
        file: shown.clone(),
        message,
    };
    let frame = if file.ends_with(".csv") {
        let frame = crate::frames::read_csv(&bytes).map_err(|e| {
            let m = e.to_string();
            if m.contains("--max-cells") {
                ProgramError::TooLarge(format!("the program's frame {shown}: {m}"))
            } else {
                malformed(m)
            }
        })?;
        warn_slow_csv(frame.height());
        frame
    } else if file.ends_with(".cols") {
        super::columns::read_columns(&bytes, &shown)?
    } else {
        read_parquet(&bytes, &shown)?
    };
    let artifacts = read_artifacts(work, bounds)?;
    Ok((frame, artifacts))
}

/// Rows of a CSV frame from which a run is told, once, of the binary fast path.
const SLOW_CSV_ROWS: usize = 100_000;

/// Tells the run once that a program sends large frames through CSV, and what is faster.
fn warn_slow_csv(rows: usize) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if rows >= SLOW_CSV_ROWS && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!(
            "a program wrote a frame of {rows} rows as CSV, which costs a Python loop per row and a parse per cell: hand `job.write` numpy arrays ({{\"noisy\": array}}) or a pyarrow table, which it writes as binary columns (output/out.cols), or write those yourself (see the external-programs chapter)"
        );
    }
}

/// The bytes of an open file, at most `max` (`Err(Some(size))` past it, `Err(None)` when
/// it cannot be read); `take` bounds the read even if the file grows meanwhile.
fn read_bounded(f: std::fs::File, max: u64) -> Result<Vec<u8>, Option<u64>> {
    let mut bytes = Vec::new();
    f.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|_| None)?;
    if bytes.len() as u64 > max {
        return Err(Some(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A Parquet frame, its rows and columns checked against the table limit before its data
/// is decoded (Parquet compresses: a small file can hold a huge table). Its columns are
/// counted first from the footer's first bytes ([`parquet_schema_len`]): the footer holds
/// metadata for every column (most of the 365 MB of a stored table of 10⁶ columns), and
/// decoding it whole would be the very cost the limit is there to prevent.
fn read_parquet(bytes: &[u8], shown: &str) -> Result<DataFrame, ProgramError> {
    let what = format!("the program's frame {shown}");
    if let Some(elements) = parquet_schema_len(bytes) {
        // The root is an element of the schema, and so is every group; a column of a group
        // costs like any other.
        crate::limits::check_columns(&what, elements.saturating_sub(1))
            .map_err(ProgramError::TooLarge)?;
    }
    let malformed = |e: PolarsError| ProgramError::MalformedFrame {
        file: shown.into(),
        message: e.to_string(),
    };
    let mut reader = ParquetReader::new(std::io::Cursor::new(bytes));
    let rows = reader.num_rows().map_err(malformed)? as u64;
    let cols = reader.schema().map_err(malformed)?.len() as u64;
    crate::limits::check_table_read(&what, rows, cols, bytes.len() as u64)
        .map_err(ProgramError::TooLarge)?;
    let reader = ParquetReader::new(std::io::Cursor::new(bytes));
    reader.finish().map_err(malformed)
}

/// How many elements the schema in a Parquet file's footer has (its columns, the root and
/// any groups), read from the footer's first bytes without decoding the rest. The footer is
/// a Thrift `FileMetaData` in the compact protocol, written at the end of the file and
/// followed by its length (4 bytes, little-endian) and `PAR1`; it starts with field 1,
/// `version` (an i32: a zigzag varint), then field 2, `schema`, a list of structs whose
/// header holds its length (in its high nibble, or in a varint after it from 15 on). Every
/// writer writes the fields in that order; `None` for any other layout, which polars then
/// reads (and judges) whole.
fn parquet_schema_len(bytes: &[u8]) -> Option<u64> {
    const FIELD_1_I32: u8 = 0x15;
    const FIELD_2_LIST: u8 = 0x19;
    const STRUCT: u8 = 12;
    let tail = bytes.len().checked_sub(8)?;
    if &bytes[tail + 4..] != b"PAR1" {
        return None;
    }
    let len = u32::from_le_bytes(bytes[tail..tail + 4].try_into().ok()?) as usize;
    let mut footer = bytes.get(tail.checked_sub(len)?..tail)?.iter().copied();
    if footer.next()? != FIELD_1_I32 {
        return None;
    }
    varint(&mut footer)?;
    if footer.next()? != FIELD_2_LIST {
        return None;
    }
    let header = footer.next()?;
    if header & 0x0f != STRUCT {
        return None;
    }
    match header >> 4 {
        15 => varint(&mut footer),
        n => Some(u64::from(n)),
    }
}

/// An unsigned LEB128 varint of at most 64 bits, as Thrift's compact protocol writes them.
fn varint(bytes: &mut impl Iterator<Item = u8>) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = bytes.next()?;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn read_artifacts(work: &WorkDir, bounds: &Bounds) -> Result<Vec<ProgramArtifact>, ProgramError> {
    let bad = |file: String, reason: String| ProgramError::BadFile { file, reason };
    let dir = work
        .dir
        .dir("artifacts")
        .map_err(|r| bad("artifacts/".into(), r))?;
    let names = dir
        .names(bounds.artifacts)
        .map_err(|e| bad("artifacts/".into(), format!("which cannot be listed ({e})")))?;
    if names.len() > bounds.artifacts {
        return Err(ProgramError::TooLarge(format!(
            "the program wrote more than {} artifacts, more than the limit",
            bounds.artifacts
        )));
    }
    let mut total = 0u64;
    let mut out = Vec::with_capacity(names.len());
    for raw in &names {
        let Some(name) = artifact_name(raw) else {
            return Err(ProgramError::BadArtifactName {
                name: raw.to_string_lossy().into_owned(),
            });
        };
        let shown = format!("artifacts/{name}");
        let (f, meta) = dir.file(raw).map_err(|r| bad(shown.clone(), r))?;
        let left = bounds.artifact_bytes.saturating_sub(total);
        let too_large = || {
            ProgramError::TooLarge(format!(
                "the program's artifacts take more than the limit of {} bytes (at {shown})",
                bounds.artifact_bytes
            ))
        };
        if meta.len() > left {
            return Err(too_large());
        }
        let bytes = read_bounded(f, left).map_err(|e| match e {
            Some(_) => too_large(),
            None => bad(shown.clone(), "which cannot be read".into()),
        })?;
        total += bytes.len() as u64;
        out.push(ProgramArtifact {
            name: name.to_string(),
            bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema's length read from a footer's first bytes is polars' own count: its columns
    /// and the root, whether the length fits the list header's nibble or needs a varint.
    #[test]
    fn the_schema_length_is_read_from_the_footer_s_first_bytes() {
        for width in [1usize, 13, 14, 300] {
            let columns: Vec<Column> = (0..width)
                .map(|i| Column::new(format!("c{i}").into(), [1i64, 2]))
                .collect();
            let mut df = DataFrame::new(2, columns).unwrap();
            let mut bytes = Vec::new();
            ParquetWriter::new(&mut bytes).finish(&mut df).unwrap();
            assert_eq!(
                parquet_schema_len(&bytes),
                Some(width as u64 + 1),
                "{width}"
            );
            // Not a Parquet file, or a footer that does not start as every writer starts it.
            assert_eq!(parquet_schema_len(&bytes[..bytes.len() - 1]), None);
            let mut odd = bytes.clone();
            let len = odd.len();
            let footer = u32::from_le_bytes(odd[len - 8..len - 4].try_into().unwrap()) as usize;
            odd[len - 8 - footer] = 0x16;
            assert_eq!(parquet_schema_len(&odd), None);
        }
        assert_eq!(parquet_schema_len(b"PAR1"), None);
        assert_eq!(parquet_schema_len(b"\xff\xff\xff\xffPAR1"), None);
    }
}
