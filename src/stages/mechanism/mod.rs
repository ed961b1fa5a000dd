//! `mechanism.*`: the kinds that apply a privacy mechanism of [`crate::mech`] to a frame.

pub mod channel;
pub mod noise;
pub mod rate_distortion;
pub mod select;
pub mod symmetric_channel;
pub mod trigonometric;
