//! `load.dataset`: a registered public dataset, verified against its sha256, with row filters
//! and a column selection.

use anyhow::{anyhow, bail, Result};
use polars::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data::{self, DataError, Registry};
use crate::expr::{Expr, Mode, Vals};
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
    verdict: None,
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
    /// rows to keep: conditions in the expression language of `frame.derive` (SQL's syntax), all true for a row to be kept (a missing value is not true): `item_id = 785`, `occupation IS NOT NULL`, `age >= 18`, `sex IN ('Male', 'Female')`; text in single quotes, a column name with spaces in double quotes
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
    /// The dataset as the registry describes it: every file with its registered sha256 (null
    /// when it has none), and how each table is read.
    fn sources(&self) -> Vec<serde_json::Value> {
        let Ok(ds) = Registry::current().and_then(|r| r.dataset(&self.dataset)) else {
            return Vec::new();
        };
        let files: Vec<serde_json::Value> = ds
            .files
            .iter()
            .map(|f| serde_json::json!({"file": f.name, "sha256": f.sha256}))
            .collect();
        vec![serde_json::json!({
            "dataset": self.dataset,
            "files": files,
            "tables": ds.tables,
        })]
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
        for (i, expr) in self.parsed()?.iter().enumerate() {
            for name in expr.columns() {
                // An unquoted word is a column name: `sex = Male` names a column `Male`.
                check(format!("where.{i}"), &name).map_err(|e| ParamError {
                    message: if e.message.contains("did you mean") {
                        e.message.clone()
                    } else {
                        format!("{} — if it is text, quote it: '{name}'", e.message)
                    },
                    ..e
                })?;
            }
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
        for (i, expr) in self.parsed()?.iter().enumerate() {
            let text = &self.conditions[i];
            let keep = match expr.eval(&df) {
                Ok(Vals::Bool(v)) => v,
                Ok(Vals::Null(n)) => vec![None; n],
                Ok(other) => bail!(
                    "where.{i}: `{text}` gives {}, not a truth value: write a condition (`x = 1`, `x IS NOT NULL`)",
                    other.type_name()
                ),
                Err(e) => bail!("where.{i}: `{text}`: {e}"),
            };
            let mask: BooleanChunked = keep.into_iter().map(|k| k == Some(true)).collect();
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

impl LoadDataset {
    /// The `where:` conditions, read by the expression language; a condition in the spelling
    /// this kind used before it (`x is not missing`, `a == 1`, `s in [a, b]`) is refused with
    /// its spelling now.
    fn parsed(&self) -> Result<Vec<Expr>, ParamError> {
        self.conditions
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let at = format!("where.{i}");
                if let Some(now) = old_spelling(text) {
                    return Err(ParamError::at(
                        &at,
                        format!("`{text}` is the old spelling of a condition: write `{now}` (conditions are SQL expressions, as in frame.derive)"),
                    ));
                }
                Expr::parse(text, Mode::Rows).map_err(|m| ParamError::at(&at, m))
            })
            .collect()
    }
}

/// The condition `text` in today's spelling, when it is written in the spelling `where:` had
/// before it took the expression language: `is missing` / `is not missing`, `==`, and
/// `in [a, b]` (whose unquoted words were text).
fn old_spelling(text: &str) -> Option<String> {
    let t = text.trim();
    if let Some(col) = t.strip_suffix(" is not missing") {
        return Some(format!("{} IS NOT NULL", col.trim()));
    }
    if let Some(col) = t.strip_suffix(" is missing") {
        return Some(format!("{} IS NULL", col.trim()));
    }
    if let Some((col, list)) = t.split_once(" in [").or_else(|| t.split_once(" in[")) {
        let list = list.trim_end().strip_suffix(']')?;
        let values: Vec<String> = list
            .split(',')
            .map(|v| v.trim().trim_matches(|c| c == '"' || c == '\''))
            .filter(|v| !v.is_empty())
            .map(|v| match v.parse::<f64>() {
                Ok(_) => v.to_string(),
                Err(_) => format!("'{v}'"),
            })
            .collect();
        return Some(format!("{} IN ({})", col.trim(), values.join(", ")));
    }
    t.contains("==").then(|| t.replace("==", "="))
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
            out("{dataset: movielens-100k, table: ratings, where: ['item_id = 785']}"),
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
            "{dataset: movielens-100k, table: ratings, where: ['item_id = 785'], columns: [rating]}",
        )
        .unwrap();
        let e = check("{dataset: movielens-100k, table: ratings, where: ['itemid = 785']}")
            .unwrap_err();
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

    /// Conditions are expressions: all must be true for a row to stay (a missing value is
    /// not true); the old spelling is refused with the new one.
    #[test]
    fn conditions_are_expressions_and_the_old_spelling_is_refused() {
        let df = FrameBuilder::new()
            .opt_f64("a", vec![Some(1.0), Some(2.0), None, Some(3.0)])
            .str("s", ["x", "y", "x", "x"].map(String::from).to_vec())
            .build()
            .unwrap();
        let keep = |conditions: &[&str]| {
            let p = LoadDataset {
                dataset: "adult".into(),
                table: None,
                conditions: conditions.iter().map(|c| c.to_string()).collect(),
                columns: None,
                if_missing: IfMissing::Error,
            };
            let mut df = df.clone();
            for e in p.parsed().unwrap() {
                let Vals::Bool(v) = e.eval(&df).unwrap() else {
                    panic!("not a condition")
                };
                let mask: BooleanChunked = v.into_iter().map(|k| k == Some(true)).collect();
                df = df.filter(&mask).unwrap();
            }
            df.height()
        };
        assert_eq!(keep(&["a >= 2"]), 2);
        assert_eq!(keep(&["a >= 2", "s = 'x'"]), 1);
        assert_eq!(keep(&["s IN ('x', 'z')", "a IS NOT NULL"]), 2);
        assert_eq!(keep(&["NOT (a < 2)"]), 2, "a missing value is not true");
        for (old, now) in [
            ("occupation is not missing", "occupation IS NOT NULL"),
            ("occupation is missing", "occupation IS NULL"),
            ("item_id == 785", "item_id = 785"),
            ("sex in [Male, 'Female', 3]", "sex IN ('Male', 'Female', 3)"),
        ] {
            assert_eq!(old_spelling(old).as_deref(), Some(now), "{old}");
        }
        assert_eq!(old_spelling("a IS NOT NULL AND b = 'in [x]'"), None);
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
