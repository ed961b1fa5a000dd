//! `aggregate.summary`: statistics of value columns per group — typically over the
//! repetitions (`over: [rep]`) or the Monte-Carlo samples of a stage.

use anyhow::Result;
use serde::Deserialize;

use super::frame::{f64_col, group_rows, FrameBuilder};
use super::{
    build, check_size_run, product, Ctx, Gather, KindInfo, Limit, Output, ParamDoc, ParamError,
    Params, Stage,
};
use crate::mech::stats::{quantile_sorted, summarise};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "aggregate.improvement",
            version: 1,
            random: false,
            summary: "How much smaller `ours` is than `baseline` over the rows (e.g. leakage or distortion of two mechanisms): mean of (b − o)/b per row, and (Σb − Σo)/Σb. One row, with n.",
            params: Params::Doc(&[
                ParamDoc { name: "ours", ty: "string", default: None, meaning: "column of the improved mechanism" },
                ParamDoc { name: "baseline", ty: "string", default: None, meaning: "column of the baseline" },
                ParamDoc { name: "label", ty: "string", default: Some("—"), meaning: "text for a `claim` column (to join with a paper's table)" },
            ]),
            gather: Gather::All,
            build: build::<Improvement>,
        },
        KindInfo {
        name: "aggregate.summary",
        version: 1,
        random: false,
        summary: "Per group and value column: n, mean, std, standard error, confidence interval of the mean (Student t), min, max and quantiles. One row per (group, value), long format.",
        params: Params::Doc(&[
            ParamDoc { name: "values", ty: "list of strings", default: None, meaning: "numeric columns to summarise" },
            ParamDoc { name: "by", ty: "list of strings", default: Some("[]"), meaning: "columns that define the groups (besides the instance's own axes)" },
            ParamDoc { name: "level", ty: "number in (0, 1)", default: Some("0.95"), meaning: "confidence level" },
            ParamDoc { name: "quantiles", ty: "list of numbers in [0, 1]", default: Some("[]"), meaning: "quantiles to report, as columns q<100·q>" },
        ]),
        gather: Gather::Nothing,
        build: build::<Summary>,
    },
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Improvement {
    ours: String,
    baseline: String,
    #[serde(default)]
    label: Option<String>,
}

