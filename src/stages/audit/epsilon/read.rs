//! Reading the audited mechanism's output: one run's frame to its releases (rows grouped by
//! `sample`, a histogram's `count`, or under `max_rows` a release of varying length as its row
//! count and its rows), text outcomes as numbers, and the names events give the numbers.

use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::{bail, Result};
use polars::prelude::{Column, DataFrame, DataType};
use sha2::{Digest, Sha256};

use super::AuditRun;
use crate::mech::audit::Releases;
use crate::stages::columns::{f64_col, str_col};

/// A text outcome as a number: 52 bits of its sha256, exact in an f64, the same on every
/// thread and run (so events on labels are deterministic); the label is kept to name it.
fn code(label: &str, names: &Mutex<HashMap<u64, String>>) -> f64 {
    let d = Sha256::digest(label.as_bytes());
    let bits = u64::from_le_bytes(d[..8].try_into().unwrap_or_default()) >> 12;
    if let Ok(mut m) = names.lock() {
        m.entry(bits).or_insert_with(|| label.to_string());
    }
    bits as f64
}

/// A column of the audited mechanism's output, or the error naming the columns it has.
pub(super) fn output_column<'a>(frame: &'a DataFrame, name: &str) -> Result<&'a Column> {
    frame.column(name).map_err(|_| {
        crate::kind::MissingColumn {
            name: name.to_string(),
            available: frame
                .get_column_names()
                .iter()
                .map(|n| n.to_string())
                .collect(),
        }
        .into()
    })
}

/// A missing row's values in a release of varying length (`max_rows`): below every number a
/// program writes that is not itself −f64::MAX, and no text's code (those are ≥ 0), so
/// that an event can tell "no row" from any value.
pub(super) const NO_ROW: f64 = f64::MIN;

/// What reading the mechanism's output found out about its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    /// Rows per release (1 for a histogram; `max_rows` for a release of varying length).
    pub rows: usize,
    /// Whether a release's length varies (`max_rows`): its first number is its row count.
    pub ragged: bool,
    /// Whether an output column holds text.
    pub text: bool,
}

impl AuditRun {
    /// The releases in one run's output frame of `n` draws.
    pub(super) fn releases(
        &self,
        frame: &DataFrame,
        n: u64,
        names: &Mutex<HashMap<u64, String>>,
    ) -> Result<(Releases, Shape)> {
        let mut cols = Vec::with_capacity(self.audit.output.len());
        let mut text = false;
        for c in &self.audit.output {
            let col = output_column(frame, c)?;
            cols.push(if col.dtype() == &DataType::String {
                text = true;
                str_col(frame, c)?.iter().map(|s| code(s, names)).collect()
            } else {
                f64_col(frame, c)?
            });
        }
        let k = cols.len();
        if let Some(count) = &self.audit.count {
            let counts: Vec<f64> = f64_col(frame, count)?;
            let mut total = 0u64;
            let mut out = Vec::with_capacity(counts.len());
            for c in counts {
                if !(c >= 0.0 && c.fract() == 0.0 && c < 2f64.powi(63)) {
                    bail!("its `{count}` column holds {c}, not a count of draws");
                }
                total += c as u64;
                out.push(c as u64);
            }
            if total != n {
                bail!("its `{count}` column counts {total} draws where {n} were asked for: does it honour `{}`?", self.audit.samples_at);
            }
            let values = (0..frame.height())
                .flat_map(|r| cols.iter().map(move |c| c[r]))
                .collect();
            return Ok((
                Releases {
                    dim: k,
                    values,
                    counts: out,
                },
                Shape {
                    rows: 1,
                    ragged: false,
                    text,
                },
            ));
        }
        let sample = frame.column("sample").map_err(|_| {
            anyhow::anyhow!("its output has no `sample` column: rows of one release share a `sample` value (or, for a histogram of releases, name its count column with `count:`)")
        })?;
        let sample = f64_col(frame, sample.name())?;
        let rows = frame.height();
        let n_draws = usize::try_from(n).unwrap_or(usize::MAX);
        // Each draw's number of rows (without a Vec per draw: this is the audit's hot path).
        let mut per_draw = vec![0usize; n_draws];
        for &s in &sample {
            if !(s >= 0.0 && s < n as f64 && s.fract() == 0.0) {
                bail!(
                    "its `sample` column holds {s}: {n} draws are numbered 0 to {}",
                    n.saturating_sub(1)
                );
            }
            per_draw[s as usize] += 1;
        }
        let (per, ragged) = match &self.audit.max_rows {
            Some(max) => {
                let max = max.get() as usize;
                if let Some((s, m)) = per_draw.iter().enumerate().find(|(_, m)| **m > max) {
                    bail!("draw {s} has {m} rows, more than `max_rows: {max}`: raise it to the most rows a release may have");
                }
                (max, true)
            }
            None => {
                let per = per_draw.first().copied().unwrap_or(0);
                if let Some((s, m)) = per_draw.iter().enumerate().find(|(_, m)| **m != per) {
                    bail!(
                        "its output has {rows} rows for {n} draws, {per} for draw 0 and {m} for draw {s}: does it honour `{}`? A release whose length depends on the data needs `max_rows:` (the most rows a release may have)",
                        self.audit.samples_at
                    );
                }
                if n == 0 || per == 0 {
                    bail!(
                        "its output has {rows} rows for {n} draws: does it honour `{}`?",
                        self.audit.samples_at
                    );
                }
                (per, false)
            }
        };
        // A release of varying length starts with its row count, and its missing rows are ∅.
        let head = usize::from(ragged);
        let dim = head + per * k;
        let mut values = vec![NO_ROW; n_draws * dim];
        let mut filled = vec![0usize; n_draws];
        for (r, &s) in sample.iter().enumerate() {
            let s = s as usize;
            let at = s * dim + head + filled[s] * k;
            for (c, col) in cols.iter().enumerate() {
                values[at + c] = col[r];
            }
            filled[s] += 1;
        }
        if ragged {
            for (s, m) in per_draw.iter().enumerate() {
                values[s * dim] = *m as f64;
            }
        }
        Ok((
            Releases::draws(dim, values),
            Shape {
                rows: per,
                ragged,
                text,
            },
        ))
    }

    /// Names of the numbers of a release, and their values in words.
    pub(super) fn coordinate_name(&self, shape: Shape, j: usize) -> String {
        let k = self.audit.output.len();
        if shape.ragged {
            let Some(j) = j.checked_sub(1) else {
                return "rows".into();
            };
            return format!("{}[{}]", self.audit.output[j % k], j / k);
        }
        let col = &self.audit.output[j % k];
        if shape.rows > 1 {
            format!("{col}[{}]", j / k)
        } else {
            col.clone()
        }
    }
}
