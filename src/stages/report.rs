//! `report.table`: a result table as a frame and as Markdown, with the paper's numbers
//! beside ours (and the difference) where the paper prints them.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use indexmap::IndexMap;
use polars::prelude::*;
use serde::Deserialize;

use super::frame::{column, read_csv, str_col};
use super::{build, Artifact, Ctx, Gather, KindInfo, Output, ParamDoc, ParamError, Stage};

pub fn kinds() -> Vec<KindInfo> {
    vec![KindInfo {
        name: "report.table",
        version: 1,
        random: false,
        summary: "A table (frame + Markdown): chosen columns of its input, optionally joined with the paper's printed numbers (columns paper_<c> and diff_<c> = ours − paper).",
        params: &[
            ParamDoc { name: "title", ty: "string", default: None, meaning: "heading of the Markdown table" },
            ParamDoc { name: "columns", ty: "list of strings", default: Some("all"), meaning: "columns to show, in order" },
            ParamDoc { name: "digits", ty: "integer", default: Some("4"), meaning: "significant digits in the Markdown" },
            ParamDoc { name: "paper", ty: "path", default: Some("—"), meaning: "CSV of the paper's numbers, relative to the pipeline file" },
            ParamDoc { name: "join", ty: "list of strings", default: Some("[]"), meaning: "key columns shared by our table and the paper's" },
            ParamDoc { name: "compare", ty: "map ours → paper column", default: Some("{}"), meaning: "which of our columns the paper's columns correspond to" },
            ParamDoc { name: "notes", ty: "string", default: Some("—"), meaning: "text printed under the table (how to read it, deviations)" },
        ],
        gather: Gather::All,
        build: build::<Table>,
    }]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    title: String,
    #[serde(default)]
    columns: Option<Vec<String>>,
    #[serde(default = "digits")]
    digits: usize,
    #[serde(default)]
    paper: Option<PathBuf>,
    #[serde(default)]
    join: Vec<String>,
    #[serde(default)]
    compare: IndexMap<String, String>,
    #[serde(default)]
    notes: Option<String>,
}

fn digits() -> usize {
    4
}

impl Stage for Table {
    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.columns {
            super::distinct("columns", c)?;
        }
        super::distinct("join", &self.join)?;
        if !(1..=17).contains(&self.digits) {
            return Err(ParamError::at(
                "digits",
                format!("digits = {} is invalid: must be in [1, 17]", self.digits),
            ));
        }
        if self.paper.is_some() && (self.join.is_empty() || self.compare.is_empty()) {
            return Err(ParamError::at(
                "paper",
                "with `paper`, give `join` (key columns) and `compare` (ours → paper columns)",
            ));
        }
        Ok(())
    }

    fn files(&self) -> Vec<(&'static str, &std::path::Path)> {
        self.paper.iter().map(|p| ("paper", p.as_path())).collect()
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let frames: Vec<&DataFrame> = ctx.inputs.iter().collect();
        let mut df = crate::frames::concat(&frames)?;
        if let Some(cols) = &self.columns {
            for c in cols {
                column(&df, c)?;
            }
            df = df.select(cols.iter().map(|s| s.as_str()))?;
        }
        if let Some(paper) = &self.paper {
            let pdf = read_csv(ctx.file(paper)?).map_err(|e| {
                anyhow::anyhow!("reading the paper's table {}: {e}", paper.display())
            })?;
            let ours_keys: Vec<Vec<String>> = self
                .join
                .iter()
                .map(|k| str_col(&df, k))
                .collect::<Result<_>>()?;
            let paper_keys: Vec<Vec<String>> = self
                .join
                .iter()
                .map(|k| str_col(&pdf, k))
                .collect::<Result<_>>()?;
            for (ours, theirs) in &self.compare {
                // Our cell may be empty (e.g. a dataset not on this machine): no difference then.
                let mine = super::frame::f64_col_or_nan(&df, ours)?;
                // The paper may print a number on some rows only.
                let printed = super::frame::f64_col_or_nan(&pdf, theirs)?;
                let mut pv = Vec::with_capacity(df.height());
                for row in 0..df.height() {
                    let hit = (0..pdf.height()).find(|&pr| {
                        ours_keys
                            .iter()
                            .zip(&paper_keys)
                            .all(|(a, b)| same_key(&a[row], &b[pr]))
                    });
                    pv.push(hit.map(|pr| printed[pr]).filter(|v| v.is_finite()));
                }
                let diff: Vec<Option<f64>> = pv
                    .iter()
                    .zip(&mine)
                    .map(|(p, m)| p.filter(|_| m.is_finite()).map(|p| m - p))
                    .collect();
                df.with_column(Column::new(format!("paper_{ours}").into(), pv))?;
                df.with_column(Column::new(format!("diff_{ours}").into(), diff))?;
            }
        }
        let md = markdown(
            &df,
            &self.title,
            self.digits,
            self.notes.as_deref(),
            ctx.stage,
        )?;
        Ok(Output {
            frame: df,
            artifacts: vec![Artifact {
                ext: "md",
                bytes: md.into_bytes(),
            }],
        })
    }
}

/// Keys match as text, or as numbers when both parse (so `0.5` matches `0.50`).
fn same_key(a: &str, b: &str) -> bool {
    a == b
        || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if (x - y).abs() <= 1e-9 * x.abs().max(1.0))
}

fn fmt_num(x: f64, digits: usize) -> String {
    if x.is_nan() {
        return "—".into();
    }
    // Counts and sizes read as integers, not as 1993.00.
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return format!("{x:.0}");
    }
    if x == 0.0 || (x.abs() >= 1e-3 && x.abs() < 1e6) {
        let mag = if x == 0.0 {
            0
        } else {
            x.abs().log10().floor() as i32
        };
        let decimals = (digits as i32 - 1 - mag).clamp(0, 17) as usize;
        format!("{x:.decimals$}")
    } else {
        format!("{x:.*e}", digits.saturating_sub(1))
    }
}

fn markdown(
    df: &DataFrame,
    title: &str,
    digits: usize,
    notes: Option<&str>,
    stage: &str,
) -> Result<String> {
    let mut s = format!("## {title}\n\n");
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    writeln!(s, "| {} |", names.join(" | "))?;
    writeln!(
        s,
        "|{}|",
        names.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    )?;
    let cols: Vec<Vec<String>> = df
        .columns()
        .iter()
        .map(|c| -> Result<Vec<String>> {
            if c.dtype().is_float() {
                let v = c.cast(&DataType::Float64)?;
                Ok(v.f64()?
                    .iter()
                    .map(|x| x.map_or("—".to_string(), |x| fmt_num(x, digits)))
                    .collect())
            } else {
                let v = c.cast(&DataType::String)?;
                Ok(v.str()?
                    .iter()
                    .map(|x| x.unwrap_or("—").to_string())
                    .collect())
            }
        })
        .collect::<Result<_>>()?;
    for r in 0..df.height() {
        writeln!(
            s,
            "| {} |",
            cols.iter()
                .map(|c| c[r].as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        )?;
    }
    if let Some(n) = notes {
        write!(s, "\n{}\n", n.trim())?;
    }
    writeln!(s, "\n_Stage `{stage}`; full precision in `{stage}.csv`._")?;
    Ok(s)
}
