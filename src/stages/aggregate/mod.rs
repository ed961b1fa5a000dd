//! `aggregate.*`: statistics over the rows of a frame — summaries per group, improvements of
//! one column over another, log–log convergence rates.

pub mod improvement;
pub mod loglog_fit;
pub mod summary;
