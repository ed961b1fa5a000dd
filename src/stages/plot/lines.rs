//! `plot.lines`: lines (optionally with confidence bands) of y against x, one series per
//! value of `series` and/or per y column, one panel per value of `facet`.

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::figure_output;
use crate::plot::{self, LineFigure, LineStyle, Panel, Series};
use crate::stages::columns::{f64_col_or_nan as f64_col, str_col};
use crate::stages::param::OneOrMany;
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, ParamError, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "plot.lines",
    version: 11,
    random: false,
    runs_programs: false,
    summary: "Lines (optionally with confidence bands) of y against x, one series per value of `series` and/or per y column, one panel per value of `facet`; log axes; labelled reference lines.",
    params: params::<Lines>,
    gather: Gather::All,
    build: build::<Lines>,
    verdict: None,
};

/// A y scale type (`Serialize` only so that the schema shows the default `{}`).
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum ScaleName {
    Log,
    Linear,
}

/// A line style (`Serialize` only so that the schema shows the default `{}`).
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum StyleName {
    Solid,
    Dashed,
    Markers,
    LineMarkers,
    /// the values the figure is held against (a paper's printed numbers): large near-black
    /// diamonds drawn over every other series and first in the legend
    Paper,
}

/// A palette colour by name (`Serialize` only so that the schema shows the default `{}`), in
/// the palette's order ([`plot::PALETTE`]'s comments name them).
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum ColourName {
    Blue,
    Vermillion,
    Green,
    Purple,
    Orange,
    Sky,
    Wine,
    Olive,
}

// One name per palette colour, in its order.
const _: () = assert!(plot::PALETTE.len() == ColourName::Olive as usize + 1);

/// A horizontal reference line (`Serialize` only so that the schema shows the default `[]`).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HLine {
    /// its label
    label: String,
    /// its height
    y: f64,
}

/// A reference curve drawn from a column.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Reference {
    /// the column of the curve's y values
    column: String,
    /// its label
    label: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Lines {
    /// column on the x axis
    x: String,
    /// column(s) on the y axis; each is a series
    y: OneOrMany,
    /// lower band column(s), parallel to `y` (use "" for none)
    lo: Option<OneOrMany>,
    /// upper band column(s), parallel to `y`
    hi: Option<OneOrMany>,
    /// column whose values split the rows into series
    series: Option<String>,
    /// column whose values split the rows into panels; a row with no value in it is drawn in
    /// every panel (a reference shared by all)
    facet: Option<String>,
    /// the y is a step function: rows of one series that share an x are the two sides of a
    /// jump (a piecewise-constant density's levels), drawn as a vertical segment, not refused
    #[serde(default)]
    jumps: bool,
    /// keep only the rows whose column holds one of the listed values: column → values
    /// (`only: {value: [max_abs_error]}`); a listed value no row holds is an error
    #[serde(default)]
    only: IndexMap<String, Vec<Cell>>,
    /// display names for columns and series values: name → text
    #[serde(default)]
    labels: IndexMap<String, String>,
    /// a y label per panel, facet value → text, for panels that show different measures (with
    /// units)
    #[serde(default)]
    y_labels: IndexMap<String, String>,
    /// a y scale type per panel (facet value → scale), for panels that show different
    /// measures (a share in [0, 1] linear beside errors on a log scale); a panel not named
    /// here follows `log_y`
    #[serde(default)]
    y_scales: IndexMap<String, ScaleName>,
    /// line style per series name (after `labels`): series → style; `paper` is for the values
    /// the figure is held against (large near-black diamonds over every other series, first in
    /// the legend)
    #[serde(default)]
    style: IndexMap<String, StyleName>,
    /// a palette colour per series name (after `labels`), so that sibling figures give one
    /// series one colour; a series not named here gets a colour chosen by its name
    #[serde(default, alias = "colors")]
    colours: IndexMap<String, ColourName>,
    /// horizontal reference lines
    #[serde(default)]
    hlines: Vec<HLine>,
    /// one dashed reference curve (e.g. a bound) from a column, drawn once per panel whatever
    /// the series
    reference: Option<Reference>,
    /// figure title
    title: String,
    /// x axis label, with units
    x_label: String,
    /// y axis label, with units
    y_label: String,
    /// logarithmic x axis
    #[serde(default)]
    log_x: bool,
    /// logarithmic y axis
    #[serde(default)]
    log_y: bool,
    /// lower end of the y axis (> 0 on a logarithmic one): a value below it is marked on the
    /// bottom edge, not drawn, so that values near 0 (1e-60) do not stretch the axis over
    /// decades no one reads
    y_min: Option<f64>,
    /// panels per row (0: automatic)
    #[serde(default)]
    columns: usize,
    /// each panel its own x range, for panels that sweep different settings (default: one x range for all panels, as facets of one sweep are read across panels)
    #[serde(default)]
    free_x: bool,
}

