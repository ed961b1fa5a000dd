//! The source distribution p(x) that the privacy channels of Wu et al. 2020
//! (`mechanism.rate_distortion`, `mechanism.symmetric_channel`) read from a
//! `load.distribution` frame.

use anyhow::{anyhow, Result};
use polars::prelude::DataFrame;

use crate::mech::rate_distortion as rd;
use crate::stages::columns::f64_col;

/// p(x) from a distribution frame's `probability` column, in its row order, normalised.
pub fn source(df: &DataFrame) -> Result<Vec<f64>> {
    let p = f64_col(df, "probability")?;
    rd::check_distribution(&p).map_err(|e| anyhow!("the source distribution: {e}"))?;
    let s: f64 = p.iter().sum();
    Ok(p.into_iter().map(|v| v / s).collect())
}
