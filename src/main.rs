//! The `dplab` command line: parses arguments and hands over to the pipeline engine.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Parser, Subcommand};
use dplab::pipeline::{compare, exec, graph, plan, spec, store};
use dplab::{data, limits, stages};

/// mimalloc instead of glibc's malloc: a sweep of 10⁵ small instances spent a third of its
/// time growing glibc's per-thread arenas (page faults and mprotect) and in its free lists.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The instance store keeps its packs open while a run reads them: the soft limit on open
/// files (often 1024) is raised to the hard one, as build tools do.
fn raise_open_file_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// A line on stdout. When the reader has gone (`dplab list | head -1`), dplab ends quietly
/// with exit 0, as ripgrep does, instead of panicking on the broken pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::emit(format_args!($($arg)*), true) };
}
/// [`out!`] without the newline.
macro_rules! out_raw {
    ($($arg:tt)*) => { $crate::emit(format_args!($($arg)*), false) };
}
/// A line on stderr; a closed stderr is ignored (there is nobody left to tell).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = $crate::scrub(&format!($($arg)*)).into_owned();
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }};
}

mod slurm;

/// Set once stdout is found closed: later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Whether this command's exit status is a verdict (validate, run, compare): a reader that
/// stops reading early (`dplab validate … | head -1`) must not turn a failure into exit 0.
/// Commands whose only product is their output (list, data list, graph) end at once, with
/// exit 0, as ripgrep does.
static STATUS_IS_VERDICT: AtomicBool = AtomicBool::new(false);