/// A value `only` keeps: text, or a number compared as a number (`sigma: [2]` keeps `2.0`).
#[derive(Deserialize, JsonSchema, Clone)]
#[serde(untagged, expecting = "expected a number or a text")]
enum Cell {
    /// a number
    Number(f64),
    /// a text
    Text(String),
}

impl Cell {
    fn matches(&self, text: &str) -> bool {
        match self {
            Cell::Number(n) => text.trim().parse::<f64>() == Ok(*n),
            Cell::Text(t) => t == text,
        }
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Number(n) => write!(f, "{n}"),
            Cell::Text(t) => f.write_str(t),
        }
    }
}

/// The columns' distinct values, in order, for messages.
fn distinct_values(v: &[String], rows: &[usize]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for &r in rows {
        if !out.contains(&v[r]) {
            out.push(v[r].clone());
        }
    }
    out
}

/// `a, b, c` with at most eight items, then `… (n in all)`.
fn listed(items: &[String]) -> String {
    let shown: Vec<String> = items.iter().take(8).map(|s| format!("`{s}`")).collect();
    if items.len() > 8 {
        format!("{}, … ({} in all)", shown.join(", "), items.len())
    } else {
        shown.join(", ")
    }
}

/// The drawn points of the figure: the frame `plot.lines` outputs, so that what a figure
/// shows is a frame the goldens compare and a test can hold against the SVG. A row without
/// `y` is a point marked below a logarithmic axis (its value ≤ 0).
#[derive(Default)]
struct Drawn {
    panel: Vec<String>,
    series: Vec<String>,
    x: Vec<f64>,
    y: Vec<Option<f64>>,
    lo: Vec<Option<f64>>,
    hi: Vec<Option<f64>>,
}

impl Drawn {
    /// The series' drawn points (a missing y draws nothing, so has no row), then its points
    /// marked below a logarithmic axis, which are the rows with no y.
    fn push(&mut self, panel: &str, s: &Series) {
        for i in 0..s.x.len() {
            let finite = |v: f64| v.is_finite().then_some(v);
            if !(s.x[i].is_finite() && s.y[i].is_finite()) {
                continue;
            }
            self.panel.push(panel.to_string());
            self.series.push(s.name.clone());
            self.x.push(s.x[i]);
            self.y.push(finite(s.y[i]));
            self.lo.push(s.band.as_ref().and_then(|b| finite(b.0[i])));
            self.hi.push(s.band.as_ref().and_then(|b| finite(b.1[i])));
        }
        for &x in &s.below {
            self.panel.push(panel.to_string());
            self.series.push(s.name.clone());
            self.x.push(x);
            // A point below the logarithmic axis: its value is ≤ 0, drawn as a mark.
            self.y.push(None);
            self.lo.push(None);
            self.hi.push(None);
        }
    }

    fn frame(self) -> Result<polars::prelude::DataFrame> {
        use polars::prelude::*;
        Ok(DataFrame::new(
            self.x.len(),
            vec![
                Column::new("panel".into(), self.panel),
                Column::new("series".into(), self.series),
                Column::new("x".into(), self.x),
                Column::new("y".into(), self.y),
                Column::new("lo".into(), self.lo),
                Column::new("hi".into(), self.hi),
            ],
        )?)
    }
}

