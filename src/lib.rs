//! dplab: reproducible differential-privacy experiments as declarative YAML pipelines.
//!
//! Three layers, one direction: the CLI (`main.rs`) drives the [`pipeline`] engine, which
//! runs [`stages`], which call the mechanisms of [`mech`]. Seeded runs exist to reproduce
//! research; they must never be used to release real private data.

pub mod axis;
pub mod data;
pub mod frames;
pub mod kind;
pub mod limits;
pub mod mech;
pub mod pipeline;
pub mod plot;
pub mod regular;
pub mod report;
pub mod stages;
pub mod text;
pub mod verdict;
pub mod yaml;
