//! `plot.histogram`: histograms of a numeric column as step outlines, one per value of
//! `series`, one panel per value of `facet`.

use crate::stages::param::yes;
use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use super::figure_output;
use crate::plot::{self, LineFigure, LineStyle, Panel, Series};
use crate::stages::columns::{f64_col_or_nan as f64_col, group_by, take_rows};
use crate::stages::param::Count;
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

/// The columns of the frame a histogram outputs: one row per drawn bin (its count, or its
/// density when `density`).
const DRAWN_COLUMNS: [&str; 5] = ["panel", "series", "bin_lo", "bin_hi", "value"];

pub const KIND: KindInfo = KindInfo {
    name: "plot.histogram",
    version: 7,
    random: false,
    runs_programs: false,
    summary: "Histograms (as step outlines, so several series stay readable) of a numeric column, one per value of `series`, one panel per value of `facet`; counts or densities.",
    params: params::<Histogram>,
    gather: Gather::All,
    build: build::<Histogram>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Histogram {
    /// the numeric column to bin
    column: String,
    /// number of equal-width bins
    #[serde(default = "crate::stages::param::count::<50>")]
    bins: Count,
    /// binned interval [low, high] (default: the data range); values outside are not counted
    #[schemars(title = "[low, high]")]
    range: Option<[f64; 2]>,
    /// normalise each series to integrate to 1 (else counts)
    #[serde(default = "yes")]
    density: bool,
    /// column whose values split the rows into series
    series: Option<String>,
    /// column whose values split the rows into panels
    facet: Option<String>,
    /// figure title
    title: String,
    /// x axis label, with units
    x_label: String,
    /// logarithmic y axis
    #[serde(default)]
    log_y: bool,
    /// panels per row (0: automatic)
    #[serde(default)]
    columns: usize,
}

impl Stage for Histogram {
    fn columns_read(&self) -> Vec<(String, String)> {
        let mut out = vec![("column".to_string(), self.column.clone())];
        for (key, col) in [("series", &self.series), ("facet", &self.facet)] {
            out.extend(col.iter().map(|c| (key.to_string(), c.clone())));
        }
        out
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(DRAWN_COLUMNS.map(str::to_string).to_vec())
    }

    fn validate(&self) -> Result<(), ParamError> {
        // Each bin is two points of the outline.
        check_size_at(
            "bins",
            Limit::Cells,
            &format!("bins × 2 outline points ({} × 2)", self.bins),
            product(&[self.bins.get(), 2]),
        )?;
        if let Some([lo, hi]) = self.range {
            // Both are finite: `build` refuses other numbers in every kind's `with:`.
            if lo >= hi {
                return Err(ParamError::at(
                    "range",
                    format!("range [{lo}, {hi}] is invalid: need low < high"),
                ));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let v = f64_col(df, &self.column)?;
        let (lo, hi) = match self.range {
            Some([lo, hi]) => (lo, hi),
            None => {
                let finite = v.iter().copied().filter(|x| x.is_finite());
                let lo = finite.clone().fold(f64::INFINITY, f64::min);
                let hi = finite.fold(f64::NEG_INFINITY, f64::max);
                if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
                    anyhow::bail!("plot.histogram: column `{}` has no spread to bin (min {lo}, max {hi}); give `range`", self.column);
                }
                (lo, hi)
            }
        };
        let bins = self.bins.get() as usize;
        let width = (hi - lo) / bins as f64;
        let facet_keys: Vec<String> = self.facet.iter().cloned().collect();
        let series_keys: Vec<String> = self.series.iter().cloned().collect();
        let facets = group_by(df, &facet_keys)?;
        // Every (panel, series) gets an outline of 2 points per bin.
        let outlines = if self.series.is_some() {
            group_by(df, &[facet_keys.clone(), series_keys.clone()].concat())?.len()
        } else {
            facets.len()
        } as u64;
        check_size_run(
            Limit::Cells,
            &format!(
                "histogram outlines × bins × 2 points ({outlines} × {} × 2)",
                self.bins
            ),
            product(&[outlines, self.bins.get(), 2]),
        )?;
        let mut panels = Vec::new();
        let mut drawn: [Vec<String>; 2] = Default::default();
        let mut bars: [Vec<f64>; 3] = Default::default();
        for (fkey, frows) in facets {
            let sub = frame_rows(df, &frows)?;
            let mut series = Vec::new();
            for (skey, rows) in group_by(&sub, &series_keys)? {
                let mut counts = vec![0.0; bins];
                let vals = f64_col(&sub, &self.column)?;
                for &r in &rows {
                    let x = vals[r];
                    if x >= lo && x <= hi {
                        let b = (((x - lo) / width) as usize).min(bins - 1);
                        counts[b] += 1.0;
                    }
                }
                if self.density {
                    let total: f64 = counts.iter().sum::<f64>() * width;
                    if total > 0.0 {
                        counts.iter_mut().for_each(|c| *c /= total);
                    }
                }
                // A step outline: up and across each bin.
                let (mut xs, mut ys) = (vec![lo], vec![0.0]);
                for (b, c) in counts.iter().enumerate() {
                    let left = lo + b as f64 * width;
                    xs.extend([left, left + width]);
                    ys.extend([*c, *c]);
                }
                xs.push(hi);
                ys.push(0.0);
                if self.log_y {
                    ys.iter_mut()
                        .filter(|y| **y <= 0.0)
                        .for_each(|y| *y = f64::NAN);
                }
                let name = skey.first().cloned().unwrap_or_else(|| self.column.clone());
                for (b, c) in counts.iter().enumerate() {
                    drawn[0].push(fkey.first().cloned().unwrap_or_default());
                    drawn[1].push(name.clone());
                    bars[0].push(lo + b as f64 * width);
                    bars[1].push(lo + (b + 1) as f64 * width);
                    bars[2].push(*c);
                }
                series.push(Series {
                    below: Vec::new(),
                    name,
                    x: xs,
                    y: ys,
                    band: None,
                    style: LineStyle::Solid,
                });
            }
            let title = match (&self.facet, fkey.first()) {
                (Some(f), Some(v)) => format!("{f} = {v}"),
                _ => String::new(),
            };
            panels.push(Panel {
                title,
                series,
                hlines: Vec::new(),
                y_label: String::new(),
                log_y: None,
            });
        }
        let fig = LineFigure {
            below_label: String::new(),
            y_min: None,
            colours: vec![],
            title: self.title.clone(),
            x_label: self.x_label.clone(),
            y_label: if self.density {
                "density".into()
            } else {
                "count".into()
            },
            log_x: false,
            log_y: self.log_y,
            panels,
            columns: self.columns,
            free_x: false,
            width: 640,
            height: 440,
        };
        let svg = plot::render_lines(&fig)?;
        let [panel, series] = drawn;
        let [bin_lo, bin_hi, value] = bars;
        let frame = polars::prelude::DataFrame::new(
            panel.len(),
            vec![
                polars::prelude::Column::new("panel".into(), panel),
                polars::prelude::Column::new("series".into(), series),
                polars::prelude::Column::new("bin_lo".into(), bin_lo),
                polars::prelude::Column::new("bin_hi".into(), bin_hi),
                polars::prelude::Column::new("value".into(), value),
            ],
        )?;
        Ok(figure_output(svg, frame))
    }
}

/// The rows `rows` of `df`, in that order.
fn frame_rows(
    df: &polars::prelude::DataFrame,
    rows: &[usize],
) -> Result<polars::prelude::DataFrame> {
    let cols = df
        .columns()
        .iter()
        .map(|c| take_rows(c, rows))
        .collect::<Result<Vec<_>>>()?;
    Ok(polars::prelude::DataFrame::new(rows.len(), cols)?)
}

#[cfg(test)]
mod kind_tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, refused, run, strings};

    /// Equal-width bins over the range: with `density` each series integrates to 1, without it
    /// the counts sum to the rows in range; the SVG is drawn beside the frame; a column
    /// without spread and an empty range are refused.
    #[test]
    fn bins_hold_the_values_and_each_density_integrates_to_one() {
        let input = polars::df!("v" => [0.0, 0.1, 0.6, 0.9, 1.0, 0.2], "s" => ["a", "a", "a", "b", "b", "b"]).unwrap();
        let base = "column: v, bins: 4, title: t, x_label: v";
        let out = run(&KIND, &format!("{{{base}, series: s}}"), &[&input], 0).unwrap();
        assert!(String::from_utf8_lossy(&out.artifacts[0].bytes).starts_with("<svg"));
        let f = out.frame;
        let (series, lo, hi, value) = (
            strings(&f, "series"),
            floats(&f, "bin_lo"),
            floats(&f, "bin_hi"),
            floats(&f, "value"),
        );
        for s in ["a", "b"] {
            // One row per bin: its ends and its height.
            let area: f64 = (0..f.height())
                .filter(|&i| series[i] == s)
                .map(|i| (hi[i] - lo[i]) * value[i])
                .sum();
            assert!((area - 1.0).abs() < 1e-12, "{s}: ∫ = {area}\n{f}");
        }
        let counts = run(
            &KIND,
            &format!("{{{base}, density: false, range: [0, 0.5]}}"),
            &[&input],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(
            floats(&counts, "value").iter().sum::<f64>(),
            3.0,
            "{counts}"
        );
        let flat = polars::df!("v" => [2.0, 2.0]).unwrap();
        assert!(fails(&KIND, &format!("{{{base}}}"), &[&flat], 0)
            .contains("has no spread to bin (min 2, max 2)"));
        assert_eq!(
            refused(&KIND, &format!("{{{base}, range: [1, 1]}}")),
            "range: range [1, 1] is invalid: need low < high"
        );
    }
}
