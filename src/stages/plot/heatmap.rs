//! `plot.heatmap`: a heatmap of z over (x, y), with a colour bar shared by all panels.

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use super::figure_output;
use crate::plot::{self, HeatPanel, HeatmapFigure};
use crate::stages::columns::{f64_col_or_nan as f64_col, group_by};
use crate::stages::{
    build, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "plot.heatmap",
    version: 7,
    random: false,
    runs_programs: false,
    summary: "A heatmap of z over (x, y) with a colour bar shared by all panels; optional contour line z = level.",
    params: params::<Heatmap>,
    gather: Gather::All,
    build: build::<Heatmap>,
    verdict: None,
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
    /// a diverging colour map (ColorBrewer's RdBu) whose white is this value: blue below it, red above it, each side over its own span — for a ratio against a reference (centre 1); default: the sequential viridis map
    centre: Option<f64>,
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
        Some(["panel", "x", "y", "z"].map(str::to_string).to_vec())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let (xs, ys, zs) = (
            f64_col(df, &self.x)?,
            f64_col(df, &self.y)?,
            f64_col(df, &self.z)?,
        );
        // A cell needs a place: NaN would fall into the lowest cell (or fail in the renderer
        // without naming the column).
        for (key, col, v) in [("x", &self.x, &xs), ("y", &self.y, &ys)] {
            let bad = v.iter().filter(|c| !c.is_finite()).count();
            if bad > 0 {
                return Err(crate::stages::ParamError::at(
                    key,
                    format!("{bad} row(s) have no finite `{col}`: a heatmap cell needs a place; leave them out upstream"),
                )
                .into());
            }
        }
        let facet_keys: Vec<String> = self.facet.iter().cloned().collect();
        let mut panels = Vec::new();
        // What the figure draws, cell by cell (a missing cell is empty).
        let mut drawn: (Vec<String>, Vec<f64>, Vec<f64>, Vec<Option<f64>>) = Default::default();
        for (fkey, rows) in group_by(df, &facet_keys)? {
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
            let mut filled = vec![false; z.len()];
            let title = match (&self.facet, fkey.first()) {
                (Some(f), Some(v)) => format!("{f} = {v}"),
                _ => String::new(),
            };
            for &r in &rows {
                let ix = gx.partition_point(|&v| v < xs[r]);
                let iy = gy.partition_point(|&v| v < ys[r]);
                let cell = iy * gx.len() + ix;
                // Two rows in one cell: the later would hide the earlier without a word.
                let same = z[cell] == zs[r] || (z[cell].is_nan() && zs[r].is_nan());
                if std::mem::replace(&mut filled[cell], true) && !same {
                    let place = if title.is_empty() {
                        String::new()
                    } else {
                        format!(" in panel `{title}`")
                    };
                    return Err(crate::stages::ParamError::at(
                        "z",
                        format!(
                            "two rows{place} fall in one cell (x = {}, y = {}) with different `{}` ({} and {}): split them with `facet`, or aggregate them first",
                            xs[r], ys[r], self.z, z[cell], zs[r]
                        ),
                    )
                    .into());
                }
                z[cell] = zs[r];
            }
            for (iy, y) in gy.iter().enumerate() {
                for (ix, x) in gx.iter().enumerate() {
                    drawn.0.push(title.clone());
                    drawn.1.push(*x);
                    drawn.2.push(*y);
                    let v = z[iy * gx.len() + ix];
                    drawn.3.push(v.is_finite().then_some(v));
                }
            }
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
            centre: self.centre,
            width: 520,
            height: 440,
        };
        let svg = plot::render_heatmap(&fig)?;
        use polars::prelude::{Column, DataFrame};
        let frame = DataFrame::new(
            drawn.0.len(),
            vec![
                Column::new("panel".into(), drawn.0),
                Column::new("x".into(), drawn.1),
                Column::new("y".into(), drawn.2),
                Column::new("z".into(), drawn.3),
            ],
        )?;
        Ok(figure_output(svg, frame))
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, run};

    /// The drawn frame holds one cell per (x, y) of the grid with its z, a missing cell empty;
    /// a row without a finite x has no place and is refused at `x`.
    #[test]
    fn every_cell_of_the_grid_is_drawn_with_its_value() {
        let with = "{x: a, y: b, z: c, title: t, x_label: a, y_label: b, z_label: c}";
        let input =
            polars::df!("a" => [1.0, 2.0, 1.0], "b" => [10.0, 10.0, 20.0], "c" => [0.5, 0.25, 1.0])
                .unwrap();
        let out = run(&KIND, with, &[&input], 0).unwrap();
        assert!(String::from_utf8_lossy(&out.artifacts[0].bytes).contains("<svg"));
        let f = out.frame;
        let cells: Vec<(f64, f64, f64)> = floats(&f, "x")
            .into_iter()
            .zip(floats(&f, "y"))
            .zip(floats(&f, "z"))
            .map(|((x, y), z)| (x, y, z))
            .collect();
        assert_eq!(cells.len(), 4, "{f}");
        for want in [(1.0, 10.0, 0.5), (2.0, 10.0, 0.25), (1.0, 20.0, 1.0)] {
            assert!(cells.contains(&want), "{want:?} not in {cells:?}");
        }
        assert!(
            cells
                .iter()
                .any(|&(x, y, z)| (x, y) == (2.0, 20.0) && z.is_nan()),
            "{cells:?}"
        );
        let bad = polars::df!("a" => [f64::NAN], "b" => [1.0], "c" => [1.0]).unwrap();
        assert!(fails(&KIND, with, &[&bad], 0).starts_with("1 row(s) have no finite `a`"));
    }
}
