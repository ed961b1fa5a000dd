//! `plot.lines`: lines (optionally with confidence bands) of y against x, one series per
//! value of `series` and/or per y column, one panel per value of `facet`.

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{no_columns, svg_output};
use crate::plot::{self, LineFigure, LineStyle, Panel, Series};
use crate::stages::frame::{f64_col_or_nan as f64_col, group_rows, str_col};
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, ParamError, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "plot.lines",
    version: 7,
    random: false,
    summary: "Lines (optionally with confidence bands) of y against x, one series per value of `series` and/or per y column, one panel per value of `facet`; log axes; labelled reference lines.",
    params: params::<Lines>,
    gather: Gather::All,
    build: build::<Lines>,
};

/// One column, or a list of columns.
#[derive(Deserialize, JsonSchema, Clone)]
#[serde(untagged)]
enum OneOrMany {
    /// one column
    One(String),
    /// a list of columns
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
}

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
    /// column whose values split the rows into panels
    facet: Option<String>,
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
    /// line style per series name (after `labels`): series → style
    #[serde(default)]
    style: IndexMap<String, StyleName>,
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
    /// panels per row (0: automatic)
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
        out.extend(
            self.reference
                .iter()
                .map(|r| ("reference.column".to_string(), r.column.clone())),
        );
        out
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        no_columns()
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
                        // `validate`: `hi` names a column wherever `lo` does.
                        let (l, h) = (&cols[lo.as_str()], &cols[hi.as_str()]);
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
        Ok(svg_output(svg))
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
