//! Everything that can go wrong when dplab runs a researcher's program, as one enum whose
//! messages say what to do about it. The kind wraps them with the stage's location; the
//! engine then stores nothing for that instance and goes on with the others.
//!
//! What a program printed, named or wrote reaches these messages, and through them the
//! terminal: its control characters are escaped here (`text::scrub`), once for every way out.

use std::fmt;

use crate::text::scrub;

/// Why an external program did not give an instance its result.
#[derive(Debug)]
pub(crate) enum ProgramError {
    /// `command[0]` is neither on the program's `PATH` nor an existing path.
    NotFound {
        program: String,
        /// The `PATH` searched (the program's, not dplab's), or `None` for a path with a `/`.
        path: Option<String>,
    },
    /// It exists but cannot be started (no execute permission, a directory, a script whose
    /// `#!` line names a missing interpreter).
    NotExecutable { program: String, reason: String },
    /// Preparing its working directory or its inputs failed (a full disk, an unwritable
    /// temporary directory): dplab's side, not the program's.
    Setup(String),
    /// It ended with a non-zero exit status.
    Exit {
        command: String,
        code: i32,
        tail: String,
    },
    /// It was killed by a signal (not by dplab's timeout).
    Signal {
        command: String,
        signal: i32,
        tail: String,
    },
    /// It ran past its timeout; its whole process group was killed.
    Timeout {
        command: String,
        seconds: f64,
        tail: String,
    },
    /// A worker (`worker: true`) answered that the instance failed; it serves the next one.
    Served {
        command: String,
        /// Its one-line reason (the helper: the exception).
        error: String,
        tail: String,
    },
    /// A worker exited while serving an instance, or broke the worker protocol; it is
    /// replaced for the next instance.
    Worker {
        command: String,
        problem: String,
        tail: String,
    },
    /// A stage's probe ran past its limit, which is fixed (`PROBE_TIMEOUT`), unlike a
    /// program's `timeout`; its whole process group was killed.
    ProbeTimeout {
        command: String,
        seconds: f64,
        tail: String,
    },
    /// It exited 0 without writing `out.parquet` or `out.csv`.
    NoFrame {
        /// What its output directory held instead: the first names of it.
        found: Vec<String>,
        /// Whether it held more than `found`.
        more: bool,
        tail: String,
    },
    /// It wrote more than one of `out.parquet`, `out.csv` and `out.cols`.
    BothFrames,
    /// Its frame file does not parse.
    MalformedFrame { file: String, message: String },
    /// Its frame's columns are not the ones its stage declares in `columns:` (axis columns
    /// aside: the engine adds those).
    Columns {
        /// What the program wrote, in its order.
        wrote: Vec<String>,
        /// What `columns:` says.
        declared: Vec<String>,
        /// Declared but not written.
        missing: Vec<String>,
        /// Written but not declared.
        extra: Vec<String>,
    },
    /// Its frame or artifacts exceed a bound.
    TooLarge(String),
    /// A file it left is not a plain file dplab may read (a symbolic link, a directory, a
    /// FIFO, a hard link), or its output directory is gone or replaced.
    BadFile { file: String, reason: String },
    /// An artifact's name is not a plain file name dplab can give to a result file.
    BadArtifactName { name: String },
}

/// The last lines of the program's output, or a note that it printed nothing.
fn tail_text(tail: &str) -> String {
    if tail.trim().is_empty() {
        " (it printed nothing)".into()
    } else {
        format!("; the last lines of its output:\n{}", scrub(tail))
    }
}

/// Names a program chose, for a message: escaped, and at most [`LISTED`] of them.
fn listed(names: &[String]) -> String {
    let mut out = names
        .iter()
        .take(LISTED)
        .map(|n| scrub(n))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LISTED {
        out.push_str(&format!(", … and {} more", names.len() - LISTED));
    }
    out
}

