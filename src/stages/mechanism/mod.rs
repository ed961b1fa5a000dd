//! `mechanism.*`: the kinds that apply a privacy mechanism of [`crate::mech`] to a frame.

pub mod noise;
pub mod select;
pub mod trigonometric;
