//! `dplab slurm`: a sharded run as two Slurm jobs. An array job whose task i of N runs
//! `dplab run PIPELINES --shard auto/N`, filling the shared instance store with its share of the
//! instances, and a merge job, started only when every task succeeded, whose plain `dplab run`
//! finds everything in the store, runs the gathers and writes the results directories.
//!
//! dplab runs no daemon of its own: Slurm schedules, and the store is the only state the jobs
//! share. Both jobs are plain scripts under `STORE/slurm/<UTC time>/`, written before anything
//! is submitted, so what ran can be read, edited and submitted again by hand.
//!
//! Part of the command line (the engine knows nothing of Slurm): it reuses how `dplab run`
//! finds, plans and checks pipelines, and talks to Slurm only through `sbatch` and `squeue`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::cli::args::SlurmArgs;
use crate::cli::exit::{Failure, Outcome};
use crate::cli::load::{self, check_outputs, pipeline_files, report_spec_errors, Pipeline};

/// Most array tasks: the engine's bound. Clusters often cap arrays lower (`MaxArraySize`, 1001
/// by default), and sbatch says so.
const MAX_SHARDS: usize = dplab::pipeline::shard::MAX_SHARDS;
/// Consecutive failed looks at the queue after which `--wait` gives up.
const MAX_QUEUE_ERRORS: u32 = 5;

/// Everything the scripts say, resolved to absolute paths and checked.
struct Job {
    dplab: String,
    dplab_sha256: String,
    pipelines: Vec<String>,
    store: String,
    out: String,
    shards: u32,
    cpus: u32,
    /// `dplab run` options both jobs pass on: profile, --set, --allow-read, limits, data.
    run_args: Vec<String>,
    /// What the header comments list besides the paths.
    profile: Option<String>,
    set: Vec<String>,
    /// sbatch options both jobs take, each already a word for a `#SBATCH` line.
    sbatch: Vec<String>,
    /// The `--output=…` words of the two scripts.
    shards_log: String,
    merge_log: String,
    /// STORE/slurm/<time>/.
    dir: PathBuf,
    written: String,
}

/// `dplab slurm …`.
pub fn main(args: SlurmArgs) -> Outcome {
    args.loc.install();
    let job = match prepare(&args) {
        Ok(j) => j,
        Err(e) => return Err(Failure::BadInput(e)),
    };
    let (shards, merge) = (shards_script(&job), merge_script(&job));
    let (shards_path, merge_path) = (job.dir.join("shards.sbatch"), job.dir.join("merge.sbatch"));
    for (path, text) in [(&shards_path, &shards), (&merge_path, &merge)] {
        if let Err(e) = std::fs::write(path, text) {
            return Err(Failure::BadInput(format!(
                "cannot write {}: {e}",
                path.display()
            )));
        }
    }
    if args.dry_run {
        out!("==> {} <==\n{shards}", shards_path.display());
        out!("==> {} <==\n{merge}", merge_path.display());
        out!(
            "Not submitted (--dry-run). To submit by hand:\n  A=$(sbatch --parsable {})\n  \
sbatch --dependency=afterok:$A --kill-on-invalid-dep=yes {}",
            quote(&shards_path.to_string_lossy()),
            quote(&merge_path.to_string_lossy())
        );
        return Ok(());
    }
    let array = match sbatch(&[], &shards_path) {
        Ok(id) => id,
        Err(e) => {
            return Err(Failure::BadInput(format!(
                "sbatch refused the array job (nothing was submitted): {e}"
            )));
        }
    };
    let dependency = [
        format!("--dependency=afterok:{array}"),
        "--kill-on-invalid-dep=yes".to_string(),
    ];
    let merge_id = match sbatch(&dependency, &merge_path) {
        Ok(id) => id,
        Err(e) => {
            return Err(Failure::Failed(format!(
                "the array job {array} was submitted, but sbatch refused the merge job: {e}\n\
The shards still fill the store. Cancel them with `scancel {array}`, or submit the merge when\n\
they are done: sbatch --dependency=afterok:{array} --kill-on-invalid-dep=yes {}",
                quote(&merge_path.to_string_lossy())
            )));
        }
    };
    let ids = format!("array {array}\nmerge {merge_id}\n");
    if let Err(e) = std::fs::write(job.dir.join("jobs"), ids) {
        tracing::warn!("cannot record the job ids in {}: {e}", job.dir.display());
    }
    out!(
        "submitted: array job {array} ({} shard task(s)), merge job {merge_id} (starts when every shard succeeded)\n\
scripts: {}\n\
logs:    {}\n\
watch:   squeue -j {array},{merge_id}\n\
results: {}/<pipeline>/ once job {merge_id} has ended\n\
If a shard fails, the merge is cancelled; submit the same command again and only the missing instances run.",
        job.shards,
        job.dir.display(),
        job.dir.join("logs").display(),
        job.out
    );
    if !args.wait {
        return Ok(());
    }
    wait(&job, &array, &merge_id, args.poll)
}

