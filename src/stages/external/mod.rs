//! External programs as stages: a researcher's program, in any language, run once per
//! instance under the hand-off protocol of [`protocol`] (version 1), with the instance's
//! parameters, axis values, seed and input frames, and its frame and artifacts read back.
//!
//! [`run`] does one instance: [`protocol`] prepares the working directory and reads the
//! results back (through [`dir`], which follows no link the program planted), [`process`]
//! runs the program (argv, minimal environment, own process group, timeout, bounded log,
//! nothing left running). The `external` stage kind builds on it.

mod dir;
mod error;
pub mod process;
pub mod protocol;
mod runner;

pub use error::ExternalError;
pub use process::{check_pass_env, kill_running, Log};
pub use protocol::{Bounds, ProgramArtifact, PROTOCOL, PYTHON_HELPER};
pub use runner::{run, Instance, Produced, Program};

#[cfg(test)]
mod tests;
