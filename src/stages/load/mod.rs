//! Loading stages: inline tables, CSV files, grids and discrete distributions.

pub mod sample;

use std::path::PathBuf;

use anyhow::Result;
use indexmap::IndexMap;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::frame::{read_csv, FrameBuilder};
use super::{
    build, check_grid_param, check_size_at, check_size_run, grid_param, product, Ctx, Gather,
    KindInfo, Limit, Output, ParamDoc, ParamError, Params, Stage,
};
use crate::axis::AxisValue;

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "load.table",
            version: 1,
            random: false,
            summary: "A table written inline (`columns`) or read from a CSV file (`path`).",
            params: Params::Doc(&[
                ParamDoc { name: "columns", ty: "map of column → list", default: Some("—"), meaning: "inline columns of equal length; numbers or strings (a `$axis` may stand for a value)" },
                ParamDoc { name: "path", ty: "path", default: Some("—"), meaning: "a CSV file with a header row, relative to the pipeline file; give `columns` or `path`" },
            ]),
            gather: Gather::Nothing,
            build: build::<LoadTable>,
        },
        KindInfo {
            name: "load.grid",
            version: 1,
            random: false,
            summary: "One column holding a grid fixed in advance (e.g. the candidate prices of an auction).",
            params: Params::Doc(&[
                ParamDoc { name: "column", ty: "string", default: None, meaning: "name of the column" },
                ParamDoc { name: "values", ty: "grid", default: None, meaning: "a list, {from, to, step}, {linspace: {from, to, num}} or {logspace: {from, to, num}}" },
            ]),
            gather: Gather::Nothing,
            build: build::<LoadGrid>,
        },
        KindInfo {
            name: "load.distribution",
            version: 1,
            random: false,
            summary: "A discrete distribution p(x): printed (checked to be non-negative and to sum to 1), or counted from a column of its input (and jointly with a second column).",
            params: Params::Doc(&[
                ParamDoc { name: "probabilities", ty: "list of numbers", default: Some("—"), meaning: "p(x) in the order of `labels` (a printed distribution); or give `column`" },
                ParamDoc { name: "labels", ty: "list of strings", default: Some("0, 1, …"), meaning: "the values x" },
                ParamDoc { name: "tolerance", ty: "number", default: Some("1e-3"), meaning: "how far the sum may be from 1 (printed tables are rounded); the frame holds the normalised p(x) and the given numbers as `printed`" },
                ParamDoc { name: "column", ty: "string", default: Some("—"), meaning: "count p(x) from this column of the input frame (missing values left out); output label, count, probability" },
                ParamDoc { name: "categories", ty: "list of strings", default: Some("sorted values"), meaning: "the order of x; a value outside it is an error, a category never seen gets p = 0" },
                ParamDoc { name: "joint", ty: "string", default: Some("—"), meaning: "a second column z: the output is the joint p(x, z) in long form (label, joint_label, count, probability)" },
                ParamDoc { name: "joint_categories", ty: "list of strings", default: Some("sorted values"), meaning: "the order of z" },
            ]),
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
            let (width, rows) = (cols.len() as u64, cols[0].len() as u64);
            check_size_at(
                "columns",
                Limit::Cells,
                &format!("rows × columns ({rows} × {width})"),
                product(&[rows, width]),
            )?;
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

    fn files(&self) -> Vec<(&'static str, &std::path::Path)> {
        self.path.iter().map(|p| ("path", p.as_path())).collect()
    }

    /// Inline columns are known; a CSV file's only once it is read.
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        self.columns.as_ref().map(|c| c.keys().cloned().collect())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        if let Some(path) = &self.path {
            let df = read_csv(ctx.file(path)?)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
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
        check_grid_param("values", &self.values, &mut |_| Ok(())).map(|_| ())
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let vals = grid_param("values", &self.values).map_err(|e| anyhow::anyhow!(e.message))?;
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
    #[serde(default)]
    probabilities: Option<Vec<f64>>,
    #[serde(default)]
    labels: Option<Vec<String>>,
    #[serde(default = "default_tolerance")]
    tolerance: f64,
    /// Empirical mode: the categorical column of the input frame.
    #[serde(default)]
    column: Option<String>,
    #[serde(default)]
    categories: Option<Vec<String>>,
    /// Joint mode: a second column; the output is p(x, z) in long form.
    #[serde(default)]
    joint: Option<String>,
    #[serde(default)]
    joint_categories: Option<Vec<String>>,
}

fn default_tolerance() -> f64 {
    1e-3
}

impl Stage for LoadDistribution {
    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.labels {
            super::distinct("labels", c)?;
        }
        if self.column.is_some() {
            if self.probabilities.is_some() || self.labels.is_some() {
                return Err(ParamError::at(
                    "column",
                    "give either `probabilities` (a printed distribution) or `column` (counted from the input frame), not both",
                ));
            }
            for (key, cats) in [
                ("categories", &self.categories),
                ("joint_categories", &self.joint_categories),
            ] {
                if let Some(c) = cats {
                    if c.is_empty() {
                        return Err(ParamError::at(key, "the category list is empty"));
                    }
                    let mut seen = std::collections::HashSet::new();
                    if let Some(d) = c.iter().find(|x| !seen.insert(x.as_str())) {
                        return Err(ParamError::at(
                            key,
                            format!("category `{d}` is listed twice"),
                        ));
                    }
                }
            }
            if self.joint.is_none() && self.joint_categories.is_some() {
                return Err(ParamError::at(
                    "joint_categories",
                    "`joint_categories` needs `joint`",
                ));
            }
            return Ok(());
        }
        if self.joint.is_some() || self.categories.is_some() || self.joint_categories.is_some() {
            return Err(ParamError::at(
                "column",
                "`categories` and `joint` count values of an input column: give `column`",
            ));
        }
        let Some(probabilities) = &self.probabilities else {
            return Err(ParamError {
                path: vec![],
                message: "load.distribution needs `probabilities` (printed) or `column` (counted from its input)".into(),
            });
        };
        if probabilities.is_empty() {
            return Err(ParamError::at("probabilities", "the distribution is empty"));
        }
        for (i, p) in probabilities.iter().enumerate() {
            if !(p.is_finite() && *p >= 0.0) {
                return Err(ParamError::at(
                    &format!("probabilities.{i}"),
                    format!("p = {p} is invalid: probabilities must be ≥ 0"),
                ));
            }
        }
        let sum: f64 = probabilities.iter().sum();
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
            if l.len() != probabilities.len() {
                return Err(ParamError::at(
                    "labels",
                    format!(
                        "{} labels for {} probabilities",
                        l.len(),
                        probabilities.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        if let Some(col) = &self.column {
            return self.empirical(ctx, col);
        }
        let probabilities = self.probabilities.as_deref().unwrap_or_default();
        let sum: f64 = probabilities.iter().sum();
        let labels = self
            .labels
            .clone()
            .unwrap_or_else(|| (0..probabilities.len()).map(|i| i.to_string()).collect());
        Ok(FrameBuilder::new()
            .str("label", labels)
            .f64(
                "probability",
                probabilities.iter().map(|p| p / sum).collect(),
            )
            .f64("printed", probabilities.to_vec())
            .build()?
            .into())
    }
}

impl LoadDistribution {
    /// p(x) (or p(x, z)) as relative frequencies of the input's rows. Rows where a counted
    /// column is missing are left out (and the number is logged); a value outside the stated
    /// categories is an error, so a typo in the order cannot silently drop mass.
    fn empirical(&self, ctx: &Ctx, col: &str) -> Result<Output> {
        let df = ctx.input()?;
        let xs = super::frame::opt_str_col(df, col)?;
        let zs = match &self.joint {
            Some(j) => Some(super::frame::opt_str_col(df, j)?),
            None => None,
        };
        let mut skipped = 0usize;
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(xs.len());
        for (i, x) in xs.iter().enumerate() {
            let z = zs.as_ref().map(|z| z[i].clone());
            match (x, z) {
                (Some(x), None) => pairs.push((x.clone(), String::new())),
                (Some(x), Some(Some(z))) => pairs.push((x.clone(), z)),
                _ => skipped += 1,
            }
        }
        if pairs.is_empty() {
            anyhow::bail!("column `{col}` has no values to count");
        }
        if skipped > 0 {
            tracing::info!(
                "load.distribution {}: {skipped} row(s) with a missing value left out",
                ctx.label
            );
        }
        let order = |given: &Option<Vec<String>>,
                     values: Vec<&String>,
                     what: &str|
         -> Result<Vec<String>> {
            let mut seen: Vec<String> = values.into_iter().cloned().collect();
            seen.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => x.total_cmp(&y),
                _ => a.cmp(b),
            });
            seen.dedup();
            match given {
                None => Ok(seen),
                Some(cats) => {
                    let extra: Vec<&String> = seen.iter().filter(|v| !cats.contains(v)).collect();
                    if !extra.is_empty() {
                        anyhow::bail!(
                            "column `{what}` has values not in the stated categories: {}",
                            extra
                                .iter()
                                .map(|s| format!("`{s}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                    }
                    Ok(cats.clone())
                }
            }
        };
        let xcats = order(&self.categories, pairs.iter().map(|p| &p.0).collect(), col)?;
        let zcats = match &self.joint {
            Some(j) => order(
                &self.joint_categories,
                pairs.iter().map(|p| &p.1).collect(),
                j,
            )?,
            None => vec![String::new()],
        };
        let xi: IndexMap<&str, usize> = xcats
            .iter()
            .enumerate()
            .map(|(i, c)| (c.as_str(), i))
            .collect();
        let zi: IndexMap<&str, usize> = zcats
            .iter()
            .enumerate()
            .map(|(i, c)| (c.as_str(), i))
            .collect();
        let (nx, nz) = (xcats.len() as u64, zcats.len() as u64);
        check_size_run(
            Limit::Cells,
            &format!("categories × joint categories ({nx} × {nz})"),
            product(&[nx, nz]),
        )?;
        let mut counts = vec![0u64; xcats.len() * zcats.len()];
        for (x, z) in &pairs {
            counts[xi[x.as_str()] * zcats.len() + zi[z.as_str()]] += 1;
        }
        let total = pairs.len() as f64;
        let mut labels = Vec::new();
        let mut joint = Vec::new();
        for x in &xcats {
            for z in &zcats {
                labels.push(x.clone());
                joint.push(z.clone());
            }
        }
        let mut fb = FrameBuilder::new().str("label", labels);
        if self.joint.is_some() {
            fb = fb.str("joint_label", joint);
        }
        Ok(fb
            .i64("count", counts.iter().map(|&c| c as i64).collect())
            .f64(
                "probability",
                counts.iter().map(|&c| c as f64 / total).collect(),
            )
            .build()?
            .into())
    }
}