/// The columns of the frame a line figure outputs: one row per drawn point.
const DRAWN_COLUMNS: [&str; 6] = ["panel", "series", "x", "y", "lo", "hi"];

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
        out.extend(
            self.reference
                .iter()
                .map(|r| ("reference.column".to_string(), r.column.clone())),
        );
        out.extend(self.only.keys().map(|c| (format!("only.{c}"), c.clone())));
        out
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(DRAWN_COLUMNS.map(str::to_string).to_vec())
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
        if let (Some(lo), Some(hi)) = (&self.lo, &self.hi) {
            let at = |i: usize| match lo {
                OneOrMany::One(_) => "lo".to_string(),
                OneOrMany::Many(_) => format!("lo.{i}"),
            };
            for (i, (l, h)) in lo.list().iter().zip(hi.list()).enumerate() {
                if l.is_empty() != h.is_empty() {
                    return Err(ParamError::at(
                        &at(i),
                        format!("`lo` names `{l}` where `hi` names `{h}`: give both band columns, or \"\" for both"),
                    ));
                }
            }
        }
        if !self.y_labels.is_empty() && self.facet.is_none() {
            return Err(ParamError::at(
                "y_labels",
                "`y_labels` names panels by their `facet` value: give `facet` too (or use `y_label`)",
            ));
        }
        if let Some(m) = self.y_min {
            let log = self.log_y || self.y_scales.values().any(|s| *s == ScaleName::Log);
            if log && m <= 0.0 {
                return Err(ParamError::at(
                    "y_min",
                    format!("y_min = {m} is invalid on a logarithmic y axis: it must be > 0"),
                ));
            }
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
        let label = |s: &str| {
            by_value(&self.labels, s)
                .cloned()
                .unwrap_or_else(|| s.to_string())
        };
        let rows = self.kept_rows(df)?;
        let xs = f64_col(df, &self.x)?;
        let ys = self.y.list();
        let none = || vec![String::new(); ys.len()];
        let los = self.lo.as_ref().map_or_else(none, |b| b.list());
        let his = self.hi.as_ref().map_or_else(none, |b| b.list());
        // Each column is read once, not once per panel and series.
        let text = |c: &Option<String>| -> Result<Option<Vec<String>>> {
            c.as_ref().map(|c| str_col(df, c)).transpose()
        };
        let (series_col, facet_col) = (text(&self.series)?, text(&self.facet)?);
        let mut cols: IndexMap<&str, Vec<f64>> = IndexMap::new();
        let bands = los.iter().chain(&his).filter(|c| !c.is_empty());
        for c in ys.iter().chain(bands) {
            if !cols.contains_key(c.as_str()) {
                cols.insert(c.as_str(), f64_col(df, c)?);
            }
        }
        let reference = match &self.reference {
            Some(r) => Some((r, f64_col(df, &r.column)?)),
            None => None,
        };
        // A row without a series value would be drawn under the y column's name, as if it
        // were a series of its own: it needs a name, or to be left out.
        if let (Some(sc), Some(name)) = (&series_col, &self.series) {
            let unnamed = rows.iter().filter(|&&r| sc[r].is_empty()).count();
            if unnamed > 0 && !self.labels.contains_key("") {
                return Err(ParamError::at(
                    "series",
                    format!("{unnamed} row(s) have no `{name}` value: name them with `labels: {{\"\": …}}`, or leave them out with `only: {{{name}: […]}}`"),
                )
                .into());
            }
        }
        // Panels: the facet's values; a row with none is drawn in every panel.
        let mut panel_rows: IndexMap<String, Vec<usize>> = IndexMap::new();
        let mut shared = Vec::new();
        for &r in &rows {
            match facet_col.as_ref().map(|f| f[r].as_str()) {
                Some(v) if !v.is_empty() => panel_rows.entry(v.to_string()).or_default().push(r),
                _ => shared.push(r),
            }
        }
        if panel_rows.is_empty() {
            panel_rows.insert(String::new(), Vec::new());
        }
        let series_of = |r: usize| series_col.as_ref().map_or("", |s| s[r].as_str());
        let mut drawn = Drawn::default();
        // What each series value and each y column drew, over all panels.
        let mut series_drew: IndexMap<String, (usize, bool)> = IndexMap::new();
        let mut y_drew: IndexMap<&str, bool> = ys.iter().map(|y| (y.as_str(), false)).collect();
        let others = if self.jumps {
            Vec::new()
        } else {
            self.other_columns(df)?
        };
        let mut panels = Vec::new();
        for (fvalue, own) in &panel_rows {
            let frows: Vec<usize> = own.iter().chain(&shared).copied().collect();
            let title = match &self.facet {
                Some(f) if !fvalue.is_empty() => {
                    facet_title(f, self.labels.get(f), fvalue, &label(fvalue))
                }
                _ => String::new(),
            };
            let panel_log_y = self
                .y_scales
                .get(fvalue)
                .map_or(self.log_y, |s| *s == ScaleName::Log);
            let mut groups: IndexMap<&str, Vec<usize>> = IndexMap::new();
            for &r in &frows {
                groups.entry(series_of(r)).or_default().push(r);
            }
            let mut series = Vec::new();
            for (sname, rows) in &groups {
                let mut idx = rows.clone();
                idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
                if !self.jumps {
                    self.refuse_joined_rows(&others, (&title, sname), &xs, &idx)?;
                }
                let seen = series_drew.entry(sname.to_string()).or_default();
                seen.0 += rows.len();
                for ((y, lo), hi) in ys.iter().zip(&los).zip(&his) {
                    let yv = &cols[y.as_str()];
                    // Rows without a series value are named by `labels: {"": …}` (checked above).
                    let sl = series_title(
                        self.series.as_deref().unwrap_or_default(),
                        self.series.as_deref().and_then(|c| self.labels.get(c)),
                        sname,
                        by_value(&self.labels, sname),
                    );
                    let name = match (self.series.is_none(), ys.len() > 1) {
                        (true, _) => label(y),
                        (false, false) => sl,
                        (false, true) => format!("{sl} — {}", label(y)),
                    };
                    let band = (!lo.is_empty()).then(|| {
                        // `validate`: `hi` names a column wherever `lo` does.
                        let (l, h) = (&cols[lo.as_str()], &cols[hi.as_str()]);
                        (
                            idx.iter().map(|&r| l[r]).collect(),
                            idx.iter().map(|&r| h[r]).collect(),
                        )
                    });
                    let style = match self.style.get(&name) {
                        Some(StyleName::Dashed) => LineStyle::Dashed,
                        Some(StyleName::Markers) => LineStyle::Markers,
                        Some(StyleName::LineMarkers) => LineStyle::LineMarkers,
                        Some(StyleName::Paper) => LineStyle::Paper,
                        Some(StyleName::Solid) | None => LineStyle::Solid,
                    };
                    let s = self.drawable(
                        (name, panel_log_y),
                        idx.iter().map(|&r| xs[r]).collect(),
                        idx.iter().map(|&r| yv[r]).collect(),
                        band,
                        style,
                    );
                    // A column that is empty for this series (e.g. no exact value) draws
                    // nothing here; a series or column that draws nothing anywhere is refused
                    // below.
                    if s.y.iter().all(|v| !v.is_finite()) && s.below.is_empty() {
                        continue;
                    }
                    seen.1 = true;
                    y_drew[y.as_str()] = true;
                    drawn.push(&title, &s);
                    series.push(s);
                }
            }
            if let Some((reference, rv)) = &reference {
                let mut pts: Vec<(f64, f64)> = frows
                    .iter()
                    .map(|&r| (xs[r], rv[r]))
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                // One curve per panel: two values at one x (a bound per series) would keep
                // the first and drop the others without a word.
                if let Some(w) = pts
                    .windows(2)
                    .find(|w| w[0].0 == w[1].0 && w[0].1 != w[1].1)
                {
                    let place = if title.is_empty() {
                        String::new()
                    } else {
                        format!(" in panel `{title}`")
                    };
                    return Err(ParamError::at(
                        "reference.column",
                        format!(
                            "`{}` has two values at x = {}{place} ({} and {}): the reference is one curve per panel; split the rows with `facet`, or keep one set with `only`",
                            reference.column, w[0].0, w[0].1, w[1].1
                        ),
                    )
                    .into());
                }
                pts.dedup_by(|a, b| a.0 == b.0);
                let s = self.drawable(
                    (reference.label.clone(), panel_log_y),
                    pts.iter().map(|p| p.0).collect(),
                    pts.iter().map(|p| p.1).collect(),
                    None,
                    LineStyle::Dashed,
                );
                if s.y.iter().any(|v| v.is_finite()) || !s.below.is_empty() {
                    drawn.push(&title, &s);
                    series.push(s);
                }
            }
            panels.push(Panel {
                title,
                series,
                hlines: self.hlines.iter().map(|h| (h.label.clone(), h.y)).collect(),
                y_label: by_value(&self.y_labels, fvalue)
                    .cloned()
                    .unwrap_or_default(),
                log_y: Some(panel_log_y),
            });
        }
        // A series or a y column with rows and nothing drawn in any panel (all missing) would
        // leave the figure without it and the reader without a word.
        for (sname, (n, drew)) in &series_drew {
            if !drew && !sname.is_empty() {
                return Err(ParamError::at(
                    "series",
                    format!("series `{sname}` has {n} row(s) and no value of {} to draw in any panel (all missing or not a number)", listed(&ys)),
                )
                .into());
            }
        }
        for (i, (y, drew)) in y_drew.iter().enumerate() {
            if !drew {
                let at = match self.y {
                    OneOrMany::One(_) => "y".to_string(),
                    OneOrMany::Many(_) => format!("y.{i}"),
                };
                return Err(ParamError::at(
                    &at,
                    format!("column `{y}` has no value to draw in any row kept (all missing or not a number)"),
                )
                .into());
            }
        }
        let columns: Vec<String> = df
            .get_column_names()
            .iter()
            .map(|c| c.to_string())
            .collect();
        let values = |c: &Option<Vec<String>>| {
            c.as_ref()
                .map_or_else(Vec::new, |v| distinct_values(v, &rows))
        };
        let mut drawn_series: Vec<String> = Vec::new();
        for p in &panels {
            for s in &p.series {
                if !drawn_series.contains(&s.name) {
                    drawn_series.push(s.name.clone());
                }
            }
        }
        self.check_declared_names(
            ctx,
            &columns,
            &values(&series_col),
            &values(&facet_col),
            &drawn_series,
        )?;
        let fig = LineFigure {
            title: self.title.clone(),
            x_label: self.x_label.clone(),
            y_label: self.y_label.clone(),
            log_x: self.log_x,
            log_y: self.log_y,
            panels,
            columns: self.columns,
            free_x: self.free_x,
            width: 640,
            height: 440,
            y_min: self.y_min,
            below_label: match self.y_min {
                Some(m) => format!("value below {m}, off the axis"),
                None => String::new(),
            },
            colours: self.palette_slots(),
        };
        let svg = plot::render_lines(&fig)?;
        Ok(figure_output(svg, drawn.frame()?))
    }
}

