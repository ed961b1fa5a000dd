//! The pipeline engine: reads a spec, expands axes into stage instances, runs them and
//! stores frames. It knows nothing about privacy: it defines the contract a stage kind
//! implements ([`crate::kind`]) and is handed the registry of kinds by its caller.

pub mod claim;
pub mod compare;
pub mod dryrun;
pub mod exec;
pub mod files;
pub mod graph;
pub mod instance_store;
pub mod key;
pub mod locate;
pub mod plan;
pub mod record;
pub mod results;
pub mod schema;
pub mod seed;
pub mod shard;
pub mod show;
pub mod spec;
