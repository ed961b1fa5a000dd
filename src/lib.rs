//! dplab: reproducible differential-privacy experiments as declarative YAML pipelines.
//!
//! Three layers. At run time the CLI (`main.rs`, `cli/`) drives the [`pipeline`] engine, which
//! runs [`stages`], which call the mechanisms of [`mech`]. Imports do not follow that order all
//! the way: the engine never imports the stage kinds — it owns their contract ([`kind`]) and is
//! handed their registry by the CLI — a kind imports the contract, never the engine, and a
//! mechanism imports neither (`tests/it/layers.rs` holds them to it). Beside them, rooms any
//! layer may use and that import none of the three: the [`program`] sandbox a researcher's
//! code runs in (the `external` kind binds it to a stage; the CLI stops its programs), the
//! [`expr`] expression language of `frame.*`, the [`plot`] drawing, [`frames`], [`text`], [`limits`]. Seeded runs exist to
//! reproduce research; they must never be used to release real private data.

pub mod axis;
pub mod data;
pub mod expr;
pub mod frames;
pub mod kind;
pub mod limits;
pub mod mech;
pub mod pipeline;
pub mod plot;
pub mod program;
pub mod regular;
pub mod report;
pub mod stages;
pub mod text;
pub mod verdict;
pub mod yaml;
