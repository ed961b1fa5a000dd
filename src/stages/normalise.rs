//! Dataset cleaning: `normalise` (numeric columns, no missing values, no constant columns,
//! min–max scaled to a box).

use crate::stages::param::yes;
use std::fmt::Write as _;

use anyhow::{bail, Result};
use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use super::columns::{column, FrameBuilder};
use super::param::{Interval, Share};
use super::{build, params, Artifact, Ctx, Gather, KindInfo, Output, ParamError, Stage};

/// The kind's name has no namespace (pipelines and store keys use it as it is), so its file is
/// `stages/normalise.rs`.
pub const KIND: KindInfo = KindInfo {
    name: "normalise",
    version: 2, // 2: axis columns are not data (were listed as dropped, not numeric)
    random: false,
    runs_programs: false,
    summary: "Keeps numeric columns (or `columns`), drops named columns, sparse columns, rows with missing values and constant columns, then min–max scales each column to `range`. Writes <stage>.md saying what was dropped and why.",
    params: params::<Normalise>,
    gather: Gather::Nothing,
    build: build::<Normalise>,
    verdict: None,
};

fn default_range() -> Interval {
    Interval::of(-1.0, 1.0)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Normalise {
    /// the columns to consider (must be numeric); default: every numeric column
    columns: Option<Vec<String>>,
    /// id and target columns to drop by name
    #[serde(default)]
    drop: Vec<String>,
    /// drop a column when more than this fraction of its values is missing (before rows are
    /// dropped); absent: no column is dropped for being sparse
    drop_sparse: Option<Share>,
    /// drop columns with a single value (they cannot be scaled)
    #[serde(default = "yes")]
    drop_constant: bool,
    /// target box [lo, hi] of the min–max scaling
    #[serde(default = "default_range")]
    range: Interval,
    /// false keeps the original values (cleaning only)
    #[serde(default = "yes")]
    scale: bool,
}

impl Stage for Normalise {
    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.columns {
            super::distinct("columns", c)?;
        }
        super::distinct("drop", &self.drop)?;
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let mut report = String::new();
        let _ = writeln!(report, "# normalise `{}` {}\n", ctx.stage, ctx.label);
        if df.get_column_names().iter().all(|c| ctx.is_axis(c)) {
            let _ = writeln!(report, "The input has no columns (no data): nothing to do.");
            return Ok(Output {
                frame: DataFrame::empty(),
                artifacts: vec![Artifact {
                    ext: "md".into(),
                    bytes: report.into_bytes(),
                }],
            });
        }
        let n0 = df.height();
        let mut dropped: Vec<(String, String)> = Vec::new();
        for name in &self.drop {
            column(df, name)?;
        }
        // 1. Candidate columns: the given list, or every numeric column.
        let mut cols: Vec<(String, Vec<Option<f64>>)> = Vec::new();
        let candidates: Vec<String> = match &self.columns {
            Some(c) => c.clone(),
            // The axis columns say which instance a row came from: not data, and the engine
            // puts them back on the output.
            None => df
                .get_column_names()
                .iter()
                .map(|s| s.to_string())
                .filter(|s| !ctx.is_axis(s))
                .collect(),
        };
        for name in candidates {
            let col = column(df, &name)?;
            if self.drop.contains(&name) {
                dropped.push((name, "named in `drop`".into()));
                continue;
            }
            if !col.dtype().is_primitive_numeric() {
                if self.columns.is_some() {
                    bail!(
                        "column `{name}` is {} and cannot be normalised",
                        col.dtype()
                    );
                }
                dropped.push((name, format!("not numeric ({})", col.dtype())));
                continue;
            }
            let v: Vec<Option<f64>> = col.cast(&DataType::Float64)?.f64()?.iter().collect();
            cols.push((name, v));
        }
        // 2. Sparse columns go before rows are dropped, or they would take most rows with them.
        if let Some(f) = self.drop_sparse.map(Share::get) {
            cols.retain(|(name, v)| {
                let miss = v.iter().filter(|x| x.is_none()).count();
                let frac = miss as f64 / n0.max(1) as f64;
                if frac > f {
                    dropped.push((
                        name.clone(),
                        format!(
                            "{miss} of {n0} values missing ({:.1}% > {:.1}%)",
                            100.0 * frac,
                            100.0 * f
                        ),
                    ));
                    false
                } else {
                    true
                }
            });
        }
        // 3. Rows with any missing value among the kept columns.
        let keep: Vec<bool> = (0..n0)
            .map(|r| cols.iter().all(|(_, v)| v[r].is_some()))
            .collect();
        let removed: Vec<usize> = (0..n0).filter(|&r| !keep[r]).collect();
        let cols: Vec<(String, Vec<f64>)> = cols
            .into_iter()
            .map(|(n, v)| {
                (
                    n,
                    v.iter()
                        .zip(&keep)
                        .filter(|(_, k)| **k)
                        .map(|(x, _)| x.expect("kept rows are complete"))
                        .collect(),
                )
            })
            .collect();
        // 4. Constant columns.
        let mut kept = Vec::new();
        for (name, v) in cols {
            let (mn, mx) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            if self.drop_constant && !v.is_empty() && mn == mx {
                dropped.push((name, format!("constant ({mn})")));
                continue;
            }
            kept.push((name, v, mn, mx));
        }
        // 5. Min–max scaling to [lo, hi].
        let Interval { lo, hi } = self.range;
        let mut fb = FrameBuilder::new();
        for (name, v, mn, mx) in &kept {
            let scaled = if self.scale {
                let w = mx - mn;
                v.iter()
                    .map(|x| {
                        if w > 0.0 {
                            lo + (hi - lo) * (x - mn) / w
                        } else {
                            (lo + hi) / 2.0
                        }
                    })
                    .collect()
            } else {
                v.clone()
            };
            fb = fb.f64(name, scaled);
        }
        let frame = fb.build()?;
        let _ = writeln!(
            report,
            "Kept n = {} rows × d = {} columns{}.\n",
            frame.height(),
            frame.width(),
            if self.scale {
                format!(", each min–max scaled to [{lo}, {hi}]")
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            report,
            "Rows dropped: {} of {n0} (a missing value in a kept column){}\n",
            removed.len(),
            if removed.is_empty() {
                String::new()
            } else {
                format!(
                    "; first: {}",
                    removed
                        .iter()
                        .take(10)
                        .map(|r| format!("row {}", r + 1))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        let _ = writeln!(report, "| dropped column | reason |\n|---|---|");
        for (c, why) in &dropped {
            let _ = writeln!(report, "| {c} | {why} |");
        }
        let _ = writeln!(
            report,
            "\nKept columns: {}",
            kept.iter()
                .map(|k| k.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        tracing::info!(
            "normalise `{}`{}: n = {}, d = {} ({} rows and {} columns dropped)",
            ctx.stage,
            if ctx.label.is_empty() {
                String::new()
            } else {
                format!(" [{}]", ctx.label)
            },
            frame.height(),
            frame.width(),
            removed.len(),
            dropped.len()
        );
        Ok(Output {
            frame,
            artifacts: vec![Artifact {
                ext: "md".into(),
                bytes: report.into_bytes(),
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, names, Instance};

    /// Text, named, sparse and constant columns go and rows with a missing value go, each
    /// said in the report beside the frame; the rest is min–max scaled onto `range`; axis
    /// columns are neither data nor dropped.
    #[test]
    fn cleans_then_scales_onto_the_range() {
        let input = polars::df!(
            "id" => [1.0, 2.0, 3.0, 4.0],
            "a" => [Some(0.0), Some(5.0), Some(10.0), None],
            "b" => [2.0, 2.0, 2.0, 2.0],
            "c" => [Some(1.0), None, None, Some(4.0)],
            "t" => ["x", "y", "z", "w"],
            "rep" => [0, 0, 0, 0]
        )
        .unwrap();
        let out = Instance::new(&KIND, "{drop: [id], drop_sparse: 0.25, range: [0, 1]}")
            .inputs(&[&input])
            .axes(&["rep"])
            .run()
            .unwrap();
        assert_eq!(names(&out.frame), ["a"]);
        assert_eq!(floats(&out.frame, "a"), [0.0, 0.5, 1.0]);
        let report = String::from_utf8(out.artifacts[0].bytes.clone()).unwrap();
        for line in [
            "| id | named in `drop` |",
            "| b | constant (2) |",
            "| c | 2 of 4 values missing (50.0% > 25.0%) |",
            "| t | not numeric (str) |",
            "Rows dropped: 1 of 4",
        ] {
            assert!(report.contains(line), "no `{line}` in\n{report}");
        }
        assert!(!report.contains("rep"), "{report}");
    }
}