/// Control characters other than newline and tab, written as escapes: text from a pipeline
/// file or a file name reaches the terminal, where an escape sequence would be obeyed.
fn scrub(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

fn emit(args: std::fmt::Arguments, newline: bool) {
    use std::io::Write as _;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let text = args.to_string();
    let mut o = std::io::stdout().lock();
    let r = o.write_all(scrub(&text).as_bytes()).and_then(|()| {
        if newline {
            o.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = r {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            if STATUS_IS_VERDICT.load(Ordering::Relaxed) {
                STDOUT_CLOSED.store(true, Ordering::Relaxed);
                return;
            }
            std::process::exit(0);
        }
        errln!("error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

const WARNING: &str =
    "Seeded runs exist to reproduce research: their noise is predictable from the seed. \
Never use dplab to release real private data.";

#[derive(Parser)]
#[command(
    name = "dplab",
    version,
    about = "Reproducible differential-privacy experiments as declarative YAML pipelines",
    long_about = "dplab runs YAML experiment pipelines (load → mechanism → evaluate → aggregate → plot/report) \
as a parallel DAG with a seeded generator per stage instance, and writes result frames (CSV + Parquet), \
SVG figures and a manifest under results/<pipeline>/.",
    after_help = format!("Examples:\n  dplab run pipelines/                      run every pipeline\n  \
dplab run pipelines/dwork-roth/dr-pumpkin.yaml --profile ci --jobs 2\n  \
dplab run dr-two-diseases.yaml --set 'eps=[0.5, 1]'\n  \
dplab validate pipelines/**/*.yaml\n  dplab list mechanism.select\n  \
dplab compare results/ tests/golden/ --rtol 1e-9\n\n{WARNING}")
)]
struct Cli {
    /// More log output (-v: debug, -vv: trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run pipelines (files, or directories searched for *.yaml).
    #[command(after_help = format!("Examples:\n  dplab run pipelines/\n  dplab run a.yaml b.yaml --profile ci --out /tmp/res\n  \
dplab run sweep.yaml --set 'eps={{from: 0.1, to: 2, step: 0.1}}' --set 'c=[1, 5]'\n\n\
Results go to OUT/<pipeline name>/: one <stage>.csv and .parquet per stored stage, figures, manifest.json.\n\
A failed pipeline does not stop the others (unless --fail-fast); failures are listed at the end.\n\
Exit codes: 0 success, 1 a run failed, 2 bad input.\n\n{WARNING}"))]
    Run {
        /// Pipeline files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
        /// Worker threads (default: all cores). Results do not depend on it.
        #[arg(short, long)]
        jobs: Option<usize>,
        /// Results root directory.
        #[arg(short, long, default_value = "results")]
        out: PathBuf,
        /// Stop at the first failed pipeline.
        #[arg(long)]
        fail_fast: bool,
        /// Skip (with a warning, exit 0) pipelines whose dataset files are not on this machine.
        #[arg(long)]
        skip_unavailable: bool,
        /// Run only a share of the instances, into the store, and write no results: `I/N`
        /// (shard I of N, from 0), `auto` (a Slurm array task's SLURM_ARRAY_TASK_ID and
        /// SLURM_ARRAY_TASK_COUNT) or `auto/N` (index from SLURM_ARRAY_TASK_ID or
        /// JOB_COMPLETION_INDEX). Once every shard is done, a run without --shard on the same
        /// store runs only the stages that gather, and writes the results. Every shard and
        /// that run must be given the same pipelines, in the same order, with the same
        /// --profile and --set.
        #[arg(long, value_name = "SPEC", conflicts_with_all = ["dry_run", "no_store"])]
        shard: Option<String>,
        #[command(flatten)]
        loc: DataLoc,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Check pipeline files without running them: keys, types, inputs, cycles, axes, ranges.
    #[command(
        after_help = "Example:\n  dplab validate pipelines/dwork-roth/*.yaml --profile ci\n\nErrors print as FILE:LINE:COL: message; exit code 2."
    )]
    Validate {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Every stage kind with its parameters, or one kind in detail.
    #[command(after_help = "Examples:\n  dplab list\n  dplab list mechanism.select")]
    List {
        /// Show only this kind.
        kind: Option<String>,
    },
    /// Print a pipeline as it will run: profile and --set applied, as a pipeline file that
    /// runs the same instances with the same seeds (or, with --instances, every instance).
    #[command(
        after_help = "Examples:\n  dplab show dr-pumpkin.yaml --profile ci --set eps=[1,2]\n  dplab show dr-pumpkin.yaml --instances | less"
    )]
    Show {
        path: PathBuf,
        /// List every instance (axis values, seed, store key) instead.
        #[arg(long)]
        instances: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Print a shell completion script (generated from these definitions).
    #[command(
        after_help = "Examples:\n  dplab completions bash > ~/.local/share/bash-completion/completions/dplab\n  dplab completions zsh > ~/.zfunc/_dplab   # with fpath+=(~/.zfunc) before compinit\n  dplab completions fish > ~/.config/fish/completions/dplab.fish"
    )]
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff), or write one page per command into DIR.
    #[command(after_help = "Examples:\n  dplab man | man -l -\n  dplab man target/man")]
    Man {
        /// Write dplab.1 and dplab-<command>.1 here instead (created if missing).
        dir: Option<PathBuf>,
    },
    /// Print a pipeline's stage DAG as Graphviz DOT or Mermaid.
    #[command(
        after_help = "Examples:\n  dplab graph dr-pumpkin.yaml | dot -Tsvg > dag.svg\n  dplab graph dr-pumpkin.yaml --format mermaid"
    )]
    Graph {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "dot")]
        format: GraphFormat,
        #[command(flatten)]
        common: Common,
    },
    /// The public datasets: list them, fetch them into the cache, verify the copies.
    #[command(
        after_help = "Examples:\n  dplab data list\n  dplab data fetch adult wdbc\n  \
dplab data fetch --all --mirror ../shared/datasets\n  dplab data verify\n\n\
Files are looked for in the cache (DPLAB_DATA_DIR, default ~/.cache/dplab/datasets), then in the\n\
offline mirror (DPLAB_DATA_MIRROR or --mirror, laid out as <dataset>/<file>). Every file is checked\n\
against the sha256 and size in data/datasets.toml before use. Exit codes: 0 ok, 1 a file is missing\n\
or wrong, 2 bad input."
    )]
    Data {
        #[command(subcommand)]
        action: DataAction,
        #[command(flatten)]
        loc: DataLoc,
    },
    /// The instance store: what it holds, and removing what no results directory uses.
    #[command(after_help = "Examples:
  dplab store info
  dplab store gc --keep results --keep target/ci-results --dry-run")]
    Store {
        #[command(subcommand)]
        action: StoreAction,
        /// The store [default: $DPLAB_STORE, else .dplab/store].
        #[arg(long, value_name = "DIR", global = true)]
        store: Option<PathBuf>,
    },
    /// Write RESULTS_DIR/index.html: one page with every experiment, the paper's numbers beside
    /// ours and where they differ.
    #[command(
        after_help = "Examples:\n  dplab report results --pipelines pipelines/\n  dplab report target/ci-results\n\n\
The page is self-contained and works offline from the file system (figures are referenced by\n\
relative paths). With --pipelines, experiments without results are listed too: as \"data not\n\
available\" with the command that gets the data, or as \"not run\".\n\
Exit codes: 0 written, 1 written but the results are damaged (listed on the page and here), 2 bad input."
    )]
    Report {
        /// A results root (the --out of `dplab run`).
        results: PathBuf,
        /// Pipeline files or directories: every experiment they define gets a section.
        #[arg(long, value_name = "PATH")]
        pipelines: Vec<PathBuf>,
        #[command(flatten)]
        loc: DataLoc,
    },
    /// Run pipelines on a Slurm cluster: an array job of N shards fills the store, then a merge
    /// job writes the results.
    #[command(after_help = slurm::AFTER_HELP)]
    Slurm(slurm::SlurmArgs),
    /// Compare two results directories frame by frame (columns, keys, values within tolerance).
    #[command(
        after_help = "Examples:\n  dplab compare results/dr-pumpkin tests/golden/dr-pumpkin\n  \
dplab compare results tests/golden --rtol 1e-6   (compares every pipeline directory present in both)\n\n\
A cell matches when |a − b| ≤ atol + rtol·|b|; text and integer cells must be equal.\nExit code 1 on any mismatch."
    )]
    Compare {
        a: PathBuf,
        b: PathBuf,
        #[arg(long, default_value_t = 1e-9)]
        rtol: f64,
        #[arg(long, default_value_t = 1e-12)]
        atol: f64,
        /// A pipeline directory of B that A lacks (e.g. skipped for missing data) is listed, not a mismatch.
        #[arg(long)]
        allow_missing: bool,
    },
}

