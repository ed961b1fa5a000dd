//! `dplab run` and `dplab validate`: planning pipelines, running them (locally or as one
//! shard) and summing up what failed. Finding and reading the files is `cli/load.rs`'s.

use std::io::IsTerminal;
use std::path::PathBuf;

use dplab::pipeline::exec;
use serde_json::json;

use crate::cli::events;

use crate::cli::args::{Common, RunArgs, MAX_JOBS};
use crate::cli::exit::{Failure, Outcome};
use crate::cli::load::{self, check_outputs, load_plan, pipeline_files, report_spec_errors};

/// `dplab validate`.
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
            Ok(p) => {
                out!(
                    "ok: {} ({}: {} stages, {} instances)",
                    f.display(),
                    p.name,
                    p.stages.len(),
                    p.instance_count()
                );
                let listed = programs(&p);
                events::emit(
                    "validated",
                    json!({
                        "file": f.display().to_string(),
                        "pipeline": p.name,
                        "stages": p.stages.len(),
                        "instances": p.instance_count(),
                        "programs": listed,
                    }),
                );
                for l in &listed {
                    out!("  runs (with --allow-exec): {l}");
                }
                if !listed.is_empty() {
                    out!("  {}", containment_line());
                }
            }
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

/// `dplab run`; `quiet` is the global `--quiet` (no progress bars). With `--message-format
/// json` its last event says how it ended.
pub(crate) fn run(args: &RunArgs, quiet: bool) -> Outcome {
    let mut tally = Tally::default();
    let outcome = run_all(args, quiet, &mut tally);
    let (exit, message) = match &outcome {
        Ok(()) => (0, ""),
        Err(Failure::BadInput(m)) => (2, m.as_str()),
        Err(Failure::Failed(m)) => (1, m.as_str()),
        Err(Failure::ShardFailed(m)) => (3, m.as_str()),
        Err(Failure::Unexpected(m)) => (4, m.as_str()),
    };
    // A refusal of the whole command (a flag, consent) is not located in a file.
    if !message.is_empty() {
        events::emit(
            "error",
            json!({"file": null, "line": null, "col": null, "message": message, "hint": null}),
        );
    }
    events::emit(
        "run_done",
        json!({"pipelines": tally.pipelines, "failed": tally.failed, "exit": exit}),
    );
    outcome
}

/// What a run's last event counts.
#[derive(Default)]
struct Tally {
    pipelines: usize,
    failed: usize,
}

/// The `pipeline_done` event of pipeline `plan_name` read from `file`.
fn pipeline_done(
    tally: &mut Tally,
    file: &std::path::Path,
    pipeline: &str,
    status: &str,
    results: Option<&std::path::Path>,
    message: Option<&str>,
) {
    tally.pipelines += 1;
    if status == "failed" || status == "invalid" {
        tally.failed += 1;
    }
    events::emit(
        "pipeline_done",
        json!({
            "pipeline": pipeline,
            "file": file.display().to_string(),
            "results": results.map(|r| r.display().to_string()),
            "status": status,
            "message": message,
        }),
    );
}

/// The `plan` event of a pipeline about to run (or a dry run's): per stage, what runs, what
/// the store has, and why.
fn plan_event(
    p: &dplab::pipeline::plan::Plan,
    store: Option<&dplab::pipeline::instance_store::InstanceStore>,
    force: &dplab::pipeline::dryrun::Force,
    share: Option<&[bool]>,
) {
    if !events::on() {
        return;
    }
    let stages = dplab::pipeline::dryrun::assess(p, store, force, share);
    events::emit(
        "plan",
        json!({
            "pipeline": p.name,
            "file": p.file.display().to_string(),
            "store": store.map(|s| s.root().display().to_string()),
            "stages": stages,
        }),
    );
}

