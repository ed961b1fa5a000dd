//! dplab's integration tests: one binary, one module per subject (as ripgrep and just keep
//! theirs). Each former `tests/*.rs` file linked dplab and polars on its own; one binary links
//! them once. Run one subject with `cargo test --release --test it cli::` (a name filter).
//!
//! The package `tests/schema-check` stays apart: its validator's dependencies would change the
//! features of dplab's own test build.

// Tests read the files they wrote and the repository's own sources and goldens (the rule of
// clippy.toml is for paths a user names, see src/regular.rs), and may print what they measured.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

mod common;
mod hay;

mod audit;
mod cli;
mod contain;
mod data;
mod derived;
mod docs;
mod error_metrics;
mod events;
mod experiment;
mod external;
mod figures;
mod golden_versions;
mod layers;
mod limits;
mod mechanism_docs;
mod mutate;
mod nested;
mod provenance;
mod report;
mod resume;
mod safety;
mod shard;
mod show;
mod slurm;
mod store;
mod together;
mod trigonometric;
mod workday;
mod worker;
