//! `dplab report`: the HTML reproduction report of a results directory.

use std::path::{Path, PathBuf};

use dplab::pipeline::spec;

use crate::cli::data::missing_datasets;
use crate::cli::exit::{Failure, Outcome};
use crate::cli::load::pipeline_files;

/// `dplab report RESULTS [--pipelines …]`.
pub(crate) fn report_cmd(results: &Path, pipelines: &[PathBuf], title: Option<&str>) -> Outcome {
    let files = if pipelines.is_empty() {
        Vec::new()
    } else {
        match pipeline_files(pipelines) {
            Ok(f) => f,
            Err(e) => {
                return Err(Failure::BadInput(e.to_string()));
            }
        }
    };
    let mut expected = Vec::new();
    for f in &files {
        match spec::load(f) {
            Ok(s) => expected.push(dplab::report::Expected {
                file: f.clone(),
                missing_data: missing_datasets(&s),
                name: s.raw.name,
                title: s.raw.title,
                paper: s.raw.source.paper,
                item: s.raw.source.item,
                description: s.raw.description,
            }),
            Err(e) => {
                return Err(Failure::BadInput(format!("{e}")));
            }
        }
    }
    match dplab::report::write_titled(results, &expected, title) {
        Ok(w) => {
            let s = &w.summary;
            let (n, f) = (&s.numbers, &s.findings);
            let mut line = format!(
                "wrote {}: {} experiment{} ({} with results, {} without data, {} not run, {} damaged)",
                w.path.display(),
                s.experiments,
                if s.experiments == 1 { "" } else { "s" },
                s.with_results,
                s.unavailable,
                s.not_run,
                s.damaged,
            );
            // Experiments of one's own print no numbers to compare: nothing is said of them.
            if s.reproduction {
                line += &format!(
                    "; {} printed numbers compared: {} agree, {} differ ({} explained, {} unexplained)",
                    n.compared, n.agree, n.differ, n.explained, n.unexplained
                );
            }
            if s.reproduction || f.compared > 0 {
                line += &format!(
                    "; {} findings: {} agree, {} differ ({} explained, {} unexplained)",
                    f.compared, f.agree, f.differ, f.explained, f.unexplained
                );
            }
            if !s.audits.is_empty() {
                line += &format!("; {} audits, {} flagged", s.audits.len(), s.flagged);
            }
            out!("{line}");
            for p in &w.problems {
                errln!("error: {p}");
            }
            if w.problems.is_empty() {
                Ok(())
            } else {
                errln!(
                    "{} problem(s) in {} (shown on the page too)",
                    w.problems.len(),
                    results.display()
                );
                Err(Failure::Failed(String::new()))
            }
        }
        Err(e) => Err(Failure::BadInput(e.to_string())),
    }
}
