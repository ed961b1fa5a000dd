//! The sandbox a researcher's program runs in: whatever language it is written in, whatever
//! it does, dplab hands it one instance as files and takes one frame back, and nothing it
//! starts outlives its instance.
//!
//! - [`runner`] does one instance from start to end ([`run`]): [`protocol`] prepares its
//!   private working directory and reads the results back (through `dir.rs`, which follows no
//!   link the program planted), [`process`] runs the program (argv, minimal environment, own
//!   process group, timeout, bounded log, nothing left running), [`contain`] keeps what it
//!   starts — a daemon in a session of its own included — from outliving it.
//! - [`worker`] serves instances one after another to a program started once per thread
//!   (worker protocol 1), each instance still in its own directory with its own seed.
//! - [`ProgramError`] is every way a program can fail, told so a researcher knows what to do.
//!
//! The room knows nothing of stages, pipelines or privacy (`tests/it/layers.rs` holds it to
//! that): the `external` kind binds it to a stage, and the command line stops its programs on
//! a signal ([`stop_programs`]) without going through a kind.

mod columns;
pub mod contain;
mod dir;
mod error;
pub mod process;
pub mod protocol;
mod runner;
pub mod worker;

pub(crate) use error::ProgramError;
pub use process::stop_programs;
pub(crate) use protocol::{Bounds, PROTOCOL, PYTHON_HELPER};
pub(crate) use runner::{run, run_probe, Instance, Program};

#[cfg(test)]
// Tests read the files their programs wrote.
#[allow(clippy::disallowed_methods)]
mod tests;
