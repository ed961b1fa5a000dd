//! `aggregate.loglog_fit`: the least-squares slope of log y on log x per group (a
//! convergence rate), beside a predicted slope.

use crate::stages::param::level_95;
use anyhow::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::stages::columns::{f64_col, group_by, FrameBuilder};
use crate::stages::param::Level;
use crate::stages::{build, distinct, params, Ctx, Gather, KindInfo, Output, ParamError, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "aggregate.loglog_fit",
    version: 2, // 2: `by:` keys keep their column's type
    random: false,
    runs_programs: false,
    summary: "Least-squares slope of log y on log x per group (a convergence rate), with a t-interval, beside a predicted slope. `output: slopes` gives one row per group; `lines` gives every input row with the fitted and the predicted line (anchored at the fit's centre) for plotting.",
    params: params::<LogLogFit>,
    gather: Gather::All,
    build: build::<LogLogFit>,
    verdict: None,
};

/// What the rows of the output are.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum FitOutput {
    /// one row per group
    #[default]
    Slopes,
    /// one row per input row, with the fitted and the predicted line
    Lines,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogLogFit {
    /// column of x (> 0)
    x: String,
    /// column of y (> 0)
    y: String,
    /// columns that define the groups
    #[serde(default)]
    by: Vec<String>,
    /// column holding each group's predicted slope (without it, the predicted slope and line
    /// are empty)
    predicted: Option<String>,
    /// the rows of the output
    #[serde(default)]
    output: FitOutput,
    /// confidence level of the slope interval
    #[serde(default = "level_95")]
    level: Level,
    /// with `output: lines`, numeric input columns carried to each row (e.g. ci_lo, ci_hi, for
    /// bands around the measured points)
    #[serde(default)]
    keep: Vec<String>,
}

impl Stage for LogLogFit {
    fn columns_read(&self) -> Vec<(String, String)> {
        let mut out = vec![("x".into(), self.x.clone()), ("y".into(), self.y.clone())];
        for (key, cols) in [("by", &self.by), ("keep", &self.keep)] {
            for (i, c) in cols.iter().enumerate() {
                out.push((format!("{key}.{i}"), c.clone()));
            }
        }
        out.extend(
            self.predicted
                .iter()
                .map(|p| ("predicted".into(), p.clone())),
        );
        out
    }

    fn intervals(&self) -> Vec<[String; 3]> {
        vec![["slope", "slope_ci_lo", "slope_ci_hi"].map(str::to_string)]
    }

