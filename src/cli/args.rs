//! What the command line is: clap's definitions of every command and flag, and the small
//! conversions from flags to what the engine takes (a store, limits, data locations).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use dplab::pipeline::{dryrun, store_at};
use dplab::{data, limits};

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
pub(crate) struct Cli {
    /// More log output (-v: debug, -vv: trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    /// `json`: `run` (and `--dry-run`), `validate` and `show` write one JSON event per line
    /// on stdout (`"format": 1`; the book's Python chapter lists them), human text on stderr.
    #[arg(long, value_enum, default_value_t = MessageFormat::Human, global = true)]
    pub(crate) message_format: MessageFormat,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How a command speaks (`--message-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MessageFormat {
    /// Text for people.
    Human,
    /// One JSON event per line on stdout, for programs.
    Json,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run pipelines (files, or directories searched for *.yaml).
    #[command(after_help = format!("Examples:\n  dplab run pipelines/\n  dplab run a.yaml b.yaml --profile ci --out /tmp/res\n  \
dplab run sweep.yaml --set 'eps={{from: 0.1, to: 2, step: 0.1}}' --set 'c=[1, 5]'\n\n\
Results go to OUT/<pipeline name>/: one <stage>.csv and .parquet per stored stage, figures, manifest.json.\n\
A failed pipeline does not stop the others (unless --fail-fast); failures are listed at the end.\n\
Exit codes: 0 success, 1 a run failed, 2 bad input.\n\n{WARNING}"))]
    Run(RunArgs),
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
    #[command(
        after_help = "Examples:\n  dplab list\n  dplab list mechanism.select\n  dplab list --markdown docs/src/kinds"
    )]
    List {
        /// Show only this kind.
        kind: Option<String>,
        /// Write the same text as Markdown into DIR instead: one page per kind
        /// (KIND.md) and index.md, the book's reference pages.
        #[arg(long, value_name = "DIR")]
        markdown: Option<PathBuf>,
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
    /// Write NAME.yaml: a commented pipeline of one's own that runs as it is (Laplace, analytic
    /// Gaussian and geometric noise on a histogram, their L1 and L∞ errors with 95% intervals,
    /// a figure and a table), to edit into your experiment.
    #[command(
        after_help = "Examples:\n  dplab new my-study && dplab run my-study.yaml && dplab report results\n  dplab new --external my-mech && dplab run --allow-exec my-mech.yaml   # my-mech/mechanism.py: Python + numpy"
    )]
    New {
        /// The pipeline's name (its results directory): letters, digits, `-`, `_`, `.`.
        name: String,
        /// Where to write NAME.yaml.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// With a mechanism of one's own: NAME/mechanism.py (Python with numpy, run by the
        /// `external` kind) and a pipeline that evaluates, draws and tabulates it.
        #[arg(long)]
        external: bool,
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
        /// The store [default: $DPLAB_STORE, else the nearest .dplab/store from the current
        /// directory upward, else .dplab/store here].
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
        /// The page's title (default: "Reproduction report" when an experiment names a paper,
        /// "Experiment report" otherwise).
        #[arg(long)]
        title: Option<String>,
        #[command(flatten)]
        loc: DataLoc,
    },
    /// Run pipelines on a Slurm cluster: an array job of N shards fills the store, then a merge
    /// job writes the results.
    #[command(after_help = AFTER_HELP)]
    Slurm(SlurmArgs),
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

/// `dplab run`'s options.
#[derive(Args)]
pub(crate) struct RunArgs {
    /// Pipeline files or directories.
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) common: Common,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(short, long)]
    pub(crate) jobs: Option<usize>,
    /// Results root directory.
    #[arg(short, long, default_value = "results")]
    pub(crate) out: PathBuf,
    /// Stop at the first failed pipeline.
    #[arg(long)]
    pub(crate) fail_fast: bool,
    /// Skip (with a warning, exit 0) pipelines whose dataset files are not on this machine.
    #[arg(long)]
    pub(crate) skip_unavailable: bool,
    /// Run only a share of the instances, into the store, and write no results: `I/N`
    /// (shard I of N, from 0), `auto` (a Slurm array task's SLURM_ARRAY_TASK_ID and
    /// SLURM_ARRAY_TASK_COUNT) or `auto/N` (index from SLURM_ARRAY_TASK_ID or
    /// JOB_COMPLETION_INDEX). Once every shard is done, a run without --shard on the same
    /// store runs only the stages that gather, and writes the results. Every shard and
    /// that run must be given the same pipelines, in the same order, with the same
    /// --profile and --set.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["no_store"])]
    pub(crate) shard: Option<String>,
    /// Compute N instances of stages that run programs (`kind: external`), chosen at random,
    /// a second time: each must give the same bytes, or it fails with the first difference
    /// (a program that is not deterministic given its seed).
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with_all = ["dry_run", "shard"])]
    pub(crate) verify: usize,
    /// Run only these stages (comma-separated) and what they read: part of a pipeline,
    /// without a second file. Every other stage keeps its outputs in the results directory —
    /// from the store when it has them, else as the earlier run left them, marked stale in
    /// the manifest when their inputs changed since. A pipeline with none of them is skipped.
    #[arg(
        long,
        value_name = "STAGE,…",
        value_delimiter = ',',
        conflicts_with = "shard"
    )]
    pub(crate) stages: Vec<String>,
    /// Stop a stage at its N-th failed instance (its other instances are not run, everything
    /// else is); `auto`: stop a stage whose first 5 instances all failed; `all`: never stop.
    /// Each stage's first failure is printed as it happens either way.
    #[arg(long, value_name = "N", default_value = "auto", value_parser = dplab::pipeline::failures::MaxFailures::parse)]
    pub(crate) max_failures: dplab::pipeline::failures::MaxFailures,
    #[command(flatten)]
    pub(crate) loc: DataLoc,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(flatten)]
    pub(crate) exec: ExecArgs,
}

/// Consent to run the programs a pipeline names (`kind: external` stages).
#[derive(Args)]
pub(crate) struct ExecArgs {
    /// Run the programs the pipelines' stages name (a pipeline with `kind: external` stages is
    /// code: without this, or DPLAB_ALLOW_EXEC=1, it is refused with the list of its commands).
    #[arg(long)]
    pub(crate) allow_exec: bool,
}

impl ExecArgs {
    /// Whether the user allowed programs to run: `--allow-exec`, or `DPLAB_ALLOW_EXEC=1`.
    pub(crate) fn allowed(&self) -> bool {
        self.allow_exec || std::env::var_os("DPLAB_ALLOW_EXEC").is_some_and(|v| v == "1")
    }
}

#[derive(Subcommand)]
pub(crate) enum StoreAction {
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
pub(crate) enum DataAction {
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
pub(crate) struct StoreArgs {
    /// The instance store: every finished stage instance is kept there, and later runs (of any
    /// pipeline) reuse it instead of computing it again [default: $DPLAB_STORE, else the
    /// nearest .dplab/store from the pipeline file's folder upward, else from the current
    /// directory upward, else .dplab/store here].
    #[arg(long, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,
    /// Neither read nor write the store: compute everything.
    #[arg(long)]
    pub(crate) no_store: bool,
    /// Recompute what the store has: every stage (`--force`), or the stages named
    /// (`--force=plot,table`).
    #[arg(long, value_name = "STAGE", num_args = 0..=1, require_equals = true, default_missing_value = "", value_delimiter = ',')]
    pub(crate) force: Option<Vec<String>>,
    /// Run nothing: per stage, how many instances would run and how many the store has, and
    /// why each would run.
    #[arg(short = 'n', long)]
    pub(crate) dry_run: bool,
}

impl StoreArgs {
    /// The store of a command that reads `pipeline` (`None`: one that reads no pipeline),
    /// found by the one rule of [`store_at`]; `None` with `--no-store`.
    pub(crate) fn store(&self, pipeline: Option<&std::path::Path>) -> Option<store_at::Found> {
        if self.no_store {
            return None;
        }
        Some(find_store(self.store.as_deref(), pipeline))
    }

    pub(crate) fn force(&self) -> dryrun::Force {
        match &self.force {
            None => dryrun::Force::Nothing,
            Some(v) if v.iter().all(|s| s.is_empty()) => dryrun::Force::All,
            Some(v) => dryrun::Force::Stages(v.iter().filter(|s| !s.is_empty()).cloned().collect()),
        }
    }
}

/// The store for `--store` (`flag`) and `pipeline`, by the rule of [`store_at`].
pub(crate) fn find_store(
    flag: Option<&std::path::Path>,
    pipeline: Option<&std::path::Path>,
) -> store_at::Found {
    let env = std::env::var_os("DPLAB_STORE").map(PathBuf::from);
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    store_at::find(flag, env.as_deref(), pipeline, &here)
}

#[derive(Args)]
pub(crate) struct DataLoc {
    /// Offline mirror laid out as <dataset>/<file> (overrides DPLAB_DATA_MIRROR).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) mirror: Option<PathBuf>,
    /// Download cache (overrides DPLAB_DATA_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
}

impl DataLoc {
    pub(crate) fn install(&self) {
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
pub(crate) struct Common {
    /// Apply the named profile of each pipeline (e.g. `ci`: smaller grids).
    #[arg(short, long)]
    pub(crate) profile: Option<String>,
    /// Override, after the profile: an axis (AXIS=VALUES, VALUES in YAML: eps=[0.1,1] or
    /// eps={from: 0.1, to: 1, step: 0.1}), any stage parameter (STAGE.PARAM=VALUE, a YAML
    /// value; nested keys with dots: noisy.samples=500, table.labels.eps=ε), or the seed
    /// (seed=N). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,
    /// Sweep a stage parameter without editing the file: STAGE.PARAM=VALUES adds an axis named
    /// after the parameter with VALUES (a list or grid, in YAML) and the parameter reads it
    /// (noisy.samples='[100, 1000]'). Its stage and the stages that read it get new seeds.
    /// Repeatable; the same as --set '+STAGE.PARAM=VALUES'.
    #[arg(long = "sweep", value_name = "STAGE.PARAM=VALUES")]
    pub(crate) sweep: Vec<String>,
    /// Let pipelines read files under DIR too (by default a pipeline reads only inside its own directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) allow_read: Vec<PathBuf>,
    /// Most stage instances in one pipeline.
    #[arg(long, value_name = "N", default_value_t = limits::Limits::DEFAULT.instances, value_parser = count)]
    pub(crate) max_instances: u64,
    /// Most random draws (samples, trials) one stage instance may make.
    #[arg(long, value_name = "N", default_value_t = limits::Limits::DEFAULT.draws, value_parser = count)]
    pub(crate) max_draws: u64,
    /// Most elements of one matrix, grid or table a stage instance may build.
    #[arg(long, value_name = "N", default_value_t = limits::Limits::DEFAULT.cells, value_parser = count)]
    pub(crate) max_cells: u64,
}

impl Common {
    /// The `--set` arguments, then the `--sweep`s as the `--set +…` they stand for: what the
    /// planner, the manifest and the jobs of `dplab slurm` are given.
    pub(crate) fn set_args(&self) -> Vec<String> {
        let mut all = self.set.clone();
        all.extend(self.sweep.iter().map(|s| format!("+{s}")));
        all
    }

    pub(crate) fn install_limits(&self) {
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
pub(crate) const MAX_JOBS: usize = 1024;

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum GraphFormat {
    Dot,
    Mermaid,
}

/// `dplab slurm`'s extended help.
pub(crate) const AFTER_HELP: &str = "\
Examples:
  dplab slurm pipelines/ --shards 8 --cpus-per-task 4 --time 2:00:00 --partition short \\
      --store /shared/me/dplab-store --out /shared/me/results
  dplab slurm sweep.yaml --shards 4 --profile ci --dry-run     write and print the scripts only
  dplab slurm sweep.yaml --shards 4 --wait                      block until the merge job ends

Two jobs: an array of N tasks, task i running `dplab run PIPELINES --shard auto/N` (its 1/N share
of the instances, into the store), and a merge job that starts only when every task succeeded
(--dependency=afterok, --kill-on-invalid-dep=yes) and runs a plain `dplab run`: it takes everything
from the store, runs the gathers and writes OUT/<pipeline>/. Every job runs with --cpus-per-task
CPUs and as many worker threads. Results are identical to a local run for any N.

The dplab binary, the pipeline files, the store and OUT must be on a file system every node sees
(the scripts name them by absolute path): not /tmp or a node's local disk.

Files: STORE/slurm/<UTC time>/ holds shards.sbatch and merge.sbatch (plain scripts to read, edit or
submit by hand), logs/ (shard-<array job>_<task>.out, merge-<job>.out), status/ (each job's exit
code) and jobs (the job ids).

A failed or cancelled shard loses nothing that finished: submit the same command again and only
the instances missing from the store run.

Exit codes: 0 submitted (with --wait: every job succeeded); 1 the merge job failed (--wait), or
Slurm failed us: the merge could not be submitted after the array was, squeue stopped answering;
2 bad input, nothing submitted (including sbatch refusing the array job); 3 with --wait: a shard
failed or was cancelled, so the merge did not run.";

/// `dplab slurm`'s options.
#[derive(Args)]
pub(crate) struct SlurmArgs {
    /// Pipeline files or directories.
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    /// Array tasks: each runs a deterministic 1/N share of the instances.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=dplab::pipeline::shard::MAX_SHARDS as i64))]
    pub(crate) shards: u32,
    /// Partition of both jobs (sbatch --partition) [default: the cluster's].
    #[arg(long, value_name = "P")]
    pub(crate) partition: Option<String>,
    /// Time limit of each job in Slurm's form: minutes, H:MM:SS, D-HH (sbatch --time).
    #[arg(long, value_name = "T")]
    pub(crate) time: Option<String>,
    /// CPUs of each job; dplab runs as many worker threads (`--jobs`).
    #[arg(long, value_name = "C", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=MAX_JOBS as i64))]
    pub(crate) cpus_per_task: u32,
    /// Memory of each job, e.g. 4G (sbatch --mem).
    #[arg(long, value_name = "M")]
    pub(crate) mem: Option<String>,
    /// Account charged for both jobs (sbatch --account).
    #[arg(long, value_name = "A")]
    pub(crate) account: Option<String>,
    /// One more sbatch option for both jobs, written as one word: --sbatch-arg=--qos=long
    /// (repeatable).
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub(crate) sbatch_args: Vec<String>,
    /// The instance store the shards fill and the merge reads; the scripts and logs go under
    /// STORE/slurm/ [default: as `dplab run` finds it for the first pipeline]. Must be on a file system every
    /// node sees.
    #[arg(long, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,
    /// Results root the merge job writes (OUT/<pipeline>/).
    #[arg(short, long, default_value = "results")]
    pub(crate) out: PathBuf,
    /// Block until the merge job and every shard have ended; the exit code says how they went.
    /// Interrupting stops the waiting, not the jobs.
    #[arg(long, conflicts_with = "dry_run")]
    pub(crate) wait: bool,
    /// Seconds between two looks at the queue with --wait (busy clusters ask for a minute).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = seconds)]
    pub(crate) poll: Duration,
    /// Write the scripts and print them; submit nothing (sbatch need not be installed).
    #[arg(short = 'n', long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) loc: DataLoc,
    #[command(flatten)]
    pub(crate) exec: ExecArgs,
}

fn seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.1..=3600.0).contains(&x) => Ok(Duration::from_secs_f64(x)),
        _ => Err(format!("`{s}` is not a number of seconds from 0.1 to 3600")),
    }
}
