//! The `dplab` binary: the allocator, where logs go, and the command line of `src/cli`.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

mod cli;

/// mimalloc instead of glibc's malloc: a sweep of 10⁵ small instances spent a third of its
/// time growing glibc's per-thread arenas (page faults and mprotect) and in its free lists.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let default = match (cli.quiet, cli.verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
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
    cli::dispatch(cli)
}
