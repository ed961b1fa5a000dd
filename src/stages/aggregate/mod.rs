//! `aggregate.*`: statistics over the rows of a frame — summaries per group, improvements of
//! one column over another, log–log convergence rates.

pub mod improvement;
pub mod loglog_fit;
pub mod summary;

use crate::stages::param::Level;

/// The default confidence level of the kinds' intervals.
fn level() -> Level {
    Level::of(0.95)
}
