//! `aggregate.summary`: statistics of value columns per group — typically over the
//! repetitions (`over: [rep]`) or the Monte-Carlo samples of a stage.

use crate::stages::param::level_95;
use anyhow::Result;
use polars::prelude::{IntoColumn, NewChunkedArray, StringChunked};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::stats::{quantile_sorted, summarise};
use crate::stages::columns::{f64_col, group_rows_by, key_texts, FrameBuilder};
use crate::stages::param::{Interval, Level, Probability};
use crate::stages::{
    build, check_size_run, distinct, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "aggregate.summary",
    version: 2, // 2: `by:` keys keep their column's type
    random: false,
    runs_programs: false,
    summary: "Per group and value column: n, mean, std, standard error, confidence interval of the mean (Student t), min, max and quantiles. One row per (group, value), long format.",
    params: params::<Summary>,
    gather: Gather::Nothing,
    build: build::<Summary>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Summary {
    /// numeric columns to summarise
    values: Vec<String>,
    /// columns that define the groups (besides the instance's own axes)
    #[serde(default)]
    by: Vec<String>,
    /// confidence level
    #[serde(default = "level_95")]
    level: Level,
    /// quantiles to report, as columns q<100·q>
    #[serde(default)]
    quantiles: Vec<Probability>,
    /// values known to lie in [lo, hi] (a share: [0, 1]): value → [lo, hi]. The interval of
    /// their mean is cut to it (a t-interval over few runs can leave it; the mean lies in it
    /// too, so the cut keeps the coverage), and a value outside it is an error
    #[serde(default)]
    bounds: indexmap::IndexMap<String, Interval>,
}

impl Stage for Summary {
    fn validate(&self) -> Result<(), ParamError> {
        distinct("values", &self.values)?;
        distinct("by", &self.by)?;
        distinct("quantiles", &self.quantiles)?;
        for col in self.bounds.keys() {
            if !self.values.contains(col) {
                return Err(ParamError::at(
                    "bounds",
                    format!(
                        "`{col}` is not one of `values` ({}): only a summarised value has bounds",
                        self.values.join(", ")
                    ),
                ));
            }
        }
        if self.values.is_empty() {
            return Err(ParamError::at(
                "values",
                "name at least one column to summarise",
            ));
        }
        Ok(())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        let named = |key: &str, cols: &[String]| -> Vec<(String, String)> {
            cols.iter()
                .enumerate()
                .map(|(i, c)| (format!("{key}.{i}"), c.clone()))
                .collect()
        };
        let mut out = named("values", &self.values);
        out.extend(named("by", &self.by));
        out
    }

    fn intervals(&self) -> Vec<[String; 3]> {
        vec![["mean", "ci_lo", "ci_hi"].map(str::to_string)]
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out = self.by.clone();
        out.push("value".into());
        out.extend(self.stat_names());
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let groups = group_rows_by(df, &self.by)?;
        // One row per (group, value), with the keys, the value's name, 8 statistics and the
        // quantiles as columns.
        let (ng, nv) = (groups.len() as u64, self.values.len() as u64);
        let width = (self.by.len() + 9 + self.quantiles.len()) as u64;
        check_size_run(
            Limit::Cells,
            &format!("groups × values × columns ({ng} × {nv} × {width})"),
            product(&[ng, nv, width]),
        )?;
        // Sized once: 10⁶ groups grown by doubling held up to twice their rows.
        let rows_out = groups.len() * self.values.len();
        // For each output row, a row of its group: where its key columns are taken from.
        let mut key_rows: Vec<usize> = Vec::with_capacity(rows_out);
        let mut stats: Vec<Vec<f64>> = (0..8 + self.quantiles.len())
            .map(|_| Vec::with_capacity(rows_out))
            .collect();
        let columns: Vec<Vec<f64>> = self
            .values
            .iter()
            .map(|v| f64_col(df, v))
            .collect::<Result<_>>()?;
        for rows in groups.iter() {
            for (name, col) in self.values.iter().zip(&columns) {
                let xs: Vec<f64> = rows.iter().map(|&r| col[r as usize]).collect();
                let mut s = summarise(&xs, *self.level);
                if let Some(&Interval { lo, hi }) = self.bounds.get(name) {
                    if let Some(x) = xs.iter().find(|x| !(lo..=hi).contains(*x)) {
                        let group = if self.by.is_empty() {
                            String::new()
                        } else {
                            let key = key_texts(df, &self.by, &[rows[0] as usize])?;
                            let key: Vec<&str> = key.iter().map(|t| t[0].as_str()).collect();
                            format!(" (group {})", key.join(", "))
                        };
                        return Err(ParamError::at(
                            &format!("bounds.{name}"),
                            format!("a value of `{name}` is {x}{group}, outside its bounds [{lo}, {hi}]"),
                        )
                        .into());
                    }
                    // One run has no interval (NaN), and cutting must not make one.
                    if s.ci_lo.is_finite() {
                        // A mean of values at a bound can round past it (three 0.1s average
                        // 0.10000000000000002): the cut interval still holds the mean.
                        s.ci_lo = s.ci_lo.max(lo).min(s.mean);
                        s.ci_hi = s.ci_hi.min(hi).max(s.mean);
                    }
                }
                let mut sorted = xs;
                sorted.sort_by(f64::total_cmp);
                key_rows.push(rows[0] as usize);
                let row = [
                    s.n as f64, s.mean, s.std, s.se, s.ci_lo, s.ci_hi, s.min, s.max,
                ];
                for (dst, v) in stats.iter_mut().zip(row) {
                    dst.push(v);
                }
                for (i, q) in self.quantiles.iter().enumerate() {
                    stats[8 + i].push(quantile_sorted(&sorted, **q));
                }
            }
        }
        drop(columns);
        let ng = groups.len();
        drop(groups);
        let mut fb = FrameBuilder::new().keys(df, &self.by, &key_rows)?;
        // The value names repeat per group: built as the column, not as 10⁶ strings first.
        let value_name = (0..ng).flat_map(|_| self.values.iter().map(String::as_str));
        fb = fb.column(StringChunked::from_iter_values("value".into(), value_name).into_column());
        for (i, (col, name)) in stats.into_iter().zip(self.stat_names()).enumerate() {
            fb = if i == 0 {
                fb.i64(&name, col.iter().map(|&x| x as i64).collect())
            } else {
                fb.f64(&name, col)
            };
        }
        Ok(fb.build()?.into())
    }
}

impl Summary {
    /// The statistics' columns, in order: 8 fixed, then one per quantile (`q50`).
    fn stat_names(&self) -> Vec<String> {
        ["n", "mean", "std", "se", "ci_lo", "ci_hi", "min", "max"]
            .into_iter()
            .map(str::to_string)
            .chain(self.quantiles.iter().map(|q| format!("q{}", **q * 100.0)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, refused, run, strings};

    /// Per group: n, mean, std (n − 1), the t-interval around the mean, min, max and the
    /// quantiles asked for; a bound names a summarised value or is refused.
    #[test]
    fn statistics_per_group() {
        let input =
            polars::df!("g" => ["a", "a", "a", "b", "b"], "x" => [1.0, 2.0, 3.0, 10.0, 10.0])
                .unwrap();
        let out = run(
            &KIND,
            "{values: [x], by: [g], quantiles: [0.5]}",
            &[&input],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(
            names(&out),
            ["g", "value", "n", "mean", "std", "se", "ci_lo", "ci_hi", "min", "max", "q50"]
        );
        assert_eq!(strings(&out, "g"), ["a", "b"]);
        assert_eq!(strings(&out, "value"), ["x", "x"]);
        assert_eq!(floats(&out, "n"), [3.0, 2.0]);
        assert_eq!(floats(&out, "mean"), [2.0, 10.0]);
        assert_eq!(floats(&out, "std"), [1.0, 0.0]);
        assert_eq!(floats(&out, "q50"), [2.0, 10.0]);
        // t(0.975, 2 df) = 4.3027: 2 ± 4.3027 · 1/√3.
        let half = 4.302652729911275 / 3f64.sqrt();
        assert!(
            (floats(&out, "ci_hi")[0] - (2.0 + half)).abs() < 1e-9,
            "{out}"
        );
        assert!(
            (floats(&out, "ci_lo")[0] - (2.0 - half)).abs() < 1e-9,
            "{out}"
        );
        assert_eq!(
            refused(&KIND, "{values: [x], bounds: {y: [0, 1]}}"),
            "bounds: `y` is not one of `values` (x): only a summarised value has bounds"
        );
    }

    /// A value outside its bounds is named with its group's keys, as they print.
    #[test]
    fn a_value_out_of_bounds_names_its_group() {
        let input = polars::df!(
            "g" => ["a", "b", "b"], "h" => [Some(1.5), None, None], "x" => [0.5, 0.5, 2.0]
        )
        .unwrap();
        let why = fails(
            &KIND,
            "{values: [x], by: [g, h], bounds: {x: [0, 1]}}",
            &[&input],
            0,
        );
        assert!(
            why.contains("a value of `x` is 2 (group b, ), outside its bounds [0, 1]"),
            "{why}"
        );
    }
}