impl Lines {
    /// `colours:` as palette slots.
    fn palette_slots(&self) -> Vec<(String, usize)> {
        self.colours
            .iter()
            .map(|(series, &c)| (series.clone(), c as usize))
            .collect()
    }

    /// A series ready to draw. On a logarithmic y axis a point with y ≤ 0 has no position, yet
    /// a Monte-Carlo estimate of a small probability is often exactly 0 and a paper prints
    /// 0.000: such a point, and one below `y_min`, is marked on the panel's bottom edge
    /// ([`Series::below`]), with its band left out (an interval reaching 0 would fill the
    /// panel to its bottom); a band's lower end below `y_min` is drawn to the bottom. On a
    /// logarithmic x axis a point with x ≤ 0 has no place at all; it is left out and counted
    /// in a warning the run prints.
    fn drawable(
        &self,
        (name, log_y): (String, bool),
        x: Vec<f64>,
        mut y: Vec<f64>,
        mut band: Option<(Vec<f64>, Vec<f64>)>,
        style: LineStyle,
    ) -> Series {
        let mut below = Vec::new();
        let mut off_x = 0usize;
        if let (Some(m), Some((lo, _))) = (self.y_min, band.as_mut()) {
            for l in lo.iter_mut().filter(|l| **l < m) {
                // On a log axis a lower end ≤ 0 is drawn to the bottom; on a linear one, the
                // bottom is `y_min`.
                *l = if log_y { 0.0 } else { m };
            }
        }
        for i in 0..x.len() {
            let gone_x = self.log_x && x[i] <= 0.0;
            let gone_y = (log_y && y[i] <= 0.0) || self.y_min.is_some_and(|m| y[i] < m);
            if gone_x {
                off_x += 1;
            } else if gone_y {
                below.push(x[i]);
            }
            if gone_x || gone_y {
                y[i] = f64::NAN;
                if let Some((lo, hi)) = band.as_mut() {
                    lo[i] = f64::NAN;
                    hi[i] = f64::NAN;
                }
            }
        }
        if off_x > 0 {
            tracing::warn!(
                "plot `{}`: {off_x} point(s) of `{name}` have x ≤ 0 and cannot be placed on the logarithmic x axis",
                self.title
            );
        }
        Series {
            name,
            x,
            y,
            band,
            style,
            below,
        }
    }
}

