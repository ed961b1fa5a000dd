//! Dataset stages: `load.dataset` (a registered public dataset, verified, with row filters and a
//! column selection), `normalise` (numeric columns, no missing values, no constant columns,
//! min–max scaled to a box) and `frame.shape` (n and d of each input, for dataset tables).

use std::fmt::Write as _;

use anyhow::{anyhow, bail, Result};
use indexmap::IndexMap;
use polars::prelude::*;
use serde::Deserialize;

use super::frame::{column, FrameBuilder};
use super::{build, Artifact, Ctx, Gather, KindInfo, Output, ParamDoc, ParamError, Params, Stage};
use crate::data::{self, DataError, Registry};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "load.dataset",
            version: 1,
            random: false,
            summary: "A registered public dataset (see `dplab data list`), checked against its sha256, read into typed columns; missing markers become nulls.",
            params: Params::Doc(&[
                ParamDoc { name: "dataset", ty: "string", default: None, meaning: "registered name, e.g. adult, census-kdd, movielens-100k" },
                ParamDoc { name: "table", ty: "string or list", default: Some("the only table"), meaning: "which table of the dataset (adult: train, test); a list stacks the tables' rows" },
                ParamDoc { name: "where", ty: "list of conditions", default: Some("[]"), meaning: "rows to keep, all must hold: `item_id == 785`, `occupation is not missing`, `age >= 18`, `sex in [Male, Female]`; quote column names with spaces in backticks" },
                ParamDoc { name: "columns", ty: "list of strings", default: Some("all"), meaning: "columns to keep, in order" },
                ParamDoc { name: "if_missing", ty: "error | empty", default: Some("error"), meaning: "when the files are in neither cache nor mirror: fail, or give an empty frame (reported as `no data` downstream)" },
            ]),
            gather: Gather::Nothing,
            build: build::<LoadDataset>,
        },
        KindInfo {
            name: "normalise",
            version: 1,
            random: false,
            summary: "Keeps numeric columns (or `columns`), drops named columns, sparse columns, rows with missing values and constant columns, then min–max scales each column to `range`. Writes <stage>.md saying what was dropped and why.",
            params: Params::Doc(&[
                ParamDoc { name: "columns", ty: "list of strings", default: Some("every numeric column"), meaning: "the columns to consider (must be numeric)" },
                ParamDoc { name: "drop", ty: "list of strings", default: Some("[]"), meaning: "id and target columns to drop by name" },
                ParamDoc { name: "drop_sparse", ty: "number in (0, 1]", default: Some("—"), meaning: "drop a column when more than this fraction of its values is missing (before rows are dropped)" },
                ParamDoc { name: "drop_constant", ty: "bool", default: Some("true"), meaning: "drop columns with a single value (they cannot be scaled)" },
                ParamDoc { name: "range", ty: "[lo, hi]", default: Some("[-1, 1]"), meaning: "target box of the min–max scaling" },
                ParamDoc { name: "scale", ty: "bool", default: Some("true"), meaning: "false keeps the original values (cleaning only)" },
            ]),
            gather: Gather::Nothing,
            build: build::<Normalise>,
        },
        KindInfo {
            name: "frame.shape",
            version: 1,
            random: false,
            summary: "One row per input: its number of rows n and columns d, and the column names; an input with no columns is reported as `no data`.",
            params: Params::Doc(&[
                ParamDoc { name: "source", ty: "map stage → label", default: Some("stage names"), meaning: "the label of each input in the `source` column" },
            ]),
            gather: Gather::Nothing,
            build: build::<Shape>,
        },
    ]
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum IfMissing {
    #[default]
    Error,
    Empty,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadDataset {
    dataset: String,
    #[serde(default)]
    table: Option<OneOrMany>,
    #[serde(default, rename = "where")]
    conditions: Vec<String>,
    #[serde(default)]
    columns: Option<Vec<String>>,
    #[serde(default)]
    if_missing: IfMissing,
}

impl LoadDataset {
    fn tables(&self) -> Vec<Option<&str>> {
        match &self.table {
            None => vec![None],
            Some(OneOrMany::One(t)) => vec![Some(t.as_str())],
            Some(OneOrMany::Many(v)) => v.iter().map(|t| Some(t.as_str())).collect(),
        }
    }
}

/// What a `load.dataset` instance with these (resolved) parameters reads, for fetching its
/// files before a run and for saying which experiments lack data; `None` when the parameters
/// are not those of `load.dataset` (planning reports that).
pub fn need(params: &serde_yaml_ng::Value) -> Option<data::need::Need> {
    let p: LoadDataset = crate::yaml::deserialize(params.clone()).ok()?;
    Some(data::need::Need {
        tables: p
            .tables()
            .into_iter()
            .map(|t| t.map(String::from))
            .collect(),
        optional: p.if_missing == IfMissing::Empty,
        dataset: p.dataset,
    })
}

impl Stage for LoadDataset {
    /// The registered checksum of every file of the dataset and how its tables are read.
    fn sources(&self) -> Vec<String> {
        let Ok(ds) = Registry::current().and_then(|r| r.dataset(&self.dataset)) else {
            return Vec::new();
        };
        let mut out: Vec<String> = ds
            .files
            .iter()
            .map(|f| format!("{} sha256 {}", f.name, f.sha256.as_deref().unwrap_or("-")))
            .collect();
        out.push(format!("{:?}", ds.tables));
        out
    }

    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.columns {
            super::distinct("columns", c)?;
        }
        let reg = Registry::current().map_err(|e| ParamError::at("dataset", e.to_string()))?;
        let ds = reg
            .dataset(&self.dataset)
            .map_err(|e| ParamError::at("dataset", e.to_string()))?;
        let tables = self.tables();
        if tables.is_empty() {
            return Err(ParamError::at("table", "no table named"));
        }
        // A table listed twice would stack its rows twice: silently doubled data, and a list
        // of repeats multiplies the memory a run needs.
        let mut seen = std::collections::HashSet::new();
        if let Some((i, Some(t))) = tables.iter().enumerate().find(|(_, t)| !seen.insert(**t)) {
            return Err(ParamError::at(
                &format!("table.{i}"),
                format!("table `{t}` is listed twice"),
            ));
        }
        for t in tables {
            match ds.table(&self.dataset, t) {
                Ok(_) => {}
                Err(DataError::Missing(_)) if self.if_missing == IfMissing::Empty => {}
                Err(e) => return Err(ParamError::at("table", e.to_string())),
            }
        }
        for (i, c) in self.conditions.iter().enumerate() {
            Condition::parse(c).map_err(|m| ParamError::at(&format!("where.{i}"), m))?;
        }
        if let Some(c) = &self.columns {
            if c.is_empty() {
                return Err(ParamError::at(
                    "columns",
                    "an empty column list keeps nothing",
                ));
            }
        }
        Ok(())
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let mut frames = Vec::new();
        for t in self.tables() {
            match data::load_table(&self.dataset, t) {
                Ok(df) => frames.push(df),
                Err(DataError::Missing(m)) if self.if_missing == IfMissing::Empty => {
                    tracing::warn!("{m} — continuing with an empty frame (if_missing: empty)");
                    return Ok(DataFrame::empty().into());
                }
                Err(DataError::Missing(m)) => {
                    return Err(anyhow::Error::new(super::Unavailable(m)))
                }
                Err(e) => bail!("{e}"),
            }
        }
        let mut df = frames.remove(0);
        for f in frames {
            df.vstack_mut(&f)
                .map_err(|e| anyhow!("the tables of `{}` do not stack: {e}", self.dataset))?;
        }
        for c in &self.conditions {
            let cond = Condition::parse(c).map_err(|m| anyhow!(m))?;
            let mask = cond.mask(&df)?;
            df = df.filter(&mask)?;
        }
        if let Some(cols) = &self.columns {
            for c in cols {
                column(&df, c)?;
            }
            df = df.select(cols.iter().map(|s| PlSmallStr::from(s.as_str())))?;
        }
        Ok(df.into())
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Missing,
    NotMissing,
}

/// One row filter: `column op value`, `column in [a, b]`, `column is (not) missing`.
#[derive(Debug, Clone, PartialEq)]
struct Condition {
    column: String,
    op: Op,
    values: Vec<String>,
}

impl Condition {
    fn parse(text: &str) -> Result<Condition, String> {
        let t = text.trim();
        let (column, rest) = if let Some(r) = t.strip_prefix('`') {
            let end = r
                .find('`')
                .ok_or_else(|| format!("`{t}`: unclosed backtick"))?;
            (r[..end].to_string(), r[end + 1..].trim_start())
        } else {
            let end = t
                .find(|c: char| c.is_whitespace() || "=!<>".contains(c))
                .unwrap_or(t.len());
            (t[..end].to_string(), t[end..].trim_start())
        };
        let usage = || {
            format!(
                "cannot read the condition `{t}`: write `COLUMN OP VALUE` with OP one of == != < <= > >=, `COLUMN in [A, B]` or `COLUMN is (not) missing`"
            )
        };
        if column.is_empty() {
            return Err(usage());
        }
        let unquote = |v: &str| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
        if let Some(r) = rest.strip_prefix("is") {
            let r = r.trim();
            let op = match r {
                "missing" => Op::Missing,
                "not missing" => Op::NotMissing,
                _ => return Err(usage()),
            };
            return Ok(Condition {
                column,
                op,
                values: vec![],
            });
        }
        if let Some(r) = rest
            .strip_prefix("in ")
            .or_else(|| rest.strip_prefix("in["))
        {
            let r = if rest.starts_with("in[") {
                &rest[2..]
            } else {
                r.trim()
            };
            let inner = r
                .strip_prefix('[')
                .and_then(|x| x.strip_suffix(']'))
                .ok_or_else(usage)?;
            let values: Vec<String> = inner
                .split(',')
                .map(unquote)
                .filter(|v| !v.is_empty())
                .collect();
            if values.is_empty() {
                return Err(format!("`{t}`: the list is empty"));
            }
            return Ok(Condition {
                column,
                op: Op::In,
                values,
            });
        }
        for (sym, op) in [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ] {
            if let Some(v) = rest.strip_prefix(sym) {
                let v = unquote(v);
                if v.is_empty() {
                    return Err(usage());
                }
                if matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge) && v.parse::<f64>().is_err() {
                    return Err(format!(
                        "`{t}`: `{v}` is not a number, so `{sym}` cannot compare it"
                    ));
                }
                return Ok(Condition {
                    column,
                    op,
                    values: vec![v],
                });
            }
        }
        Err(usage())
    }

    fn mask(&self, df: &DataFrame) -> Result<BooleanChunked> {
        let col = column(df, &self.column)?;
        let numeric = col.dtype().is_primitive_numeric();
        let n = df.height();
        let mut out = Vec::with_capacity(n);
        if numeric {
            let cast = col.cast(&DataType::Float64)?;
            let ca = cast.f64()?;
            let targets: Vec<f64> = self
                .values
                .iter()
                .map(|v| {
                    v.parse::<f64>().map_err(|_| {
                        anyhow!(
                            "condition on numeric column `{}`: `{v}` is not a number",
                            self.column
                        )
                    })
                })
                .collect::<Result<_>>()?;
            for x in ca.iter() {
                out.push(match (&self.op, x) {
                    (Op::Missing, x) => x.is_none(),
                    (Op::NotMissing, x) => x.is_some(),
                    (_, None) => false,
                    (Op::Eq, Some(x)) => x == targets[0],
                    (Op::Ne, Some(x)) => x != targets[0],
                    (Op::Lt, Some(x)) => x < targets[0],
                    (Op::Le, Some(x)) => x <= targets[0],
                    (Op::Gt, Some(x)) => x > targets[0],
                    (Op::Ge, Some(x)) => x >= targets[0],
                    (Op::In, Some(x)) => targets.contains(&x),
                });
            }
        } else {
            let cast = col.cast(&DataType::String)?;
            let ca = cast.str()?;
            if matches!(self.op, Op::Lt | Op::Le | Op::Gt | Op::Ge) {
                bail!(
                    "column `{}` is text: compare it with ==, != or in",
                    self.column
                );
            }
            for x in ca.iter() {
                out.push(match (&self.op, x) {
                    (Op::Missing, x) => x.is_none(),
                    (Op::NotMissing, x) => x.is_some(),
                    (_, None) => false,
                    (Op::Eq, Some(x)) => x == self.values[0],
                    (Op::Ne, Some(x)) => x != self.values[0],
                    (Op::In, Some(x)) => self.values.iter().any(|v| v == x),
                    _ => unreachable!("ordering operators rejected above"),
                });
            }
        }
        Ok(BooleanChunked::from_slice("mask".into(), &out))
    }
}

