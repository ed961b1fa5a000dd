//! `load.dataset`: a registered public dataset, verified against its sha256, with row filters
//! and a column selection.

use anyhow::{anyhow, bail, Result};
use polars::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data::{self, DataError, Registry};
use crate::stages::columns::column;
use crate::stages::param::OneOrMany;
use crate::stages::{
    build, distinct, params, Ctx, Gather, KindInfo, Output, ParamError, Stage, Unavailable,
};

pub const KIND: KindInfo = KindInfo {
    name: "load.dataset",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "A registered public dataset (see `dplab data list`), checked against its sha256, read into typed columns; missing markers become nulls.",
    params: params::<LoadDataset>,
    gather: Gather::Nothing,
    build: build::<LoadDataset>,
};

#[derive(Deserialize, Serialize, JsonSchema, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum IfMissing {
    /// fail
    #[default]
    Error,
    /// give an empty frame (reported as `no data` downstream)
    Empty,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadDataset {
    /// registered name, e.g. adult, census-kdd, movielens-100k
    dataset: String,
    /// which table of the dataset (adult: train, test; default: the only table); a list
    /// stacks the tables' rows
    table: Option<OneOrMany>,
    /// rows to keep, all must hold: `item_id == 785`, `occupation is not missing`,
    /// `age >= 18`, `sex in [Male, Female]`; quote column names with spaces in backticks
    #[serde(default, rename = "where")]
    #[schemars(title = "list of conditions")]
    conditions: Vec<String>,
    /// columns to keep, in order (default: all)
    columns: Option<Vec<String>>,
    /// when the files are in neither cache nor mirror
    #[serde(default)]
    if_missing: IfMissing,
}

impl LoadDataset {
    /// The columns of the tables read, when the registry lists them (no header row or
    /// `.names` file) and the stacked tables agree; `None` otherwise.
    fn table_columns(&self) -> Option<Vec<String>> {
        let ds = Registry::current().ok()?.dataset(&self.dataset).ok()?;
        let mut known = None;
        for t in self.tables() {
            let cols = ds.table(&self.dataset, t).ok()?.1.known_columns()?;
            // Stacked tables must agree (else the run fails on stacking them).
            if known.as_ref().is_some_and(|k| *k != cols) {
                return None;
            }
            known = Some(cols);
        }
        known
    }

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
            distinct("columns", c)?;
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
        // Column names are checked against the registry where it lists the table's columns,
        // so a misspelt name is found before any file is read (else when the table is read).
        let known = self.table_columns();
        let check = |path: String, name: &str| match &known {
            Some(cols) if !cols.iter().any(|c| c == name) => {
                let hint = crate::text::suggest(name, cols.iter().map(String::as_str))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                Err(ParamError::at(
                    &path,
                    format!(
                        "no column `{name}` in dataset `{}`{hint} (its columns: {})",
                        self.dataset,
                        cols.join(", ")
                    ),
                ))
            }
            _ => Ok(()),
        };
        for (i, c) in self.conditions.iter().enumerate() {
            let cond = Condition::parse(c).map_err(|m| ParamError::at(&format!("where.{i}"), m))?;
            check(format!("where.{i}"), &cond.column)?;
        }
        if let Some(c) = &self.columns {
            if c.is_empty() {
                return Err(ParamError::at(
                    "columns",
                    "an empty column list keeps nothing",
                ));
            }
            for (i, name) in c.iter().enumerate() {
                check(format!("columns.{i}"), name)?;
            }
        }
        Ok(())
    }

    /// `columns` when given; else the registry's column list when it has one for every table
    /// (movielens-100k, wdbc, cardiotocography): the other tables take their names from the
    /// file's header row or a `.names` file, known only once those are read. `where` drops
    /// rows only. With `if_missing: empty` the frame may have no columns at all: not known
    /// before running.
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        if self.if_missing == IfMissing::Empty {
            return None;
        }
        if let Some(c) = &self.columns {
            return Some(c.clone());
        }
        self.table_columns()
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
                Err(DataError::Missing(m)) => return Err(anyhow::Error::new(Unavailable(m))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::columns::FrameBuilder;

    #[test]
    fn output_columns_come_from_the_registry_where_it_lists_them() {
        let out = |y: &str| {
            let p: LoadDataset = crate::yaml::deserialize(serde_yaml_ng::from_str(y).unwrap())
                .unwrap_or_else(|e| panic!("{y}: {}", e.message));
            p.columns_out(&[])
        };
        let ratings = Some(
            ["user_id", "item_id", "rating", "timestamp"]
                .map(String::from)
                .to_vec(),
        );
        assert_eq!(
            out("{dataset: movielens-100k, table: ratings, where: [item_id == 785]}"),
            ratings
        );
        // `columns` picks, in its order; names from a header row or a .names file are unknown.
        assert_eq!(
            out("{dataset: adult, table: train, columns: [sex, age]}"),
            Some(vec!["sex".to_string(), "age".to_string()])
        );
        assert_eq!(out("{dataset: adult, table: train}"), None);
        assert_eq!(out("{dataset: parkinsons}"), None);
        // An empty frame may stand in for a missing dataset.
        assert_eq!(
            out("{dataset: movielens-100k, table: ratings, if_missing: empty}"),
            None
        );
    }

    #[test]
    fn misspelt_columns_are_found_from_the_registry_before_anything_is_read() {
        let check = |y: &str| {
            let p: LoadDataset = crate::yaml::deserialize(serde_yaml_ng::from_str(y).unwrap())
                .unwrap_or_else(|e| panic!("{y}: {}", e.message));
            p.validate()
        };
        check(
            "{dataset: movielens-100k, table: ratings, where: [item_id == 785], columns: [rating]}",
        )
        .unwrap();
        let e =
            check("{dataset: movielens-100k, table: ratings, where: [itemid == 785]}").unwrap_err();
        assert_eq!(e.path, ["where", "0"]);
        assert!(
            e.message.contains(
                "no column `itemid` in dataset `movielens-100k`; did you mean `item_id`?"
            ),
            "{}",
            e.message
        );
        let e = check("{dataset: movielens-100k, table: ratings, columns: [rating, timestmp]}")
            .unwrap_err();
        assert_eq!(e.path, ["columns", "1"]);
        assert!(
            e.message.contains("did you mean `timestamp`?"),
            "{}",
            e.message
        );
        // Names from a header row are known only when the file is read.
        check("{dataset: adult, table: train, columns: [sexx]}").unwrap();
    }

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

#[cfg(test)]
mod kind_tests {
    use super::KIND;
    use crate::kind::testing::refused;

    /// Through the kind's own checks: an unregistered dataset, a table listed twice and an
    /// empty column list are refused at their parameters before any file is looked for.
    #[test]
    fn what_is_refused_before_any_file_is_read() {
        let e = refused(&KIND, "{dataset: no-such-data}");
        assert!(
            e.starts_with("dataset: ") && e.contains("no-such-data"),
            "{e}"
        );
        assert_eq!(
            refused(&KIND, "{dataset: adult, table: [train, test, train]}"),
            "table.2: table `train` is listed twice"
        );
        assert_eq!(
            refused(&KIND, "{dataset: adult, table: train, columns: []}"),
            "columns: an empty column list keeps nothing"
        );
    }
}