/// Checks everything that can be checked before submitting and creates STORE/slurm/<time>/.
/// An empty error means the errors were already reported.
fn prepare(args: &SlurmArgs) -> Result<Job, String> {
    // Each file is read once, planned (to report its errors) and checked for its results
    // directory.
    let pipelines = load::read(pipeline_files(&args.paths)?);
    let mut bad = false;
    let mut programs = Vec::new();
    for p in &pipelines {
        match p.plan(&args.common) {
            Ok(plan) => programs.extend(crate::cli::run::programs(&plan)),
            Err(errs) => {
                report_spec_errors(&errs);
                bad = true;
            }
        }
    }
    // The shards run the programs on the cluster: the same consent as `dplab run`'s, given
    // here and passed on to every job.
    if !programs.is_empty() && !args.exec.allowed() {
        return Err(crate::cli::run::without_consent(&programs, "submit"));
    }
    if bad {
        return Err(String::new());
    }
    check_outputs(&pipelines, &args.out)?;
    let mut sbatch = Vec::new();
    for (flag, value) in [
        ("--partition", &args.partition),
        ("--time", &args.time),
        ("--mem", &args.mem),
        ("--account", &args.account),
    ] {
        if let Some(v) = value {
            sbatch.push(sbatch_word(flag, &format!("{flag}={v}"))?);
        }
    }
    for a in &args.sbatch_args {
        refuse_own_option(a)?;
        sbatch.push(sbatch_word("--sbatch-arg", a)?);
    }
    if !args.dry_run {
        find_in_path("sbatch").ok_or_else(|| {
            format!(
                "`sbatch` is not on PATH ({}): run this on a machine that submits Slurm jobs, or \
give --dry-run to write the scripts only",
                std::env::var("PATH").unwrap_or_default()
            )
        })?;
    }

    let dplab = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot find the dplab binary that is running: {e}"))?;
    let dplab_sha256 = sha256_file(&dplab)
        .map_err(|e| format!("cannot read the dplab binary {}: {e}", dplab.display()))?;
    let pipelines = pipelines
        .iter()
        .map(|Pipeline { path: f, .. }| {
            let p = f
                .canonicalize()
                .map_err(|e| format!("{}: {e}", f.display()))?;
            utf8(&p, "pipeline file")
        })
        .collect::<Result<Vec<_>, _>>()?;
    // One store for every shard and the merge (the first pipeline's, by the rule of
    // `store_at`), given to each of them as --store.
    let store = store_dir(args.store.as_deref(), pipelines.first().map(Path::new))?;
    let out = utf8(&absolute(&args.out)?, "--out")?;

    let mut run_args = Vec::new();
    let common = &args.common;
    if let Some(p) = &common.profile {
        run_args.extend(["--profile".to_string(), p.clone()]);
    }
    for s in &common.set_args() {
        run_args.extend(["--set".to_string(), s.clone()]);
    }
    for d in &common.allow_read {
        run_args.extend([
            "--allow-read".to_string(),
            utf8(&absolute(d)?, "--allow-read")?,
        ]);
    }
    let defaults = dplab::limits::Limits::DEFAULT;
    for (flag, value, default) in [
        ("--max-instances", common.max_instances, defaults.instances),
        ("--max-draws", common.max_draws, defaults.draws),
        ("--max-cells", common.max_cells, defaults.cells),
    ] {
        if value != default {
            run_args.extend([flag.to_string(), value.to_string()]);
        }
    }
    // Named explicitly: a job's environment is the submitter's only under sbatch's default
    // --export=ALL, and the scripts should say where the data came from.
    let data = dplab::data::Locations::current();
    if let Some(m) = &data.mirror {
        run_args.extend([
            "--mirror".to_string(),
            utf8(&absolute(m)?, "the data mirror")?,
        ]);
    }
    run_args.extend([
        "--data-dir".to_string(),
        utf8(&absolute(&data.cache)?, "the data cache")?,
    ]);
    // Last: the script's options are written two words a line, and this flag is one.
    if !programs.is_empty() {
        run_args.push("--allow-exec".to_string());
    }

    let written = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let dir = run_dir(Path::new(&store), &written)?;
    Ok(Job {
        shards_log: log_pattern(&dir, "shard-%A_%a.out")?,
        merge_log: log_pattern(&dir, "merge-%j.out")?,
        dplab: utf8(&dplab, "the dplab binary's path")?,
        dplab_sha256,
        pipelines,
        store,
        out,
        shards: args.shards,
        cpus: args.cpus_per_task,
        run_args,
        profile: common.profile.clone(),
        set: common.set_args(),
        sbatch,
        dir,
        written,
    })
}

