//! Heatmaps: coloured cells on a rectilinear grid, a shared colour bar and
//! an optional contour line, interpolated between cell centres by marching
//! squares (the `contour` crate, a port of d3-contour).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::scale::{self, Axis};
use super::*;

/// Viridis sampled at 16 evenly spaced points; interpolated linearly in RGB,
/// which is visually indistinguishable from the full 256-entry table.
const VIRIDIS: [(u8, u8, u8); 16] = [
    (0x44, 0x01, 0x54),
    (0x48, 0x1A, 0x6C),
    (0x47, 0x2F, 0x7D),
    (0x41, 0x44, 0x87),
    (0x39, 0x56, 0x8C),
    (0x31, 0x68, 0x8E),
    (0x2A, 0x78, 0x8E),
    (0x23, 0x88, 0x8E),
    (0x1F, 0x98, 0x8B),
    (0x22, 0xA8, 0x84),
    (0x35, 0xB7, 0x79),
    (0x54, 0xC5, 0x68),
    (0x7A, 0xD1, 0x51),
    (0xA5, 0xDB, 0x36),
    (0xD2, 0xE2, 0x1B),
    (0xFD, 0xE7, 0x25),
];

const MISSING_FILL: RGBColor = RGBColor(0xE4, 0xE4, 0xE4);
const MISSING_HATCH: RGBColor = RGBColor(0xA8, 0xA8, 0xA8);
const BAR_W: i32 = 22;

/// ColorBrewer's RdBu, from its blue end to its red end (Brewer, colorbrewer2.org): a
/// diverging map whose white middle is the value a figure centres on.
const RDBU: [(u8, u8, u8); 11] = [
    (0x05, 0x30, 0x61),
    (0x21, 0x66, 0xAC),
    (0x43, 0x93, 0xC3),
    (0x92, 0xC5, 0xDE),
    (0xD1, 0xE5, 0xF0),
    (0xF7, 0xF7, 0xF7),
    (0xFD, 0xDB, 0xC7),
    (0xF4, 0xA5, 0x82),
    (0xD6, 0x60, 0x4D),
    (0xB2, 0x18, 0x2B),
    (0x67, 0x00, 0x1F),
];