fn default_range() -> [f64; 2] {
    [-1.0, 1.0]
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Normalise {
    #[serde(default)]
    columns: Option<Vec<String>>,
    #[serde(default)]
    drop: Vec<String>,
    #[serde(default)]
    drop_sparse: Option<f64>,
    #[serde(default = "yes")]
    drop_constant: bool,
    #[serde(default = "default_range")]
    range: [f64; 2],
    #[serde(default = "yes")]
    scale: bool,
}

impl Stage for Normalise {
    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.columns {
            super::distinct("columns", c)?;
        }
        super::distinct("drop", &self.drop)?;
        let [lo, hi] = self.range;
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            return Err(ParamError::at(
                "range",
                format!("range = [{lo}, {hi}] is invalid: need finite lo < hi"),
            ));
        }
        if let Some(f) = self.drop_sparse {
            if !(f > 0.0 && f <= 1.0) {
                return Err(ParamError::at(
                    "drop_sparse",
                    format!("drop_sparse = {f} is invalid: must be in (0, 1]"),
                ));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let mut report = String::new();
        let _ = writeln!(report, "# normalise `{}` {}\n", ctx.stage, ctx.label);
        if df.width() == 0 {
            let _ = writeln!(report, "The input has no columns (no data): nothing to do.");
            return Ok(Output {
                frame: DataFrame::empty(),
                artifacts: vec![Artifact {
                    ext: "md",
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
            None => df
                .get_column_names()
                .iter()
                .map(|s| s.to_string())
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
        if let Some(f) = self.drop_sparse {
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
        let [lo, hi] = self.range;
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
                ext: "md",
                bytes: report.into_bytes(),
            }],
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Shape {
    #[serde(default)]
    source: IndexMap<String, String>,
}

impl Stage for Shape {
    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let mut source = Vec::new();
        let mut n = Vec::new();
        let mut d = Vec::new();
        let mut status = Vec::new();
        let mut names = Vec::new();
        for (df, stage) in ctx.inputs.iter().zip(ctx.input_names) {
            source.push(
                self.source
                    .get(stage)
                    .cloned()
                    .unwrap_or_else(|| stage.clone()),
            );
            if df.width() == 0 {
                n.push(None);
                d.push(None);
                status.push("no data".to_string());
                names.push(String::new());
            } else {
                n.push(Some(df.height() as f64));
                d.push(Some(df.width() as f64));
                status.push("ok".to_string());
                names.push(
                    df.get_column_names()
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                );
            }
        }
        Ok(FrameBuilder::new()
            .str("source", source)
            .opt_f64("n", n)
            .opt_f64("d", d)
            .str("status", status)
            .str("columns", names)
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse() {
        let c = Condition::parse("item_id == 785").unwrap();
        assert_eq!(
            (c.column.as_str(), c.op.clone(), c.values[0].as_str()),
            ("item_id", Op::Eq, "785")
        );
        let c = Condition::parse("`wage per hour` > 0").unwrap();
        assert_eq!(c.column, "wage per hour");
        assert_eq!(
            Condition::parse("occupation is not missing").unwrap().op,
            Op::NotMissing
        );
        let c = Condition::parse("sex in [Male, 'Female']").unwrap();
        assert_eq!(c.values, vec!["Male", "Female"]);
        assert!(Condition::parse("age >= old")
            .unwrap_err()
            .contains("not a number"));
        assert!(Condition::parse("age ~ 3")
            .unwrap_err()
            .contains("COLUMN OP VALUE"));
        assert!(Condition::parse("x in []").unwrap_err().contains("empty"));
    }

    #[test]
    fn conditions_filter() {
        let df = FrameBuilder::new()
            .f64("a", vec![1.0, 2.0, 3.0])
            .str("s", vec!["x".into(), "y".into(), "x".into()])
            .build()
            .unwrap();
        let m = Condition::parse("a >= 2").unwrap().mask(&df).unwrap();
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![Some(false), Some(true), Some(true)]
        );
        let m = Condition::parse("s != x").unwrap().mask(&df).unwrap();
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![Some(false), Some(true), Some(false)]
        );
        assert!(Condition::parse("s < 3").unwrap().mask(&df).is_err());
    }
}