fn run_all(args: &RunArgs, quiet: bool, tally: &mut Tally) -> Outcome {
    let RunArgs {
        paths,
        common,
        jobs,
        out,
        fail_fast,
        skip_unavailable,
        shard,
        verify,
        max_failures,
        stages: only,
        loc,
        store,
        exec: consent,
    } = args;
    loc.install();
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
    // Each file is read once: the results directories are checked on all of them before the
    // first one runs.
    let pipelines = load::read(files);
    // A pipeline that runs programs is code: none runs without the user's consent, and the
    // refusal comes before anything ran, with every command it would have started. Only the
    // pipelines with a stage of a kind that runs programs are planned for this (the kinds say
    // so on their own), so a run without such stages plans each file once.
    if !store.dry_run && !consent.allowed() {
        let listed: Vec<String> = pipelines
            .iter()
            .filter(|p| p.runs_programs())
            .filter_map(|p| p.plan(common).ok())
            .flat_map(|p| programs(&p))
            .collect();
        if !listed.is_empty() {
            return Err(Failure::BadInput(without_consent(&listed, "run")));
        }
    }
    let shard = match shard
        .as_deref()
        .map(|s| dplab::pipeline::shard::Shard::parse(s, |v| std::env::var(v).ok()))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            return Err(Failure::BadInput(e.to_string()));
        }
    };
    // Units dealt to shards so far: the round-robin continues across pipelines.
    let mut dealt = 0;
    // The `--stages` names some pipeline had.
    let mut named = std::collections::BTreeSet::new();
    if store.dry_run {
        let force = store.force();
        let mut stores = Stores::default();
        let mut bad = false;
        for pipeline in &pipelines {
            let st = stores.of(store, &pipeline.path);
            match pipeline.plan_probing(common, consent.allowed()) {
                Ok(mut p) => {
                    match keep_stages(&mut p, only, &mut named) {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => return Err(Failure::BadInput(e)),
                    }
                    // A shard's share, dealt as the run would deal it.
                    let owned: Option<Vec<bool>> = shard.map(|sh| {
                        let (owners, next) = dplab::pipeline::shard::owners(&p, sh.count, dealt);
                        dealt = next;
                        owners.iter().map(|&o| o as usize == sh.index).collect()
                    });
                    let name = shard.map(|sh| sh.to_string()).unwrap_or_default();
                    if events::on() {
                        plan_event(&p, st.as_ref().map(|(s, _)| s), &force, owned.as_deref());
                        pipeline_done(tally, &pipeline.path, &p.name, "ok", None, None);
                        continue;
                    }
                    let explained = dplab::pipeline::dryrun::explain(
                        &p,
                        st.as_ref().map(|(s, _)| s),
                        &force,
                        owned.as_deref().map(|o| (name.as_str(), o)),
                    );
                    // Which store it looked in, under the pipeline's line.
                    let (head, rest) = explained.split_once('\n').unwrap_or((&explained, ""));
                    let store_line = match &st {
                        Some((_, found)) => found.describe(),
                        None => "no store (--no-store)".to_string(),
                    };
                    out_raw!("{head}\n  {store_line}\n{rest}");
                    let listed = programs(&p);
                    for l in &listed {
                        out!("  runs (with --allow-exec): {l}");
                    }
                    if !listed.is_empty() {
                        out!("  {}", containment_line());
                    }
                }
                Err(errs) => {
                    report_spec_errors(&errs);
                    pipeline_done(tally, &pipeline.path, "", "invalid", None, None);
                    bad = true;
                }
            }
        }
        if let Some(e) = stages_not_found(only, &named) {
            return Err(Failure::BadInput(e));
        }
        return if bad {
            Err(Failure::BadInput(String::new()))
        } else {
            Ok(())
        };
    }
    // A shard writes no results directory, so it has none to check.
    if shard.is_none() {
        if let Err(e) = check_outputs(&pipelines, out) {
            return Err(Failure::BadInput(e.to_string()));
        }
    }
    // The engine runs `threads` instances at once on threads of its own; what a kind does in
    // parallel inside one instance runs on rayon's global pool, `threads` wide too (see the
    // module doc of `pipeline::exec`: instances are never jobs of that pool).
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
    {
        if rayon::current_num_threads() != threads {
            return Err(Failure::Failed(format!(
                "cannot start {threads} worker threads: {e}"
            )));
        }
    }
    if pipelines.iter().any(|p| p.runs_programs()) {
        match dplab::program::contain::containment() {
            dplab::program::contain::Containment::Group => dplab::program::contain::warn_if_weak(),
            _ => tracing::debug!("{}", containment_line()),
        }
    }
    let mut stores = Stores::default();
    let shown: std::sync::Arc<dyn dplab::pipeline::progress::Reporter> = if events::on() {
        std::sync::Arc::new(events::Events::new())
    } else {
        std::sync::Arc::new(super::progress::Shown::new(
            !quiet && std::io::stderr().is_terminal(),
        ))
    };
    let verdicts = std::sync::Arc::new(super::verdicts::Verdicts::new(shown, events::on()));
    // One pool of `threads` slots for every pipeline of the command: they run at once, and
    // together run `threads` instances (see `pipeline::exec::Slots`).
    let slots = std::sync::Arc::new(exec::Slots::new(threads));
    let options = |st: Option<dplab::pipeline::instance_store::InstanceStore>| exec::RunOptions {
        out_dir: out.clone(),
        reporter: verdicts.clone(),
        jobs: threads,
        slots: slots.clone(),
        set: common.set_args(),
        store: st,
        force: store.force(),
        verify: *verify,
        max_failures: *max_failures,
    };
    let mut input_failures = Vec::new();
    let mut skipped = Vec::new();
    // Every pipeline is planned first (its probes run, its `plan` event goes out, a shard's
    // share is dealt in file order), then they run.
    let mut planned: Vec<Planned> = Vec::new();
    for (index, pipeline) in pipelines.iter().enumerate() {
        let f = &pipeline.path;
        // Said with -v; said always when none was found and one is made here.
        let st = stores.of(store, f).map(|(s, found)| {
            if found.how == dplab::pipeline::store_at::How::New {
                tracing::info!("{}: {}", pipeline.path.display(), found.describe());
            } else {
                tracing::debug!("{}: {}", pipeline.path.display(), found.describe());
            }
            s
        });
        match pipeline.plan_probing(common, consent.allowed()) {
            // What its programs need is not installed (every error a failed probe): skipped
            // like a pipeline whose data is not here.
            Err(errs)
                if *skip_unavailable
                    && errs.iter().all(|e| {
                        e.hint.as_deref() == Some(dplab::pipeline::plan::PROBE_FAILED)
                    }) =>
            {
                let why = errs
                    .iter()
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ");
                tracing::warn!("skipped {}: {why}", f.display());
                pipeline_done(tally, f, "", "skipped", None, Some(&why));
                skipped.push(format!(
                    "{} ({})",
                    f.display(),
                    dplab::text::brief(&why, 200)
                ));
            }
            Err(errs) => {
                report_spec_errors(&errs);
                pipeline_done(tally, f, "", "invalid", None, None);
                input_failures.push(f.display().to_string());
                if *fail_fast {
                    break;
                }
            }
            Ok(mut p) => {
                match keep_stages(&mut p, only, &mut named) {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::info!("{}: none of --stages is a stage of it: skipped", p.name);
                        continue;
                    }
                    Err(e) => return Err(Failure::BadInput(e)),
                }
                let opts = options(st);
                let owners = shard.map(|sh| {
                    let (owners, next) = dplab::pipeline::shard::owners(&p, sh.count, dealt);
                    dealt = next;
                    owners
                });
                if shard.is_none() {
                    plan_event(&p, opts.store.as_ref(), &opts.force, None);
                }
                planned.push(Planned {
                    index,
                    file: f,
                    plan: p,
                    opts,
                    owners,
                });
            }
        }
    }
    let ends = std::sync::Mutex::new(Ends {
        tally,
        skipped,
        failures: Vec::new(),
    });
    let run_one = |job: &Planned| run_pipeline(job, shard, *skip_unavailable, &ends);
    if *fail_fast {
        // The first failure stops the run: one pipeline after another.
        for job in &planned {
            if !run_one(job) {
                break;
            }
        }
    } else {
        // At once, in file order as slots free up: while one ends on a few long instances,
        // the next ones' instances take the other cores.
        let at_once = exec::Slots::new(PIPELINES_AT_ONCE);
        std::thread::scope(|threads| {
            for job in &planned {
                let slot = at_once.take();
                threads.spawn(move || {
                    run_one(job);
                    drop(slot);
                });
            }
        });
    }
    let Ends {
        skipped,
        mut failures,
        ..
    } = ends.into_inner().unwrap_or_else(|e| e.into_inner());
    // Listed in file order, whichever ended first.
    failures.sort_by_key(|(i, _)| *i);
    let run_failures: Vec<String> = failures.into_iter().map(|(_, f)| f).collect();
    if let Some(e) = stages_not_found(only, &named) {
        return Err(Failure::BadInput(e));
    }
    if !skipped.is_empty() {
        errln!(
            "\n{} pipeline(s) skipped because their data or what their programs need is not on this machine (see `dplab data list`):",
            skipped.len()
        );
        for s in &skipped {
            errln!("  {s}");
        }
    }
    let said = verdicts.tally();
    if said.checks > 0 {
        tracing::info!(
            "{} verdict(s): {} flagged, {} unexpected",
            said.checks,
            said.flagged,
            said.unexpected.len()
        );
    }
    if input_failures.is_empty() && run_failures.is_empty() {
        if said.unexpected.is_empty() {
            return Ok(());
        }
        errln!(
            "\n{} of {} verdict(s) differ from what their stage expects (`expect:`; with none, any flag):",
            said.unexpected.len(),
            said.checks
        );
        for u in said.unexpected.iter().take(10) {
            errln!("  {u}");
        }
        if said.unexpected.len() > 10 {
            errln!("  … and {} more", said.unexpected.len() - 10);
        }
        return Err(Failure::Unexpected(String::new()));
    }
    errln!(
        "\n{} of {} pipeline(s) failed:",
        input_failures.len() + run_failures.len(),
        pipelines.len()
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

/// How many pipelines of one command run at once (sharing `--jobs` slots for their instances,
/// see `pipeline::exec::Slots`). Each open pipeline keeps `--jobs` threads, and each thread
/// may keep a worker process alive (`program::worker`), so the bound is small. A cold run of
/// `pipelines/` on two cores (issue #57's note) took 423 s at 159 % CPU with three and 387 s
/// at 153 % with eight, one run each: the idle share did not shrink with more pipelines open
/// (it is inside the DP-Sniper suite, which runs at 104 %), so three it stays.
const PIPELINES_AT_ONCE: usize = 3;

/// A pipeline planned and about to run: its place among the files, its plan, how it runs,
/// and in a shard, whose its instances are ([`dplab::pipeline::shard::owners`]).
struct Planned<'a> {
    index: usize,
    file: &'a std::path::Path,
    plan: dplab::pipeline::plan::Plan,
    opts: exec::RunOptions,
    owners: Option<Vec<u32>>,
}

