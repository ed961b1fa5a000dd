//! Finding pipeline files, reading each once and planning it: the plumbing every command that
//! takes pipelines shares (`run`, `validate`, `show`, `graph`, `slurm`, `data fetch
//! --pipelines`, `report`).

use std::path::{Path, PathBuf};

use dplab::pipeline::{plan, results, spec};
use dplab::stages;

use crate::cli::args::Common;
use crate::cli::exit::{Failure, Outcome};

/// Pipeline files named directly, or found (sorted) under directories. Symbolic links to
/// directories are not followed (a link to an ancestor would find the same files forever),
/// and a file reached twice (named twice, or through a link) is run once.
pub(crate) fn pipeline_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found, 0).map_err(|e| format!("{}: {e}", p.display()))?;
            if found.is_empty() {
                return Err(format!(
                    "{}: no *.yaml pipeline files in this directory",
                    p.display()
                ));
            }
            found.sort();
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.canonicalize().unwrap_or_else(|_| p.clone())));
    Ok(out)
}

/// Directories nested deeper than this are not searched (a sign of a loop or a mistake).
const MAX_DEPTH: usize = 32;

fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other(format!(
            "{}: directories nested more than {MAX_DEPTH} deep",
            dir.display()
        )));
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        let t = e.file_type()?;
        if t.is_dir() {
            walk(&p, out, depth + 1)?;
        } else if (!t.is_symlink() || p.is_file())
            && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        {
            out.push(p);
        }
    }
    Ok(())
}

/// A pipeline file read and parsed once. A command that looks at its files more than once
/// (`run` and `slurm` check every results directory before the first pipeline runs) keeps
/// these instead of reading the files again. A file that does not parse keeps its error,
/// reported when its turn comes.
pub(crate) struct Pipeline {
    pub(crate) path: PathBuf,
    pub(crate) spec: Result<spec::SpecFile, spec::SpecError>,
}

impl Pipeline {
    /// Whether a stage of the file is of a kind that runs programs (a file that does not
    /// parse has none: it fails when planned).
    pub(crate) fn runs_programs(&self) -> bool {
        self.spec.as_ref().is_ok_and(|s| {
            s.raw
                .stages
                .values()
                .any(|st| dplab::stages::registry::find(&st.kind).is_some_and(|k| k.runs_programs))
        })
    }

    /// The file planned with the command line's profile, `--set`, `--allow-read` and limits.
    /// Stages' probes are not run (their outputs stay out of the keys).
    pub(crate) fn plan(&self, common: &Common) -> Result<plan::Plan, Vec<spec::SpecError>> {
        self.plan_probing(common, false)
    }

    /// [`Pipeline::plan`], running the stages' probes when the user allowed programs to run
    /// (`allowed`): the keys are then the ones a run uses.
    pub(crate) fn plan_probing(
        &self,
        common: &Common,
        allowed: bool,
    ) -> Result<plan::Plan, Vec<spec::SpecError>> {
        common.install_limits();
        let file = self.spec.as_ref().map_err(|e| vec![e.clone()])?;
        plan_spec(file, common, allowed.then(prober))
    }
}

/// Reads and parses each file, in order.
pub(crate) fn read(files: Vec<PathBuf>) -> Vec<Pipeline> {
    files
        .into_iter()
        .map(|path| Pipeline {
            spec: spec::load(&path),
            path,
        })
        .collect()
}

/// One file, read and planned.
pub(crate) fn load_plan(path: &Path, common: &Common) -> Result<plan::Plan, Vec<spec::SpecError>> {
    common.install_limits();
    let file = spec::load(path).map_err(|e| vec![e])?;
    plan_spec(&file, common, None)
}

/// The one prober of this process: each distinct probe runs once, however many pipelines
/// name it.
fn prober() -> plan::ProberHandle {
    static ONE: std::sync::OnceLock<plan::ProberHandle> = std::sync::OnceLock::new();
    ONE.get_or_init(|| {
        plan::ProberHandle(std::sync::Arc::new(
            dplab::stages::external::Probes::default(),
        ))
    })
    .clone()
}

fn plan_spec(
    file: &spec::SpecFile,
    common: &Common,
    prober: Option<plan::ProberHandle>,
) -> Result<plan::Plan, Vec<spec::SpecError>> {
    plan::plan(
        file,
        &plan::Overrides {
            profile: common.profile.clone(),
            set: common.set_args(),
            allow_read: common.allow_read.clone(),
            prober,
        },
        stages::registry::all(),
    )
}

/// Prints a pipeline's errors as they are found (a run of many files goes on to the next).
pub(crate) fn report_spec_errors(errs: &[spec::SpecError]) {
    for e in errs {
        errln!("error: {e}");
    }
    crate::cli::events::spec_errors(errs);
}

/// A pipeline's errors as a command's outcome.
pub(crate) fn spec_failure(errs: &[spec::SpecError]) -> Outcome {
    report_spec_errors(errs);
    Err(Failure::BadInput(String::new()))
}

/// Refuses, before anything runs, two pipelines that would write the same results
/// directory, and a results path that exists but is not a directory dplab may replace.
pub(crate) fn check_outputs(pipelines: &[Pipeline], out: &Path) -> Result<(), String> {
    let mut by_name: std::collections::HashMap<String, (&str, &PathBuf)> = Default::default();
    for p in pipelines {
        // Files that do not parse are reported when their turn comes.
        let Ok(spec) = &p.spec else { continue };
        let name = spec.raw.name.as_str();
        if spec::name_problem(name, spec::NameKind::Pipeline).is_some() {
            continue;
        }
        // Compared ignoring case: `A` and `a` are one directory on macOS and Windows.
        if let Some((first_name, first)) = by_name.insert(name.to_lowercase(), (name, &p.path)) {
            let named = if first_name == name {
                format!("are both named `{name}`")
            } else {
                format!("are named `{first_name}` and `{name}`, which differ only in case, and")
            };
            return Err(format!(
                "{} and {} {named}: they would write the same results directory {}",
                first.display(),
                p.path.display(),
                out.join(name).display()
            ));
        }
        results::replaceable(&out.join(name), name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipeline parsed from `text` as if read from `path`, which does not exist: anything
    /// that reads the file again fails.
    fn parsed(path: &str, name: &str) -> Pipeline {
        let text = format!(
            "name: {name}\ntitle: t\nsource: {{paper: test, item: none}}\ndescription: d\nseed: 1\n\
stages:\n  t:\n    kind: load.table\n    with: {{columns: {{x: [1, 2]}}}}\n"
        );
        let path = PathBuf::from(path);
        Pipeline {
            spec: Ok(spec::parse(&path, text).expect("the test pipeline parses")),
            path,
        }
    }

    /// `check_outputs` looks at the pipelines as they were read: it finds the clash from what
    /// it was given, without reading the (here absent) files a second time.
    #[test]
    fn check_outputs_uses_the_files_as_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let gone = |f: &str| dir.path().join("gone").join(f).display().to_string();
        let (a, b) = (gone("a.yaml"), gone("b.yaml"));
        let out = dir.path().join("out");
        assert_eq!(
            check_outputs(&[parsed(&a, "same"), parsed(&b, "Same")], &out),
            Err(format!(
                "{a} and {b} are named `same` and `Same`, which differ only in case, and: they \
would write the same results directory {}",
                out.join("Same").display()
            ))
        );
        assert_eq!(
            check_outputs(&[parsed(&a, "one"), parsed(&b, "two")], &out),
            Ok(())
        );
    }
}