impl Stage for Improvement {
    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let frames: Vec<&polars::prelude::DataFrame> = ctx.inputs.iter().collect();
        let df = crate::frames::concat(&frames)?;
        let o = f64_col(&df, &self.ours)?;
        let b = f64_col(&df, &self.baseline)?;
        if o.is_empty() {
            anyhow::bail!("aggregate.improvement: no rows");
        }
        if let Some(v) = b.iter().find(|v| **v == 0.0) {
            anyhow::bail!("aggregate.improvement: baseline `{}` has the value {v}; relative changes need a non-zero baseline", self.baseline);
        }
        let n = o.len() as f64;
        let mean_rel = o.iter().zip(&b).map(|(o, b)| (b - o) / b).sum::<f64>() / n;
        let (so, sb) = (o.iter().sum::<f64>(), b.iter().sum::<f64>());
        let mut fb = FrameBuilder::new();
        if let Some(l) = &self.label {
            fb = fb.str("claim", vec![l.clone()]);
        }
        Ok(fb
            .i64("n", vec![o.len() as i64])
            .f64("mean_relative", vec![mean_rel])
            .f64("ratio_of_sums", vec![(sb - so) / sb])
            .build()?
            .into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Summary {
    values: Vec<String>,
    #[serde(default)]
    by: Vec<String>,
    #[serde(default = "level")]
    level: f64,
    #[serde(default)]
    quantiles: Vec<f64>,
}

fn level() -> f64 {
    0.95
}

impl Stage for Summary {
    fn validate(&self) -> Result<(), ParamError> {
        super::distinct("values", &self.values)?;
        super::distinct("by", &self.by)?;
        super::distinct("quantiles", &self.quantiles)?;
        if self.values.is_empty() {
            return Err(ParamError::at(
                "values",
                "name at least one column to summarise",
            ));
        }
        super::check_level(self.level)?;
        for (i, q) in self.quantiles.iter().enumerate() {
            if !(0.0..=1.0).contains(q) {
                return Err(ParamError::at(
                    &format!("quantiles.{i}"),
                    format!("quantile {q} is invalid: must be in [0, 1]"),
                ));
            }
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

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out = self.by.clone();
        out.push("value".into());
        out.extend(self.stat_names());
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let groups = group_rows(df, &self.by)?;
        // One row per (group, value), with the keys, the value's name, 8 statistics and the
        // quantiles as columns.
        let (ng, nv) = (groups.len() as u64, self.values.len() as u64);
        let width = (self.by.len() + 9 + self.quantiles.len()) as u64;
        check_size_run(
            Limit::Cells,
            &format!("groups × values × columns ({ng} × {nv} × {width})"),
            product(&[ng, nv, width]),
        )?;
        let mut key_cols: Vec<Vec<String>> = vec![Vec::new(); self.by.len()];
        let mut value_name = Vec::new();
        let mut stats: Vec<Vec<f64>> = vec![Vec::new(); 8 + self.quantiles.len()];
        let columns: Vec<Vec<f64>> = self
            .values
            .iter()
            .map(|v| f64_col(df, v))
            .collect::<Result<_>>()?;
        for (key, rows) in &groups {
            for (name, col) in self.values.iter().zip(&columns) {
                let xs: Vec<f64> = rows.iter().map(|&r| col[r]).collect();
                let s = summarise(&xs, self.level);
                let mut sorted = xs.clone();
                sorted.sort_by(f64::total_cmp);
                for (k, kc) in key.iter().zip(&mut key_cols) {
                    kc.push(k.clone());
                }
                value_name.push(name.clone());
                let row = [
                    s.n as f64, s.mean, s.std, s.se, s.ci_lo, s.ci_hi, s.min, s.max,
                ];
                for (dst, v) in stats.iter_mut().zip(row) {
                    dst.push(v);
                }
                for (i, q) in self.quantiles.iter().enumerate() {
                    stats[8 + i].push(quantile_sorted(&sorted, *q));
                }
            }
        }
        let mut fb = FrameBuilder::new().keys(&self.by, key_cols);
        fb = fb.str("value", value_name);
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
            .chain(self.quantiles.iter().map(|q| format!("q{}", q * 100.0)))
            .collect()
    }
}

pub fn fit_kinds() -> Vec<KindInfo> {
    vec![KindInfo {
        name: "aggregate.loglog_fit",
        version: 1,
        random: false,
        summary: "Least-squares slope of log y on log x per group (a convergence rate), with a t-interval, beside a predicted slope. `output: slopes` gives one row per group; `lines` gives every input row with the fitted and the predicted line (anchored at the fit's centre) for plotting.",
        params: Params::Doc(&[
            ParamDoc { name: "x", ty: "string", default: None, meaning: "column of x (> 0)" },
            ParamDoc { name: "y", ty: "string", default: None, meaning: "column of y (> 0)" },
            ParamDoc { name: "by", ty: "list of strings", default: Some("[]"), meaning: "columns that define the groups" },
            ParamDoc { name: "predicted", ty: "string", default: Some("—"), meaning: "column holding each group's predicted slope" },
            ParamDoc { name: "output", ty: "slopes | lines", default: Some("slopes"), meaning: "one row per group, or per input row" },
            ParamDoc { name: "level", ty: "number in (0, 1)", default: Some("0.95"), meaning: "confidence level of the slope interval" },
            ParamDoc { name: "keep", ty: "list of strings", default: Some("[]"), meaning: "with `output: lines`, numeric input columns carried to each row (e.g. ci_lo, ci_hi, for bands around the measured points)" },
        ]),
        gather: Gather::All,
        build: build::<LogLogFit>,
    }]
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum FitOutput {
    #[default]
    Slopes,
    Lines,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogLogFit {
    x: String,
    y: String,
    #[serde(default)]
    by: Vec<String>,
    #[serde(default)]
    predicted: Option<String>,
    #[serde(default)]
    output: FitOutput,
    #[serde(default = "level")]
    level: f64,
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

    fn validate(&self) -> Result<(), ParamError> {
        super::distinct("by", &self.by)?;
        super::distinct("keep", &self.keep)?;
        super::check_level(self.level)?;
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
        let groups = group_rows(df, &self.by)?;
        let mut fb = FrameBuilder::new();
        let mut keys: Vec<Vec<String>> = vec![Vec::new(); self.by.len()];
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
            let fit = crate::mech::stats::fit_line(&lx, &ly, self.level);
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
                for (k, kc) in key.iter().zip(&mut keys) {
                    kc.push(k.clone());
                }
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
        fb = fb.keys(&self.by, keys);
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