/// What the pipelines' ends add up to (they end in any order): the run's tally, the skipped
/// ones, and the failed ones with their place among the files.
struct Ends<'t> {
    tally: &'t mut Tally,
    skipped: Vec<String>,
    failures: Vec<(usize, String)>,
}

/// Runs one planned pipeline (or a shard's share of it) and says how it ended; `false` when
/// it failed.
fn run_pipeline(
    job: &Planned,
    shard: Option<dplab::pipeline::shard::Shard>,
    skip_unavailable: bool,
    ends: &std::sync::Mutex<Ends>,
) -> bool {
    let (p, f, t0) = (&job.plan, job.file, std::time::Instant::now());
    let done = match (shard, &job.owners) {
        (Some(sh), Some(owners)) => exec::execute_shard(p, &job.opts, sh, owners).map(|r| {
            format!(
                "shard {sh}: owns {} instances ({} already stored); computed {} ({} of them shared with other shards) in {:.2} s of compute, loaded {} from the store",
                r.owned, r.owned_stored, r.computed, r.shared_computed, r.compute_seconds, r.loaded
            )
        }),
        _ => exec::execute(p, &job.opts).map(|dir| {
            let mut e = ends.lock().unwrap_or_else(|e| e.into_inner());
            pipeline_done(e.tally, f, &p.name, "ok", Some(&dir), None);
            format!("{} instances → {}", p.instance_count(), dir.display())
        }),
    };
    let mut e = ends.lock().unwrap_or_else(|e| e.into_inner());
    match done {
        Ok(what) => {
            if shard.is_some() {
                pipeline_done(e.tally, f, &p.name, "ok", None, None);
            }
            tracing::info!("{}: {what} in {:.2} s", p.name, t0.elapsed().as_secs_f64());
            true
        }
        Err(err) if err.unavailable && skip_unavailable => {
            tracing::warn!("skipped {}: {}", p.name, err.message);
            pipeline_done(e.tally, f, &p.name, "skipped", None, Some(&err.message));
            e.skipped.push(format!("{} ({})", f.display(), err.message));
            true
        }
        Err(err) => {
            pipeline_done(
                e.tally,
                f,
                &p.name,
                "failed",
                err.written.as_deref(),
                Some(&err.to_string()),
            );
            errln!("error: {err}");
            // The whole message was just printed: the list at the end names it.
            let first = err.to_string();
            let first = first.lines().next().unwrap_or_default();
            e.failures.push((
                job.index,
                format!("{} ({})", f.display(), dplab::text::brief(first, 160)),
            ));
            false
        }
    }
}

