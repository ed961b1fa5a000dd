//! The `frame.*` kinds: frames reshaped, joined, stacked, derived and grouped.

pub mod derive;
pub mod group;
pub mod join;
pub mod shape;
pub mod stack;