/// The store directory (`--store`, else found for `pipeline` as a run finds it), created if
/// missing, as an absolute path; refused unless dplab can
/// write there (a probe file is created and removed).
fn store_dir(given: Option<&Path>, pipeline: Option<&Path>) -> Result<String, String> {
    let root = crate::cli::args::find_store(given, pipeline).root;
    let shown = root.display().to_string();
    // The logs' paths, under the store, stand on #SBATCH lines: checked before anything is
    // created, and again once links are resolved.
    let on_sbatch_line = |p: &Path| -> Result<(), String> {
        sbatch_word("the store", &utf8(p, "the store")?.replace('%', "%%")).map(|_| ())
    };
    on_sbatch_line(&absolute(&root)?)?;
    if root.exists() && !root.is_dir() {
        return Err(format!("the store {shown} exists and is not a directory"));
    }
    std::fs::create_dir_all(&root)
        .map_err(|e| format!("cannot create the store directory {shown}: {e}"))?;
    let root = root
        .canonicalize()
        .map_err(|e| format!("the store {shown}: {e}"))?;
    on_sbatch_line(&root)?;
    let probe = root.join(format!(".dplab-slurm-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .map_err(|e| format!("the store {} is not writable: {e}", root.display()))?;
    let _ = std::fs::remove_file(&probe);
    utf8(&root, "the store")
}

/// STORE/slurm/<time>/ with logs/ and status/, new for this submission (a suffix keeps two
/// submissions in one second apart).
fn run_dir(store: &Path, written: &str) -> Result<PathBuf, String> {
    let stamp: String = written
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let parent = store.join("slurm");
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    for n in 1..1000 {
        let dir = if n == 1 {
            parent.join(&stamp)
        } else {
            parent.join(format!("{stamp}-{n}"))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                for sub in ["logs", "status"] {
                    std::fs::create_dir(dir.join(sub))
                        .map_err(|e| format!("cannot create {}: {e}", dir.join(sub).display()))?;
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
    }
    Err(format!(
        "{} holds 999 submissions of this second already",
        parent.display()
    ))
}

fn absolute(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// Scripts are text: a path that is not UTF-8 cannot be written into one faithfully.
fn utf8(p: &Path, what: &str) -> Result<String, String> {
    p.to_str().map(str::to_string).ok_or_else(|| {
        format!(
            "{what} {} is not valid UTF-8, which a job script cannot name faithfully",
            p.display()
        )
    })
}

// Hashes the running dplab binary (std::env::current_exe), not a path a user named.
#[expect(clippy::disallowed_methods)]
fn sha256_file(p: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    std::io::copy(&mut std::fs::File::open(p)?, &mut h)?;
    Ok(dplab::text::hex(&h.finalize()))
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A word of a shell command line, quoted for a POSIX shell.
fn quote(s: &str) -> String {
    // Only NUL cannot be quoted, and no argument or path holds one.
    shlex::try_quote(s)
        .map(|q| q.into_owned())
        .unwrap_or_else(|_| "''".to_string())
}

/// A value as it may stand on a `#SBATCH` line. sbatch splits those lines itself, not a
/// shell: whitespace separates words and double quotes group them, but `#`, `\` and the quotes
/// are read differently by different Slurm versions, so values holding them are refused rather
/// than guessed at.
fn sbatch_word(what: &str, v: &str) -> Result<String, String> {
    if let Some(c) = v
        .chars()
        .find(|c| c.is_control() || matches!(c, '"' | '\'' | '\\' | '#'))
    {
        return Err(format!(
            "{what} `{}` holds {}, which a #SBATCH line cannot carry reliably: give a value without \
quotes, backslashes, `#` and control characters",
            v.escape_debug(),
            c.escape_debug()
        ));
    }
    if v.is_empty() || v.ends_with('=') {
        return Err(format!("{what} `{v}` is empty"));
    }
    if v.chars().any(char::is_whitespace) {
        Ok(format!("\"{v}\""))
    } else {
        Ok(v.to_string())
    }
}

/// sbatch options `dplab slurm` sets itself: another value would break the array, the
/// dependency, the log locations or `--wait`.
fn refuse_own_option(arg: &str) -> Result<(), String> {
    const LONG: [&str; 7] = [
        "--array",
        "--dependency",
        "--kill-on-invalid-dep",
        "--output",
        "--error",
        "--parsable",
        "--wait",
    ];
    const SHORT: [&str; 5] = ["-a", "-d", "-o", "-e", "-W"];
    let name = arg.split('=').next().unwrap_or(arg);
    let own = LONG
        .iter()
        .any(|l| l.starts_with(name) && name.len() > 3 && name.starts_with("--"))
        || SHORT.iter().any(|s| arg.starts_with(s));
    if own {
        return Err(format!(
            "--sbatch-arg `{}`: dplab slurm sets --array, --dependency, --kill-on-invalid-dep, \
--output, --error, --parsable and --wait itself (use --shards, --wait; logs go under \
STORE/slurm/)",
            arg.escape_debug()
        ));
    }
    if !arg.starts_with('-') {
        return Err(format!(
            "--sbatch-arg `{}` is not an option: give one sbatch option per --sbatch-arg, \
e.g. --sbatch-arg=--qos=long",
            arg.escape_debug()
        ));
    }
    Ok(())
}

/// A path in a `--output` file name pattern: `%` is Slurm's escape (`%j`, `%A`), `%%` a `%`.
fn log_pattern(dir: &Path, name: &str) -> Result<String, String> {
    let p = utf8(&dir.join("logs"), "the log directory")?.replace('%', "%%");
    sbatch_word("the log directory", &format!("--output={p}/{name}"))
}

/// Text shown in a `#` comment: control characters escaped, so a value can never end the
/// comment and start a command.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The comments every script starts with: what runs, with which settings, where.
fn header(job: &Job, what: &str) -> String {
    let mut h = format!(
        "#!/bin/bash\n# {what}\n# Written by `dplab slurm` at {}.\n#\n\
# dplab:     {} (version {}, sha256 {})\n",
        job.written,
        comment(&job.dplab),
        env!("CARGO_PKG_VERSION"),
        job.dplab_sha256
    );
    for (i, p) in job.pipelines.iter().enumerate() {
        let label = if i == 0 { "pipelines:" } else { "" };
        h += &format!("# {label:<10} {}\n", comment(p));
    }
    h += &format!(
        "# profile:   {}\n",
        comment(job.profile.as_deref().unwrap_or("(none)"))
    );
    if job.set.is_empty() {
        h += "# --set:     (none)\n";
    }
    for (i, s) in job.set.iter().enumerate() {
        let label = if i == 0 { "--set:" } else { "" };
        h += &format!("# {label:<10} {}\n", comment(s));
    }
    h += &format!(
        "# store:     {}\n# results:   {} (written by the merge job)\n# shards:    {}\n#\n\
# The binary, the pipelines, the store and the results must be on a file system every node sees.\n",
        comment(&job.store),
        comment(&job.out),
        job.shards
    );
    h
}

fn sbatch_lines(job: &Job, name: &str, log: &str) -> String {
    let mut s = format!("#SBATCH --job-name={name}\n#SBATCH {log}\n");
    s += &format!("#SBATCH --cpus-per-task={}\n", job.cpus);
    for w in &job.sbatch {
        s += &format!("#SBATCH {w}\n");
    }
    s
}

/// `dplab run` with the pipelines and then the options (every one a flag and its value), a
/// pipeline or an option per line; then the exit code is recorded and returned.
fn command(job: &Job, head: &[String], status_file: &str) -> String {
    let options: Vec<&String> = head.iter().chain(&job.run_args).collect();
    let lines: Vec<String> = std::iter::once(format!("{} run", quote(&job.dplab)))
        .chain(job.pipelines.iter().map(|p| quote(p)))
        .chain(
            options
                .chunks(2)
                .map(|pair| pair.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")),
        )
        .collect();
    let mut s = lines.join(" \\\n  ");
    // The exit code outlives the controller's memory of the job (squeue forgets finished jobs
    // after MinJobAge): `dplab slurm --wait` reads it from here.
    s += &format!("\nstatus=$?\necho \"$status\" > {status_file}\nexit \"$status\"\n");
    s
}

fn shards_script(job: &Job) -> String {
    let n = job.shards;
    let mut s = header(
        job,
        &format!("dplab sharded run, the shards: array task i of {n} runs its 1/{n} share of the instances into the store."),
    );
    s += "# Submit by hand: A=$(sbatch --parsable shards.sbatch), then the merge:\n\
#   sbatch --dependency=afterok:$A --kill-on-invalid-dep=yes merge.sbatch\n";
    s += &sbatch_lines(job, "dplab-shards", &job.shards_log);
    s += &format!("#SBATCH --array=0-{}\n\n", n - 1);
    s += &format!(
        "echo \"dplab shard ${{SLURM_ARRAY_TASK_ID:-?}} of {n} on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)\"\n"
    );
    let status = format!(
        "{}\"${{SLURM_ARRAY_TASK_ID:-unknown}}\"",
        quote(&format!("{}/status/shard-", job.dir.display()))
    );
    let head = [
        "--shard".to_string(),
        format!("auto/{n}"),
        "--jobs".to_string(),
        job.cpus.to_string(),
        "--store".to_string(),
        job.store.clone(),
    ];
    s + &command(job, &head, &status)
}

fn merge_script(job: &Job) -> String {
    let mut s = header(
        job,
        "dplab sharded run, the merge: takes every instance from the store, runs the gathers and writes the results.",
    );
    s += "# Submit by hand after the shards' array job A:\n\
#   sbatch --dependency=afterok:$A --kill-on-invalid-dep=yes merge.sbatch\n";
    s += &sbatch_lines(job, "dplab-merge", &job.merge_log);
    s += "\necho \"dplab merge on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)\"\n";
    let status = quote(&format!("{}/status/merge", job.dir.display()));
    let head = [
        "--jobs".to_string(),
        job.cpus.to_string(),
        "--store".to_string(),
        job.store.clone(),
        "--out".to_string(),
        job.out.clone(),
    ];
    s + &command(job, &head, &status)
}

/// `sbatch --parsable EXTRA SCRIPT`: the job id.
fn sbatch(extra: &[String], script: &Path) -> Result<String, String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(extra)
        .arg(script)
        .output()
        .map_err(|e| format!("cannot run sbatch: {e}"))?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !out.status.success() {
        return Err(format!("sbatch {}: {}", out.status, stderr.trim()));
    }
    if !stderr.trim().is_empty() {
        errln!("sbatch: {}", stderr.trim());
    }
    // --parsable prints `<job id>` or `<job id>;<cluster>`.
    let line = stdout.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    let id = line.split(';').next().unwrap_or("").trim();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "sbatch printed `{}` where a job id belongs",
            line.escape_debug()
        ));
    }
    Ok(id.to_string())
}

/// One line of `squeue`: a job (or array task) id, its state and the reason it waits.
struct Row {
    id: String,
    state: String,
    reason: String,
}

/// The rows of these jobs, finished ones included while the controller remembers them
/// (`MinJobAge`, 300 s by default); an array is listed task by task.
fn squeue(jobs: &[&str]) -> Result<Vec<Row>, String> {
    let out = Command::new("squeue")
        .args(["--noheader", "--array", "--states=all", "--format=%i|%T|%r"])
        .arg(format!("--jobs={}", jobs.join(",")))
        .output()
        .map_err(|e| format!("cannot run squeue: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // Every job named is forgotten already: they all ended.
        if stderr.contains("Invalid job id") {
            return Ok(Vec::new());
        }
        return Err(format!("squeue {}: {}", out.status, stderr.trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.trim().splitn(3, '|');
            Some(Row {
                id: f.next()?.to_string(),
                state: f.next()?.to_string(),
                reason: f.next().unwrap_or("").to_string(),
            })
        })
        .collect())
}

/// The task indices an array row stands for: `A_3`, or `A_[0-2,5%2]` for tasks not yet split
/// off; `None` for a row of another job.
fn array_tasks(id: &str, array: &str) -> Option<Vec<u32>> {
    let rest = id.strip_prefix(array)?.strip_prefix('_')?;
    let list = rest.trim_start_matches('[').trim_end_matches(']');
    let list = list.split('%').next().unwrap_or("");
    let mut tasks = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?);
                tasks.extend(a..=b.min(a.saturating_add(MAX_SHARDS as u32)));
            }
            None => tasks.push(part.parse().ok()?),
        }
    }
    Some(tasks)
}

