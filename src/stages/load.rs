//! Loading stages: inline tables, CSV files, grids and discrete distributions.

use std::path::PathBuf;

use anyhow::Result;
use indexmap::IndexMap;
use polars::prelude::*;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::frame::FrameBuilder;
use super::{build, Ctx, Gather, KindInfo, Output, ParamDoc, ParamError, Stage};
use crate::pipeline::spec::{parse_axis, AxisValue};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "load.table",
            summary: "A table written inline (`columns`) or read from a CSV file (`path`).",
            params: &[
                ParamDoc { name: "columns", ty: "map of column → list", default: Some("—"), meaning: "inline columns of equal length; numbers or strings (a `$axis` may stand for a value)" },
                ParamDoc { name: "path", ty: "path", default: Some("—"), meaning: "a CSV file with a header row, relative to the pipeline file; give `columns` or `path`" },
            ],
            gather: Gather::Nothing,
            build: build::<LoadTable>,
        },
        KindInfo {
            name: "load.grid",
            summary: "One column holding a grid fixed in advance (e.g. the candidate prices of an auction).",
            params: &[
                ParamDoc { name: "column", ty: "string", default: None, meaning: "name of the column" },
                ParamDoc { name: "values", ty: "grid", default: None, meaning: "a list, {from, to, step}, {linspace: {from, to, num}} or {logspace: {from, to, num}}" },
            ],
            gather: Gather::Nothing,
            build: build::<LoadGrid>,
        },
        KindInfo {
            name: "load.distribution",
            summary: "A discrete distribution p(x) over labelled values; checked to be non-negative and to sum to 1.",
            params: &[
                ParamDoc { name: "probabilities", ty: "list of numbers", default: None, meaning: "p(x) in the order of `labels`" },
                ParamDoc { name: "labels", ty: "list of strings", default: Some("0, 1, …"), meaning: "the values x" },
                ParamDoc { name: "tolerance", ty: "number", default: Some("1e-3"), meaning: "how far the sum may be from 1 (printed tables are rounded); the frame holds the normalised p(x) and the given numbers as `printed`" },
            ],
            gather: Gather::Nothing,
            build: build::<LoadDistribution>,
        },
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadTable {
    #[serde(default)]
    columns: Option<IndexMap<String, Vec<Value>>>,
    #[serde(default)]
    path: Option<PathBuf>,
}

