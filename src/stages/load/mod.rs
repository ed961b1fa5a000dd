//! `load.*`: kinds that bring data in: inline tables, CSV files, grids, distributions and datasets.

pub mod dataset;
pub mod distribution;
pub mod grid;
pub mod sample;
pub mod table;
