//! Plot stages: adapt a (gathered) frame to the figure types of [`crate::plot`].

use anyhow::Result;
use indexmap::IndexMap;
use serde::Deserialize;

use super::frame::{f64_col_or_nan as f64_col, group_rows, str_col};
use super::{
    build, check_size_at, check_size_run, product, Artifact, Ctx, Gather, KindInfo, Limit, Output,
    ParamDoc, ParamError, Params, Stage,
};
use crate::plot::{self, HeatPanel, HeatmapFigure, LineFigure, LineStyle, Panel, Series};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "plot.lines",
            version: 7,
            random: false,
            summary: "Lines (optionally with confidence bands) of y against x, one series per value of `series` and/or per y column, one panel per value of `facet`; log axes; labelled reference lines.",
            params: Params::Doc(&[
                ParamDoc { name: "x", ty: "string", default: None, meaning: "column on the x axis" },
                ParamDoc { name: "y", ty: "string or list", default: None, meaning: "column(s) on the y axis; each is a series" },
                ParamDoc { name: "lo", ty: "string or list", default: Some("—"), meaning: "lower band column(s), parallel to `y` (use \"\" for none)" },
                ParamDoc { name: "hi", ty: "string or list", default: Some("—"), meaning: "upper band column(s), parallel to `y`" },
                ParamDoc { name: "series", ty: "string", default: Some("—"), meaning: "column whose values split the rows into series" },
                ParamDoc { name: "facet", ty: "string", default: Some("—"), meaning: "column whose values split the rows into panels" },
                ParamDoc { name: "labels", ty: "map", default: Some("{}"), meaning: "display names for columns and series values" },
                ParamDoc { name: "y_labels", ty: "map facet value → text", default: Some("{}"), meaning: "a y label per panel, for panels that show different measures (with units)" },
                ParamDoc { name: "y_scales", ty: "map facet value → log|linear", default: Some("{} (log_y for every panel)"), meaning: "a y scale type per panel, for panels that show different measures (a share in [0, 1] linear beside errors on a log scale)" },
                ParamDoc { name: "style", ty: "map series → solid|dashed|markers|line_markers", default: Some("{}"), meaning: "line style per series name (after `labels`)" },
                ParamDoc { name: "hlines", ty: "list of {label, y}", default: Some("[]"), meaning: "horizontal reference lines" },
                ParamDoc { name: "reference", ty: "{column, label}", default: Some("—"), meaning: "one dashed reference curve (e.g. a bound) from a column, drawn once per panel whatever the series" },
                ParamDoc { name: "title", ty: "string", default: None, meaning: "figure title" },
                ParamDoc { name: "x_label", ty: "string", default: None, meaning: "x axis label, with units" },
                ParamDoc { name: "y_label", ty: "string", default: None, meaning: "y axis label, with units" },
                ParamDoc { name: "log_x", ty: "bool", default: Some("false"), meaning: "logarithmic x axis" },
                ParamDoc { name: "log_y", ty: "bool", default: Some("false"), meaning: "logarithmic y axis" },
                ParamDoc { name: "columns", ty: "integer", default: Some("0 (automatic)"), meaning: "panels per row" },
            ]),
            gather: Gather::All,
            build: build::<Lines>,
        },
        KindInfo {
            name: "plot.histogram",
            version: 4,
            random: false,
            summary: "Histograms (as step outlines, so several series stay readable) of a numeric column, one per value of `series`, one panel per value of `facet`; counts or densities.",
            params: Params::Doc(&[
                ParamDoc { name: "column", ty: "string", default: None, meaning: "the numeric column to bin" },
                ParamDoc { name: "bins", ty: "integer ≥ 1", default: Some("50"), meaning: "number of equal-width bins" },
                ParamDoc { name: "range", ty: "[low, high]", default: Some("data range"), meaning: "binned interval; values outside are not counted" },
                ParamDoc { name: "density", ty: "bool", default: Some("true"), meaning: "normalise each series to integrate to 1 (else counts)" },
                ParamDoc { name: "series", ty: "string", default: Some("—"), meaning: "column whose values split the rows into series" },
                ParamDoc { name: "facet", ty: "string", default: Some("—"), meaning: "column whose values split the rows into panels" },
                ParamDoc { name: "title", ty: "string", default: None, meaning: "figure title" },
                ParamDoc { name: "x_label", ty: "string", default: None, meaning: "x axis label, with units" },
                ParamDoc { name: "log_y", ty: "bool", default: Some("false"), meaning: "logarithmic y axis" },
                ParamDoc { name: "columns", ty: "integer", default: Some("0 (automatic)"), meaning: "panels per row" },
            ]),
            gather: Gather::All,
            build: build::<Histogram>,
        },
        KindInfo {
            name: "plot.heatmap",
            version: 5,
            random: false,
            summary: "A heatmap of z over (x, y) with a colour bar shared by all panels; optional contour line z = level.",
            params: Params::Doc(&[
                ParamDoc { name: "x", ty: "string", default: None, meaning: "column on the x axis" },
                ParamDoc { name: "y", ty: "string", default: None, meaning: "column on the y axis" },
                ParamDoc { name: "z", ty: "string", default: None, meaning: "column shown as colour" },
                ParamDoc { name: "facet", ty: "string", default: Some("—"), meaning: "column whose values split the rows into panels" },
                ParamDoc { name: "contour", ty: "number", default: Some("—"), meaning: "draw the level set z = contour, interpolated between cell centres (marching squares; in log z when log_z)" },
                ParamDoc { name: "title", ty: "string", default: None, meaning: "figure title" },
                ParamDoc { name: "x_label", ty: "string", default: None, meaning: "x axis label" },
                ParamDoc { name: "y_label", ty: "string", default: None, meaning: "y axis label" },
                ParamDoc { name: "z_label", ty: "string", default: None, meaning: "colour bar label" },
                ParamDoc { name: "log_x", ty: "bool", default: Some("false"), meaning: "logarithmic x axis" },
                ParamDoc { name: "log_y", ty: "bool", default: Some("false"), meaning: "logarithmic y axis" },
                ParamDoc { name: "log_z", ty: "bool", default: Some("false"), meaning: "logarithmic colour scale" },
                ParamDoc { name: "columns", ty: "integer", default: Some("0 (automatic)"), meaning: "panels per row" },
            ]),
            gather: Gather::All,
            build: build::<Heatmap>,
        },
    ]
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn list(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }

    /// The columns it names, each with its path under `key` (`y`, or `y.1`); `""` names none.
    fn named(&self, key: &str) -> Vec<(String, String)> {
        match self {
            OneOrMany::One(s) => vec![(key.to_string(), s.clone())],
            OneOrMany::Many(v) => v
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("{key}.{i}"), c.clone()))
                .collect(),
        }
        .into_iter()
        .filter(|(_, c)| !c.is_empty())
        .collect()
    }
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum ScaleName {
    Log,
    Linear,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum StyleName {
    Solid,
    Dashed,
    Markers,
    LineMarkers,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HLine {
    label: String,
    y: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reference {
    column: String,
    label: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Lines {
    x: String,
    y: OneOrMany,
    #[serde(default)]
    lo: Option<OneOrMany>,
    #[serde(default)]
    hi: Option<OneOrMany>,
    #[serde(default)]
    series: Option<String>,
    #[serde(default)]
    facet: Option<String>,
    #[serde(default)]
    labels: IndexMap<String, String>,
    #[serde(default)]
    y_labels: IndexMap<String, String>,
    #[serde(default)]
    y_scales: IndexMap<String, ScaleName>,
    #[serde(default)]
    style: IndexMap<String, StyleName>,
    #[serde(default)]
    hlines: Vec<HLine>,
    #[serde(default)]
    reference: Option<Reference>,
    title: String,
    x_label: String,
    y_label: String,
    #[serde(default)]
    log_x: bool,
    #[serde(default)]
    log_y: bool,
    #[serde(default)]
    columns: usize,
}

impl Lines {
    /// On a logarithmic axis a point with a non-positive coordinate has no position; a
    /// Monte-Carlo estimate of a small probability is often exactly 0. Such points become
    /// gaps in the line (the frame keeps them) and the count is logged, rather than
    /// failing the figure or silently moving the point. The point's band goes with it: a
    /// confidence interval reaching down to 0 would otherwise fill the panel to its bottom.
    #[allow(clippy::type_complexity)]
    fn drawable(
        &self,
        (name, log_y): (&str, bool),
        x: Vec<f64>,
        mut y: Vec<f64>,
        mut band: Option<(Vec<f64>, Vec<f64>)>,
    ) -> (Vec<f64>, Vec<f64>, Option<(Vec<f64>, Vec<f64>)>) {
        let mut dropped = 0usize;
        for i in 0..x.len() {
            if (self.log_x && x[i] <= 0.0) || (log_y && y[i] <= 0.0) {
                dropped += 1;
                y[i] = f64::NAN;
                if let Some((lo, hi)) = band.as_mut() {
                    lo[i] = f64::NAN;
                    hi[i] = f64::NAN;
                }
            }
        }
        if dropped > 0 {
            tracing::info!(
                "plot `{}`: {dropped} point(s) of `{name}` are ≤ 0 and are left out of the logarithmic axis",
                self.title
            );
        }
        (x, y, band)
    }
}

impl Stage for Lines {
    fn columns_read(&self) -> Vec<(String, String)> {
        let mut out = vec![("x".to_string(), self.x.clone())];
        out.extend(self.y.named("y"));
        for (key, band) in [("lo", &self.lo), ("hi", &self.hi)] {
            out.extend(band.iter().flat_map(|b| b.named(key)));
        }
        for (key, col) in [("series", &self.series), ("facet", &self.facet)] {
            out.extend(col.iter().map(|c| (key.to_string(), c.clone())));
        }
        out
    }

    fn validate(&self) -> Result<(), ParamError> {
        let ny = self.y.list().len();
        for (name, b) in [("lo", &self.lo), ("hi", &self.hi)] {
            if let Some(b) = b {
                if b.list().len() != ny {
                    return Err(ParamError::at(name, format!("`{name}` must list one column per `y` column ({ny}); use \"\" for none")));
                }
            }
        }
        if self.lo.is_some() != self.hi.is_some() {
            return Err(ParamError::at("lo", "bands need both `lo` and `hi`"));
        }
        if !self.y_labels.is_empty() && self.facet.is_none() {
            return Err(ParamError::at(
                "y_labels",
                "`y_labels` names panels by their `facet` value: give `facet` too (or use `y_label`)",
            ));
        }
        if !self.y_scales.is_empty() && self.facet.is_none() {
            return Err(ParamError::at(
                "y_scales",
                "`y_scales` names panels by their `facet` value: give `facet` too (or use `log_y`)",
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let label = |s: &str| self.labels.get(s).cloned().unwrap_or_else(|| s.to_string());
        let xs = f64_col(df, &self.x)?;
        let ys = self.y.list();
        let los = self
            .lo
            .as_ref()
            .map(|b| b.list())
            .unwrap_or_else(|| vec![String::new(); ys.len()]);
        let his = self
            .hi
            .as_ref()
            .map(|b| b.list())
            .unwrap_or_else(|| vec![String::new(); ys.len()]);
        let facet_keys: Vec<String> = self.facet.iter().cloned().collect();
        // Each column is read once, not once per panel and series.
        let series_names = match &self.series {
            Some(s) => str_col(df, s)?,
            None => vec![String::new(); df.height()],
        };
        let mut cols: IndexMap<&str, Vec<f64>> = IndexMap::new();
        // `y` columns always; band columns where given ("" is none).
        let bands = los.iter().chain(&his).filter(|c| !c.is_empty());
        for c in ys.iter().chain(bands) {
            if !cols.contains_key(c.as_str()) {
                cols.insert(c.as_str(), f64_col(df, c)?);
            }
        }
        let mut panels = Vec::new();
        for (fkey, frows) in group_rows(df, &facet_keys)? {
            let title = match (&self.facet, fkey.first()) {
                (Some(f), Some(v)) => facet_title(f, self.labels.get(f), v, &label(v)),
                _ => String::new(),
            };
            let panel_log_y = fkey
                .first()
                .and_then(|v| self.y_scales.get(v))
                .map_or(self.log_y, |s| *s == ScaleName::Log);
            let mut groups: IndexMap<String, Vec<usize>> = IndexMap::new();
            for &r in &frows {
                groups.entry(series_names[r].clone()).or_default().push(r);
            }
            let mut series = Vec::new();
            for (sname, rows) in &groups {
                for ((y, lo), hi) in ys.iter().zip(&los).zip(&his) {
                    let yv = &cols[y.as_str()];
                    let name = match (sname.is_empty(), ys.len() > 1) {
                        (true, _) => label(y),
                        (false, false) => label(sname),
                        (false, true) => format!("{} — {}", label(sname), label(y)),
                    };
                    let mut idx = rows.clone();
                    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
                    let band = if lo.is_empty() {
                        None
                    } else {
                        let band_col = |c: &str| {
                            cols.get(c).ok_or_else(|| {
                                anyhow::anyhow!("`lo` names `{lo}` where `hi` names `{hi}`: give both band columns, or \"\" for both")
                            })
                        };
                        let (l, h) = (band_col(lo)?, band_col(hi)?);
                        Some((
                            idx.iter().map(|&r| l[r]).collect(),
                            idx.iter().map(|&r| h[r]).collect(),
                        ))
                    };
                    let style = match self.style.get(&name) {
                        Some(StyleName::Dashed) => LineStyle::Dashed,
                        Some(StyleName::Markers) => LineStyle::Markers,
                        Some(StyleName::LineMarkers) => LineStyle::LineMarkers,
                        Some(StyleName::Solid) | None => LineStyle::Solid,
                    };
                    let x: Vec<f64> = idx.iter().map(|&r| xs[r]).collect();
                    let y: Vec<f64> = idx.iter().map(|&r| yv[r]).collect();
                    let (x, y, band) = self.drawable((&name, panel_log_y), x, y, band);
                    // A column that is empty for this series (e.g. no exact value) draws nothing.
                    if y.iter().all(|v| !v.is_finite()) {
                        continue;
                    }
                    series.push(Series {
                        name,
                        x,
                        y,
                        band,
                        style,
                    });
                }
            }
            if let Some(reference) = &self.reference {
                let rv = f64_col(df, &reference.column)?;
                let mut pts: Vec<(f64, f64)> = frows
                    .iter()
                    .map(|&r| (xs[r], rv[r]))
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                pts.dedup_by(|a, b| a.0 == b.0);
                let (x, y, _) = self.drawable(
                    (&reference.label, panel_log_y),
                    pts.iter().map(|p| p.0).collect(),
                    pts.iter().map(|p| p.1).collect(),
                    None,
                );
                if y.iter().any(|v| v.is_finite()) {
                    series.push(Series {
                        name: reference.label.clone(),
                        x,
                        y,
                        band: None,
                        style: LineStyle::Dashed,
                    });
                }
            }
            let y_label = fkey
                .first()
                .and_then(|v| self.y_labels.get(v))
                .cloned()
                .unwrap_or_default();
            panels.push(Panel {
                title,
                series,
                hlines: self.hlines.iter().map(|h| (h.label.clone(), h.y)).collect(),
                y_label,
                log_y: Some(panel_log_y),
            });
        }
        let fig = LineFigure {
            title: self.title.clone(),
            x_label: self.x_label.clone(),
            y_label: self.y_label.clone(),
            log_x: self.log_x,
            log_y: self.log_y,
            panels,
            columns: self.columns,
            width: 640,
            height: 440,
        };
        let svg = plot::render_lines(&fig)?;
        Ok(Output {
            frame: polars::prelude::DataFrame::empty(),
            artifacts: vec![Artifact {
                ext: "svg",
                bytes: svg.into_bytes(),
            }],
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Heatmap {
    x: String,
    y: String,
    z: String,
    #[serde(default)]
    facet: Option<String>,
    #[serde(default)]
    contour: Option<f64>,
    title: String,
    x_label: String,
    y_label: String,
    z_label: String,
    #[serde(default)]
    log_x: bool,
    #[serde(default)]
    log_y: bool,
    #[serde(default)]
    log_z: bool,
    #[serde(default)]
    columns: usize,
}

impl Stage for Heatmap {
    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let (xs, ys, zs) = (
            f64_col(df, &self.x)?,
            f64_col(df, &self.y)?,
            f64_col(df, &self.z)?,
        );
        let facet_keys: Vec<String> = self.facet.iter().cloned().collect();
        let mut panels = Vec::new();
        for (fkey, rows) in group_rows(df, &facet_keys)? {
            let grid = |v: &[f64]| {
                let mut g: Vec<f64> = rows.iter().map(|&r| v[r]).collect();
                g.sort_by(f64::total_cmp);
                g.dedup();
                g
            };
            let (gx, gy) = (grid(&xs), grid(&ys));
            let (nx, ny) = (gx.len() as u64, gy.len() as u64);
            check_size_run(
                Limit::Cells,
                &format!("heatmap cells, distinct x × distinct y ({nx} × {ny})"),
                product(&[nx, ny]),
            )?;
            let mut z = vec![f64::NAN; gx.len() * gy.len()];
            for &r in &rows {
                let ix = gx.partition_point(|&v| v < xs[r]);
                let iy = gy.partition_point(|&v| v < ys[r]);
                z[iy * gx.len() + ix] = zs[r];
            }
            let title = match (&self.facet, fkey.first()) {
                (Some(f), Some(v)) => format!("{f} = {v}"),
                _ => String::new(),
            };
            panels.push(HeatPanel {
                title,
                x: gx,
                y: gy,
                z,
            });
        }
        let fig = HeatmapFigure {
            title: self.title.clone(),
            x_label: self.x_label.clone(),
            y_label: self.y_label.clone(),
            z_label: self.z_label.clone(),
            log_x: self.log_x,
            log_y: self.log_y,
            panels,
            columns: self.columns,
            contour: self.contour,
            log_z: self.log_z,
            width: 520,
            height: 440,
        };
        let svg = plot::render_heatmap(&fig)?;
        Ok(Output {
            frame: polars::prelude::DataFrame::empty(),
            artifacts: vec![Artifact {
                ext: "svg",
                bytes: svg.into_bytes(),
            }],
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Histogram {
    column: String,
    #[serde(default = "fifty")]
    bins: usize,
    #[serde(default)]
    range: Option<[f64; 2]>,
    #[serde(default = "yes")]
    density: bool,
    #[serde(default)]
    series: Option<String>,
    #[serde(default)]
    facet: Option<String>,
    title: String,
    x_label: String,
    #[serde(default)]
    log_y: bool,
    #[serde(default)]
    columns: usize,
}

fn fifty() -> usize {
    50
}
fn yes() -> bool {
    true
}

impl Stage for Histogram {
    fn validate(&self) -> Result<(), ParamError> {
        if self.bins == 0 {
            return Err(ParamError::at("bins", "bins = 0 is invalid: must be ≥ 1"));
        }
        // Each bin is two points of the outline.
        check_size_at(
            "bins",
            Limit::Cells,
            &format!("bins × 2 outline points ({} × 2)", self.bins),
            product(&[self.bins as u64, 2]),
        )?;
        if let Some([lo, hi]) = self.range {
            if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                return Err(ParamError::at(
                    "range",
                    format!("range [{lo}, {hi}] is invalid: need finite low < high"),
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
        let width = (hi - lo) / self.bins as f64;
        let facet_keys: Vec<String> = self.facet.iter().cloned().collect();
        let series_keys: Vec<String> = self.series.iter().cloned().collect();
        let facets = group_rows(df, &facet_keys)?;
        // Every (panel, series) gets an outline of 2 points per bin.
        let outlines = if self.series.is_some() {
            group_rows(df, &[facet_keys.clone(), series_keys.clone()].concat())?.len()
        } else {
            facets.len()
        } as u64;
        check_size_run(
            Limit::Cells,
            &format!(
                "histogram outlines × bins × 2 points ({outlines} × {} × 2)",
                self.bins
            ),
            product(&[outlines, self.bins as u64, 2]),
        )?;
        let mut panels = Vec::new();
        for (fkey, frows) in facets {
            let sub = frame_rows(df, &frows)?;
            let mut series = Vec::new();
            for (skey, rows) in group_rows(&sub, &series_keys)? {
                let mut counts = vec![0.0; self.bins];
                let vals = f64_col(&sub, &self.column)?;
                for &r in &rows {
                    let x = vals[r];
                    if x >= lo && x <= hi {
                        let b = (((x - lo) / width) as usize).min(self.bins - 1);
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
                series.push(Series {
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
            width: 640,
            height: 440,
        };
        let svg = plot::render_lines(&fig)?;
        Ok(Output {
            frame: polars::prelude::DataFrame::empty(),
            artifacts: vec![Artifact {
                ext: "svg",
                bytes: svg.into_bytes(),
            }],
        })
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
        .map(|c| super::frame::take_rows(c, rows))
        .collect::<Result<Vec<_>>>()?;
    Ok(polars::prelude::DataFrame::new(rows.len(), cols)?)
}

/// A panel's title in `plot.lines`: `σ = 2` when the facet column has a label (`labels:
/// {sigma: σ}`) or the value is a number (which needs its name); else the value alone, since a
/// bare column name (`value = worst absolute error`, `panel = CRM · …`) is not for readers.
fn facet_title(column: &str, column_label: Option<&String>, raw: &str, shown: &str) -> String {
    match column_label {
        Some(c) => format!("{c} = {shown}"),
        None if raw.trim().parse::<f64>().is_ok() => format!("{column} = {shown}"),
        None => shown.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{facet_title, Lines};

    /// `y_scales` is checked with the other parameters: the bad value and the valid ones named,
    /// and only with `facet` (it names panels by their facet value).
    #[test]
    fn y_scales_are_checked() {
        let build = |extra: &str| {
            let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&format!(
                "{{x: k, y: mean, title: t, x_label: x, y_label: y, log_y: true, {extra}}}"
            ))
            .unwrap();
            crate::kind::build::<Lines>(&v).err()
        };
        assert!(build("facet: value, y_scales: {share: linear, error: log}").is_none());
        let e = build("facet: value, y_scales: {share: logarithmic}").unwrap();
        assert!(
            e.message.contains("logarithmic")
                && e.message.contains("`log`")
                && e.message.contains("`linear`"),
            "{}",
            e.message
        );
        assert_eq!(e.path.join("."), "y_scales.share");
        let e = build("y_scales: {share: linear}").unwrap();
        assert!(e.message.contains("give `facet`"), "{}", e.message);
    }

    #[test]
    fn panel_titles_show_no_bare_column_names() {
        let sigma = "σ".to_string();
        assert_eq!(facet_title("sigma", Some(&sigma), "2.0", "2.0"), "σ = 2.0");
        assert_eq!(facet_title("d", None, "1", "1"), "d = 1");
        assert_eq!(
            facet_title("value", None, "max_abs_error", "worst absolute error"),
            "worst absolute error"
        );
        assert_eq!(
            facet_title(
                "panel",
                None,
                "CRM · max_abs_error",
                "CRM: worst absolute error"
            ),
            "CRM: worst absolute error"
        );
    }
}
