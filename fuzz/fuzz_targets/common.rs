//! What both fuzz targets run: the path `dplab validate FILE` takes (see `load_plan` and
//! `validate` in src/main.rs), from the file's bytes on. Only the read of the file itself
//! (`spec::read_regular_file`, a size and file-type check) is left out: the bytes come from
//! the fuzzer instead.
//!
//! A panic (or an abort, a stack overflow, an allocation past `-rss_limit_mb`, a run past
//! `-timeout`) is a bug; an `Err` is a correct answer to a bad file.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dplab::pipeline::{plan, spec};

/// The directory the fuzzed pipeline "lives" in. Parameters that name files (`paper:`,
/// `path:`) resolve against it and may only read inside it, as for a real pipeline; it holds
/// copies of the files the shipped pipelines name (the `*.paper.csv` tables), so that mutants
/// of the seeds reach the code that reads them.
fn pipeline_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("dplab-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the fuzz pipeline directory");
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pipelines");
        copy_data_files(&shipped, &dir);
        extern "C" fn cleanup() {
            if let Some(d) = DIR.get() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
        // SAFETY: registers a plain `extern "C" fn()` to run at exit; it only removes files.
        unsafe { libc_atexit(cleanup) };
        dir
    })
}

extern "C" {
    #[link_name = "atexit"]
    fn libc_atexit(f: extern "C" fn()) -> i32;
}

/// Copies every non-YAML file found under `from` (recursively) into `to`, flattened.
fn copy_data_files(from: &Path, to: &Path) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_data_files(&p, to);
        } else if p.extension().is_some_and(|x| x != "yaml" && x != "yml") {
            if let Some(name) = p.file_name() {
                let _ = std::fs::copy(&p, to.join(name));
            }
        }
    }
}

/// `dplab validate <dir>/fuzz.yaml` on a file holding `data`, with the default flags.
pub fn validate(data: &[u8]) {
    let path = pipeline_dir().join("fuzz.yaml");
    // `Common` without flags: the default limits (`load_plan` installs them).
    dplab::limits::set(dplab::limits::Limits::DEFAULT);
    let result = spec::decode(&path, data)
        .and_then(|text| spec::parse(&path, text))
        .map_err(|e| vec![e])
        .and_then(|file| {
            plan::plan(
                &file,
                &plan::Overrides::default(),
                dplab::stages::registry::all(),
            )
        });
    // What `validate` prints, so that formatting the answer is exercised too.
    match result {
        Ok(p) => {
            let line = format!(
                "ok: {} ({}: {} stages, {} instances)",
                path.display(),
                p.name,
                p.stages.len(),
                p.instance_count()
            );
            std::hint::black_box(line);
        }
        Err(errs) => {
            assert!(!errs.is_empty(), "plan failed without an error");
            for e in errs {
                std::hint::black_box(format!("error: {e}"));
            }
        }
    }
}
