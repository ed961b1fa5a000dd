//! The `dplab` command line: parses arguments and hands over to the pipeline engine.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Parser, Subcommand};
use dplab::pipeline::{compare, graph};
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

mod cli;

use cli::{
    compare::compare_cmd,
    data::data_cmd,
    docs::{list, man},
    report::report_cmd,
    run::{load_plan, run, spec_failure, validate},
    slurm,
    store::store_cmd,
};

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
    /// Print the JSON Schema of a pipeline file (every kind's parameters, their types, ranges
    /// and docs), for editors and validators.
    #[command(after_help = "Examples:\n  dplab schema > dplab.schema.json
  then, first line of a pipeline file (VS Code, Neovim, … with yaml-language-server):\n  # yaml-language-server: $schema=../dplab.schema.json")]
    Schema,
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
        /// Pipeline files or directories: every experiment they define gets a section (several
        /// after one flag, or the flag repeated).
        #[arg(long, value_name = "PATH", num_args = 1..)]
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
        /// The files these pipelines read (files or directories searched for *.yaml; several
        /// after one flag, or the flag repeated).
        #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with_all = ["names", "all", "accept_unverified"])]
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
    fn store(&self) -> Option<dplab::pipeline::instance_store::InstanceStore> {
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
        Some(dplab::pipeline::instance_store::InstanceStore::new(root))
    }

    fn force(&self) -> dplab::pipeline::dryrun::Force {
        match &self.force {
            None => dplab::pipeline::dryrun::Force::Nothing,
            Some(v) if v.iter().all(|s| s.is_empty()) => dplab::pipeline::dryrun::Force::All,
            Some(v) => dplab::pipeline::dryrun::Force::Stages(
                v.iter().filter(|s| !s.is_empty()).cloned().collect(),
            ),
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

/// Why a command failed. Its type decides the exit status, in [`exit_status`] and nowhere
/// else: 2 when what the user gave is wrong, 1 when the work failed.
#[derive(Debug)]
enum Failure {
    /// A pipeline file, a flag, a path or a name the user gave is wrong: exit 2.
    BadInput(String),
    /// The work failed (a stage, a comparison, a download, a write): exit 1.
    Failed(String),
    /// A Slurm shard job failed (`dplab slurm --wait`): exit 3, so a script can tell it
    /// from a failed merge.
    ShardFailed(String),
}

/// What a command returns; the message of a failure is printed by [`exit_status`] (empty when
/// the command printed its errors as it went, one per pipeline or file).
type Outcome = Result<(), Failure>;

/// The one place where an outcome becomes an exit status.
fn exit_status(outcome: Outcome) -> ExitCode {
    let (code, message) = match outcome {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::BadInput(m)) => (2, m),
        Err(Failure::Failed(m)) => (1, m),
        Err(Failure::ShardFailed(m)) => (3, m),
    };
    if !message.is_empty() {
        errln!("error: {message}");
    }
    ExitCode::from(code)
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
    let outcome = match cli.command {
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
        Command::Schema => {
            let schema = dplab::pipeline::schema::pipeline_schema(stages::registry::all());
            out!(
                "{}",
                serde_json::to_string_pretty(&schema).expect("a JSON value prints")
            );
            Ok(())
        }
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "dplab", &mut std::io::stdout());
            Ok(())
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
                        Err(Failure::Failed(format!("writing the instances: {e}")))
                    }
                    _ => Ok(()),
                }
            }
            Ok(p) => {
                out_raw!("{}", dplab::pipeline::show::composed(&p));
                Ok(())
            }
            Err(errs) => spec_failure(&errs),
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
                Ok(())
            }
            Err(errs) => spec_failure(&errs),
        },
        Command::Compare {
            a,
            b,
            rtol,
            atol,
            allow_missing,
        } => match compare::Tolerance::new(rtol, atol) {
            Ok(tol) => compare_cmd(&a, &b, tol, allow_missing),
            Err(e) => Err(Failure::BadInput(format!("{e}"))),
        },
    };
    exit_status(outcome)
}