/// What `--wait` calls a task that left the queue without running or ending: Slurm drops a
/// pending array task that is cancelled, with no record.
const VANISHED: &str = "VANISHED";

/// Whether a job in this state will change no more.
fn ended(state: &str) -> bool {
    matches!(
        state,
        VANISHED
            | "COMPLETED"
            | "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "PREEMPTED"
            | "OUT_OF_MEMORY"
            | "BOOT_FAIL"
            | "DEADLINE"
    )
}

/// The exit code a job recorded in status/ (see [`command`]).
// A status file under STORE/slurm/<time>/, written by the job scripts dplab wrote.
#[expect(clippy::disallowed_methods)]
fn recorded(dir: &Path, name: &str) -> Option<i32> {
    std::fs::read_to_string(dir.join("status").join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `--wait`: looks at the queue every `poll` until the merge job and every shard have ended,
/// then says how they went (exit 0, 1, or 3 when a shard failed: [`Failure::ShardFailed`]).
fn wait(job: &Job, array: &str, merge: &str, poll: Duration) -> Outcome {
    // Progress is logged (hidden by -q); the outcome is printed.
    tracing::info!(
        "waiting for jobs {array} and {merge} (squeue every {} s; interrupting stops the waiting, not the jobs)",
        poll.as_secs_f64()
    );
    let mut shards: BTreeMap<u32, String> = BTreeMap::new();
    let mut merge_row: Option<(String, String)> = None;
    let mut errors = 0;
    let mut last = String::new();
    loop {
        let rows = match squeue(&[array, merge]) {
            Ok(r) => {
                errors = 0;
                r
            }
            Err(e) => {
                errors += 1;
                if errors >= MAX_QUEUE_ERRORS {
                    return Err(Failure::Failed(format!(
                        "{e}\nGave up waiting after {errors} failed looks at the queue; the jobs go on: squeue -j {array},{merge}"
                    )));
                }
                tracing::warn!("{e} (trying again)");
                std::thread::sleep(poll);
                continue;
            }
        };
        let (mut merge_listed, mut shards_live) = (false, false);
        let mut listed = std::collections::HashSet::new();
        for row in rows {
            if row.id == merge {
                merge_listed = true;
                merge_row = Some((row.state, row.reason));
            } else if let Some(tasks) = array_tasks(&row.id, array) {
                shards_live |= !ended(&row.state);
                for t in tasks {
                    listed.insert(t);
                    shards.insert(t, row.state.clone());
                }
            }
        }
        // A task cancelled while pending leaves no record: it just stops being listed.
        for (t, state) in shards.iter_mut() {
            if !listed.contains(t) && !ended(state) {
                *state = VANISHED.to_string();
            }
        }
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for s in shards.values() {
            *counts.entry(s.as_str()).or_default() += 1;
        }
        let (merge_state, reason) = merge_row.clone().unwrap_or_default();
        let now = format!(
            "shards: {}; merge: {}",
            counts
                .iter()
                .map(|(s, n)| format!("{n} {}", s.to_lowercase()))
                .collect::<Vec<_>>()
                .join(", "),
            if merge_state.is_empty() {
                "not listed".to_string()
            } else if reason.is_empty() || reason == "None" {
                merge_state.to_lowercase()
            } else {
                format!("{} ({reason})", merge_state.to_lowercase())
            }
        );
        if now != last {
            tracing::info!("{now}");
            last = now;
        }
        // A merge waiting on a dependency that can no longer be met has ended in all but name
        // (sbatch's --kill-on-invalid-dep=yes cancels it; a hand-edited submission may not).
        let merge_over =
            !merge_listed || ended(&merge_state) || reason == "DependencyNeverSatisfied";
        if merge_over && !shards_live {
            break;
        }
        std::thread::sleep(poll);
    }
    outcome(job, array, merge, &shards, merge_row)
}

fn outcome(
    job: &Job,
    array: &str,
    merge: &str,
    shards: &BTreeMap<u32, String>,
    merge_row: Option<(String, String)>,
) -> Outcome {
    let (merge_state, _) = merge_row.unwrap_or_default();
    let merge_code = recorded(&job.dir, "merge");
    if merge_code == Some(0) || merge_state == "COMPLETED" {
        out!(
            "done: every shard and the merge succeeded; results in {}/",
            job.out
        );
        return Ok(());
    }
    let logs = job.dir.join("logs");
    let failed: Vec<String> = (0..job.shards)
        .filter_map(|i| {
            let code = recorded(&job.dir, &format!("shard-{i}"));
            let state = shards.get(&i).map(String::as_str).unwrap_or("");
            if code == Some(0) || state == "COMPLETED" {
                return None;
            }
            let how = match (code, state) {
                (None, VANISHED) => {
                    "left the queue without running (cancelled while pending?)".to_string()
                }
                (Some(c), "") => format!("exit code {c}"),
                (Some(c), s) => format!("{s}, exit code {c}"),
                (None, "") => "no record: it did not finish".to_string(),
                (None, s) => s.to_string(),
            };
            Some(format!(
                "  shard {i}: {how} (log {})",
                logs.join(format!("shard-{array}_{i}.out")).display()
            ))
        })
        .collect();
    if !failed.is_empty() {
        return Err(Failure::ShardFailed(format!(
            "{} of {} shard(s) did not succeed, so the merge job {merge} did not run:\n{}\n\
What they finished is in the store: submit the same command again and only the missing instances run.",
            failed.len(),
            job.shards,
            failed.join("\n")
        )));
    }
    let how = match (merge_code, merge_state.as_str()) {
        (Some(c), _) => format!("exited with {c}"),
        (None, "") => "ended without a record".to_string(),
        (None, s) => format!("ended {s}"),
    };
    Err(Failure::Failed(format!(
        "every shard succeeded, but the merge job {merge} {how} (log {})",
        logs.join(format!("merge-{merge}.out")).display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_rows_name_their_tasks() {
        assert_eq!(array_tasks("7_3", "7"), Some(vec![3]));
        assert_eq!(array_tasks("7_[0-2,5%2]", "7"), Some(vec![0, 1, 2, 5]));
        assert_eq!(array_tasks("7", "7"), None);
        assert_eq!(array_tasks("70_1", "7"), None);
        assert_eq!(array_tasks("8_1", "7"), None);
        assert_eq!(array_tasks("7_x", "7"), None);
    }

    #[test]
    fn sbatch_words_are_plain_quoted_or_refused() {
        assert_eq!(sbatch_word("x", "--qos=long").unwrap(), "--qos=long");
        assert_eq!(
            sbatch_word("x", "--comment=a b").unwrap(),
            "\"--comment=a b\""
        );
        for bad in [
            "--c=a\"b", "--c=a'b", "--c=a\\b", "--c=a#b", "--c=a\tb", "", "--time=",
        ] {
            assert!(sbatch_word("x", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn options_dplab_sets_itself_are_refused_others_pass() {
        for own in [
            "--array=1",
            "--arr=1",
            "-a",
            "-a1",
            "--dependency=x",
            "--output=x",
            "--ou=x",
            "-o",
            "-e",
            "--error=x",
            "--parsable",
            "--wait",
            "-W",
            "--kill-on-invalid-dep=no",
        ] {
            assert!(refuse_own_option(own).is_err(), "{own}");
        }
        for fine in [
            "--qos=long",
            "--account=x",
            "--exclusive",
            "--wait-all-nodes=1",
            "--open-mode=append",
            "-A",
            "-p",
            "--hold",
        ] {
            assert!(refuse_own_option(fine).is_ok(), "{fine}");
        }
        assert!(refuse_own_option("qos=long").is_err());
    }

    #[test]
    fn comments_cannot_be_left() {
        assert_eq!(comment("a\nb\r"), "a\\nb\\r");
        assert_eq!(comment("plain $(x)"), "plain $(x)");
    }
}
