//! The command line, the top layer: it drives the library (the engine, the stages, the data
//! registry, the report) and nothing imports it. `main.rs` sets up the process and calls
//! [`dispatch`]; everything else is here, each file with one job:
//!
//! - `args.rs`: what the command line is (clap's definitions of every command and flag);
//! - `out.rs`: how it prints (`out!`, `out_raw!`, `errln!`), and a reader that went away;
//! - `exit.rs`: how a command ends ([`exit::Outcome`]) and the one outcome → exit-status map;
//! - `load.rs`: finding pipeline files, reading each once, planning them;
//! - `progress.rs`: how a run's progress is drawn (the engine only counts);
//! - one file per command (`run.rs` runs and validates, `show.rs` shows and graphs, `docs.rs`
//!   lists kinds and prints the schema, completions and manual, and `compare`, `data`,
//!   `report`, `slurm`, `store`, `new`).

// First: the output macros are visible only in the modules declared after them.
#[macro_use]
mod out;

mod args;
mod compare;
mod data;
mod docs;
mod events;
mod exit;
mod load;
mod new;
mod progress;
mod report;
mod run;
mod show;
mod slurm;
mod store;
mod verdicts;

use std::process::ExitCode;

pub(crate) use args::Cli;
use args::{Command, StoreArgs};
use exit::Failure;

/// Runs the command `cli` names, and turns how it went into the exit status.
pub(crate) fn dispatch(cli: Cli) -> ExitCode {
    if cli.message_format == args::MessageFormat::Json {
        // Only these speak in events; any other command's output would go to stderr.
        if !matches!(
            cli.command,
            Command::Run(_)
                | Command::Validate { .. }
                | Command::Show {
                    instances: false,
                    ..
                }
        ) {
            return exit::exit_status(Err(Failure::BadInput(
                "--message-format json is for `run` (and its --dry-run), `validate` and `show` (without --instances)".into(),
            )));
        }
        events::turn_on();
    }
    raise_open_file_limit();
    end_programs_on_signals();
    out::status_is_verdict(matches!(
        cli.command,
        Command::Run(_)
            | Command::Validate { .. }
            | Command::Compare { .. }
            | Command::Report { .. }
            | Command::Slurm(_)
    ));
    let outcome = match cli.command {
        Command::Run(args) => run::run(&args, cli.quiet),
        Command::Store { action, store } => store::store_cmd(
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
            data::data_cmd(action)
        }
        Command::Validate { paths, common } => run::validate(&paths, &common),
        Command::Report {
            results,
            pipelines,
            title,
            loc,
        } => {
            loc.install();
            report::report_cmd(&results, &pipelines, title.as_deref())
        }
        Command::Slurm(args) => slurm::main(args),
        Command::List { kind, markdown } => match markdown {
            Some(dir) => docs::list_markdown(kind.as_deref(), &dir),
            None => docs::list(kind.as_deref()),
        },
        Command::New {
            name,
            dir,
            external,
        } => new::new(&name, &dir, external),
        Command::Schema => docs::schema(),
        Command::Completions { shell } => docs::completions(shell),
        Command::Man { dir } => docs::man(dir.as_deref()),
        Command::Show {
            path,
            instances,
            common,
        } => show::show_cmd(&path, instances, &common),
        Command::Graph {
            path,
            format,
            common,
        } => show::graph_cmd(&path, format, &common),
        Command::Compare {
            a,
            b,
            rtol,
            atol,
            allow_missing,
        } => match dplab::pipeline::compare::Tolerance::new(rtol, atol) {
            Ok(tol) => compare::compare_cmd(&a, &b, tol, allow_missing),
            Err(e) => Err(Failure::BadInput(format!("{e}"))),
        },
    };
    // A signal is being handled (its programs killed, their directories being removed): the
    // process ends of that signal, from the handling thread, not with the run's status.
    if dplab::program::process::stopping() {
        loop {
            std::thread::park();
        }
    }
    exit::exit_status(outcome)
}

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

/// Ctrl-C, SIGTERM or SIGHUP: first end the programs external stages started (they run in
/// process groups of their own, out of the terminal's reach), then die of the signal as
/// before. What dplab had stored stays stored: the store survives a kill at any moment.
fn end_programs_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            // What the interrupt leaves, counted before the programs are stopped (a SIGTERM
            // that printed nothing left the user guessing); no instance starts from here on.
            let left = dplab::pipeline::exec::interrupted();
            dplab::program::stop_programs();
            errln!("{left}");
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            // Only if dying of the signal did not happen: the shell's convention for it.
            #[expect(
                clippy::exit,
                reason = "a signal ends the process from its own thread: no outcome to return"
            )]
            std::process::exit(128 + signal);
        }
    });
}
