//! The commands, one module each. `main.rs` holds what the command line is (clap's
//! definitions), dispatches to these, and turns their [`crate::Outcome`] into the exit status.

pub(crate) mod compare;
pub(crate) mod data;
pub(crate) mod docs;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod slurm;
pub(crate) mod store;
