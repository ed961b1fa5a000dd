//! `dplab show` and `dplab graph`: a pipeline as it will run, without running it.

use std::path::Path;

use dplab::pipeline::{graph, show};

use crate::cli::args::{Common, GraphFormat};
use crate::cli::exit::{Failure, Outcome};
use crate::cli::load::{load_plan, spec_failure};

/// `dplab show PATH [--instances]`.
pub(crate) fn show_cmd(path: &Path, instances: bool, common: &Common) -> Outcome {
    match load_plan(path, common) {
        Ok(p) if instances => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            match show::instances(&p, &mut out).and_then(|()| std::io::Write::flush(&mut out)) {
                // A closed pipe (`| head`) is the reader's choice, not an error.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(Failure::Failed(format!("writing the instances: {e}")))
                }
                _ => Ok(()),
            }
        }
        Ok(p) if crate::cli::events::on() => {
            crate::cli::events::emit(
                "show",
                serde_json::json!({
                    "file": path.display().to_string(),
                    "pipeline": p.name,
                    "yaml": show::composed(&p),
                }),
            );
            Ok(())
        }
        Ok(p) => {
            out_raw!("{}", show::composed(&p));
            Ok(())
        }
        Err(errs) => spec_failure(&errs),
    }
}

/// `dplab graph PATH [--format dot|mermaid]`.
pub(crate) fn graph_cmd(path: &Path, format: GraphFormat, common: &Common) -> Outcome {
    match load_plan(path, common) {
        Ok(p) => {
            out_raw!(
                "{}",
                match format {
                    GraphFormat::Dot => graph::dot(&p),
                    GraphFormat::Mermaid => graph::mermaid(&p),
                }
            );
            Ok(())
        }
        Err(errs) => spec_failure(&errs),
    }
}
