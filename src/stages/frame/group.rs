//! `frame.group`: one row per group of rows with equal `by:` values, with aggregates.
//!
//! `with: {by: [mechanism, eps], aggregates: {l1: "sum(abs_err)", q90: "quantile(abs_err,
//! 0.9)", n: "count(*)"}}` gives the columns `mechanism, eps, l1, q90, n`:
//!
//! - **Which rows.** By default the stage gathers every axis (one instance for the whole sweep,
//!   as SQL's GROUP BY sees the whole table): the groups are made by `by:` alone; `over:`
//!   narrows what is gathered as for any stage.
//! - **Group order** is the order of first appearance in the input (deterministic, as the
//!   input's order is). Keys are equal when their values are (an integer 1 and a number 1.0
//!   are one key); a missing key value makes a group of its own. The key columns keep their
//!   type. Without `by:`, the whole input is one group (one row, even for an empty input).
//! - **Aggregates** (see [`super::expr`]): `count(*)`, `count(x)`, `sum`, `mean`/`avg`, `min`,
//!   `max`, `median`, `quantile(x, q)` (linear interpolation between order statistics, numpy's
//!   default), `std`, `var` (sample, n − 1). They skip missing values; over no values they are
//!   missing (`count`: 0). `count`, and `sum`, `min`, `max` of integers, are integers. An
//!   argument is any row expression (`mean(abs(noisy - count))`), and an aggregate may sit
//!   in an expression (`sqrt(mean(sq))`, `sum(a) / count(*)`); outside aggregates an
//!   expression names only the keys and the aggregates written before it (`rmse: sqrt(mse)`).

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::expr::{group_rows, load, Expr, Mode, Vals};
use crate::stages::columns::{column, take_rows};
use crate::stages::{build, distinct, params, Ctx, Gather, KindInfo, Output, ParamError, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "frame.group",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "One row per group of equal `by:` values (in order of first appearance; the whole sweep by default), with aggregates: count(*), sum, mean, min, max, median, quantile(x, q), std, var of any row expression.",
    params: params::<Group>,
    gather: Gather::All,
    build: build::<Group>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Group {
    /// the columns whose values make the groups (none: the whole input is one group)
    #[serde(default)]
    by: Vec<String>,
    /// the output columns after the keys, in order: name → aggregate expression (`sum(abs_err)`,
    /// `mean(abs(noisy - count))`, `quantile(abs_err, 0.9)`, `count(*)`, `sqrt(mean(sq))`)
    #[schemars(title = "map column → aggregate expression")]
    aggregates: IndexMap<String, String>,
}

/// An error about the aggregate `name`, located at it.
fn at(name: &str, message: String) -> ParamError {
    ParamError {
        path: vec!["aggregates".into(), name.into()],
        message,
    }
}

impl Group {
    /// Each aggregate with its parsed expression; an error at `aggregates.<name>`.
    fn parsed(&self) -> Result<Vec<(&str, Expr)>, ParamError> {
        self.aggregates
            .iter()
            .map(|(name, text)| {
                Expr::parse(text, Mode::Groups)
                    .map(|e| (name.as_str(), e))
                    .map_err(|m| at(name, m))
            })
            .collect()
    }
}

impl Stage for Group {
    fn validate(&self) -> Result<(), ParamError> {
        distinct("by", &self.by)?;
        if self.aggregates.is_empty() {
            return Err(ParamError::at(
                "aggregates",
                "name at least one aggregate (`{n: \"count(*)\", mean_err: \"mean(abs_err)\"}`)",
            ));
        }
        let mut known: Vec<&str> = self.by.iter().map(String::as_str).collect();
        for (name, e) in self.parsed()? {
            if self.by.iter().any(|b| b == name) {
                return Err(at(
                    name,
                    format!("`{name}` is a `by` column: an aggregate needs a name of its own"),
                ));
            }
            if name.trim().is_empty() {
                return Err(at(name, "an aggregate needs a name".into()));
            }
            if let Some((c, pos)) = e
                .columns_outside_aggregates()
                .into_iter()
                .find(|(c, _)| !known.contains(&c.as_str()))
            {
                return Err(at(
                    name,
                    format!(
                        "{pos}`{c}` is neither a `by` column nor an aggregate written before, nor inside an aggregate (sum({c}), mean({c}) …): outside aggregates an expression names only those (here: {})",
                        if known.is_empty() { "none".to_string() } else { known.join(", ") }
                    ),
                ));
            }
            known.push(name);
        }
        Ok(())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .by
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("by.{i}"), c.clone()))
            .collect();
        let Ok(parsed) = self.parsed() else {
            return out;
        };
        let mut made: Vec<&str> = Vec::new();
        for (name, e) in parsed {
            for c in e.columns() {
                if !made.contains(&c.as_str()) && !self.by.contains(&c) {
                    out.push((format!("aggregates.{name}"), c));
                }
            }
            made.push(name);
        }
        out
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out = self.by.clone();
        out.extend(self.aggregates.keys().cloned());
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let keys: Vec<Vals> = self
            .by
            .iter()
            .enumerate()
            .map(|(i, b)| {
                load(column(df, b)?).map_err(|m| {
                    anyhow::Error::new(ParamError {
                        path: vec!["by".into(), i.to_string()],
                        message: m,
                    })
                })
            })
            .collect::<Result<_>>()?;
        let groups = if self.by.is_empty() {
            vec![(0..df.height()).collect()]
        } else {
            group_rows(&keys)
        };
        // The key columns keep their type: each group's first row of the input's column.
        // (Only a group without keys can be empty — `by: []` on an input of no rows — and then no
        // key column is taken.)
        let first: Vec<usize> = groups.iter().filter_map(|g| g.first().copied()).collect();
        let mut out = polars::prelude::DataFrame::new(
            groups.len(),
            self.by
                .iter()
                .map(|b| take_rows(column(df, b)?, &first))
                .collect::<Result<Vec<_>>>()?,
        )?;
        for (name, e) in self.parsed()? {
            let vals = e.eval_groups(&out, df, &groups).map_err(|m| at(name, m))?;
            out.with_column(vals.into_column(name))?;
        }
        Ok(out.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, refused, run, strings};
    use polars::prelude::DataType;

    fn input() -> polars::prelude::DataFrame {
        polars::df!(
            "mechanism" => ["laplace", "gaussian", "laplace", "gaussian", "laplace"],
            "eps" => [1i64, 1, 1, 1, 2],
            "err" => [Some(1.0), Some(4.0), Some(3.0), None, Some(10.0)],
            "count" => [1i64, 2, 3, 4, 5]
        )
        .unwrap()
    }

    /// One row per group in order of first appearance, keys of their type, each aggregate.
    #[test]
    fn aggregates_per_group_in_order_of_appearance() {
        let out = run(
            &KIND,
            r#"{by: [mechanism, eps], aggregates: {n: "count(*)", present: count(err), total: sum(count), mean: mean(err), q: "quantile(err, 0.5)", worst: max(err), rms: "sqrt(mean(err * err))", twice: n * 2}}"#,
            &[&input()],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(
            names(&out),
            [
                "mechanism",
                "eps",
                "n",
                "present",
                "total",
                "mean",
                "q",
                "worst",
                "rms",
                "twice"
            ]
        );
        assert_eq!(
            strings(&out, "mechanism"),
            ["laplace", "gaussian", "laplace"]
        );
        assert_eq!(out.column("eps").unwrap().dtype(), &DataType::Int64);
        assert_eq!(out.column("n").unwrap().dtype(), &DataType::Int64);
        assert_eq!(out.column("total").unwrap().dtype(), &DataType::Int64);
        assert_eq!(floats(&out, "n"), [2.0, 2.0, 1.0]);
        // A missing value is skipped, not counted.
        assert_eq!(floats(&out, "present"), [2.0, 1.0, 1.0]);
        assert_eq!(floats(&out, "total"), [4.0, 6.0, 5.0]);
        assert_eq!(floats(&out, "mean"), [2.0, 4.0, 10.0]);
        assert_eq!(floats(&out, "q"), [2.0, 4.0, 10.0]);
        assert_eq!(floats(&out, "worst"), [3.0, 4.0, 10.0]);
        assert_eq!(floats(&out, "rms")[0], 5f64.sqrt());
        assert_eq!(floats(&out, "twice"), [4.0, 4.0, 2.0]);
    }

    /// Without `by:`, one row for the whole input.
    #[test]
    fn no_keys_is_one_group() {
        let out = run(
            &KIND,
            r#"{aggregates: {n: "count(*)", s: sum(err)}}"#,
            &[&input()],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(floats(&out, "n"), [5.0]);
        assert_eq!(floats(&out, "s"), [18.0]);
    }

    /// An input of no rows: without keys, one row as SQL gives (count 0, the other aggregates
    /// missing), not a panic; with keys, no rows.
    #[test]
    fn an_empty_input_is_no_group_or_one_empty_one() {
        let empty = input().head(Some(0));
        let all = r#"n: "count(*)", c: count(err), s: sum(count), m: mean(err), md: median(err), q: "quantile(err, 0.9)", lo: min(err), hi: max(err), sd: std(err), v: var(err)"#;
        let out = run(&KIND, &format!("{{aggregates: {{{all}}}}}"), &[&empty], 0)
            .unwrap()
            .frame;
        assert_eq!(out.height(), 1, "{out}");
        assert_eq!(floats(&out, "n"), [0.0]);
        assert_eq!(floats(&out, "c"), [0.0]);
        for c in ["s", "m", "md", "q", "lo", "hi", "sd", "v"] {
            assert_eq!(out.column(c).unwrap().null_count(), 1, "{c}: {out}");
        }
        let out = run(
            &KIND,
            &format!("{{by: [mechanism], aggregates: {{{all}}}}}"),
            &[&empty],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(out.height(), 0, "{out}");
    }

    #[test]
    fn refuses_what_is_not_an_aggregate_of_a_group() {
        let e = refused(&KIND, r#"{by: [mechanism], aggregates: {x: err + 1}}"#);
        assert!(
            e.starts_with("aggregates.x: at character 1: `err` is neither a `by` column"),
            "{e}"
        );
        let e = refused(
            &KIND,
            r#"{by: [mechanism], aggregates: {x: "sum(mean(err))"}}"#,
        );
        assert!(e.contains("aggregates do not nest"), "{e}");
        let e = refused(&KIND, r#"{aggregates: {x: "quantile(err, 1.5)"}}"#);
        assert!(e.contains("not in [0, 1]"), "{e}");
        let e = refused(&KIND, r#"{aggregates: {x: "quantile(err, q)"}}"#);
        assert!(
            e.contains("a number in [0, 1] written in the expression"),
            "{e}"
        );
        let e = refused(&KIND, r#"{aggregates: {x: "meen(err)"}}"#);
        assert!(e.contains("did you mean `mean`?"), "{e}");
        let e = refused(
            &KIND,
            r#"{by: [mechanism], aggregates: {mechanism: "count(*)"}}"#,
        );
        assert!(e.contains("is a `by` column"), "{e}");
        let e = fails(
            &KIND,
            r#"{aggregates: {x: "sum(mechanism)"}}"#,
            &[&input()],
            0,
        );
        assert!(e.contains("`sum` needs numbers, and this is text"), "{e}");
    }
}