impl Lines {
    /// The rows `only` keeps. A listed value that no row holds is an error: a figure that
    /// silently drew nothing of it is the class this check closes.
    fn kept_rows(&self, df: &polars::prelude::DataFrame) -> Result<Vec<usize>> {
        let mut keep = vec![true; df.height()];
        for (col, wanted) in &self.only {
            let v = str_col(df, col)?;
            let all: Vec<usize> = (0..df.height()).collect();
            for (i, w) in wanted.iter().enumerate() {
                if !v.iter().any(|x| w.matches(x)) {
                    return Err(ParamError::at(
                        &format!("only.{col}.{i}"),
                        format!(
                            "no row has `{col}` = `{w}`; its values: {}",
                            listed(&distinct_values(&v, &all))
                        ),
                    )
                    .into());
                }
            }
            for (k, x) in keep.iter_mut().zip(&v) {
                *k &= wanted.iter().any(|w| w.matches(x));
            }
        }
        Ok((0..df.height()).filter(|&i| keep[i]).collect())
    }

    /// The columns that tell rows apart where they share an x: all but what the figure draws
    /// at a point (x, y, the band, the reference) and the series (equal within a series). The
    /// facet column stays: rows without a facet value join every panel's own rows. A column
    /// `only` filters on stays too. Each is read once (`refuse_joined_rows` runs per series).
    fn other_columns(&self, df: &polars::prelude::DataFrame) -> Result<Vec<(String, Vec<String>)>> {
        let drawn: Vec<String> = self
            .columns_read()
            .into_iter()
            .filter(|(key, _)| !key.starts_with("only.") && key != "facet")
            .map(|(_, c)| c)
            .collect();
        df.get_column_names()
            .into_iter()
            .filter(|c| !drawn.iter().any(|d| d == c.as_str()))
            .map(|c| Ok((c.to_string(), str_col(df, c)?)))
            .collect()
    }

