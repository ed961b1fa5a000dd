//! `evaluate.error`: the errors every DP paper reports, of estimates (noisy releases) against
//! true values: ℓ1, ℓ2, ℓ∞, RMSE, mean and max absolute error, mean and max relative error.
//!
//! Definitions, with eᵢ = estimateᵢ − truthᵢ over the n rows of one group (one instance, or
//! one value of the `by:` columns in it):
//! - `l1` = Σ|eᵢ|, `l2` = √(Σeᵢ²), `linf` = maxᵢ|eᵢ| (the norms of the error vector);
//! - `rmse` = √(Σeᵢ²/n), `mean_abs` = Σ|eᵢ|/n, `max_abs` = maxᵢ|eᵢ| (= `linf`, under the name
//!   tables use);
//! - `mean_rel` = Σ rᵢ/n and `max_rel` = maxᵢ rᵢ with rᵢ = |eᵢ| / max(|truthᵢ|, floor): the
//!   stated `floor` keeps a true value of 0 (an empty histogram bin) from dividing by zero:
//!   the "sanity bound" of Xiao, Wang & Gehrke's relative error (Privelet, 2010).
//!
//! The true value is a column of the same frame, or of a second input (the true frame) matched
//! row by row on the `on:` keys: each estimate row must find exactly one true row. No
//! randomness: the errors are a function of the inputs, so their spread over repetitions is
//! `aggregate.summary`'s work downstream.

use std::collections::HashMap;

