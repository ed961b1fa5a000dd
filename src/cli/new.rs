//! `dplab new NAME`: a pipeline of one's own to start from. It is the shipped example
//! `pipelines/examples/histogram-noise.yaml` under another name — one file, so the example a
//! newcomer reads, the one the book builds (docs/src/experiment.md) and the one `new` writes cannot drift apart (a
//! test runs what `new` writes).
//!
//! `dplab new --external NAME`: the same with a mechanism of one's own, `NAME/mechanism.py`
//! (Python and numpy, through the helper dplab hands programs), and its pipeline. Its two
//! files live in `src/cli/new/`; a test validates what it writes and `make
//! external-check` runs it with numpy.

use std::path::Path;

use dplab::pipeline::spec::{name_problem, NameKind};

use crate::cli::exit::{Failure, Outcome};

const EXAMPLE: &str = include_str!("../../pipelines/examples/histogram-noise.yaml");
const EXTERNAL: &str = include_str!("new/external.yaml");
const MECHANISM: &str = include_str!("new/mechanism.py");

/// The pipeline `new` writes for `name`: the example with its name, without the schema line
/// (whose relative path holds only inside the repository).
fn pipeline(name: &str) -> String {
    EXAMPLE
        .lines()
        .filter(|l| !l.starts_with("# yaml-language-server:"))
        .map(|l| {
            if l.starts_with("name: ") {
                format!("name: {name}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Writes `dir/NAME.yaml` (and, with `external`, `dir/NAME/mechanism.py`), never over an
/// existing file.
pub(crate) fn new(name: &str, dir: &Path, external: bool) -> Outcome {
    if let Some(p) = name_problem(name, NameKind::Pipeline) {
        return Err(Failure::BadInput(format!("`{name}`: {p}")));
    }
    let path = dir.join(format!("{name}.yaml"));
    if !external {
        create(&path, &pipeline(name))?;
        out!(
            "wrote {}: run it with `dplab run {}`, then `dplab report results`",
            path.display(),
            path.display()
        );
        return Ok(());
    }
    // The program's folder first: a name whose folder exists writes nothing.
    let folder = dir.join(name);
    match std::fs::create_dir(&folder) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Failure::BadInput(format!(
                "{} exists: not overwritten (give another name, or --dir)",
                folder.display()
            )))
        }
        Err(e) => return Err(Failure::BadInput(format!("{}: {e}", folder.display()))),
    }
    let program = folder.join("mechanism.py");
    let written = create(&path, &EXTERNAL.replace("__NAME__", name))
        .and_then(|()| create(&program, &MECHANISM.replace("__NAME__", name)));
    if let Err(e) = written {
        // Nothing half-written is left behind: the folder is new and holds at most the program.
        let _ = std::fs::remove_file(&program);
        let _ = std::fs::remove_dir(&folder);
        return Err(e);
    }
    out!(
        "wrote {} and {}: a mechanism of your own in Python with numpy (`pip install numpy` if \
         `python3 -c 'import numpy'` fails). Run it with `dplab run --allow-exec {}`, then \
         `dplab report results`; replace the program with yours (its docstring says what dplab \
         hands it).",
        path.display(),
        program.display(),
        path.display()
    );
    Ok(())
}

/// Writes `text` to a new file at `path`, never over an existing one.
fn create(path: &Path, text: &str) -> Outcome {
    // Creates a new file dplab names; never opens an existing path.
    #[expect(
        clippy::disallowed_methods,
        reason = "create_new: never an existing file"
    )]
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Failure::BadInput(format!(
                "{} exists: not overwritten (give another name, or --dir)",
                path.display()
            )))
        }
        Err(e) => return Err(Failure::BadInput(format!("{}: {e}", path.display()))),
    };
    use std::io::Write as _;
    file.write_all(text.as_bytes())
        .map_err(|e| Failure::Failed(format!("{}: {e}", path.display())))
}