    /// Rows of one series in one panel that share an x and differ in a column the figure does
    /// not draw would be joined by a line that zigzags between them (absolute and relative
    /// errors in one line): they are refused, naming the column and the ways out. Rows that
    /// differ only in what is drawn are a step (a staircase density's jump) and pass.
    fn refuse_joined_rows(
        &self,
        others: &[(String, Vec<String>)],
        (panel, series): (&str, &str),
        xs: &[f64],
        idx: &[usize],
    ) -> Result<()> {
        for run in idx.chunk_by(|&a, &b| xs[a].total_cmp(&xs[b]).is_eq()) {
            if run.len() < 2 {
                continue;
            }
            let mut apart: Vec<(String, Vec<String>)> = Vec::new();
            for (c, v) in others {
                let vals = distinct_values(v, run);
                if vals.len() > 1 {
                    apart.push((c.to_string(), vals));
                }
            }
            let Some((c, vals)) = apart.first() else {
                continue;
            };
            let place = match (panel.is_empty(), series.is_empty()) {
                (true, true) => String::new(),
                (true, false) => format!(" of series `{series}`"),
                (false, true) => format!(" in panel `{panel}`"),
                (false, false) => format!(" of series `{series}` in panel `{panel}`"),
            };
            let x = xs[run[0]];
            let others = if apart.len() > 1 {
                format!(
                    " (and in {})",
                    listed(&apart[1..].iter().map(|a| a.0.clone()).collect::<Vec<_>>())
                )
            } else {
                String::new()
            };
            return Err(ParamError::at(
                "x",
                format!(
                    "{} rows{place} share x = {x} and differ in column `{c}` ({}){others}: one line would zigzag between them. Split them into panels with `facet: {c}` or into series with `series: {c}`, or draw one of them with `only: {{{c}: [{}]}}` (if y is a step function that jumps there, say so with `jumps: true`)",
                    run.len(),
                    listed(vals),
                    vals[0]
                ),
            )
            .into());
        }
        Ok(())
    }