/// The colour at `u ∈ [0, 1]` (clamped; NaN as 0) of a map given by evenly spaced stops.
fn interpolate(stops: &[(u8, u8, u8)], u: f64) -> RGBColor {
    let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
    let pos = u * (stops.len() - 1) as f64;
    let i = (pos.floor() as usize).min(stops.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (stops[i], stops[i + 1]);
    let mix = |p: u8, q: u8| (p as f64 + (q as f64 - p as f64) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// A figure's colour for a value `t` on its (possibly logarithmic) z scale, over `[lo, hi]`:
/// viridis from `lo` to `hi`, or — with a centre `c` — RdBu whose white is `c`, each side
/// stretched over its own span (blue from `lo` to `c`, red from `c` to `hi`), so that which side
/// of the centre a cell lies on is read from its hue and neither side's range is wasted.
pub(super) fn colour_of(t: f64, (lo, hi): (f64, f64), centre: Option<f64>) -> RGBColor {
    match centre {
        None => viridis((t - lo) / (hi - lo)),
        Some(c) => {
            let u = if t <= c {
                if c > lo {
                    0.5 * (t - lo) / (c - lo)
                } else {
                    0.5
                }
            } else if hi > c {
                0.5 + 0.5 * (t - c) / (hi - c)
            } else {
                0.5
            };
            interpolate(&RDBU, u)
        }
    }
}

/// Maps `u ∈ [0, 1]` (clamped) to a viridis colour.
pub(crate) fn viridis(u: f64) -> RGBColor {
    interpolate(&VIRIDIS, u)
}

fn panel_name(p: &HeatPanel, i: usize) -> String {
    if p.title.is_empty() {
        format!("heatmap panel #{}", i + 1)
    } else {
        p.title.clone()
    }
}

/// Validates one grid axis and returns its cell edges in axis units: halfway
/// between neighbouring centres (geometric midpoints on a log axis, since
/// we work in log10 units there), mirrored at the ends.
fn edges(panel: &str, axis: &'static str, c: &[f64], log: bool) -> Result<Vec<f64>, PlotError> {
    if c.is_empty() {
        return Err(PlotError::NoFiniteData {
            series: format!("{panel} ({axis} coordinates)"),
        });
    }
    for &v in c {
        if !v.is_finite() {
            return Err(PlotError::NonFinite {
                series: panel.to_string(),
                what: format!("{axis} coordinate"),
                value: v,
            });
        }
        if log && v <= 0.0 {
            return Err(PlotError::NonPositiveOnLog {
                series: panel.to_string(),
                axis,
                value: v,
            });
        }
    }
    for w in c.windows(2) {
        if w[1] <= w[0] {
            return Err(PlotError::NotAscending {
                panel: panel.to_string(),
                axis,
                prev: w[0],
                next: w[1],
            });
        }
    }
    let t: Vec<f64> = c.iter().map(|&v| scale::fwd(log, v)).collect();
    if t.len() == 1 {
        let (lo, hi) = scale::pad(log, t[0], t[0], 0.0);
        return Ok(vec![lo, hi]);
    }
    let n = t.len();
    let mut e = Vec::with_capacity(n + 1);
    e.push(t[0] - (t[1] - t[0]) / 2.0);
    for w in t.windows(2) {
        e.push((w[0] + w[1]) / 2.0);
    }
    e.push(t[n - 1] + (t[n - 1] - t[n - 2]) / 2.0);
    Ok(e)
}

struct Grid {
    ex: Vec<f64>,
    ey: Vec<f64>,
}

pub(super) fn render(fig: &HeatmapFigure) -> Result<String, PlotError> {
    check_size(fig.width, fig.height)?;
    if fig.panels.is_empty() {
        return Err(PlotError::NoPanels {
            figure: fig.title.clone(),
        });
    }

    let mut grids = Vec::new();
    let (mut z_lo, mut z_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut any_missing = false;
    for (i, p) in fig.panels.iter().enumerate() {
        let name = panel_name(p, i);
        let ex = edges(&name, "x", &p.x, fig.log_x)?;
        let ey = edges(&name, "y", &p.y, fig.log_y)?;
        let n = p.x.len() * p.y.len();
        if p.z.len() != n {
            return Err(PlotError::LengthMismatch {
                series: name,
                what: "z".into(),
                expected: n,
                got: p.z.len(),
            });
        }
        for &z in &p.z {
            if !z.is_finite() {
                any_missing = true;
                continue;
            }
            if fig.log_z && z <= 0.0 {
                return Err(PlotError::NonPositiveOnLog {
                    series: name,
                    axis: "z",
                    value: z,
                });
            }
            let t = scale::fwd(fig.log_z, z);
            z_lo = z_lo.min(t);
            z_hi = z_hi.max(t);
        }
        grids.push(Grid { ex, ey });
    }
    if z_lo > z_hi {
        let what = if fig.title.is_empty() {
            "heatmap".to_string()
        } else {
            fig.title.clone()
        };
        return Err(PlotError::NoFiniteData { series: what });
    }
    for (what, v) in [("centre", fig.centre), ("contour", fig.contour)] {
        let Some(c) = v else { continue };
        if !c.is_finite() {
            return Err(PlotError::NonFinite {
                series: what.into(),
                what: "level".into(),
                value: c,
            });
        }
        if fig.log_z && c <= 0.0 {
            return Err(PlotError::NonPositiveOnLog {
                series: what.into(),
                axis: "z",
                value: c,
            });
        }
    }
    // A constant field still needs a non-empty colour range.
    if z_hi - z_lo <= 1e-12 * z_lo.abs().max(z_hi.abs()) {
        (z_lo, z_hi) = scale::pad(fig.log_z, z_lo, z_hi, 0.0);
    }
    let centre = fig.centre.map(|c| scale::fwd(fig.log_z, c));
    let colour = |z: f64| colour_of(scale::fwd(fig.log_z, z), (z_lo, z_hi), centre);

    // Panels share axes so cells line up across facets.
    let fold = |f: &dyn Fn(&Grid) -> (f64, f64)| {
        grids
            .iter()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (lo, hi)| {
                (a.min(lo), b.max(hi))
            })
    };
    let (x_lo, x_hi) = fold(&|g| (g.ex[0], *g.ex.last().unwrap()));
    let (y_lo, y_hi) = fold(&|g| (g.ey[0], *g.ey.last().unwrap()));

    // Colour bar ticks and label; measured first because they set the width.
    let (cols, rows) = grid(fig.panels.len(), fig.columns);
    let (pw, ph) = (panel_width(fig.width, cols) as i32, fig.height as i32);
    let any_titles = fig.panels.iter().any(|p| !p.title.is_empty());
    let ptitle_h = if any_titles { 34 } else { 6 };
    let ylab_w = if fig.y_label.is_empty() { 8 } else { 36 };
    let xlab_h = if fig.x_label.is_empty() { 8 } else { 36 };
    let x_area = (TICK_PX + 14.0) as i32;
    let bar_h_est = (rows as i32 * ph - ptitle_h - x_area - 10) as f64;
    let za = Axis::new(fig.log_z, z_lo, z_hi, (bar_h_est / 50.0) as usize);
    let bar_label: Vec<String> = {
        let note = fig
            .contour
            .map(|c| format!("black line at {}", scale::format_value(c)));
        let one = match &note {
            Some(n) if fig.z_label.is_empty() => n.clone(),
            Some(n) => format!("{} ({n})", fig.z_label),
            None => fig.z_label.clone(),
        };
        match note {
            // Too long to run along the bar: put the note in a second column.
            Some(n) if text_width(&one, LABEL_PX) > bar_h_est && !fig.z_label.is_empty() => {
                vec![fig.z_label.clone(), format!("({n})")]
            }
            _ if one.is_empty() => vec![],
            _ => vec![one],
        }
    };
    let bar_ticks_w = za.widest_label(TICK_PX).ceil() as i32;
    let missing_w = if any_missing {
        text_width("no data", LEGEND_PX) as i32 + 24
    } else {
        0
    };
    let bar_col_w = (BAR_W + 8 + bar_ticks_w + 12 + bar_label.len() as i32 * 24).max(missing_w);
    let grid_left = ylab_w;
    let grid_right = grid_left + cols as i32 * pw;
    let total_w = grid_right + 16 + bar_col_w + 12;
    let title_h = if fig.title.is_empty() {
        8
    } else {
        let (lines, px) = fit_title(&fig.title, f64::from(total_w - TITLE_MARGIN));
        title_height(&lines, px)
    };
    let grid_top = title_h;
    let total_h = grid_top + rows as i32 * ph + xlab_h;

    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (total_w as u32, total_h as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let (mut bar_top, mut bar_bottom) = (i32::MAX, i32::MIN);

        for (pi, panel) in fig.panels.iter().enumerate() {
            let g = &grids[pi];
            let (c, r) = ((pi % cols) as i32, (pi / cols) as i32);
            let (cx, cy) = (grid_left + c * pw, grid_top + r * ph);
            let cell = root
                .clone()
                .shrink((cx, cy + ptitle_h), (pw, ph - ptitle_h));
            let (mut chart, xa, ya) = panel_chart(
                &cell,
                (fig.log_x, fig.log_y),
                (x_lo, x_hi),
                (y_lo, y_hi),
                (pw, ph, ptitle_h, x_area),
            )?;
            // Grid lines would be hidden under the cells anyway.
            chart
                .configure_mesh()
                .disable_mesh()
                .label_style(TextStyle::from(font(TICK_PX)).color(&INK))
                .axis_style(GREY)
                .draw()
                .map_err(draw_err)?;
            let (xpix, ypix) = chart.plotting_area().get_pixel_range();
            bar_top = bar_top.min(ypix.start);
            bar_bottom = bar_bottom.max(ypix.end - 1);

            if !panel.title.is_empty() {
                root.draw(&Text::new(
                    panel.title.clone(),
                    ((xpix.start + xpix.end) / 2, cy + 6),
                    text_style(PANEL_TITLE_PX, INK, HPos::Center, VPos::Top),
                ))
                .map_err(draw_err)?;
            }

            // Edge pixels are computed once and shared by neighbouring cells,
            // so cells tile exactly, without seams.
            let px: Vec<i32> =
                g.ex.iter()
                    .map(|&e| chart.backend_coord(&(e, ya.lo)).0)
                    .collect();
            let py: Vec<i32> =
                g.ey.iter()
                    .map(|&e| chart.backend_coord(&(xa.lo, e)).1)
                    .collect();
            let nx = panel.x.len();
            for iy in 0..panel.y.len() {
                for ix in 0..nx {
                    let z = panel.z[iy * nx + ix];
                    let (x0, x1, y0, y1) = (px[ix], px[ix + 1], py[iy + 1], py[iy]);
                    // A cell reaches one pixel into its right and upper neighbours, which
                    // are drawn after it and cover that pixel again: a renderer's
                    // antialiased edges between two exactly abutting cells blend with the
                    // white page and show as pale seams; over a colour they do not.
                    let x1 = if ix + 1 < nx { x1 + 1 } else { x1 };
                    let y0 = if iy + 1 < panel.y.len() { y0 - 1 } else { y0 };
                    if z.is_finite() {
                        root.draw(&Rectangle::new([(x0, y0), (x1, y1)], colour(z).filled()))
                            .map_err(draw_err)?;
                    } else {
                        draw_missing(&root, (x0, y0), (x1, y1))?;
                    }
                }
            }

            if let Some(level) = fig.contour {
                let t = |c: &[f64], log: bool| -> Vec<f64> {
                    c.iter().map(|&v| scale::fwd(log, v)).collect()
                };
                let zt: Vec<f64> = panel.z.iter().map(|&z| scale::fwd(fig.log_z, z)).collect();
                let lines = contour_lines(
                    &zt,
                    (&t(&panel.x, fig.log_x), &t(&panel.y, fig.log_y)),
                    scale::fwd(fig.log_z, level),
                )?;
                let lines: Vec<Vec<(i32, i32)>> = lines
                    .iter()
                    .map(|l| l.iter().map(|p| chart.backend_coord(p)).collect())
                    .collect();
                // White halo under the black line keeps it visible on the
                // dark end of the colour map.
                for (style, w) in [(WHITE, 5), (BLACK, 3)] {
                    for l in &lines {
                        root.draw(&PathElement::new(l.clone(), style.stroke_width(w)))
                            .map_err(draw_err)?;
                    }
                }
            }
            root.draw(&Rectangle::new(
                [(xpix.start, ypix.start), (xpix.end - 1, ypix.end - 1)],
                GREY.stroke_width(1),
            ))
            .map_err(draw_err)?;
        }

        draw_colour_bar(
            &root,
            &za,
            (z_lo, z_hi),
            fig,
            &bar_label,
            (grid_right + 16, bar_top, bar_bottom),
            any_missing,
        )?;
        draw_frame_text(
            &root,
            [&fig.title, &fig.x_label, &fig.y_label],
            (grid_left, grid_top, grid_right, grid_top + rows as i32 * ph),
            total_w,
        )?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

fn draw_missing<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    (x0, y0): (i32, i32),
    (x1, y1): (i32, i32),
) -> Result<(), PlotError> {
    root.draw(&Rectangle::new([(x0, y0), (x1, y1)], MISSING_FILL.filled()))
        .map_err(draw_err)?;
    // Diagonal hatching on a global 8 px lattice (x + y = c), so hatches
    // continue seamlessly across neighbouring missing cells.
    let (lo, hi) = (x0.min(x1), x0.max(x1));
    let (top, bottom) = (y0.min(y1), y0.max(y1));
    let step = 8;
    let mut c = (lo + top).div_euclid(step) * step;
    while c <= hi + bottom {
        let xa = lo.max(c - bottom);
        let xb = hi.min(c - top);
        if xa < xb {
            root.draw(&PathElement::new(
                vec![(xa, c - xa), (xb, c - xb)],
                MISSING_HATCH.stroke_width(1),
            ))
            .map_err(draw_err)?;
        }
        c += step;
    }
    Ok(())
}

/// The level set `z = level` as polylines in axis units (log10 units on a log
/// axis), by marching squares over the cell centres `(tx[i], ty[j])` with
/// linear interpolation along each square's edges: a vertex lies where the
/// line between two neighbouring centres crosses the level, not on a cell
/// edge. `z` is row-major (`z[j * nx + i]`), already in colour-scale units so
/// that on a log colour scale the interpolation is in log z. Squares with a
/// missing (non-finite) corner draw nothing: the line stops at missing data.
pub(crate) fn contour_lines(
    z: &[f64],
    (tx, ty): (&[f64], &[f64]),
    level: f64,
) -> Result<Vec<Vec<(f64, f64)>>, PlotError> {
    let (nx, ny) = (tx.len(), ty.len());
    if nx < 2 || ny < 2 || z.len() != nx * ny {
        return Ok(Vec::new());
    }
    let rings = contour::ContourBuilder::new(nx, ny, true)
        .lines(z, &[level])
        .map_err(|e| PlotError::Drawing(format!("contour at {level}: {e:?}")))?;
    // The crate puts centre i at grid coordinate i + 0.5 and closes rings
    // through a padding row and column at coordinates 0 and n; a point there
    // lies outside the centres and is dropped with its segments.
    let to_axis = |c: f64, t: &[f64]| -> Option<f64> {
        let u = c - 0.5;
        if !u.is_finite() || u < -1e-9 || u > (t.len() - 1) as f64 + 1e-9 {
            return None;
        }
        let i = (u.floor().max(0.0) as usize).min(t.len() - 2);
        Some(t[i] + (u - i as f64) * (t[i + 1] - t[i]))
    };
    let square_ok = |a: (f64, f64), b: (f64, f64)| {
        let (mx, my) = ((a.0 + b.0) / 2.0 - 0.5, (a.1 + b.1) / 2.0 - 0.5);
        let (i, j) = (mx.floor(), my.floor());
        if i < 0.0 || j < 0.0 || i as usize + 1 >= nx || j as usize + 1 >= ny {
            return false;
        }
        let (i, j) = (i as usize, j as usize);
        [(i, j), (i + 1, j), (i, j + 1), (i + 1, j + 1)]
            .iter()
            .all(|&(i, j)| z[j * nx + i].is_finite())
    };
    let mut out = Vec::new();
    for line in rings {
        for ring in line.geometry().0.iter() {
            let mut current: Vec<(f64, f64)> = Vec::new();
            for w in ring.0.windows(2) {
                let (a, b) = ((w[0].x, w[0].y), (w[1].x, w[1].y));
                let kept = square_ok(a, b)
                    .then(|| {
                        Some((
                            (to_axis(a.0, tx)?, to_axis(a.1, ty)?),
                            (to_axis(b.0, tx)?, to_axis(b.1, ty)?),
                        ))
                    })
                    .flatten();
                match kept {
                    Some((pa, pb)) => {
                        if current.is_empty() {
                            current.push(pa);
                        }
                        current.push(pb);
                    }
                    None if current.len() >= 2 => out.push(std::mem::take(&mut current)),
                    None => current.clear(),
                }
            }
            if current.len() >= 2 {
                out.push(current);
            }
        }
    }
    Ok(out)
}

fn draw_colour_bar<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    za: &Axis,
    (z_lo, z_hi): (f64, f64),
    fig: &HeatmapFigure,
    label: &[String],
    (x0, top, bottom): (i32, i32, i32),
    any_missing: bool,
) -> Result<(), PlotError> {
    let h = (bottom - top).max(1) as f64;
    let to_px = |t: f64| bottom - ((t - z_lo) / (z_hi - z_lo) * h).round() as i32;
    let centre = fig.centre.map(|c| scale::fwd(fig.log_z, c));
    for y in top..bottom {
        let t = z_lo + (bottom - y) as f64 / h * (z_hi - z_lo);
        // Two pixels high, the next one drawn over the second: no seams (as the cells).
        root.draw(&Rectangle::new(
            [(x0, y), (x0 + BAR_W, (y + 2).min(bottom))],
            colour_of(t, (z_lo, z_hi), centre).filled(),
        ))
        .map_err(draw_err)?;
    }
    root.draw(&Rectangle::new(
        [(x0, top), (x0 + BAR_W, bottom)],
        GREY.stroke_width(1),
    ))
    .map_err(draw_err)?;
    for (t, s) in &za.ticks {
        let y = to_px(*t);
        root.draw(&PathElement::new(
            vec![(x0 + BAR_W, y), (x0 + BAR_W + 5, y)],
            GREY.stroke_width(1),
        ))
        .map_err(draw_err)?;
        root.draw(&Text::new(
            s.clone(),
            (x0 + BAR_W + 8, y),
            text_style(TICK_PX, INK, HPos::Left, VPos::Center),
        ))
        .map_err(draw_err)?;
    }
    if let Some(c) = fig.contour {
        let t = scale::fwd(fig.log_z, c);
        if t >= z_lo && t <= z_hi {
            let y = to_px(t);
            for (style, w) in [(WHITE, 5), (BLACK, 3)] {
                root.draw(&PathElement::new(
                    vec![(x0 - 3, y), (x0 + BAR_W + 3, y)],
                    style.stroke_width(w),
                ))
                .map_err(draw_err)?;
            }
        }
    }
    let mut lx = x0 + BAR_W + 8 + za.widest_label(TICK_PX).ceil() as i32 + 10;
    for line in label {
        root.draw(&Text::new(
            line.clone(),
            (lx, (top + bottom) / 2),
            text_style(LABEL_PX, INK, HPos::Center, VPos::Top).transform(FontTransform::Rotate270),
        ))
        .map_err(draw_err)?;
        lx += 24;
    }
    if any_missing {
        let y = bottom + 34;
        draw_missing(root, (x0, y), (x0 + 16, y + 16))?;
        root.draw(&Rectangle::new(
            [(x0, y), (x0 + 16, y + 16)],
            GREY.stroke_width(1),
        ))
        .map_err(draw_err)?;
        root.draw(&Text::new(
            "no data",
            (x0 + 22, y + 8),
            text_style(LEGEND_PX, INK, HPos::Left, VPos::Center),
        ))
        .map_err(draw_err)?;
    }
    Ok(())
}