    /// The keys of `by`; with `output: lines` x, y and the fitted and predicted lines; the
    /// slope, its interval and the predicted slope; then the `keep` columns.
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out = self.by.clone();
        if self.output == FitOutput::Lines {
            out.extend([
                self.x.clone(),
                self.y.clone(),
                "fitted".into(),
                "predicted".into(),
            ]);
        }
        out.extend(["slope", "slope_ci_lo", "slope_ci_hi", "predicted_slope"].map(str::to_string));
        out.extend(self.keep.iter().cloned());
        Some(out)
    }

    fn validate(&self) -> Result<(), ParamError> {
        distinct("by", &self.by)?;
        distinct("keep", &self.keep)?;
        if !self.keep.is_empty() && self.output != FitOutput::Lines {
            return Err(ParamError::at(
                "keep",
                "`keep` carries input columns to each row: it needs `output: lines`",
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let x = f64_col(df, &self.x)?;
        let y = f64_col(df, &self.y)?;
        let predicted = match &self.predicted {
            Some(c) => Some(f64_col(df, c)?),
            None => None,
        };
        if let Some(i) = (0..x.len()).find(|&i| !(x[i] > 0.0 && y[i] > 0.0)) {
            anyhow::bail!(
                "aggregate.loglog_fit: row {i} has {} = {}, {} = {}; a log–log fit needs both > 0",
                self.x,
                x[i],
                self.y,
                y[i]
            );
        }
        let kept: Vec<Vec<f64>> = self
            .keep
            .iter()
            .map(|c| f64_col(df, c))
            .collect::<Result<_>>()?;
        let mut kept_out: Vec<Vec<f64>> = vec![Vec::new(); kept.len()];
        let groups = group_by(df, &self.by)?;
        let mut fb = FrameBuilder::new();
        // For each output row, a row of its group: where its key columns are taken from.
        let mut key_rows: Vec<usize> = Vec::new();
        let mut cols: Vec<Vec<f64>> = vec![Vec::new(); 8];
        for (key, rows) in &groups {
            if rows.len() < 2 {
                anyhow::bail!(
                    "aggregate.loglog_fit: group {key:?} has {} point(s); a slope needs ≥ 2",
                    rows.len()
                );
            }
            let lx: Vec<f64> = rows.iter().map(|&r| x[r].ln()).collect();
            let ly: Vec<f64> = rows.iter().map(|&r| y[r].ln()).collect();
            if lx.iter().all(|v| *v == lx[0]) {
                anyhow::bail!("aggregate.loglog_fit: group {key:?} has one x value only ({}); a slope needs two", x[rows[0]]);
            }
            let fit = crate::mech::stats::fit_line(&lx, &ly, *self.level);
            let pred = predicted.as_ref().map_or(f64::NAN, |p| p[rows[0]]);
            if let Some(p) = &predicted {
                if let Some(&r) = rows.iter().find(|&&r| p[r] != pred) {
                    anyhow::bail!(
                        "aggregate.loglog_fit: the predicted slope differs within group {key:?} ({pred} and {}); add the column that separates them to `by`",
                        p[r]
                    );
                }
            }
            let centre = lx.iter().sum::<f64>() / lx.len() as f64;
            let at_centre = fit.intercept + fit.slope * centre;
            let emit: Vec<usize> = match self.output {
                FitOutput::Slopes => vec![rows[0]],
                FitOutput::Lines => rows.clone(),
            };
            for r in emit {
                key_rows.push(rows[0]);
                let lxr = x[r].ln();
                let row = [
                    x[r],
                    y[r],
                    (fit.intercept + fit.slope * lxr).exp(),
                    (at_centre + pred * (lxr - centre)).exp(),
                    fit.slope,
                    fit.slope_lo,
                    fit.slope_hi,
                    pred,
                ];
                for (c, v) in cols.iter_mut().zip(row) {
                    c.push(v);
                }
                for (out, col) in kept_out.iter_mut().zip(&kept) {
                    out.push(col[r]);
                }
            }
        }
        fb = fb.keys(df, &self.by, &key_rows)?;
        let names: [&str; 8] = [
            &self.x,
            &self.y,
            "fitted",
            "predicted",
            "slope",
            "slope_ci_lo",
            "slope_ci_hi",
            "predicted_slope",
        ];
        let skip = if self.output == FitOutput::Slopes {
            4
        } else {
            0
        };
        for (name, col) in names.iter().zip(cols).skip(skip) {
            fb = fb.f64(name, col);
        }
        for (name, col) in self.keep.iter().zip(kept_out) {
            fb = fb.f64(name, col);
        }
        Ok(fb.build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, run, strings};

    /// y = 3·x^−0.5 exactly gives slope −0.5 with an interval of width ~0 in its group,
    /// y = x² slope 2 in the other; `output: lines` puts the fitted line through the points.
    #[test]
    fn the_slope_of_a_power_law_per_group() {
        let x = [1.0, 2.0, 4.0, 8.0];
        let mut g = vec!["half"; 4];
        g.extend(["square"; 4]);
        let xs: Vec<f64> = x.iter().chain(&x).copied().collect();
        let ys: Vec<f64> = x
            .iter()
            .map(|x| 3.0 * x.powf(-0.5))
            .chain(x.iter().map(|x| x * x))
            .collect();
        let input = polars::df!("g" => g, "n" => xs, "err" => ys.clone()).unwrap();
        let out = run(&KIND, "{x: n, y: err, by: [g]}", &[&input], 0)
            .unwrap()
            .frame;
        assert_eq!(strings(&out, "g"), ["half", "square"]);
        let slope = floats(&out, "slope");
        assert!(
            (slope[0] + 0.5).abs() < 1e-12 && (slope[1] - 2.0).abs() < 1e-12,
            "{slope:?}"
        );
        let (lo, hi) = (floats(&out, "slope_ci_lo"), floats(&out, "slope_ci_hi"));
        assert!(
            lo[0] <= slope[0] && slope[0] <= hi[0] && hi[0] - lo[0] < 1e-9,
            "{out}"
        );
        let lines = run(
            &KIND,
            "{x: n, y: err, by: [g], output: lines}",
            &[&input],
            0,
        )
        .unwrap()
        .frame;
        for (f, y) in floats(&lines, "fitted").iter().zip(&ys) {
            assert!((f - y).abs() < 1e-9 * y, "{f} vs {y}");
        }
    }
}