    /// A name that must match something drawn: a `labels` key names a column or a value of
    /// `series` or `facet`; a `style` or `colours` key a series; a `y_labels`/`y_scales` key a
    /// panel.
    /// When the column's values come from an axis, a profile or `--set` may have narrowed the
    /// axis, so an unmatched value is not an error there.
    fn check_declared_names(
        &self,
        ctx: &Ctx,
        columns: &[String],
        series_values: &[String],
        facet_values: &[String],
        drawn_series: &[String],
    ) -> Result<()> {
        let axis = |c: &Option<String>| c.as_deref().is_some_and(|c| ctx.is_axis(c));
        let (series_axis, facet_axis) = (axis(&self.series), axis(&self.facet));
        let miss = |key: String, what: &str, name: &str, options: Vec<&String>| -> anyhow::Error {
            let hint = crate::text::suggest(name, options.iter().map(|s| s.as_str()))
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            let shown: Vec<String> = options.iter().map(|s| s.to_string()).collect();
            ParamError::at(
                &key,
                format!(
                    "`{name}` names no {what} of the rows drawn{hint} (there: {})",
                    listed(&shown)
                ),
            )
            .into()
        };
        if !(series_axis || facet_axis) {
            for name in self.labels.keys() {
                let known = columns.contains(name)
                    || series_values.contains(name)
                    || facet_values.contains(name);
                // A number names a value of a sweep, which a profile may narrow even where
                // the column is no longer an axis (after a `frame.stack`): only text is held
                // to the rows.
                let number = name.trim().parse::<f64>().is_ok();
                if !known && !name.is_empty() && !number {
                    let options = columns.iter().chain(series_values).chain(facet_values);
                    return Err(miss(
                        format!("labels.{name}"),
                        "column, series or panel",
                        name,
                        options.collect(),
                    ));
                }
            }
        }
        if !series_axis {
            let styled = self.style.keys().map(|n| ("style", n));
            for (key, name) in styled.chain(self.colours.keys().map(|n| ("colours", n))) {
                if !drawn_series.contains(name) {
                    return Err(miss(
                        format!("{key}.{name}"),
                        "series (after `labels`)",
                        name,
                        drawn_series.iter().collect(),
                    ));
                }
            }
        }
        if !facet_axis {
            for (key, names) in [
                ("y_labels", self.y_labels.keys().collect::<Vec<_>>()),
                ("y_scales", self.y_scales.keys().collect()),
            ] {
                for name in names {
                    if !facet_values.contains(name) {
                        return Err(miss(
                            format!("{key}.{name}"),
                            "panel (a `facet` value)",
                            name,
                            facet_values.iter().collect(),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The entry of a map keyed by values (`labels`, `y_labels`) for the value `v` as the frame
/// prints it: its text, or else the key that is the same number (`"6.0"` names 6, and `"6"`
/// names 6.0): an axis written `[2, 6]` holds integers, one written `[2.0, 6.0]` floats, and a
/// label keyed by the other's text must not silently stop naming its series.
fn by_value<'m>(map: &'m IndexMap<String, String>, v: &str) -> Option<&'m String> {
    map.get(v).or_else(|| {
        let x = v.trim().parse::<f64>().ok()?;
        map.iter()
            .find(|(k, _)| k.trim().parse::<f64>().ok() == Some(x))
            .map(|(_, l)| l)
    })
}

/// A series' name in `plot.lines`'s legend: its own label when `labels` has one (`0.001: δ =
/// 10⁻³`); else a number with its column's name (`δ = 0.001` with `labels: {delta: δ}`, else
/// `delta = 0.001`), since bare numbers (`0.00001`, `0.001`) do not say what they are; else the
/// value alone (a mechanism's name says what it is).
fn series_title(
    column: &str,
    column_label: Option<&String>,
    raw: &str,
    own: Option<&String>,
) -> String {
    match own {
        Some(l) => l.clone(),
        None if !raw.is_empty() && raw.trim().parse::<f64>().is_ok() => {
            format!("{} = {raw}", column_label.map_or(column, String::as_str))
        }
        None => raw.to_string(),
    }
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

    /// `colours:` names the palette's colours; another name is refused at its key, with the
    /// nearest name and every one there is.
    #[test]
    fn colours_are_the_palette_s() {
        let build = |c: &str| {
            let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&format!(
                "{{x: k, y: m, series: s, title: t, x_label: x, y_label: y, colours: {{{c}}}}}"
            ))
            .unwrap();
            crate::kind::build::<Lines>(&v).err()
        };
        assert!(build("high: wine, low: olive").is_none());
        let e = build("high: wien").unwrap();
        assert_eq!(e.path.join("."), "colours.high");
        assert!(
            e.message.contains("wien")
                && e.message.contains("`wine`")
                && e.message.contains("`olive`"),
            "{}",
            e.message
        );
    }

    /// A band needs its two columns: `lo` and `hi` are both "" or both columns, item by item,
    /// checked with the other parameters (not when the figure is drawn).
    #[test]
    fn band_columns_come_in_pairs() {
        let build = |bands: &str| {
            let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&format!(
                "{{x: k, y: [a, b], title: t, x_label: x, y_label: y, {bands}}}"
            ))
            .unwrap();
            crate::kind::build::<Lines>(&v).err()
        };
        assert!(build("lo: ['', a_lo], hi: ['', a_hi]").is_none());
        let e = build("lo: ['', a_lo], hi: [b_hi, a_hi]").unwrap();
        assert_eq!(e.path.join("."), "lo.0");
        assert!(
            e.message.contains("give both band columns"),
            "{}",
            e.message
        );
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

#[cfg(test)]
mod kind_tests {
    use super::KIND;
    use crate::kind::testing::{floats, run, strings};

    /// The drawn frame is the figure point by point: one series per value of `series`, each
    /// in x order with its y, and the SVG names every series in its legend.
    #[test]
    fn every_series_is_drawn_point_by_point() {
        let input = polars::df!("k" => [2.0, 1.0, 1.0, 2.0], "m" => [4.0, 3.0, 5.0, 6.0], "s" => ["low", "low", "high", "high"]).unwrap();
        let out = run(
            &KIND,
            "{x: k, y: m, series: s, title: t, x_label: k, y_label: m}",
            &[&input],
            0,
        )
        .unwrap();
        let svg = String::from_utf8(out.artifacts[0].bytes.clone()).unwrap();
        assert!(
            svg.contains(">\nlow\n<") && svg.contains(">\nhigh\n<"),
            "{svg}"
        );
        // A colour the pipeline fixes is the series' line colour.
        let fixed = run(
            &KIND,
            "{x: k, y: m, series: s, title: t, x_label: k, y_label: m, colours: {high: wine, low: olive}}",
            &[&input],
            0,
        )
        .unwrap();
        let svg = String::from_utf8(fixed.artifacts[0].bytes.clone()).unwrap();
        let line = |hex: &str| format!("stroke=\"{hex}\" stroke-width=\"3\"");
        assert!(
            svg.contains(&line("#882255")) && svg.contains(&line("#999933")),
            "{svg}"
        );
        let f = out.frame;
        let points: Vec<(String, f64, f64)> = strings(&f, "series")
            .into_iter()
            .zip(floats(&f, "x"))
            .zip(floats(&f, "y"))
            .map(|((s, x), y)| (s, x, y))
            .collect();
        let of = |s: &str| {
            points
                .iter()
                .filter(|p| p.0 == s)
                .map(|p| (p.1, p.2))
                .collect::<Vec<_>>()
        };
        assert_eq!(of("low"), [(1.0, 3.0), (2.0, 4.0)]);
        assert_eq!(of("high"), [(1.0, 5.0), (2.0, 6.0)]);
    }
}

#[cfg(test)]
mod by_value_tests {
    use super::*;

    /// A label keyed by a float's text names the same integer, and the other way round.
    #[test]
    fn labels_name_a_value_by_its_number() {
        let map: IndexMap<String, String> = [("6.0", "σ = 6"), ("2", "σ = 2"), ("a", "A")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(by_value(&map, "6").map(String::as_str), Some("σ = 6"));
        assert_eq!(by_value(&map, "2.0").map(String::as_str), Some("σ = 2"));
        assert_eq!(by_value(&map, "a").map(String::as_str), Some("A"));
        assert_eq!(by_value(&map, "7"), None);
    }
}