/// The most names of columns or files one list in a message shows (a program may write
/// 10⁵ columns).
const LISTED: usize = 20;

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ProgramError::*;
        match self {
            NotFound {
                program,
                path: Some(path),
            } => write!(
                f,
                "command not found: `{program}` (PATH={path}); give its full path, or list PATH's directories that hold it"
            ),
            NotFound {
                program,
                path: None,
            } => write!(f, "command not found: `{program}` (no such file)"),
            NotExecutable { program, reason } => {
                write!(f, "`{program}` cannot be started: {reason}")
            }
            Setup(message) => write!(f, "preparing the program's working directory: {message}"),
            Exit {
                command,
                code,
                tail,
            } => write!(
                f,
                "`{command}` exited with status {code}{}",
                tail_text(tail)
            ),
            Signal {
                command,
                signal,
                tail,
            } => {
                let name = signal_name(*signal);
                let hint = if *signal == libc::SIGKILL {
                    " — often the out-of-memory killer"
                } else {
                    ""
                };
                write!(
                    f,
                    "`{command}` was killed by signal {signal} ({name}{hint}){}",
                    tail_text(tail)
                )
            }
            Timeout {
                command,
                seconds,
                tail,
            } => write!(
                f,
                "`{command}` timed out after {seconds} s (its process group was killed); raise `timeout` if it needs longer{}",
                tail_text(tail)
            ),
            Served {
                command,
                error,
                tail,
            } => write!(
                f,
                "`{command}` (a worker) failed this instance: {}{}",
                scrub(error),
                tail_text(tail)
            ),
            Worker {
                command,
                problem,
                tail,
            } => write!(
                f,
                "`{command}` (a worker) did not serve this instance: {}; a new worker serves the next one{}",
                scrub(problem),
                tail_text(tail)
            ),
            ProbeTimeout {
                command,
                seconds,
                tail,
            } => write!(
                f,
                "`{command}` did not finish within {seconds} s, the fixed limit of a probe (its process group was killed): a probe only prints a version and returns, such as [python3, --version]; probe something quicker{}",
                tail_text(tail)
            ),
            NoFrame { found, more, tail } => {
                write!(
                    f,
                    "the program exited 0 but wrote no frame: it must write out.parquet, out.csv or out.cols in its output directory (`output.parquet` / `output.csv` / `output.cols` in dplab.json)"
                )?;
                if !found.is_empty() {
                    write!(f, "; that directory holds: {}", listed(found))?;
                    if *more {
                        f.write_str(", …")?;
                    }
                }
                f.write_str(&tail_text(tail))
            }
            BothFrames => f.write_str(
                "the program wrote more than one of out.parquet, out.csv and out.cols: write exactly one of them",
            ),
            MalformedFrame { file, message } => write!(
                f,
                "the program's frame {file} cannot be read: {}",
                scrub(message)
            ),
            Columns {
                wrote,
                declared,
                missing,
                extra,
            } => {
                write!(
                    f,
                    "the program wrote columns [{}] but the stage declares `columns: [{}]`: ",
                    listed(wrote),
                    listed(declared)
                )?;
                match (missing.is_empty(), extra.is_empty()) {
                    (true, true) => f.write_str(
                        "the same columns in another order; the program must write them in the declared order",
                    ),
                    (false, true) => write!(f, "missing {}", listed(missing)),
                    (true, false) => write!(f, "not declared {}", listed(extra)),
                    (false, false) => write!(
                        f,
                        "missing {}, not declared {}",
                        listed(missing),
                        listed(extra)
                    ),
                }?;
                f.write_str(" (the program is wrong, or its stage's `columns:` is)")
            }
            TooLarge(message) => f.write_str(message),
            BadFile { file, reason } => write!(
                f,
                "the program left {file}, {reason}: dplab reads only plain files its program wrote inside its working directory"
            ),
            BadArtifactName { name } => write!(
                f,
                "artifact {name:?}: an artifact's name is a plain file name of letters, digits, `.`, `_` and `-` (at most 100, not starting with `.` or `-`), such as figure.svg"
            ),
        }
    }
}

impl std::error::Error for ProgramError {}

/// The usual name of a signal number, for messages.
pub(crate) fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => "a signal",
    }
}
