//! What dplab prints: lines on stdout ([`out!`], [`out_raw!`]) and on stderr ([`errln!`]),
//! scrubbed of control characters, and what happens when the reader goes away.
//!
//! Declared first in `cli/mod.rs` with `#[macro_use]`, so every command file has the macros.

use std::sync::atomic::{AtomicBool, Ordering};

/// A line on stdout. When the reader has gone (`dplab list | head -1`), dplab ends quietly
/// with exit 0, as ripgrep does, instead of panicking on the broken pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::out::emit(format_args!($($arg)*), true) };
}
/// [`out!`] without the newline.
macro_rules! out_raw {
    ($($arg:tt)*) => { $crate::cli::out::emit(format_args!($($arg)*), false) };
}
/// A line on stderr; a closed stderr is ignored (there is nobody left to tell).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = $crate::cli::out::scrub(&format!($($arg)*)).into_owned();
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }};
}

/// Set once stdout is found closed: later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Whether this command's exit status is a verdict (validate, run, compare): a reader that
/// stops reading early (`dplab validate … | head -1`) must not turn a failure into exit 0.
/// Commands whose only product is their output (list, data list, graph) end at once, with
/// exit 0, as ripgrep does.
static STATUS_IS_VERDICT: AtomicBool = AtomicBool::new(false);

/// Says, before the command runs, whether its exit status is a verdict (see
/// [`STATUS_IS_VERDICT`]).
pub(crate) fn status_is_verdict(verdict: bool) {
    STATUS_IS_VERDICT.store(verdict, Ordering::Relaxed);
}

pub(crate) use dplab::text::scrub;

/// What [`out!`] and [`out_raw!`] expand to.
// A closed or failing stdout ends the command here, wherever it was printing: the one exit
// that does not go through `exit_status` (clippy.toml's house rules deny `process::exit`).
#[expect(clippy::exit)]
pub(crate) fn emit(args: std::fmt::Arguments, newline: bool) {
    use std::io::Write as _;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let text = args.to_string();
    // With `--message-format json` stdout holds the events alone: text goes to stderr.
    if crate::cli::events::on() {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(scrub(&text).as_bytes());
        if newline {
            let _ = e.write_all(b"\n");
        }
        return;
    }
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
