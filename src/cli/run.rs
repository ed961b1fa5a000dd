//! `dplab run` and `dplab validate`: finding pipeline files, planning them, running them
//! (locally or as one shard) and summing up what failed.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use dplab::pipeline::{exec, plan, results, spec};
use dplab::stages;

use crate::{Common, Failure, Outcome, StoreArgs, MAX_JOBS};

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
pub(crate) const MAX_DEPTH: usize = 32;

pub(crate) fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) -> std::io::Result<()> {
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

pub(crate) fn load_plan(path: &Path, common: &Common) -> Result<plan::Plan, Vec<spec::SpecError>> {
    common.install_limits();
    let file = spec::load(path).map_err(|e| vec![e])?;
    plan::plan(
        &file,
        &plan::Overrides {
            profile: common.profile.clone(),
            set: common.set.clone(),
            allow_read: common.allow_read.clone(),
        },
        stages::registry::all(),
    )
}

/// Prints a pipeline's errors as they are found (a run of many files goes on to the next).
pub(crate) fn report_spec_errors(errs: &[spec::SpecError]) {
    for e in errs {
        errln!("error: {e}");
    }
}

/// A pipeline's errors as a command's outcome.
pub(crate) fn spec_failure(errs: &[spec::SpecError]) -> Outcome {
    report_spec_errors(errs);
    Err(Failure::BadInput(String::new()))
}

pub(crate) fn validate(paths: &[PathBuf], common: &Common) -> Outcome {
    let files = match pipeline_files(paths) {
        Ok(f) => f,
        Err(e) => {
            return Err(Failure::BadInput(e.to_string()));
        }
    };
    let mut bad = false;
    for f in files {
        match load_plan(&f, common) {
            Ok(p) => out!(
                "ok: {} ({}: {} stages, {} instances)",
                f.display(),
                p.name,
                p.stages.len(),
                p.instance_count()
            ),
            Err(errs) => {
                report_spec_errors(&errs);
                bad = true;
            }
        }
    }
    if bad {
        Err(Failure::BadInput(String::new()))
    } else {
        Ok(())
    }
}

pub(crate) fn run(
    paths: &[PathBuf],
    common: &Common,
    (jobs, store, shard): (Option<usize>, &StoreArgs, Option<&str>),
    out: &Path,
    (fail_fast, skip_unavailable): (bool, bool),
    quiet: bool,
) -> Outcome {
    let files = match pipeline_files(paths) {
        Ok(f) => f,
        Err(e) => {
            return Err(Failure::BadInput(e.to_string()));
        }
    };
    let threads =
        jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if !(1..=MAX_JOBS).contains(&threads) {
        return Err(Failure::BadInput(format!(
            "--jobs {threads} is out of range: give 1 to {MAX_JOBS} worker threads"
        )));
    }
    if store.dry_run {
        let (st, force) = (store.store(), store.force());
        let mut bad = false;
        for f in &files {
            match load_plan(f, common) {
                Ok(p) => out_raw!(
                    "{}",
                    dplab::pipeline::dryrun::explain(&p, st.as_ref(), &force)
                ),
                Err(errs) => {
                    report_spec_errors(&errs);
                    bad = true;
                }
            }
        }
        return if bad {
            Err(Failure::BadInput(String::new()))
        } else {
            Ok(())
        };
    }
    let shard = match shard
        .map(|s| dplab::pipeline::shard::Shard::parse(s, |v| std::env::var(v).ok()))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            return Err(Failure::BadInput(e.to_string()));
        }
    };
    // A shard writes no results directory, so it has none to check.
    if shard.is_none() {
        if let Err(e) = check_outputs(&files, out) {
            return Err(Failure::BadInput(e.to_string()));
        }
    }
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            return Err(Failure::Failed(format!(
                "cannot start {threads} worker threads: {e}"
            )));
        }
    };
    let opts = exec::RunOptions {
        out_dir: out.to_path_buf(),
        terminal: !quiet && std::io::stderr().is_terminal(),
        jobs: threads,
        set: common.set.clone(),
        store: store.store(),
        force: store.force(),
    };
    let mut input_failures = Vec::new();
    let mut run_failures = Vec::new();
    let mut skipped = Vec::new();
    // Units dealt to shards so far: the round-robin continues across pipelines.
    let mut dealt = 0;
    for f in &files {
        let t0 = std::time::Instant::now();
        let outcome = match load_plan(f, common) {
            Err(errs) => {
                report_spec_errors(&errs);
                input_failures.push(f.display().to_string());
                false
            }
            Ok(p) => {
                let done = match shard {
                    Some(sh) => {
                        let (owners, next) = dplab::pipeline::shard::owners(&p, sh.count, dealt);
                        dealt = next;
                        pool.install(|| exec::execute_shard(&p, &opts, sh, &owners)).map(|r| {
                            format!(
                                "shard {sh}: owns {} instances ({} already stored); computed {} ({} of them shared with other shards) in {:.2} s of compute, loaded {} from the store",
                                r.owned, r.owned_stored, r.computed, r.shared_computed, r.compute_seconds, r.loaded
                            )
                        })
                    }
                    None => pool
                        .install(|| exec::execute(&p, &opts))
                        .map(|dir| format!("{} instances → {}", p.instance_count(), dir.display())),
                };
                match done {
                    Ok(what) => {
                        tracing::info!("{}: {what} in {:.2} s", p.name, t0.elapsed().as_secs_f64());
                        true
                    }
                    Err(e) if e.unavailable && skip_unavailable => {
                        tracing::warn!("skipped {}: {}", p.name, e.message);
                        skipped.push(format!("{} ({})", f.display(), e.message));
                        true
                    }
                    Err(e) => {
                        errln!("error: {e}");
                        run_failures.push(format!("{} ({e})", f.display()));
                        false
                    }
                }
            }
        };
        if !outcome && fail_fast {
            break;
        }
    }
    if !skipped.is_empty() {
        errln!(
            "\n{} pipeline(s) skipped because their data is not on this machine (see `dplab data list`):",
            skipped.len()
        );
        for s in &skipped {
            errln!("  {s}");
        }
    }
    if input_failures.is_empty() && run_failures.is_empty() {
        return Ok(());
    }
    errln!(
        "\n{} of {} pipeline(s) failed:",
        input_failures.len() + run_failures.len(),
        files.len()
    );
    for f in input_failures
        .iter()
        .map(|f| format!("{f} (invalid pipeline)"))
        .chain(run_failures.iter().cloned())
    {
        errln!("  {f}");
    }
    if run_failures.is_empty() {
        Err(Failure::BadInput(String::new()))
    } else {
        Err(Failure::Failed(String::new()))
    }
}

/// Refuses, before anything runs, two pipelines that would write the same results
/// directory, and a results path that exists but is not a directory dplab may replace.
pub(crate) fn check_outputs(files: &[PathBuf], out: &Path) -> Result<(), String> {
    let mut by_name: std::collections::HashMap<String, (String, &PathBuf)> = Default::default();
    for f in files {
        // Files that do not parse are reported when their turn comes.
        let Ok(spec) = spec::load(f) else { continue };
        let name = spec.raw.name;
        if spec::name_problem(&name, spec::NameKind::Pipeline).is_some() {
            continue;
        }
        // Compared ignoring case: `A` and `a` are one directory on macOS and Windows.
        if let Some((first_name, first)) = by_name.insert(name.to_lowercase(), (name.clone(), f)) {
            let named = if first_name == name {
                format!("are both named `{name}`")
            } else {
                format!("are named `{first_name}` and `{name}`, which differ only in case, and")
            };
            return Err(format!(
                "{} and {} {named}: they would write the same results directory {}",
                first.display(),
                f.display(),
                out.join(&name).display()
            ));
        }
        results::replaceable(&out.join(&name), &name)?;
    }
    Ok(())
}
