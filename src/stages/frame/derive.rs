//! `frame.derive`: new columns computed row by row from expressions over the input's columns.
//!
//! `with: {columns: {abs_err: "abs(noisy - count)", sq: "abs_err * abs_err"}}` keeps every
//! column of the input and adds `abs_err` and `sq` (a name the input has is replaced in
//! place). The expressions are evaluated in the order written, so a later one may read an
//! earlier one's column. Their syntax is SQL's (`CASE WHEN eps < 1 THEN 'small' ELSE 'large'
//! END`; text in single quotes, an odd column name in double quotes) and their semantics
//! those of [`super::expr`]:
//!
//! - integers stay integers under `+ - * %`, unary minus, `abs`, `least`, `greatest`,
//!   `coalesce`; `/` and the other functions give numbers (Float64); an integer overflow is
//!   an error naming the row;
//! - a missing value makes the result missing (`AND`/`OR`: SQL's three-valued logic);
//! - division or `%` by zero, and any computed number that is not finite (`sqrt(-1)`,
//!   `ln(0)`), is missing (null), as in SQLite;
//! - the axis columns of the input (`eps`, `rep`) are columns like any other.
//!
//! Errors are found before anything runs where they can be: the syntax, unknown functions
//! (with the nearest name), arities and limits by `validate` at the expression, a misspelt
//! column wherever the input's columns are known (with the nearest column); a type error
//! (`'a' + 1`) when the input exists, at the expression and the character inside it.

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::expr::{Expr, Mode};
use crate::stages::{
    build, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "frame.derive",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "The input with new columns computed row by row from expressions over its columns (SQL syntax: abs(noisy - count), CASE WHEN … END); integers stay integers, nulls propagate, x/0 is null.",
    params: params::<Derive>,
    gather: Gather::Nothing,
    build: build::<Derive>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Derive {
    /// the new columns, in order: name → expression over the input's columns and the columns
    /// derived before it (`abs(noisy - count)`; + - * / %, comparisons, AND OR NOT, CASE WHEN …
    /// THEN … ELSE … END, IS NULL, abs sqrt ln log log10 log2 exp pow floor ceil round least
    /// greatest coalesce; 'text'; "odd name")
    #[schemars(title = "map column → expression")]
    columns: IndexMap<String, String>,
}

impl Derive {
    /// Each new column with its parsed expression; an error at `columns.<name>`.
    fn parsed(&self) -> Result<Vec<(&str, Expr)>, ParamError> {
        self.columns
            .iter()
            .map(|(name, text)| {
                Expr::parse(text, Mode::Rows)
                    .map(|e| (name.as_str(), e))
                    .map_err(|m| at(name, m))
            })
            .collect()
    }
}

/// An error about the expression of column `name`, located at it.
fn at(name: &str, message: String) -> ParamError {
    ParamError {
        path: vec!["columns".into(), name.into()],
        message,
    }
}

impl Stage for Derive {
    fn validate(&self) -> Result<(), ParamError> {
        if self.columns.is_empty() {
            return Err(ParamError::at(
                "columns",
                "name at least one column to derive (`{abs_err: \"abs(noisy - count)\"}`)",
            ));
        }
        if let Some(name) = self.columns.keys().find(|n| n.trim().is_empty()) {
            return Err(at(name, "a derived column needs a name".into()));
        }
        self.parsed().map(|_| ())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        let Ok(parsed) = self.parsed() else {
            return Vec::new();
        };
        // A column derived before is read from there, not from the input.
        let mut derived: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for (name, e) in parsed {
            for c in e.columns() {
                if !derived.contains(&c.as_str()) {
                    out.push((format!("columns.{name}"), c));
                }
            }
            derived.push(name);
        }
        out
    }

    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out = inputs.first()?.clone()?;
        for name in self.columns.keys() {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let mut frame = ctx.input()?.clone();
        let added = self
            .columns
            .keys()
            .filter(|n| frame.column(n).is_err())
            .count();
        let (rows, width) = (frame.height() as u64, (frame.width() + added) as u64);
        check_size_run(
            Limit::Cells,
            &format!("rows × columns of the output ({rows} × {width})"),
            product(&[rows, width]),
        )?;
        for (name, e) in self.parsed()? {
            let vals = e.eval(&frame).map_err(|m| at(name, m))?;
            frame.with_column(vals.into_column(name))?;
        }
        Ok(frame.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, refused, run, strings};
    use polars::prelude::DataType;

    fn input() -> polars::prelude::DataFrame {
        polars::df!(
            "bin" => [1i64, 2, 3],
            "count" => [10i64, 20, 30],
            "noisy" => [12.5, 17.0, 30.0],
            "mechanism" => ["laplace", "gaussian", "laplace"]
        )
        .unwrap()
    }

    /// Columns are added in order, a later one reads an earlier one, a name the input has is
    /// replaced in place, and integer arithmetic stays integer.
    #[test]
    fn derives_in_order_keeping_the_input() {
        let out = run(
            &KIND,
            r#"{columns: {abs_err: "abs(noisy - count)", sq: "abs_err * abs_err", count: "count * 2", big: "CASE WHEN abs_err > 1 THEN 'yes' ELSE 'no' END"}}"#,
            &[&input()],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(
            names(&out),
            ["bin", "count", "noisy", "mechanism", "abs_err", "sq", "big"]
        );
        assert_eq!(floats(&out, "abs_err"), [2.5, 3.0, 0.0]);
        assert_eq!(floats(&out, "sq"), [6.25, 9.0, 0.0]);
        assert_eq!(out.column("count").unwrap().dtype(), &DataType::Int64);
        assert_eq!(floats(&out, "count"), [20.0, 40.0, 60.0]);
        assert_eq!(strings(&out, "big"), ["yes", "yes", "no"]);
    }

    /// A column named like an axis (`eps`, which the engine adds) is read like any other.
    #[test]
    fn reads_axis_columns() {
        let mut df = input();
        df.with_column(polars::prelude::Column::new("eps".into(), [0.5, 0.5, 0.5]))
            .unwrap();
        let out = run(&KIND, "{columns: {scaled: noisy * eps}}", &[&df], 0)
            .unwrap()
            .frame;
        assert_eq!(floats(&out, "scaled"), [6.25, 8.5, 15.0]);
    }

    /// What `validate` refuses, each at the expression with the character inside it.
    #[test]
    fn refuses_bad_expressions_before_running() {
        let e = refused(&KIND, r#"{columns: {a: "abss(noisy)"}}"#);
        assert!(
            e.starts_with("columns.a: at character 1: no function `abss`; did you mean `abs`?"),
            "{e}"
        );
        let e = refused(&KIND, r#"{columns: {a: "noisy + "}}"#);
        assert!(e.contains("cannot read the expression"), "{e}");
        let e = refused(&KIND, r#"{columns: {a: "noisy noisy"}}"#);
        assert!(
            e.contains("at character 7: unexpected `noisy` after the end"),
            "{e}"
        );
        let e = refused(&KIND, r#"{columns: {a: "max(noisy)"}}"#);
        assert!(
            e.contains("aggregate") && e.contains("greatest(a, b)"),
            "{e}"
        );
        let e = refused(&KIND, "{columns: {}}");
        assert!(e.contains("at least one"), "{e}");
    }

    /// A type error, or a column the input lacks, is found when the input exists: at the
    /// expression, with the nearest column.
    #[test]
    fn run_time_errors_name_the_column_and_place() {
        let e = fails(&KIND, r#"{columns: {a: "mechanism + 1"}}"#, &[&input()], 0);
        assert!(
            e.contains("at character 1: `+` needs numbers, and this is text"),
            "{e}"
        );
        let e = fails(
            &KIND,
            r#"{columns: {a: "abs(nosy - count)"}}"#,
            &[&input()],
            0,
        );
        assert!(
            e.contains("at character 5: no column `nosy`") && e.contains("did you mean `noisy`?"),
            "{e}"
        );
    }
}