impl Stage for LoadTable {
    fn validate(&self) -> Result<(), ParamError> {
        match (&self.columns, &self.path) {
            (Some(_), Some(_)) => {
                return Err(ParamError::at(
                    "path",
                    "give either `columns` or `path`, not both",
                ))
            }
            (None, None) => {
                return Err(ParamError {
                    path: vec![],
                    message: "load.table needs `columns` (inline) or `path` (a CSV file)".into(),
                })
            }
            _ => {}
        }
        if let Some(cols) = &self.columns {
            if cols.is_empty() {
                return Err(ParamError::at("columns", "no columns given"));
            }
            let mut len = None;
            for (name, vals) in cols {
                if *len.get_or_insert(vals.len()) != vals.len() {
                    return Err(ParamError::at(
                        &format!("columns.{name}"),
                        format!(
                            "column `{name}` has {} values, the first column {}",
                            vals.len(),
                            len.unwrap_or(0)
                        ),
                    ));
                }
                column_values(name, vals)?;
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        if let Some(path) = &self.path {
            let full = ctx.base_dir.join(path);
            let df = CsvReadOptions::default()
                .with_has_header(true)
                .try_into_reader_with_file_path(Some(full.clone()))?
                .finish()
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", full.display()))?;
            return Ok(df.into());
        }
        let mut fb = FrameBuilder::new();
        for (name, vals) in self.columns.as_ref().into_iter().flatten() {
            fb = match column_values(name, vals).map_err(|e| anyhow::anyhow!(e.message))? {
                Values::Num(v) => fb.f64(name, v),
                Values::Text(v) => fb.str(name, v),
            };
        }
        Ok(fb.build()?.into())
    }
}

enum Values {
    Num(Vec<f64>),
    Text(Vec<String>),
}

fn column_values(name: &str, vals: &[Value]) -> Result<Values, ParamError> {
    if vals.iter().all(|v| v.is_number()) {
        Ok(Values::Num(
            vals.iter()
                .map(|v| v.as_f64().unwrap_or(f64::NAN))
                .collect(),
        ))
    } else if vals.iter().all(|v| v.is_string()) {
        Ok(Values::Text(
            vals.iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect(),
        ))
    } else {
        Err(ParamError::at(
            &format!("columns.{name}"),
            format!("column `{name}` must hold only numbers or only strings"),
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadGrid {
    column: String,
    values: Value,
}

impl Stage for LoadGrid {
    fn validate(&self) -> Result<(), ParamError> {
        parse_axis(&self.values)
            .map(|_| ())
            .map_err(|(sub, msg)| ParamError {
                path: std::iter::once("values".to_string())
                    .chain((!sub.is_empty()).then_some(sub))
                    .collect(),
                message: msg,
            })
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let vals = parse_axis(&self.values).map_err(|(_, m)| anyhow::anyhow!(m))?;
        let fb = FrameBuilder::new();
        let fb = if vals.iter().all(|v| matches!(v, AxisValue::Num(_))) {
            fb.f64(
                &self.column,
                vals.iter()
                    .map(|v| {
                        if let AxisValue::Num(x) = v {
                            *x
                        } else {
                            f64::NAN
                        }
                    })
                    .collect(),
            )
        } else {
            fb.str(
                &self.column,
                vals.iter().map(AxisValue::canonical).collect(),
            )
        };
        Ok(fb.build()?.into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadDistribution {
    probabilities: Vec<f64>,
    #[serde(default)]
    labels: Option<Vec<String>>,
    #[serde(default = "default_tolerance")]
    tolerance: f64,
}

fn default_tolerance() -> f64 {
    1e-3
}

impl Stage for LoadDistribution {
    fn validate(&self) -> Result<(), ParamError> {
        if self.probabilities.is_empty() {
            return Err(ParamError::at("probabilities", "the distribution is empty"));
        }
        for (i, p) in self.probabilities.iter().enumerate() {
            if !(p.is_finite() && *p >= 0.0) {
                return Err(ParamError::at(
                    &format!("probabilities.{i}"),
                    format!("p = {p} is invalid: probabilities must be ≥ 0"),
                ));
            }
        }
        let sum: f64 = self.probabilities.iter().sum();
        if !(self.tolerance >= 0.0 && self.tolerance < 1.0) {
            return Err(ParamError::at(
                "tolerance",
                format!(
                    "tolerance = {} is invalid: must be in [0, 1)",
                    self.tolerance
                ),
            ));
        }
        if (sum - 1.0).abs() > self.tolerance {
            return Err(ParamError::at(
                "probabilities",
                format!(
                    "the probabilities sum to {sum}, not 1 (tolerance {})",
                    self.tolerance
                ),
            ));
        }
        if let Some(l) = &self.labels {
            if l.len() != self.probabilities.len() {
                return Err(ParamError::at(
                    "labels",
                    format!(
                        "{} labels for {} probabilities",
                        l.len(),
                        self.probabilities.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let sum: f64 = self.probabilities.iter().sum();
        let labels = self.labels.clone().unwrap_or_else(|| {
            (0..self.probabilities.len())
                .map(|i| i.to_string())
                .collect()
        });
        Ok(FrameBuilder::new()
            .str("label", labels)
            .f64(
                "probability",
                self.probabilities.iter().map(|p| p / sum).collect(),
            )
            .f64("printed", self.probabilities.clone())
            .build()?
            .into())
    }
}
