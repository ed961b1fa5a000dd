//! Point sets in frames, as the smooth-query kinds exchange them (`mechanism.trigonometric`,
//! `query.smooth`, `evaluate.smooth_queries`): the data columns, an optional `weight` column
//! (a synthetic database is a weighted point set) and `synthesis_*` diagnostic columns.

use anyhow::Result;

use super::columns::{f64_col, has_col, numeric_matrix};

/// Columns that describe a synthesis rather than hold data.
pub(crate) const DIAGNOSTIC_PREFIX: &str = "synthesis_";

/// The weights of a weighted point set.
pub(crate) const WEIGHT: &str = "weight";

/// A point set read from a frame: every numeric column except the axis columns, `weight`
/// and the `synthesis_*` diagnostics, as row-major values; with the column names and the
/// weights (when the frame has a `weight` column).
pub(crate) struct PointSet {
    pub points: Vec<f64>,
    pub names: Vec<String>,
    pub weights: Option<Vec<f64>>,
}

impl PointSet {
    pub fn read(
        df: &polars::prelude::DataFrame,
        axis_names: &[String],
        input: &str,
    ) -> Result<Self> {
        let (points, names) = numeric_matrix(df, |c| {
            c == WEIGHT || c.starts_with(DIAGNOSTIC_PREFIX) || axis_names.iter().any(|a| a == c)
        })?;
        if names.is_empty() || df.height() == 0 {
            anyhow::bail!("the input `{input}` has no numeric data columns or no rows");
        }
        let weights = if has_col(df, WEIGHT) {
            Some(f64_col(df, WEIGHT)?)
        } else {
            None
        };
        Ok(PointSet {
            points,
            names,
            weights,
        })
    }

    pub fn dim(&self) -> usize {
        self.names.len()
    }
}
