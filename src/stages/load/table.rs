//! `load.table`: a table written inline in the pipeline, or read from a CSV file.

use std::path::PathBuf;

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::frames::{read_csv, read_csv_text};
use crate::stages::columns::FrameBuilder;
use crate::stages::{
    build, check_size_at, distinct, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "load.table",
    version: 2, // 2: an inline column written in integers is of integers
    random: false,
    runs_programs: false,
    summary: "A table written inline (`columns`) or read from a CSV file (`path`).",
    params: params::<LoadTable>,
    gather: Gather::Nothing,
    build: build::<LoadTable>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadTable {
    /// inline columns of equal length; numbers or strings (a `$axis` may stand for a value)
    // (`skip_serializing_if`: no `default: null` in the schema; absent means none.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "columns_schema")]
    columns: Option<IndexMap<String, Vec<Value>>>,
    /// a CSV file with a header row, relative to the pipeline file; give `columns` or `path`
    #[schemars(with = "Option<String>", title = "path")]
    path: Option<PathBuf>,
    /// columns of the CSV file kept as text, each cell exactly as the file writes it: a paper's
    /// printed `0.050` or `1.6205`, which as numbers show as 0.05 and 1.621 (only with `path`)
    #[serde(default)]
    text: Vec<String>,
}

/// `columns`: a mapping of column names to lists of numbers or strings.
fn columns_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "title": "map of column → list",
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": ["number", "string"]}}
    })
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
        distinct("text", &self.text)?;
        if self.path.is_none() && !self.text.is_empty() {
            return Err(ParamError::at(
                "text",
                "`text` names columns of a CSV file (`path`); an inline column of strings is text already",
            ));
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
            let bytes = ctx.file(path)?;
            let reading = |e: anyhow::Error| anyhow::anyhow!("reading {}: {e}", path.display());
            let mut df = read_csv(bytes).map_err(reading)?;
            if !self.text.is_empty() {
                let text = read_csv_text(bytes).map_err(reading)?;
                for (i, name) in self.text.iter().enumerate() {
                    let col = text.column(name).map_err(|_| {
                        ParamError::at(
                            &format!("text.{i}"),
                            format!(
                                "{} has no column `{name}` (its columns: {})",
                                path.display(),
                                df.get_column_names()
                                    .iter()
                                    .map(|c| c.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })?;
                    df.with_column(col.clone())?;
                }
            }
            return Ok(df.into());
        }
        let mut fb = FrameBuilder::new();
        for (name, vals) in self.columns.as_ref().into_iter().flatten() {
            fb = match column_values(name, vals).map_err(|e| anyhow::anyhow!(e.message))? {
                Values::Int(v) => fb.i64(name, v),
                Values::Num(v) => fb.f64(name, v),
                Values::Text(v) => fb.str(name, v),
            };
        }
        Ok(fb.build()?.into())
    }
}

enum Values {
    /// Every value written as an integer: the column holds integers (counts stay counts).
    Int(Vec<i64>),
    Num(Vec<f64>),
    Text(Vec<String>),
}

/// An inline column's values, all numbers or all strings (`validate` checks it, `run` builds).
fn column_values(name: &str, vals: &[Value]) -> Result<Values, ParamError> {
    if let Some(ints) = vals
        .iter()
        .map(|v| v.as_i64())
        .collect::<Option<Vec<i64>>>()
    {
        Ok(Values::Int(ints))
    } else if vals.iter().all(|v| v.is_number()) {
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
        // The first value that breaks the column's type: one neither a number nor a string,
        // else the first whose type differs from the first value's.
        let number = |v: &Value| v.is_number();
        let at = vals
            .iter()
            .position(|v| !v.is_number() && !v.is_string())
            .or_else(|| {
                let first = vals.first().map(number).unwrap_or(true);
                vals.iter().position(|v| number(v) != first)
            })
            .unwrap_or(0);
        let what = match &vals[at] {
            Value::Number(_) => "a number".to_string(),
            Value::String(_) => "a string".to_string(),
            Value::Null => "null".to_string(),
            Value::Bool(b) => format!("the boolean {b}"),
            Value::Sequence(_) => "a list".to_string(),
            Value::Mapping(_) => "a mapping".to_string(),
            Value::Tagged(_) => "a tagged value".to_string(),
        };
        Err(ParamError::at(
            &format!("columns.{name}.{at}"),
            format!(
                "column `{name}` must hold only numbers or only strings, and this value is {what}"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, names, refused, strings, Instance};

    /// Inline columns keep their order and type; a CSV file is read from the bytes the engine
    /// hands over; columns of unequal length, mixed types and both sources at once are refused.
    #[test]
    fn inline_columns_and_csv_files_and_what_is_refused() {
        let out = Instance::new(&KIND, "{columns: {name: [a, b], x: [1, 2.5]}}")
            .run()
            .unwrap()
            .frame;
        assert_eq!(names(&out), ["name", "x"]);
        assert_eq!(
            (strings(&out, "name"), floats(&out, "x")),
            (vec!["a".to_string(), "b".into()], vec![1.0, 2.5])
        );
        let out = Instance::new(&KIND, "{path: t.csv}")
            .file("t.csv", b"k,v\nq,3\nr,4\n")
            .run()
            .unwrap()
            .frame;
        assert_eq!(floats(&out, "v"), [3.0, 4.0]);
        assert_eq!(
            refused(&KIND, "{columns: {a: [1, 2], b: [1]}}"),
            "columns.b: column `b` has 1 values, the first column 2"
        );
        assert_eq!(
            refused(&KIND, "{columns: {a: [1, x]}}"),
            "columns.a.1: column `a` must hold only numbers or only strings, and this value is a string"
        );
        assert_eq!(
            refused(&KIND, "{columns: {a: [1]}, path: t.csv}"),
            "path: give either `columns` or `path`, not both"
        );
    }

    /// `text:` keeps a CSV column as the file writes it (a paper's printed digits), the other
    /// columns keep their types; a column the file lacks is named with the file's columns.
    #[test]
    fn text_columns_keep_the_printed_digits() {
        let csv = b"k,d,mi\nq,0.050,1.6205\nr,0.100,1.5000\n";
        let out = Instance::new(&KIND, "{path: t.csv, text: [d, mi]}")
            .file("t.csv", csv)
            .run()
            .unwrap()
            .frame;
        assert_eq!(names(&out), ["k", "d", "mi"]);
        assert_eq!(strings(&out, "d"), ["0.050", "0.100"]);
        assert_eq!(strings(&out, "mi"), ["1.6205", "1.5000"]);
        let why = Instance::new(&KIND, "{path: t.csv, text: [d, x]}")
            .file("t.csv", csv)
            .run()
            .err()
            .unwrap();
        let why = why.downcast_ref::<crate::stages::ParamError>().unwrap();
        assert_eq!(
            (why.path.join("."), why.message.as_str()),
            (
                "text.1".into(),
                "t.csv has no column `x` (its columns: k, d, mi)"
            )
        );
        assert_eq!(
            refused(&KIND, "{columns: {a: [1]}, text: [a]}"),
            "text: `text` names columns of a CSV file (`path`); an inline column of strings is text already"
        );
    }
}