/// `--stages`: runs only the named stages of `plan` and what they read. `Ok(false)` when it has
/// none of them (the pipeline is skipped); the names it has are added to `found`.
fn keep_stages(
    plan: &mut dplab::pipeline::plan::Plan,
    only: &[String],
    found: &mut std::collections::BTreeSet<String>,
) -> Result<bool, String> {
    if only.is_empty() {
        return Ok(true);
    }
    let here: Vec<String> = only
        .iter()
        .filter(|n| plan.stages.iter().any(|s| &s.name == *n))
        .cloned()
        .collect();
    if here.is_empty() {
        return Ok(false);
    }
    found.extend(here.iter().cloned());
    plan.run_only(&here)?;
    Ok(true)
}

/// The stores of the pipelines of one command (by the rule of
/// [`dplab::pipeline::store_at`]): one [`InstanceStore`] per directory, opened once, so
/// pipelines that share a store share what it read of its indexes.
///
/// [`InstanceStore`]: dplab::pipeline::instance_store::InstanceStore
#[derive(Default)]
struct Stores(Vec<dplab::pipeline::instance_store::InstanceStore>);

impl Stores {
    /// The store of pipeline `file` and how it was found; `None` with `--no-store`.
    fn of(
        &mut self,
        args: &crate::cli::args::StoreArgs,
        file: &std::path::Path,
    ) -> Option<(
        dplab::pipeline::instance_store::InstanceStore,
        dplab::pipeline::store_at::Found,
    )> {
        let found = args.store(Some(file))?;
        let s = match self.0.iter().find(|s| s.root() == found.root) {
            Some(s) => s.clone(),
            None => {
                let s = dplab::pipeline::instance_store::InstanceStore::new(found.root.clone());
                self.0.push(s.clone());
                s
            }
        };
        Some((s, found))
    }
}

