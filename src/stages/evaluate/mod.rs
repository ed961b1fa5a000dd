//! `evaluate.*`: the errors of estimates against true values (ℓ1, ℓ∞, RMSE, relative), and
//! evaluation of selection mechanisms: expected utility, utility tails
//! (Thm 3.11), total-variation distance between two mechanisms (Thm 3.13) and measured privacy
//! loss on neighbouring utility vectors (Thm 3.10). Exact values come from the mechanisms'
//! output distributions; Monte-Carlo values come with confidence intervals.

pub mod error;
pub mod privacy_loss;
pub mod selection;
pub mod smooth_queries;
pub mod tv_distance;
pub mod utility_tail;

use anyhow::{Context, Result};

use crate::stages::columns::{f64_col, str_col};

/// One `mechanism.select` output: utilities, exact probabilities (if known), counts.
pub(crate) struct Dist {
    pub(crate) method: String,
    pub(crate) utility: Vec<f64>,
    pub(crate) prob: Option<Vec<f64>>,
    pub(crate) count: Vec<u64>,
}

impl Dist {
    pub(crate) fn read(df: &polars::prelude::DataFrame, what: &str) -> Result<Self> {
        let ctx = || format!("{what} must be the output of a mechanism.select stage");
        let method = str_col(df, "method").with_context(ctx)?;
        if method.iter().any(|m| m != &method[0]) {
            anyhow::bail!("{what} holds several selections (methods {:?}…); evaluate one selection per instance", &method[..method.len().min(3)]);
        }
        let utility = f64_col(df, "utility").with_context(ctx)?;
        let prob = f64_col(df, "probability").ok();
        let count = f64_col(df, "count")
            .with_context(ctx)?
            .iter()
            .map(|&c| c as u64)
            .collect();
        Ok(Dist {
            method: method.first().cloned().unwrap_or_default(),
            utility,
            prob,
            count,
        })
    }

    pub(crate) fn samples(&self) -> u64 {
        self.count.iter().sum()
    }

    pub(crate) fn opt(&self) -> f64 {
        self.utility
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}