use anyhow::{bail, Result};
use polars::prelude::{Column, DataFrame};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::expr::KeyCell;
use crate::stages::columns::{column, f64_col, group_by, take_rows};
use crate::stages::param::Positive;
use crate::stages::{
    build, check_size_run, distinct, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "evaluate.error",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "Errors of an estimate column against true values (a column of the same frame, or of a second input joined on `on:` keys): l1, l2, linf, rmse, mean_abs, max_abs, mean_rel, max_rel (relative to max(|true|, floor)); one row per instance, or per group of `by:`; or, with `per_row`, each row's abs_error and sq_error.",
    params: params::<Errors>,
    gather: Gather::Nothing,
    build: build::<Errors>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Metric {
    /// Σ|e|
    L1,
    /// √(Σe²)
    L2,
    /// max |e|
    Linf,
    /// √(Σe²/n)
    Rmse,
    /// Σ|e|/n
    MeanAbs,
    /// max |e| (= linf)
    MaxAbs,
    /// Σ r/n, r = |e| / max(|true|, floor)
    MeanRel,
    /// max r
    MaxRel,
}

impl Metric {
    const ALL: [Metric; 8] = [
        Metric::L1,
        Metric::L2,
        Metric::Linf,
        Metric::Rmse,
        Metric::MeanAbs,
        Metric::MaxAbs,
        Metric::MeanRel,
        Metric::MaxRel,
    ];

    /// The output column's name: the metric's, as written in `metrics:`.
    fn name(self) -> &'static str {
        match self {
            Metric::L1 => "l1",
            Metric::L2 => "l2",
            Metric::Linf => "linf",
            Metric::Rmse => "rmse",
            Metric::MeanAbs => "mean_abs",
            Metric::MaxAbs => "max_abs",
            Metric::MeanRel => "mean_rel",
            Metric::MaxRel => "max_rel",
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Errors {
    /// the column of estimates (the noisy releases), in the first input
    estimate: String,
    /// the column of true values: in the first input, or in the second input when there is
    /// one (the true frame, matched on `on:`)
    truth: String,
    /// key columns that match each estimate row to its true row in the second input (required
    /// with a second input, refused without one)
    #[serde(default)]
    on: Vec<String>,
    /// one row per group of these columns of the first input (e.g. [sample]); without, one
    /// row per instance
    #[serde(default)]
    by: Vec<String>,
    /// the metrics to report, one column each, in this order (default: all eight)
    metrics: Option<Vec<Metric>>,
    /// the floor of a relative error's denominator: r = |e| / max(|true|, floor)
    #[serde(default = "unit_floor")]
    floor: Positive,
    /// instead of metrics, each row of the first input with its `abs_error` |e| and
    /// `sq_error` e² (and the true value, when it comes from the second input)
    #[serde(default)]
    per_row: bool,
}

fn unit_floor() -> Positive {
    Positive::of(1.0)
}

impl Stage for Errors {
    fn validate(&self) -> Result<(), ParamError> {
        distinct("on", &self.on)?;
        distinct("by", &self.by)?;
        distinct("metrics", self.metrics())?;
        if self.metrics().is_empty() {
            return Err(ParamError::at("metrics", "name at least one metric"));
        }
        if self.per_row && self.metrics.is_some() {
            return Err(ParamError::at(
                "metrics",
                "`per_row: true` outputs each row's abs_error and sq_error, not metrics: drop `metrics` or `per_row`",
            ));
        }
        if self.per_row && !self.by.is_empty() {
            return Err(ParamError::at(
                "by",
                "`per_row: true` keeps every row: there are no groups to form",
            ));
        }
        if let Some((i, k)) = self
            .by
            .iter()
            .enumerate()
            .find(|(_, k)| self.on.contains(k))
        {
            return Err(ParamError {
                path: vec!["by".into(), i.to_string()],
                message: format!("`{k}` is a key of `on`: one row per key is `per_row: true`"),
            });
        }
        Ok(())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("estimate".to_string(), self.estimate.clone()),
            ("truth".to_string(), self.truth.clone()),
        ];
        for (key, cols) in [("on", &self.on), ("by", &self.by)] {
            out.extend(
                cols.iter()
                    .enumerate()
                    .map(|(i, c)| (format!("{key}.{i}"), c.clone())),
            );
        }
        out
    }

    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        if !self.per_row {
            let mut out = self.by.clone();
            out.extend(self.metrics().iter().map(|m| m.name().to_string()));
            return Some(out);
        }
        let mut out = inputs.first()?.clone()?;
        if inputs.len() == 2 && !out.contains(&self.truth) {
            out.push(self.truth.clone());
        }
        out.extend(["abs_error", "sq_error"].map(String::from));
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let (frame, truth) = match ctx.inputs {
            [one] => {
                if !self.on.is_empty() {
                    return Err(ParamError::at(
                        "on",
                        "`on` matches rows of a second input (the true frame), and this stage has one input",
                    )
                    .into());
                }
                (one, f64_col(one, &self.truth)?)
            }
            [estimates, truth] => (estimates, self.joined_truth(estimates, truth)?),
            other => bail!(
                "evaluate.error takes one input (estimates and true values) or two ([estimates, true frame]); got {}",
                other.len()
            ),
        };
        let estimate = f64_col(frame, &self.estimate)?;
        for (name, values) in [(&self.estimate, &estimate), (&self.truth, &truth)] {
            if let Some(i) = values.iter().position(|x| !x.is_finite()) {
                bail!(
                    "column `{name}` is {} at row {}: errors are defined for finite numbers",
                    values[i],
                    i + 1
                );
            }
        }
        let error: Vec<f64> = estimate.iter().zip(&truth).map(|(e, t)| e - t).collect();
        if self.per_row {
            let mut out = frame.clone();
            if ctx.inputs.len() == 2 && !self.has_own_truth(frame) {
                out.with_column(Column::new(self.truth.as_str().into(), truth.clone()))?;
            }
            out.with_column(Column::new(
                "abs_error".into(),
                error.iter().map(|e| e.abs()).collect::<Vec<f64>>(),
            ))?;
            out.with_column(Column::new(
                "sq_error".into(),
                error.iter().map(|e| e * e).collect::<Vec<f64>>(),
            ))?;
            return Ok(out.into());
        }
        let groups = if self.by.is_empty() {
            vec![(Vec::new(), (0..frame.height()).collect())]
        } else {
            group_by(frame, &self.by)?
        };
        let (ng, width) = (
            groups.len() as u64,
            (self.by.len() + self.metrics().len()) as u64,
        );
        check_size_run(
            Limit::Cells,
            &format!("groups × columns ({ng} × {width})"),
            product(&[ng, width]),
        )?;
        let floor = *self.floor;
        let mut cols: Vec<Column> = Vec::new();
        // The key columns keep their type: each group's first row.
        let firsts: Vec<usize> = groups.iter().map(|(_, rows)| rows[0]).collect();
        for key in &self.by {
            cols.push(take_rows(column(frame, key)?, &firsts)?);
        }
        for &m in self.metrics() {
            let values: Vec<f64> = groups
                .iter()
                .map(|(_, rows)| metric(m, rows, &error, &truth, floor))
                .collect();
            cols.push(Column::new(m.name().into(), values));
        }
        Ok(DataFrame::new_infer_height(cols)?.into())
    }
}

/// Metric `m` over the rows `rows` of the errors `e` (true values `t`, relative floor `floor`).
/// An empty group (an instance with no rows) has no error: NaN, written as a missing value.
fn metric(m: Metric, rows: &[usize], e: &[f64], t: &[f64], floor: f64) -> f64 {
    if rows.is_empty() {
        return f64::NAN;
    }
    let n = rows.len() as f64;
    let abs = rows.iter().map(|&i| e[i].abs());
    let sq = || rows.iter().map(|&i| e[i] * e[i]).sum::<f64>();
    let rel = rows.iter().map(|&i| e[i].abs() / t[i].abs().max(floor));
    match m {
        Metric::L1 => abs.sum(),
        Metric::L2 => sq().sqrt(),
        Metric::Linf | Metric::MaxAbs => abs.fold(0.0, f64::max),
        Metric::Rmse => (sq() / n).sqrt(),
        Metric::MeanAbs => abs.sum::<f64>() / n,
        Metric::MeanRel => rel.sum::<f64>() / n,
        Metric::MaxRel => rel.fold(0.0, f64::max),
    }
}

impl Errors {
    /// The metrics asked for, all eight by default.
    fn metrics(&self) -> &[Metric] {
        self.metrics.as_deref().unwrap_or(&Metric::ALL)
    }

    /// Whether the estimates' frame holds the truth column itself (then per-row output keeps
    /// it as it is rather than adding the joined one).
    fn has_own_truth(&self, frame: &DataFrame) -> bool {
        frame.column(&self.truth).is_ok()
    }

    /// The true value of each row of `estimates`, found in `truth` by the `on:` keys.
    fn joined_truth(&self, estimates: &DataFrame, truth: &DataFrame) -> Result<Vec<f64>> {
        if self.on.is_empty() {
            return Err(ParamError::at(
                "on",
                "with a second input (the true frame), name the key columns that match its rows to the estimates (e.g. `on: [bin]`)",
            )
            .into());
        }
        let values = f64_col(truth, &self.truth)?;
        let truth_keys = keys(truth, &self.on)?;
        let mut index: HashMap<&[KeyCell], usize> = HashMap::with_capacity(truth_keys.len());
        for (row, key) in truth_keys.iter().enumerate() {
            if let Some(first) = index.insert(key, row) {
                bail!(
                    "the true frame holds the key ({}) = ({}) twice (rows {} and {}): each key must name one true value",
                    self.on.join(", "),
                    key_text(truth, &self.on, row)?,
                    first + 1,
                    row + 1
                );
            }
        }
        keys(estimates, &self.on)?
            .iter()
            .enumerate()
            .map(|(row, key)| match index.get(key.as_slice()) {
                Some(&t) => Ok(values[t]),
                None => bail!(
                    "row {} of the estimates has the key ({}) = ({}), which the true frame lacks",
                    row + 1,
                    self.on.join(", "),
                    key_text(estimates, &self.on, row)?
                ),
            })
            .collect()
    }
}

/// Each row's key: its cells of the columns `keys`, matched by the one rule of
/// [`KeyCell`] (an integer key 3 matches a float key 3.0, text as it is).
fn keys(frame: &DataFrame, keys: &[String]) -> Result<Vec<Vec<KeyCell>>> {
    let mut out = vec![Vec::with_capacity(keys.len()); frame.height()];
    for key in keys {
        let cells = KeyCell::column(column(frame, key)?).map_err(anyhow::Error::msg)?;
        for (row, c) in out.iter_mut().zip(cells) {
            row.push(c);
        }
    }
    Ok(out)
}

/// Row `row`'s key as a message shows it: its cells' text, joined by `, `.
fn key_text(frame: &DataFrame, keys: &[String], row: usize) -> Result<String> {
    let cells: Vec<String> = keys
        .iter()
        .map(|k| Ok(crate::stages::columns::str_col(frame, k)?[row].clone()))
        .collect::<Result<_>>()?;
    Ok(cells.join(", "))
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, refused, run};

    /// Every metric against values computed by hand: errors (1, −2, 0, 4) on true values
    /// (0, 10, 5, −8) with floor 1: ℓ1 = 7, ℓ2 = √21, ℓ∞ = 4, RMSE = √(21/4), mean |e| = 7/4,
    /// relative errors (1/1, 2/10, 0, 4/8) — the first divided by the floor, not by 0.
    #[test]
    fn every_metric_by_hand() {
        let input = polars::df!(
            "value" => [0.0, 10.0, 5.0, -8.0],
            "noisy" => [1.0, 8.0, 5.0, -4.0]
        )
        .unwrap();
        let out = run(&KIND, "{estimate: noisy, truth: value}", &[&input], 0)
            .unwrap()
            .frame;
        assert_eq!(
            names(&out),
            ["l1", "l2", "linf", "rmse", "mean_abs", "max_abs", "mean_rel", "max_rel"]
        );
        let got: Vec<f64> = names(&out).iter().map(|c| floats(&out, c)[0]).collect();
        let want = [
            7.0,
            21f64.sqrt(),
            4.0,
            (21.0f64 / 4.0).sqrt(),
            1.75,
            4.0,
            (1.0 + 0.2 + 0.0 + 0.5) / 4.0,
            1.0,
        ];
        for ((g, w), c) in got.iter().zip(want).zip(names(&out)) {
            assert!((g - w).abs() < 1e-12, "{c}: {g} ≠ {w}");
        }
        // A floor above |true| divides by the floor: 1/5 and 2/10 (10 ≥ 5), …
        let out = run(
            &KIND,
            "{estimate: noisy, truth: value, metrics: [max_rel, l1], floor: 5}",
            &[&input],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(names(&out), ["max_rel", "l1"]);
        assert_eq!(floats(&out, "max_rel"), [0.5]);
    }

    /// `by:` gives one row per group, its key keeping its type (an integer `sample` stays an
    /// integer); per-row output keeps every input column and adds |e| and e².
    #[test]
    fn groups_and_rows() {
        let input = polars::df!(
            "sample" => [0i64, 0, 1, 1],
            "value" => [1.0, 2.0, 1.0, 2.0],
            "noisy" => [2.0, 2.0, 1.0, -1.0]
        )
        .unwrap();
        let out = run(
            &KIND,
            "{estimate: noisy, truth: value, by: [sample], metrics: [l1, linf]}",
            &[&input],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(names(&out), ["sample", "l1", "linf"]);
        assert_eq!(
            out.column("sample").unwrap().dtype(),
            &polars::prelude::DataType::Int64
        );
        assert_eq!(floats(&out, "l1"), [1.0, 3.0]);
        assert_eq!(floats(&out, "linf"), [1.0, 3.0]);
        let rows = run(
            &KIND,
            "{estimate: noisy, truth: value, per_row: true}",
            &[&input],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(
            names(&rows),
            ["sample", "value", "noisy", "abs_error", "sq_error"]
        );
        assert_eq!(floats(&rows, "sq_error"), [1.0, 0.0, 0.0, 9.0]);
    }

    /// A true frame as second input is matched on the keys, whatever the row order and
    /// whether a key is an integer on one side and a float on the other; a key the true frame
    /// lacks, or holds twice, is an error naming it.
    #[test]
    fn truth_from_a_second_frame_on_keys() {
        let noisy = polars::df!("bin" => [2.0, 0.0, 1.0], "noisy" => [7.0, 1.0, 1.0]).unwrap();
        let truth = polars::df!("bin" => [0i64, 1, 2], "count" => [1.0, 3.0, 4.0]).unwrap();
        let with = "{estimate: noisy, truth: count, on: [bin], metrics: [l1, linf]}";
        let out = run(&KIND, with, &[&noisy, &truth], 0).unwrap().frame;
        assert_eq!(floats(&out, "l1"), [5.0]);
        assert_eq!(floats(&out, "linf"), [3.0]);
        let rows = run(
            &KIND,
            "{estimate: noisy, truth: count, on: [bin], per_row: true}",
            &[&noisy, &truth],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(floats(&rows, "count"), [4.0, 1.0, 3.0]);
        let short = polars::df!("bin" => [0i64, 1], "count" => [1.0, 3.0]).unwrap();
        let e = fails(&KIND, with, &[&noisy, &short], 0);
        assert!(
            e.contains("row 1 of the estimates has the key (bin) = (2.0)"),
            "{e}"
        );
        let twice = polars::df!("bin" => [0i64, 0, 1, 2], "count" => [1.0, 1.0, 3.0, 4.0]).unwrap();
        let e = fails(&KIND, with, &[&noisy, &twice], 0);
        assert!(e.contains("holds the key (bin) = (0) twice"), "{e}");
        let e = fails(
            &KIND,
            "{estimate: noisy, truth: count}",
            &[&noisy, &truth],
            0,
        );
        assert!(
            e.contains("with a second input (the true frame), name the key"),
            "{e}"
        );
    }

    /// Contradictory parameters are refused at their key before anything runs; a value that is
    /// not a finite number (NaN, or text that is no number) fails the run, naming the column
    /// and row.
    #[test]
    fn bad_parameters_and_values() {
        assert_eq!(
            refused(&KIND, "{estimate: a, truth: b, metrics: []}"),
            "metrics: name at least one metric"
        );
        assert_eq!(
            refused(&KIND, "{estimate: a, truth: b, metrics: [l1, l1]}"),
            "metrics.1: `metrics` holds l1 twice"
        );
        assert!(
            refused(&KIND, "{estimate: a, truth: b, per_row: true, by: [s]}")
                .starts_with("by: `per_row: true` keeps every row")
        );
        assert!(refused(&KIND, "{estimate: a, truth: b, floor: 0}").starts_with("floor:"));
        assert!(refused(&KIND, "{estimate: a, truth: b, metrics: [l3]}").contains("l3"));
        let input = polars::df!("a" => [1.0, f64::NAN], "b" => [1.0, 1.0]).unwrap();
        let e = fails(&KIND, "{estimate: a, truth: b}", &[&input], 0);
        assert!(e.contains("column `a` is NaN at row 2"), "{e}");
        let input = polars::df!("a" => ["x"], "b" => [1.0]).unwrap();
        let e = fails(&KIND, "{estimate: a, truth: b}", &[&input], 0);
        assert!(
            e.contains("column `a` holds `x` at row 0, not a number"),
            "{e}"
        );
    }
}
