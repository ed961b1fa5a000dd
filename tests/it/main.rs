//! dplab's integration tests: one binary, one module per subject (as ripgrep and just keep
//! theirs). Each former `tests/*.rs` file linked dplab and polars on its own; one binary links
//! them once. Run one subject with `cargo test --release --test it cli::` (a name filter).
//!
//! The package `tests/schema-check` stays apart: its validator's dependencies would change the
//! features of dplab's own test build.

mod common;

mod cli;
mod data;
mod figures;
mod golden_versions;
mod layers;
mod limits;
mod mechanism_docs;
mod mutate;
mod report;
mod resume;
mod safety;
mod shard;
mod show;
mod slurm;
mod store;
mod trigonometric;
