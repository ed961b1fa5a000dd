//! `plot.heatmap`: a heatmap of z over (x, y), with a colour bar shared by all panels.

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{no_columns, svg_output};
use crate::plot::{self, HeatPanel, HeatmapFigure};
use crate::stages::frame::{f64_col_or_nan as f64_col, group_rows};
use crate::stages::{
    build, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "plot.heatmap",
    version: 5,
    random: false,
    summary: "A heatmap of z over (x, y) with a colour bar shared by all panels; optional contour line z = level.",
    params: params::<Heatmap>,
    gather: Gather::All,
    build: build::<Heatmap>,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Heatmap {
    /// column on the x axis
    x: String,
    /// column on the y axis
    y: String,
    /// column shown as colour
    z: String,
    /// column whose values split the rows into panels
    facet: Option<String>,
    /// draw the level set z = contour, interpolated between cell centres (marching squares; in
    /// log z when log_z)
    contour: Option<f64>,
    /// figure title
    title: String,
    /// x axis label
    x_label: String,
    /// y axis label
    y_label: String,
    /// colour bar label
    z_label: String,
    /// logarithmic x axis
    #[serde(default)]
    log_x: bool,
    /// logarithmic y axis
    #[serde(default)]
    log_y: bool,
    /// logarithmic colour scale
    #[serde(default)]
    log_z: bool,
    /// panels per row (0: automatic)
    #[serde(default)]
    columns: usize,
}

impl Stage for Heatmap {
    fn columns_read(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = [("x", &self.x), ("y", &self.y), ("z", &self.z)]
            .map(|(k, c)| (k.to_string(), c.clone()))
            .into();
        out.extend(self.facet.iter().map(|c| ("facet".to_string(), c.clone())));
        out
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        no_columns()
    }

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
        Ok(svg_output(svg))
    }
}
