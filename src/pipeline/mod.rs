//! The pipeline engine: reads a spec, expands axes into stage instances, runs them and
//! stores frames. It knows nothing about privacy: stage kinds come from
//! [`crate::stages::registry`].

pub mod compare;
pub mod exec;
pub mod graph;
pub mod locate;
pub mod plan;
pub mod seed;
pub mod spec;
pub mod store;