#[derive(Subcommand)]
enum StoreAction {
    /// Entries and bytes in all, and per pipeline those its last run used.
    Info,
    /// Remove every entry no results directory under the given roots references (by the
    /// instance keys in their manifests), and what killed writers left in tmp/ over an hour ago.
    Gc {
        /// A results root whose directories' entries are kept (repeatable).
        #[arg(long, value_name = "DIR", default_value = "results")]
        keep: Vec<PathBuf>,
        /// Say what would be removed, remove nothing.
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
enum DataAction {
    /// Every registered dataset file: present? where, size, licence.
    List,
    /// Put verified copies into the cache (from the mirror when it has them, else download).
    #[command(
        after_help = "Examples:\n  dplab data fetch adult wdbc\n  dplab data fetch --pipelines pipelines/\n\n\
With --pipelines, fetches exactly the files the pipelines' load.dataset stages read (after\n\
--profile and --set): a verified copy in the cache or the mirror is used where it is, any other\n\
is downloaded from its upstream URL and verified. A file with no registered checksum is never\n\
fetched this way. Ends with what could not be obtained and which pipelines that leaves without\n\
data (`dplab run --skip-unavailable` skips them; `dplab report` shows them as \"data not\n\
available\"). Exit codes: 0 everything needed is here, 1 something is missing, 2 bad input."
    )]
    Fetch {
        /// Dataset names.
        names: Vec<String>,
        /// Every registered dataset.
        #[arg(long)]
        all: bool,
        /// The files these pipelines read (files or directories searched for *.yaml).
        #[arg(long, value_name = "PATH", conflicts_with_all = ["names", "all", "accept_unverified"])]
        pipelines: Vec<PathBuf>,
        /// Download files that have no registered checksum and print their sha256.
        #[arg(long)]
        accept_unverified: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Check every present copy (cache and mirror) against the registry.
    Verify {
        /// Dataset names (default: all).
        names: Vec<String>,
    },
}

/// The instance store and what to take from it.
#[derive(Args)]
struct StoreArgs {
    /// The instance store: every finished stage instance is kept there, and later runs (of any
    /// pipeline) reuse it instead of computing it again [default: $DPLAB_STORE, else
    /// .dplab/store in the current directory].
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Neither read nor write the store: compute everything.
    #[arg(long)]
    no_store: bool,
    /// Recompute what the store has: every stage (`--force`), or the stages named
    /// (`--force=plot,table`).
    #[arg(long, value_name = "STAGE", num_args = 0..=1, require_equals = true, default_missing_value = "", value_delimiter = ',')]
    force: Option<Vec<String>>,
    /// Run nothing: per stage, how many instances would run and how many the store has, and
    /// why each would run.
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl StoreArgs {
    fn store(&self) -> Option<dplab::pipeline::cache::InstanceStore> {
        if self.no_store {
            return None;
        }
        let root = self
            .store
            .clone()
            .or_else(|| {
                std::env::var_os("DPLAB_STORE")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from(".dplab/store"));
        Some(dplab::pipeline::cache::InstanceStore::new(root))
    }

    fn force(&self) -> exec::Force {
        match &self.force {
            None => exec::Force::Nothing,
            Some(v) if v.iter().all(|s| s.is_empty()) => exec::Force::All,
            Some(v) => exec::Force::Stages(v.iter().filter(|s| !s.is_empty()).cloned().collect()),
        }
    }
}

#[derive(Args)]
struct DataLoc {
    /// Offline mirror laid out as <dataset>/<file> (overrides DPLAB_DATA_MIRROR).
    #[arg(long, global = true, value_name = "DIR")]
    mirror: Option<PathBuf>,
    /// Download cache (overrides DPLAB_DATA_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

impl DataLoc {
    fn install(&self) {
        let mut l = data::Locations::from_env();
        if let Some(m) = &self.mirror {
            l.mirror = Some(m.clone());
        }
        if let Some(d) = &self.data_dir {
            l.cache = d.clone();
        }
        data::Locations::install(l);
    }
}

#[derive(Args)]
struct Common {
    /// Apply the named profile of each pipeline (e.g. `ci`: smaller grids).
    #[arg(short, long)]
    profile: Option<String>,
    /// Override, after the profile: an axis (AXIS=VALUES, VALUES in YAML: eps=[0.1,1] or
    /// eps={from: 0.1, to: 1, step: 0.1}), any stage parameter (STAGE.PARAM=VALUE, a YAML
    /// value; nested keys with dots: noisy.samples=500, table.labels.eps=ε), or the seed
    /// (seed=N). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Let pipelines read files under DIR too (by default a pipeline reads only inside its own directory).
    #[arg(long, value_name = "DIR")]
    allow_read: Vec<PathBuf>,
    /// Most stage instances in one pipeline.
    #[arg(long, value_name = "N", default_value_t = limits::Limits::DEFAULT.instances, value_parser = count)]
    max_instances: u64,
    /// Most random draws (samples, trials) one stage instance may make.
    #[arg(long, value_name = "N", default_value_t = limits::Limits::DEFAULT.draws, value_parser = count)]
    max_draws: u64,
    /// Most elements of one matrix, grid or table a stage instance may build.
    #[arg(long, value_name = "N", default_value_t = limits::Limits::DEFAULT.cells, value_parser = count)]
    max_cells: u64,
}

impl Common {
    fn install_limits(&self) {
        limits::set(limits::Limits {
            instances: self.max_instances,
            draws: self.max_draws,
            cells: self.max_cells,
        });
    }
}

/// A count on the command line: an integer, also written as `1e6`.
fn count(s: &str) -> Result<u64, String> {
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    match s.parse::<f64>() {
        Ok(x) if x >= 1.0 && x.fract() == 0.0 && x <= 9.007_199_254_740_992e15 => Ok(x as u64),
        _ => Err(format!("`{s}` is not a whole number ≥ 1")),
    }
}

/// Most worker threads: more than this is a typo (each thread reserves a stack).
const MAX_JOBS: usize = 1024;

#[derive(Clone, Copy, clap::ValueEnum)]
enum GraphFormat {
    Dot,
    Mermaid,
}

/// `dplab man`: the top page to stdout, or every page into `dir`.
fn man(dir: Option<&Path>) -> ExitCode {
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
            errln!("error: rendering the manual page: {e}");
            return ExitCode::from(1);
        }
        out_raw!("{}", String::from_utf8_lossy(&out));
        return ExitCode::SUCCESS;
    };
    let written = std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))
        .and_then(|()| {
            clap_mangen::generate_to(cmd, dir)
                .map_err(|e| anyhow::anyhow!("writing pages into {}: {e}", dir.display()))
        });
    match written {
        Ok(()) => {
            out!("manual pages written to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    raise_open_file_limit();
    let default = if cli.quiet {
        "warn"
    } else {
        match cli.verbose {
            0 => "info",
            1 => "debug",
            _ => "trace",
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        // On a failed write (stderr piped into `head`, which exited) tracing-subscriber would
        // say so with `eprintln!`, which panics on that same closed stderr: the run died
        // (exit 101) and lost its work. Logs nobody reads are dropped instead.
        .log_internal_errors(false)
        .init();
    STATUS_IS_VERDICT.store(
        matches!(
            cli.command,
            Command::Run { .. }
                | Command::Validate { .. }
                | Command::Compare { .. }
                | Command::Report { .. }
                | Command::Slurm(_)
        ),
        Ordering::Relaxed,
    );
    match cli.command {
        Command::Run {
            paths,
            common,
            jobs,
            out,
            fail_fast,
            skip_unavailable,
            shard,
            loc,
            store,
        } => {
            loc.install();
            run(
                &paths,
                &common,
                (jobs, &store, shard.as_deref()),
                &out,
                (fail_fast, skip_unavailable),
                cli.quiet,
            )
        }
        Command::Store { action, store } => store_cmd(
            &StoreArgs {
                store,
                no_store: false,
                force: None,
                dry_run: false,
            },
            action,
        ),
        Command::Data { action, loc } => {
            loc.install();
            data_cmd(action)
        }
        Command::Validate { paths, common } => validate(&paths, &common),
        Command::Report {
            results,
            pipelines,
            loc,
        } => {
            loc.install();
            report_cmd(&results, &pipelines)
        }
        Command::Slurm(args) => slurm::main(args),
        Command::List { kind } => list(kind.as_deref()),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "dplab", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man { dir } => man(dir.as_deref()),
        Command::Show {
            path,
            instances,
            common,
        } => match load_plan(&path, &common) {
            Ok(p) if instances => {
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                match dplab::pipeline::show::instances(&p, &mut out)
                    .and_then(|()| std::io::Write::flush(&mut out))
                {
                    // A closed pipe (`| head`) is the reader's choice, not an error.
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                        errln!("error: writing the instances: {e}");
                        ExitCode::from(1)
                    }
                    _ => ExitCode::SUCCESS,
                }
            }
            Ok(p) => {
                out_raw!("{}", dplab::pipeline::show::composed(&p));
                ExitCode::SUCCESS
            }
            Err(errs) => report_spec_errors(&errs),
        },
        Command::Graph {
            path,
            format,
            common,
        } => match load_plan(&path, &common) {
            Ok(p) => {
                out_raw!(
                    "{}",
                    match format {
                        GraphFormat::Dot => graph::dot(&p),
                        GraphFormat::Mermaid => graph::mermaid(&p),
                    }
                );
                ExitCode::SUCCESS
            }
            Err(errs) => report_spec_errors(&errs),
        },
        Command::Compare {
            a,
            b,
            rtol,
            atol,
            allow_missing,
        } => match compare::Tolerance::new(rtol, atol) {
            Ok(tol) => compare_cmd(&a, &b, tol, allow_missing),
            Err(e) => {
                errln!("error: {e}");
                ExitCode::from(2)
            }
        },
    }
}

/// Pipeline files named directly, or found (sorted) under directories. Symbolic links to
/// directories are not followed (a link to an ancestor would find the same files forever),
/// and a file reached twice (named twice, or through a link) is run once.
fn pipeline_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
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

fn load_plan(path: &Path, common: &Common) -> Result<plan::Plan, Vec<spec::SpecError>> {
    common.install_limits();
    let file = spec::load(path).map_err(|e| vec![e])?;
    plan::plan(
        &file,
        &plan::Overrides {
            profile: common.profile.clone(),
            set: common.set.clone(),
            allow_read: common.allow_read.clone(),
        },
        stages::registry(),
    )
}

fn report_spec_errors(errs: &[spec::SpecError]) -> ExitCode {
    for e in errs {
        errln!("error: {e}");
    }
    ExitCode::from(2)
}

fn validate(paths: &[PathBuf], common: &Common) -> ExitCode {
    let files = match pipeline_files(paths) {
        Ok(f) => f,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(2);
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
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

fn run(
    paths: &[PathBuf],
    common: &Common,
    (jobs, store, shard): (Option<usize>, &StoreArgs, Option<&str>),
    out: &Path,
    (fail_fast, skip_unavailable): (bool, bool),
    quiet: bool,
) -> ExitCode {
    let files = match pipeline_files(paths) {
        Ok(f) => f,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let threads =
        jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if !(1..=MAX_JOBS).contains(&threads) {
        errln!("error: --jobs {threads} is out of range: give 1 to {MAX_JOBS} worker threads");
        return ExitCode::from(2);
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
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let shard = match shard
        .map(|s| dplab::pipeline::shard::Shard::parse(s, |v| std::env::var(v).ok()))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // A shard writes no results directory, so it has none to check.
    if shard.is_none() {
        if let Err(e) = check_outputs(&files, out) {
            errln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            errln!("error: cannot start {threads} worker threads: {e}");
            return ExitCode::from(1);
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
        return ExitCode::SUCCESS;
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
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}

/// Refuses, before anything runs, two pipelines that would write the same results
/// directory, and a results path that exists but is not a directory dplab may replace.
fn check_outputs(files: &[PathBuf], out: &Path) -> Result<(), String> {
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
        store::replaceable(&out.join(&name), &name)?;
    }
    Ok(())
}

fn store_cmd(args: &StoreArgs, action: StoreAction) -> ExitCode {
    let Some(store) = args.store() else {
        return ExitCode::SUCCESS;
    };
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let entries = store.entries();
    match action {
        StoreAction::Info => {
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            out!(
                "{}: {} entries, {}",
                store.root().display(),
                entries.len(),
                mb(total)
            );
            let size: std::collections::HashMap<&str, u64> =
                entries.iter().map(|e| (e.key.as_str(), e.bytes)).collect();
            for (pipeline, keys) in store.keys_by_pipeline() {
                let present: Vec<u64> = keys
                    .iter()
                    .filter_map(|k| size.get(k.as_str()).copied())
                    .collect();
                out!(
                    "  {pipeline:<28} {:>8} entries {:>10}  (its last run; entries shared with other pipelines count in each)",
                    present.len(),
                    mb(present.iter().sum())
                );
            }
            ExitCode::SUCCESS
        }
        StoreAction::Gc { keep, dry_run } => {
            let mut referenced = std::collections::HashSet::new();
            for root in &keep {
                let dirs = std::fs::read_dir(root).into_iter().flatten().flatten();
                for d in dirs {
                    referenced.extend(dplab::pipeline::cache::manifest_keys(&d.path()));
                }
            }
            let unused: Vec<_> = entries
                .iter()
                .filter(|e| !referenced.contains(&e.key))
                .collect();
            let bytes: u64 = unused.iter().map(|e| e.bytes).sum();
            if dry_run {
                out!(
                    "would remove {} of {} entries ({}): no results directory under {} references them",
                    unused.len(),
                    entries.len(),
                    mb(bytes),
                    keep.iter().map(|k| k.display().to_string()).collect::<Vec<_>>().join(", ")
                );
            } else {
                let (n, freed) = store.gc(&referenced);
                out!("removed {n} of {} entries ({})", entries.len(), mb(freed));
            }
            ExitCode::SUCCESS
        }
    }
}

fn list(kind: Option<&str>) -> ExitCode {
    let kinds: Vec<_> = stages::registry()
        .iter()
        .filter(|k| kind.is_none_or(|n| k.name == n))
        .collect();
    if kinds.is_empty() {
        let name = kind.unwrap_or_default();
        let hint = spec::suggest(name, stages::registry().iter().map(|k| k.name))
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        errln!("error: no stage kind `{name}`{hint}");
        return ExitCode::from(2);
    }
    for k in kinds {
        out!("{}\n    {}", k.name, k.summary);
        if k.gather == stages::Gather::All {
            out!("    (gathers every axis of its inputs into one instance unless `over:` says otherwise)");
        }
        for p in k.param_lines() {
            out!(
                "    {:<16} {} ({})\n    {:<16} {}",
                p.name,
                p.ty,
                p.default,
                "",
                p.meaning
            );
        }
        out!("");
    }
    out!("Every stage also takes: kind, input (a stage or a list), with (the parameters above), \
over (axes to gather: `all` or a list), repeat (run N times over axis `rep`), store (write its frame; default true).");
    ExitCode::SUCCESS
}

fn compare_cmd(a: &Path, b: &Path, tol: compare::Tolerance, allow_missing: bool) -> ExitCode {
    for d in [a, b] {
        if !d.is_dir() {
            errln!("error: {}: not a directory", d.display());
            return ExitCode::from(2);
        }
    }
    // Two results roots: compare each pipeline directory present in either.
    let subdirs = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    };
    let (sa, sb) = (subdirs(a), subdirs(b));
    let pairs: Vec<(PathBuf, PathBuf, String)> = if sa.is_empty() && sb.is_empty() {
        vec![(a.to_path_buf(), b.to_path_buf(), String::new())]
    } else {
        let mut names: Vec<String> = sa.iter().chain(&sb).cloned().collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|n| (a.join(&n), b.join(&n), n))
            .collect()
    };
    // Different profiles first: then the frames are not expected to match at all.
    let mut profiles: Vec<(String, String, String)> = Vec::new();
    for (da, db, name) in &pairs {
        if let (Some(ma), Some(mb)) = (compare::made(da), compare::made(db)) {
            if ma.profile != mb.profile {
                profiles.push((name.clone(), ma.profile_name(), mb.profile_name()));
            }
        }
    }
    let all_alike = profiles
        .windows(2)
        .all(|w| (&w[0].1, &w[0].2) == (&w[1].1, &w[1].2));
    if let (Some((_, pa, pb)), true) = (profiles.first(), all_alike) {
        let which = if profiles.len() == 1 && profiles[0].0.is_empty() {
            String::new()
        } else {
            format!(
                " ({} pipeline{}: {})",
                profiles.len(),
                if profiles.len() == 1 { "" } else { "s" },
                profiles
                    .iter()
                    .map(|p| p.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        out!(
            "DIFFERENT PROFILES: A ({}) was made with {pa}, B ({}) with {pb}{which}; their frames are not expected to match",
            a.display(),
            b.display()
        );
    } else {
        for (name, pa, pb) in &profiles {
            out!("DIFFERENT PROFILES: {name}: A was made with {pa}, B with {pb}; its frames are not expected to match");
        }
    }
    let mut mismatch = !profiles.is_empty();
    let (mut frames, mut cells, mut timings) = (0, 0, 0);
    for (da, db, name) in pairs {
        if !da.is_dir() && db.is_dir() && allow_missing {
            out!(
                "{name}: not in {} (not compared: --allow-missing)",
                a.display()
            );
            continue;
        }
        if !da.is_dir() || !db.is_dir() {
            out!(
                "{name}: only in {}",
                if da.is_dir() {
                    a.display()
                } else {
                    b.display()
                }
            );
            mismatch = true;
            continue;
        }
        match compare::compare_dirs(&da, &db, tol) {
            Ok(c) => {
                frames += c.frames;
                cells += c.cells;
                timings += c.timings;
                if !c.report.is_empty() {
                    mismatch = true;
                    for line in c.report.lines() {
                        if name.is_empty() {
                            out!("{line}")
                        } else {
                            out!("{name}/{line}")
                        }
                    }
                }
            }
            Err(e) => {
                errln!("error: {e:#}");
                return ExitCode::from(2);
            }
        }
    }
    if mismatch {
        out!(
            "MISMATCH (rtol {}, atol {}){}",
            tol.rtol(),
            tol.atol(),
            if profiles.is_empty() {
                ""
            } else {
                "; the directories were made with different profiles (see the first line)"
            }
        );
        ExitCode::from(1)
    } else {
        out!(
            "ok: {frames} frames, {cells} cells match (rtol {}, atol {}); {timings} wall-time cells not compared",
            tol.rtol(), tol.atol()
        );
        ExitCode::SUCCESS
    }
}

/// `dplab report RESULTS [--pipelines …]`.
fn report_cmd(results: &Path, pipelines: &[PathBuf]) -> ExitCode {
    let files = if pipelines.is_empty() {
        Vec::new()
    } else {
        match pipeline_files(pipelines) {
            Ok(f) => f,
            Err(e) => {
                errln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let mut expected = Vec::new();
    for f in &files {
        match spec::load(f) {
            Ok(s) => expected.push(dplab::report::Expected {
                file: f.clone(),
                missing_data: missing_datasets(f),
                name: s.raw.name,
                title: s.raw.title,
                paper: s.raw.source.paper,
                item: s.raw.source.item,
                description: s.raw.description,
            }),
            Err(e) => {
                errln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    match dplab::report::write(results, &expected) {
        Ok(w) => {
            let s = &w.summary;
            out!(
                "wrote {}: {} experiments ({} with results, {} without data, {} not run, {} damaged); {} printed numbers compared: {} agree, {} differ ({} explained)",
                w.path.display(),
                s.experiments,
                s.with_results,
                s.unavailable,
                s.not_run,
                s.damaged,
                s.compared,
                s.agree,
                s.differ,
                s.explained
            );
            for p in &w.problems {
                errln!("error: {p}");
            }
            if w.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                errln!(
                    "{} problem(s) in {} (shown on the page too)",
                    w.problems.len(),
                    results.display()
                );
                ExitCode::from(1)
            }
        }
        Err(e) => {
            errln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The datasets the `load.dataset` instances of a plan read, each once, in plan order.
fn plan_needs(p: &plan::Plan) -> Vec<data::need::Need> {
    let mut out = indexmap::IndexSet::new();
    for st in p.stages.iter().filter(|s| s.kind.name == "load.dataset") {
        for inst in &st.instances {
            if let Some(n) = stages::load::dataset::need(&st.params(inst)) {
                out.insert(n);
            }
        }
    }
    out.into_iter().collect()
}

/// The datasets a pipeline needs (not those it can do without) whose files are neither in the
/// cache nor in the mirror, verified. A pipeline that does not plan needs nothing here: the
/// report shows it as not run.
fn missing_datasets(file: &Path) -> Vec<String> {
    let Ok(reg) = data::Registry::current() else {
        return Vec::new();
    };
    let planned = spec::load(file)
        .map_err(|e| vec![e])
        .and_then(|f| plan::plan(&f, &plan::Overrides::default(), stages::registry()));
    let Ok(p) = planned else {
        return Vec::new();
    };
    let loc = data::Locations::current();
    let mut out: Vec<String> = Vec::new();
    for n in plan_needs(&p).iter().filter(|n| !n.optional) {
        if data::need::available(reg, loc, n).is_err() && !out.contains(&n.dataset) {
            out.push(n.dataset.clone());
        }
    }
    out
}

/// `dplab data fetch --pipelines PATH…`: every file the pipelines read, obtained once, then
/// what could not be and which pipelines that leaves without data.
fn fetch_for_pipelines(
    reg: &data::Registry,
    loc: &data::Locations,
    paths: &[PathBuf],
    common: &Common,
) -> ExitCode {
    use data::need::{files, obtain, Obtained};
    let list = match pipeline_files(paths) {
        Ok(f) => f,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut plans = Vec::new();
    let mut bad = false;
    for f in &list {
        match load_plan(f, common) {
            Ok(p) => plans.push(p),
            Err(errs) => {
                bad = true;
                for e in errs {
                    errln!("error: {e}");
                }
            }
        }
    }
    if bad {
        return ExitCode::from(2);
    }
    // What each (dataset, file) came to: fetched once however many pipelines read it.
    let mut got: indexmap::IndexMap<(String, String), Obtained> = indexmap::IndexMap::new();
    /// A dataset that could not be had: which files, the pipelines that need it, those that can
    /// do without.
    #[derive(Default)]
    struct Lacking {
        files: Vec<String>,
        needed_by: Vec<String>,
        optional_for: Vec<String>,
    }
    let mut lacking: indexmap::IndexMap<String, Lacking> = indexmap::IndexMap::new();
    let mut with_data = 0;
    for p in &plans {
        let needs = plan_needs(p);
        if !needs.is_empty() {
            with_data += 1;
        }
        for n in needs {
            let mut why = Vec::new();
            match files(reg, &n) {
                Err(e) => {
                    if !lacking.contains_key(&n.dataset) {
                        errln!("MISSING   {}: {e}", n.dataset);
                    }
                    why.push("no file can be read".to_string());
                }
                Ok(entries) => {
                    for f in entries {
                        let key = (n.dataset.clone(), f.name.clone());
                        let o = got.entry(key).or_insert_with(|| {
                            let o = obtain(&n.dataset, f, loc);
                            let what = format!("{}/{}", n.dataset, f.name);
                            match &o {
                                Obtained::Cached(p) => {
                                    out!("ok        {what} (in the cache, {})", p.display())
                                }
                                Obtained::Mirror(p) => {
                                    out!("ok        {what} (in the mirror, {})", p.display())
                                }
                                Obtained::Downloaded(p) => {
                                    out!("fetched   {what} → {} (sha256 verified)", p.display())
                                }
                                Obtained::Failed(m) => errln!("MISSING   {what}: {m}"),
                            }
                            o
                        });
                        if let Obtained::Failed(_) = o {
                            why.push(f.name.clone());
                        }
                    }
                }
            }
            if why.is_empty() {
                continue;
            }
            let entry = lacking.entry(n.dataset.clone()).or_default();
            for w in why {
                if !entry.files.contains(&w) {
                    entry.files.push(w);
                }
            }
            let who = if n.optional {
                &mut entry.optional_for
            } else {
                &mut entry.needed_by
            };
            if !who.contains(&p.name) {
                who.push(p.name.clone());
            }
        }
    }
    let required: Vec<&String> = lacking
        .values()
        .flat_map(|l| &l.needed_by)
        .collect::<indexmap::IndexSet<_>>()
        .into_iter()
        .collect();
    if lacking.is_empty() {
        out!(
            "data: every file the {} pipeline(s) read ({with_data} of them read datasets) is here and verified",
            plans.len()
        );
        return ExitCode::SUCCESS;
    }
    errln!("\ncould not be obtained (why: above):");
    for (dataset, l) in &lacking {
        let (need, optional) = (&l.needed_by, &l.optional_for);
        errln!("  {dataset}: {}", l.files.join(", "));
        if !need.is_empty() {
            errln!(
                "    needed by {}: skipped by `dplab run --skip-unavailable`, shown as \"data not available\" by `dplab report`",
                need.join(", ")
            );
        }
        if !optional.is_empty() {
            errln!(
                "    optional for {} (if_missing: empty): they run without it",
                optional.join(", ")
            );
        }
    }
    if required.is_empty() {
        errln!(
            "data: every file the {} pipeline(s) need is here and verified; only optional data is missing",
            plans.len()
        );
        return ExitCode::SUCCESS;
    }
    errln!(
        "data: {} of {with_data} pipeline(s) reading datasets lack data; set DPLAB_DATA_MIRROR (or --mirror) to a mirror, or give this machine internet access, then run this again",
        required.len(),
    );
    ExitCode::from(1)
}

/// `dplab data …`.
fn data_cmd(action: DataAction) -> ExitCode {
    let reg = match data::Registry::current() {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let loc = data::Locations::current();
    let human = |n: u64| {
        if n >= 1 << 20 {
            format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
        } else {
            format!("{:.1} KiB", n as f64 / 1024.0)
        }
    };
    let unknown: Vec<&String> = match &action {
        DataAction::Fetch { names, .. } | DataAction::Verify { names } => names
            .iter()
            .filter(|n| !reg.datasets.contains_key(n.as_str()))
            .collect(),
        DataAction::List => vec![],
    };
    if let Some(n) = unknown.first() {
        errln!(
            "error: {}",
            reg.dataset(n)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        );
        return ExitCode::from(2);
    }
    match action {
        DataAction::List => {
            out!(
                "cache: {}\nmirror: {}\n",
                loc.cache.display(),
                loc.mirror
                    .as_ref()
                    .map(|m| m.display().to_string())
                    .unwrap_or_else(|| "(none; set DPLAB_DATA_MIRROR)".into())
            );
            for (name, ds) in &reg.datasets {
                out!("{name} — {}", ds.title);
                out!("  licence: {}", ds.licence);
                if !ds.redistribution {
                    out!("  NOT REDISTRIBUTABLE: do not commit or publish these files or row-level outputs.");
                }
                for st in data::status(reg, loc, Some(name)) {
                    let (present, where_) = match &st.state {
                        data::FileState::Cached(p) => ("yes", format!("cache {}", p.display())),
                        data::FileState::Mirrored(p) => ("yes", format!("mirror {}", p.display())),
                        data::FileState::Missing => ("no ", "—".to_string()),
                        data::FileState::Bad(m) => ("BAD", m.clone()),
                    };
                    let size = st.size.map(human).unwrap_or_else(|| "size unknown".into());
                    out!("  [{present}] {:<40} {:>10}  {where_}", st.file, size);
                }
            }
            ExitCode::SUCCESS
        }
        DataAction::Fetch {
            pipelines, common, ..
        } if !pipelines.is_empty() => fetch_for_pipelines(reg, loc, &pipelines, &common),
        DataAction::Fetch {
            names,
            all,
            accept_unverified,
            common,
            ..
        } => {
            if common.profile.is_some() || !common.set.is_empty() {
                errln!("error: --profile and --set choose what pipelines read: give them with --pipelines PATH");
                return ExitCode::from(2);
            }
            if names.is_empty() && !all {
                errln!("error: name the datasets to fetch, give --all, or --pipelines PATH");
                return ExitCode::from(2);
            }
            let chosen: Vec<&String> = if all {
                reg.datasets.keys().collect()
            } else {
                names.iter().collect()
            };
            let mut failed = 0;
            for name in chosen {
                let ds = &reg.datasets[name.as_str()];
                for f in &ds.files {
                    match data::fetch(name, f, loc, accept_unverified) {
                        Ok(data::FetchOutcome::Present(p)) => out!("ok        {name}/{} (already in {})", f.name, p.display()),
                        Ok(data::FetchOutcome::Mirrored(p)) => out!("copied    {name}/{} from the mirror → {}", f.name, p.display()),
                        Ok(data::FetchOutcome::Downloaded { path, sha256, verified: true }) => {
                            out!("fetched   {name}/{} → {} (sha256 {sha256} verified)", f.name, path.display())
                        }
                        Ok(data::FetchOutcome::Downloaded { path, sha256, verified: false }) => out!(
                            "fetched   {name}/{} → {} UNVERIFIED: sha256 {sha256}; check it and record it in data/datasets.toml",
                            f.name,
                            path.display()
                        ),
                        Err(e) => {
                            failed += 1;
                            errln!("error: {e}");
                        }
                    }
                }
            }
            if failed > 0 {
                errln!("{failed} file(s) could not be fetched");
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        DataAction::Verify { names } => {
            let mut bad = 0;
            let mut ok = 0;
            for (name, ds) in &reg.datasets {
                if !names.is_empty() && !names.contains(name) {
                    continue;
                }
                for f in &ds.files {
                    let candidates = [Some(loc.cached(name, &f.name)), loc.mirrored(name, &f.name)];
                    for p in candidates.into_iter().flatten().filter(|p| p.is_file()) {
                        match data::check_file(f, &p) {
                            Ok(()) => {
                                ok += 1;
                                out!("ok   {}", p.display());
                            }
                            Err(e) => {
                                bad += 1;
                                out!("BAD  {e}");
                            }
                        }
                    }
                }
            }
            out!("{ok} file(s) verified, {bad} bad");
            if bad > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