/// `--stages` names that no pipeline had: an error naming them.
fn stages_not_found(only: &[String], found: &std::collections::BTreeSet<String>) -> Option<String> {
    let missing: Vec<&str> = only
        .iter()
        .filter(|n| !found.contains(*n))
        .map(String::as_str)
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "--stages: no pipeline given has a stage named {}",
            missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The refusal of programs the user did not allow: prints each command and returns the
/// message of the error (`verb`: what the user would do with them, `run` or `submit`).
pub(crate) fn without_consent(listed: &[String], verb: &str) -> String {
    let last =
        format!("{verb} them only if you trust them: give --allow-exec (or DPLAB_ALLOW_EXEC=1)");
    // In events, one message that holds the commands.
    if events::on() {
        return format!(
            "these pipelines run programs, and a pipeline that runs programs is code:\n  {}\n{last}",
            listed.join("\n  ")
        );
    }
    errln!("error: these pipelines run programs, and a pipeline that runs programs is code:");
    for l in listed {
        errln!("  {l}");
    }
    last
}

/// The programs a plan's stages run, one line each, with what the first word runs:
/// `pipeline: stage `pf`: python3 pf.py  [python3 is /usr/bin/python3]`.
pub(crate) fn programs(plan: &dplab::pipeline::plan::Plan) -> Vec<String> {
    plan.programs()
        .into_iter()
        .map(|(stage, argv)| {
            let program = argv.first().map_or("", String::as_str);
            let what = if program.contains('/') {
                format!("{program} is the pipeline's file, copied from `code:` as hashed")
            } else {
                match dplab::program::process::which(program) {
                    Some(p) => format!("{program} is {}", p.display()),
                    None => format!("{program} is not on PATH"),
                }
            };
            format!("{}: stage `{stage}`: {}  [{what}]", plan.name, shown(argv))
        })
        .collect()
}

/// The line that says how programs are contained here (see `program::contain`).
pub(crate) fn containment_line() -> String {
    format!(
        "programs are contained: {}",
        dplab::program::contain::containment().describe()
    )
}

/// An argv as a person would type it into a POSIX shell: plain words as they are, anything
/// else in single quotes (so `$(rm -rf ~)` shows as the one quoted word it is).
fn shown(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
