//! The pipeline engine: reads a spec, expands axes into stage instances, runs them and
//! stores frames. It knows nothing about privacy: it defines the contract a stage kind
//! implements ([`crate::kind`]) and is handed the registry of kinds by its caller.
//!
//! # Its rooms, in the order a run goes through them
//! 1. [`spec`] reads the YAML file into its typed form; [`locate`] keeps where every key and
//!    value sits, so any later error names file:line:col.
//! 2. [`plan`] turns the file (+ profile, `--set`) into a [`plan::Plan`]: stages in
//!    topological order, each with its instances. A phase of planning goes in the file of
//!    `plan/` named for it (`planner.rs` for a phase of the whole file, `stage.rs` for one
//!    stage). Planning reads the files parameters name through [`files`], derives every seed
//!    with [`seed`] and every store key with [`key`].
//! 3. What a plan is shown as, without running it: [`dryrun`] (`--dry-run`: what would run
//!    and why), [`show`], [`graph`], [`schema`].
//! 4. [`exec`] runs the instances in parallel as their inputs become ready (telling
//!    [`failures`] each failure as it happens, ticking [`progress`]), each taken from
//!    or put into the [`instance_store`] (content-addressed by [`key::Key`], found where
//!    [`store_at`] says); [`claim`] keeps
//!    concurrent shards from computing one instance twice, [`shard`] deals a plan's instances
//!    out to N processes.
//! 5. [`results`] writes the results directory (frames, artifacts, manifest) atomically, and
//!    [`record`] keeps the run record in the store that the next `--dry-run` compares with.
//! 6. [`compare`] holds two results directories against each other.
//!
//! Imports run down this list and never back up (no file imports one that imports it): the
//! key, the store and the record are below the executor, and each can be read and tested
//! without it. A new store feature goes in `instance_store.rs` (or a file beside it that it
//! imports); something every instance's key must cover goes in [`key::KeyParts`].

pub mod claim;
pub mod compare;
pub mod dryrun;
pub mod exec;
pub mod failures;
pub mod files;
pub mod graph;
pub mod instance_store;
pub mod key;
pub mod locate;
pub mod manifest;
pub mod plan;
pub mod progress;
pub mod provenance;
pub mod record;
pub mod results;
pub mod schema;
pub mod seed;
pub mod shard;
pub mod show;
pub mod spec;
pub mod store_at;
pub mod verify;
