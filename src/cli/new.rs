//! `dplab new NAME`: a pipeline of one's own to start from. It is the shipped example
//! `pipelines/examples/histogram-noise.yaml` under another name — one file, so the example a
//! newcomer reads, the one the README builds and the one `new` writes cannot drift apart (a
//! test runs what `new` writes).

use std::path::Path;

use dplab::pipeline::spec::{name_problem, NameKind};

use crate::cli::exit::{Failure, Outcome};

const EXAMPLE: &str = include_str!("../../pipelines/examples/histogram-noise.yaml");

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

/// Writes `dir/NAME.yaml`, never over an existing file.
pub(crate) fn new(name: &str, dir: &Path) -> Outcome {
    if let Some(p) = name_problem(name, NameKind::Pipeline) {
        return Err(Failure::BadInput(format!("`{name}`: {p}")));
    }
    let path = dir.join(format!("{name}.yaml"));
    // Creates a new file dplab names; never opens an existing path.
    #[expect(
        clippy::disallowed_methods,
        reason = "create_new: never an existing file"
    )]
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path);
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
    file.write_all(pipeline(name).as_bytes())
        .map_err(|e| Failure::Failed(format!("{}: {e}", path.display())))?;
    out!(
        "wrote {}: run it with `dplab run {}`, then `dplab report results`",
        path.display(),
        path.display()
    );
    Ok(())
}
