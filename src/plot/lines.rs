//! Line figures: series, confidence bands, reference lines, legends, facets.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::scale;
use super::*;

mod marks;
pub(super) use marks::colour_slots;
use marks::{draw_below, draw_marker, draw_paper_marker, MARKER_R, PAPER_INK};

/// Pixel length of a legend glyph.
const GLYPH_W: i32 = 32;
const LEGEND_ROW: i32 = 22;
const LEGEND_PAD: i32 = 8;
const LINE_W: u32 = 3;
const BAND_ALPHA: f64 = 0.2;

/// A series checked and moved into axis units; `None` breaks the line.
struct Prepared<'a> {
    s: &'a Series,
    color: RGBColor,
    marker: usize,
    /// How it is drawn: the series' style, but with markers where its line would repeat the
    /// colour of an earlier series (more series than colours).
    style: LineStyle,
    pts: Vec<Option<(f64, f64)>>,
    /// (x, lower, upper) in axis units; lower = -inf means "to axis bottom".
    band: Vec<Option<(f64, f64, f64)>>,
    /// x in axis units of the points marked on the bottom edge ([`Series::below`]).
    below: Vec<f64>,
}

/// Reference-line dash patterns (on, off px), so several lines stay distinct.
const HLINE_DASH: [(f64, f64); 3] = [(9.0, 5.0), (3.0, 4.0), (16.0, 5.0)];

#[derive(Clone)]
enum Glyph {
    Series {
        color: RGBColor,
        style: LineStyle,
        marker: usize,
        band: bool,
    },
    HLine {
        pattern: usize,
    },
    /// The mark of a point below a logarithmic axis ([`Series::below`]).
    Below,
}

#[derive(Clone)]
struct Entry {
    label: String,
    glyph: Glyph,
}

type Range1 = Option<(f64, f64)>;

fn widen(r: &mut Range1, v: f64) {
    if !v.is_finite() {
        return;
    }
    *r = Some(match *r {
        None => (v, v),
        Some((lo, hi)) => (lo.min(v), hi.max(v)),
    });
}

fn panel_name(p: &Panel, i: usize) -> String {
    if p.title.is_empty() {
        format!("panel #{}", i + 1)
    } else {
        p.title.clone()
    }
}

fn prepare<'a>(
    (log_x, log_y): (bool, bool),
    s: &'a Series,
    (color, marker, repeated): (RGBColor, usize, bool),
) -> Result<Prepared<'a>, PlotError> {
    let n = s.x.len();
    if s.y.len() != n {
        return Err(PlotError::LengthMismatch {
            series: s.name.clone(),
            what: "y".into(),
            expected: n,
            got: s.y.len(),
        });
    }
    let mut pts = Vec::with_capacity(n);
    for (&x, &y) in s.x.iter().zip(&s.y) {
        if !(x.is_finite() && y.is_finite()) {
            pts.push(None);
            continue;
        }
        if log_x && x <= 0.0 {
            return Err(PlotError::NonPositiveOnLog {
                series: s.name.clone(),
                axis: "x",
                value: x,
            });
        }
        if log_y && y <= 0.0 {
            return Err(PlotError::NonPositiveOnLog {
                series: s.name.clone(),
                axis: "y",
                value: y,
            });
        }
        pts.push(Some((scale::fwd(log_x, x), scale::fwd(log_y, y))));
    }
    let mut below = Vec::with_capacity(s.below.len());
    for &x in &s.below {
        if !x.is_finite() {
            return Err(PlotError::NonFinite {
                series: s.name.clone(),
                what: "x of a point below the axis".into(),
                value: x,
            });
        }
        if log_x && x <= 0.0 {
            return Err(PlotError::NonPositiveOnLog {
                series: s.name.clone(),
                axis: "x",
                value: x,
            });
        }
        below.push(scale::fwd(log_x, x));
    }
    if pts.iter().all(Option::is_none) && below.is_empty() {
        return Err(PlotError::NoFiniteData {
            series: s.name.clone(),
        });
    }
    let mut band = Vec::new();
    if let Some((lo, hi)) = &s.band {
        for (what, v) in [("band lower", lo), ("band upper", hi)] {
            if v.len() != n {
                return Err(PlotError::LengthMismatch {
                    series: s.name.clone(),
                    what: what.into(),
                    expected: n,
                    got: v.len(),
                });
            }
        }
        for i in 0..n {
            let (x, l, h) = (s.x[i], lo[i], hi[i]);
            let ok = x.is_finite() && l.is_finite() && h.is_finite() && (!log_x || x > 0.0);
            if !ok || (log_y && h <= 0.0) {
                band.push(None);
                continue;
            }
            let (l, h) = (l.min(h), l.max(h));
            let lt = if log_y && l <= 0.0 {
                f64::NEG_INFINITY
            } else {
                scale::fwd(log_y, l)
            };
            band.push(Some((scale::fwd(log_x, x), lt, scale::fwd(log_y, h))));
        }
    }
    // A repeated colour gets markers (of a shape of its own) on its line.
    let style = match s.style {
        LineStyle::Solid | LineStyle::Dashed if repeated => LineStyle::LineMarkers,
        other => other,
    };
    Ok(Prepared {
        s,
        color,
        marker,
        style,
        pts,
        band,
        below,
    })
}

/// Contiguous runs of defined points.
fn runs<T: Copy>(v: &[Option<T>]) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for p in v {
        match p {
            Some(p) => cur.push(*p),
            None if !cur.is_empty() => out.push(std::mem::take(&mut cur)),
            None => {}
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Where the legend goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Multi-panel: one strip under the title.
    Strip,
    /// Single panel: inside the plot, at the corner hiding the least data.
    Inside,
    /// Single panel whose every corner is busy: a column right of the plot.
    Outside,
}

pub(super) fn render(fig: &LineFigure) -> Result<String, PlotError> {
    let first = if fig.panels.len() > 1 {
        Place::Strip
    } else {
        Place::Inside
    };
    let (svg, hidden) = render_with(fig, first)?;
    // Rendering is cheap, so rather than predicting pixel positions we draw
    // once and redo it with the legend outside if it hid too much data.
    if first == Place::Inside && hidden > 0.02 {
        return Ok(render_with(fig, Place::Outside)?.0);
    }
    Ok(svg)
}

/// Renders with the legend at `place`; also returns the fraction of the data
/// (by sampled drawing weight) an inside legend covers.
fn render_with(fig: &LineFigure, place: Place) -> Result<(String, f64), PlotError> {
    check_size(fig.width, fig.height)?;
    if fig.panels.is_empty() {
        return Err(PlotError::NoPanels {
            figure: fig.title.clone(),
        });
    }

    // Same name → same colour in every panel, so the shared legend is valid. The paper's
    // series are near-black and take no palette colour.
    let mut names: Vec<&str> = Vec::new();
    for p in &fig.panels {
        for s in p.series.iter().filter(|s| s.style != LineStyle::Paper) {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
    }
    let slots = colour_slots(&names, &fig.colours);
    // (colour slot, marker shape, whether an earlier series has the colour): beyond the
    // palette's colours a series is told apart by the markers on its line.
    let idx_of = |name: &str| {
        let i = names.iter().position(|n| *n == name).unwrap_or(0);
        let earlier = slots[..i].iter().filter(|&&k| k == slots[i]).count();
        // The marker follows the slot (stable as series come and go), shifted for a repeat.
        (slots[i], slots[i] + 3 * earlier, earlier > 0)
    };

    let mut prepared: Vec<Vec<Prepared>> = Vec::new();
    let mut xr: Vec<Range1> = Vec::new();
    let mut yr: Vec<Range1> = Vec::new();
    let log_y = |p: &Panel| p.log_y.unwrap_or(fig.log_y);
    for (pi, p) in fig.panels.iter().enumerate() {
        let p_log_y = log_y(p);
        if p.series.is_empty() && p.hlines.is_empty() {
            return Err(PlotError::EmptyPanel {
                panel: panel_name(p, pi),
            });
        }
        let mut ps = Vec::new();
        let (mut x, mut y) = (None, None);
        for s in &p.series {
            let look = if s.style == LineStyle::Paper {
                (PAPER_INK, 0, false)
            } else {
                let (slot, marker, repeated) = idx_of(&s.name);
                (PALETTE[slot % PALETTE.len()], marker, repeated)
            };
            let pr = prepare((fig.log_x, p_log_y), s, look)?;
            for (px, py) in pr.pts.iter().flatten() {
                widen(&mut x, *px);
                widen(&mut y, *py);
            }
            for bx in &pr.below {
                widen(&mut x, *bx);
            }
            for (_, l, h) in pr.band.iter().flatten() {
                widen(&mut y, *l);
                widen(&mut y, *h);
            }
            ps.push(pr);
        }
        if let Some(m) = fig
            .y_min
            .filter(|m| m.is_finite() && (!p_log_y || *m > 0.0))
        {
            widen(&mut y, scale::fwd(p_log_y, m));
        }
        for (label, v) in &p.hlines {
            if !v.is_finite() {
                return Err(PlotError::NonFinite {
                    series: label.clone(),
                    what: "reference line".into(),
                    value: *v,
                });
            }
            if p_log_y && *v <= 0.0 {
                return Err(PlotError::NonPositiveOnLog {
                    series: label.clone(),
                    axis: "y",
                    value: *v,
                });
            }
            widen(&mut y, scale::fwd(p_log_y, *v));
        }
        prepared.push(ps);
        xr.push(x);
        yr.push(y);
    }

    let union = |rs: &[Range1]| {
        rs.iter().flatten().fold(None, |acc: Range1, &(lo, hi)| {
            Some(acc.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))))
        })
    };
    // x is shared unless the caller frees it: facets are normally the same sweep. A panel
    // with only reference lines has no x extent of its own and borrows the union.
    let Some(x_all) = union(&xr) else {
        return Err(PlotError::NoFiniteData {
            series: fig.title.clone(),
        });
    };
    let y_all = union(&yr).unwrap_or((0.0, 1.0));
    let all_span = y_all.1 - y_all.0;
    // Ranges in log10 units and in plain units have no common scale: mixed scale types
    // always give each panel its own range.
    let mixed_scales = fig.panels.windows(2).any(|w| log_y(&w[0]) != log_y(&w[1]));
    let free_y = mixed_scales
        || yr
            .iter()
            .flatten()
            .any(|(lo, hi)| hi - lo > 0.0 && (hi - lo) < all_span / 5.0);

    let (cols, rows) = grid(fig.panels.len(), fig.columns);
    let (pw, ph) = (panel_width(fig.width, cols) as i32, fig.height as i32);

    // Legend entries in first-appearance order: series, then reference lines.
    let mut entries: Vec<Entry> = Vec::new();
    for p in &prepared {
        for pr in p {
            if pr.s.name.is_empty() || entries.iter().any(|e| e.label == pr.s.name) {
                continue;
            }
            entries.push(Entry {
                label: pr.s.name.clone(),
                glyph: Glyph::Series {
                    color: pr.color,
                    style: pr.style,
                    marker: pr.marker,
                    // A band only where the series has one somewhere (a series without
                    // one still carries a slot per point).
                    band: pr.band.iter().any(Option::is_some),
                },
            });
        }
    }
    // The paper's values first: they are what the figure is held against.
    entries.sort_by_key(|e| {
        !matches!(
            e.glyph,
            Glyph::Series {
                style: LineStyle::Paper,
                ..
            }
        )
    });
    let any_below = prepared.iter().flatten().any(|pr| !pr.below.is_empty());
    if any_below {
        entries.push(Entry {
            label: if fig.below_label.is_empty() {
                BELOW_LABEL.to_string()
            } else {
                fig.below_label.clone()
            },
            glyph: Glyph::Below,
        });
    }
    let mut hline_labels: Vec<&str> = Vec::new();
    for p in &fig.panels {
        for (l, _) in &p.hlines {
            if !hline_labels.contains(&l.as_str()) {
                hline_labels.push(l);
            }
        }
    }
    for (i, l) in hline_labels.iter().enumerate() {
        if !l.is_empty() {
            entries.push(Entry {
                label: l.to_string(),
                glyph: Glyph::HLine { pattern: i },
            });
        }
    }

    let ylab_w = if fig.y_label.is_empty() { 8 } else { 36 };
    let xlab_h = if fig.x_label.is_empty() { 8 } else { 36 };
    let outside_w = entries.iter().map(entry_width).max().unwrap_or(0) + 2 * LEGEND_PAD;
    let total_w = ylab_w
        + cols as i32 * pw
        + 8
        + if place == Place::Outside {
            outside_w + 4
        } else {
            0
        };
    // Several panels: one legend strip under the title (never covers data,
    // not repeated per panel).
    let strip = place == Place::Strip && !entries.is_empty();
    let strip_rows = if strip {
        layout_strip(&entries, total_w - 40).len() as i32
    } else {
        0
    };
    let strip_h = if strip {
        strip_rows * LEGEND_ROW + 10
    } else {
        0
    };
    let title_h = if fig.title.is_empty() {
        8
    } else {
        let (lines, px) = fit_title(&fig.title, f64::from(total_w - TITLE_MARGIN));
        title_height(&lines, px)
    };
    let grid_top = title_h + strip_h;
    let total_h = grid_top + rows as i32 * ph + xlab_h;
    let any_titles = fig.panels.iter().any(|p| !p.title.is_empty());
    let ptitle_h = if any_titles { 34 } else { 6 };

    let mut svg = String::new();
    let mut hidden = 0.0;
    {
        let root =
            SVGBackend::with_string(&mut svg, (total_w as u32, total_h as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;

        for (pi, panel) in fig.panels.iter().enumerate() {
            let (c, r) = ((pi % cols) as i32, (pi / cols) as i32);
            let (cx, cy) = (ylab_w + c * pw, grid_top + r * ph);
            // A panel's own y label sits left of its tick labels, in a strip of its own.
            let own = if panel.y_label.is_empty() {
                0
            } else {
                PANEL_YLAB_W
            };
            if own > 0 {
                root.draw(&Text::new(
                    panel.y_label.clone(),
                    (cx + 2, cy + ptitle_h + (ph - ptitle_h) / 2 - 10),
                    text_style(TICK_PX + 1.0, INK, HPos::Center, VPos::Top)
                        .transform(FontTransform::Rotate270),
                ))
                .map_err(draw_err)?;
            }
            let cell = root
                .clone()
                .shrink((cx + own, cy + ptitle_h), (pw - own, ph - ptitle_h));

            let (y_lo, y_hi) = if free_y {
                yr[pi].unwrap_or(y_all)
            } else {
                y_all
            };
            let (x_lo, x_hi) = if fig.free_x {
                xr[pi].unwrap_or(x_all)
            } else {
                x_all
            };
            let (x_lo, x_hi) = scale::pad(fig.log_x, x_lo, x_hi, 0.03);
            let p_log_y = log_y(panel);
            let (y_lo, y_hi) = scale::pad(p_log_y, y_lo, y_hi, 0.05);
            let ticks_h = (TICK_PX + 14.0) as i32;
            let x_area = ticks_h + if any_below { BELOW_STRIP } else { 0 };
            let (mut chart, xa, ya) = panel_chart(
                &cell,
                (fig.log_x, p_log_y),
                (x_lo, x_hi),
                (y_lo, y_hi),
                (pw, ph, ptitle_h, x_area),
            )?;
            chart
                .configure_mesh()
                .label_style(TextStyle::from(font(TICK_PX)).color(&INK))
                .bold_line_style(BLACK.mix(0.10))
                .light_line_style(BLACK.mix(0.04))
                .axis_style(GREY)
                .draw()
                .map_err(draw_err)?;

            let (xpix, ypix) = chart.plotting_area().get_pixel_range();
            let map = |x: f64, y: f64| {
                // Clamped band edges (-inf) go to the axis bottom.
                let y = if y == f64::NEG_INFINITY { ya.lo } else { y };
                chart.backend_coord(&(x, y))
            };

            let series = &prepared[pi];
            // A panel where only the paper has values says so, or its lone diamonds read as
            // a figure whose other series were forgotten.
            let drawn = |pr: &Prepared| pr.pts.iter().any(Option::is_some) || !pr.below.is_empty();
            let paper = |pr: &Prepared| pr.style == LineStyle::Paper;
            let paper_only = series.iter().any(|pr| paper(pr) && drawn(pr))
                && !series.iter().any(|pr| !paper(pr) && drawn(pr))
                && prepared.iter().flatten().any(|pr| !paper(pr) && drawn(pr));
            if !panel.title.is_empty() {
                let title = if paper_only {
                    format!("{} (only the paper has values)", panel.title)
                } else {
                    panel.title.clone()
                };
                root.draw(&Text::new(
                    title,
                    ((xpix.start + xpix.end) / 2, cy + 6),
                    text_style(PANEL_TITLE_PX, INK, HPos::Center, VPos::Top),
                ))
                .map_err(draw_err)?;
            }

            // Bands first so every line stays visible on top of every band.
            for pr in series {
                for run in runs(&pr.band) {
                    // An isolated point has no neighbour to stretch a band to: its interval
                    // is an error bar (a Monte-Carlo point drawn bare read as exact).
                    if let [(x, lo, hi)] = run[..] {
                        let ((px, top), (_, bottom)) = (map(x, hi), map(x, lo));
                        let bar = pr.color.mix(0.7).stroke_width(2);
                        for seg in [
                            vec![(px, top), (px, bottom)],
                            vec![(px - MARKER_R, top), (px + MARKER_R, top)],
                            vec![(px - MARKER_R, bottom), (px + MARKER_R, bottom)],
                        ] {
                            root.draw(&PathElement::new(seg, bar)).map_err(draw_err)?;
                        }
                        continue;
                    }
                    let mut poly: Vec<(i32, i32)> =
                        run.iter().map(|&(x, _, h)| map(x, h)).collect();
                    poly.extend(run.iter().rev().map(|&(x, l, _)| map(x, l)));
                    root.draw(&Polygon::new(poly, pr.color.mix(BAND_ALPHA).filled()))
                        .map_err(draw_err)?;
                }
            }
            for (label, v) in &panel.hlines {
                let k = hline_labels.iter().position(|l| l == label).unwrap_or(0);
                let y = map(xa.lo, scale::fwd(p_log_y, *v)).1;
                let (on, off) = HLINE_DASH[k % HLINE_DASH.len()];
                for seg in dash(&[(xpix.start, y), (xpix.end, y)], on, off) {
                    root.draw(&PathElement::new(seg, GREY.stroke_width(2)))
                        .map_err(draw_err)?;
                }
            }
            // The paper's values last, over every other series.
            let on_top = |pr: &&Prepared| pr.style == LineStyle::Paper;
            for pr in series
                .iter()
                .filter(|pr| !on_top(pr))
                .chain(series.iter().filter(on_top))
            {
                let pix: Vec<Option<(i32, i32)>> =
                    pr.pts.iter().map(|p| p.map(|(x, y)| map(x, y))).collect();
                let style = pr.style;
                for run in runs(&pix) {
                    match style {
                        LineStyle::Solid | LineStyle::LineMarkers if run.len() >= 2 => {
                            root.draw(&PathElement::new(run, pr.color.stroke_width(LINE_W)))
                                .map_err(draw_err)?;
                        }
                        LineStyle::Dashed if run.len() >= 2 => {
                            for seg in dash(&run, 10.0, 6.0) {
                                root.draw(&PathElement::new(seg, pr.color.stroke_width(LINE_W)))
                                    .map_err(draw_err)?;
                            }
                        }
                        _ => {}
                    }
                }
                // Markers where asked, and for isolated points a line style
                // would otherwise not show at all.
                let isolated = |i: usize| {
                    (i == 0 || pix[i - 1].is_none()) && (i + 1 >= pix.len() || pix[i + 1].is_none())
                };
                for (i, p) in pix.iter().enumerate() {
                    let Some(p) = p else { continue };
                    if style == LineStyle::Paper {
                        draw_paper_marker(&root, *p)?;
                    } else if matches!(style, LineStyle::Markers | LineStyle::LineMarkers)
                        || isolated(i)
                    {
                        draw_marker(&root, *p, pr.marker, pr.color)?;
                    }
                }
            }
            // Points a log axis cannot show (≤ 0): marked in a strip under the x tick labels,
            // outside the frame, since a mark inside it would stand where a value could be
            // (stacked upward, eight of them once read as 1.1–5.7 steps); series that share
            // an x stand side by side.
            let below: Vec<(i32, RGBColor)> = series
                .iter()
                .flat_map(|pr| {
                    pr.below
                        .iter()
                        .map(|&bx| (map(bx, f64::NEG_INFINITY).0, pr.color))
                })
                .collect();
            let step = 2 * (MARKER_R + 1) + 2;
            for (i, &(px, color)) in below.iter().enumerate() {
                let near = |&&(x, _): &&(i32, RGBColor)| (x - px).abs() <= 2 * (MARKER_R + 1);
                let n = below.iter().filter(near).count() as i32;
                let k = below[..i].iter().filter(near).count() as i32;
                let x = px + ((2 * k + 1 - n) * step) / 2;
                draw_below(&root, (x, ypix.end + ticks_h + BELOW_STRIP - 2), color)?;
            }
            root.draw(&Rectangle::new(
                [(xpix.start, ypix.start), (xpix.end - 1, ypix.end - 1)],
                GREY.stroke_width(1),
            ))
            .map_err(draw_err)?;

            if place == Place::Inside && !entries.is_empty() {
                let samples = occupancy(series, &panel.hlines, p_log_y, &map, &xpix);
                hidden = draw_inside_legend(&root, &entries, (&xpix, &ypix), &samples)?;
            } else if place == Place::Outside && !entries.is_empty() {
                draw_legend_box(&root, &entries, (cx + pw - 8, ypix.start))?;
            }
        }

        if strip {
            let rows = layout_strip(&entries, total_w - 40);
            for (ri, row) in rows.iter().enumerate() {
                let row_w: i32 = row.iter().map(|(_, w)| w).sum();
                let mut x = (total_w - row_w) / 2;
                let y = title_h + ri as i32 * LEGEND_ROW + LEGEND_ROW / 2;
                for (e, w) in row {
                    draw_entry(&root, &entries[*e], x, y)?;
                    x += w;
                }
            }
        }

        let grid_bottom = grid_top + rows as i32 * ph;
        draw_frame_text(
            &root,
            [&fig.title, &fig.x_label, &fig.y_label],
            (ylab_w, grid_top, ylab_w + cols as i32 * pw, grid_bottom),
            total_w,
        )?;
        root.present().map_err(draw_err)?;
    }
    Ok((svg, hidden))
}

/// Pixel width of one legend entry (glyph, gap, text).
fn entry_width(e: &Entry) -> i32 {
    GLYPH_W + 8 + text_width(&e.label, LEGEND_PX).ceil() as i32
}

/// Greedy wrap of legend entries into rows of at most `max_w` px; returns
/// (entry index, allotted width) per row.
fn layout_strip(entries: &[Entry], max_w: i32) -> Vec<Vec<(usize, i32)>> {
    let mut rows: Vec<Vec<(usize, i32)>> = vec![Vec::new()];
    let mut used = 0;
    for (i, e) in entries.iter().enumerate() {
        let w = entry_width(e) + 22;
        if used + w > max_w && !rows.last().unwrap().is_empty() {
            rows.push(Vec::new());
            used = 0;
        }
        rows.last_mut().unwrap().push((i, w));
        used += w;
    }
    rows
}

/// Height of the strip under a panel's x tick labels where [`draw_below`]'s triangles stand.
const BELOW_STRIP: i32 = 2 * (MARKER_R + 1) + 6;

/// What the legend says of [`draw_below`]'s triangle, unless the figure says otherwise.
const BELOW_LABEL: &str = "value ≤ 0, below the log axis";

/// Draws one legend entry with its glyph starting at `x`, centred on `y`.
fn draw_entry<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    e: &Entry,
    x: i32,
    y: i32,
) -> Result<(), PlotError> {
    let line = [(x, y), (x + GLYPH_W, y)];
    match &e.glyph {
        Glyph::Series {
            color,
            style,
            marker,
            band,
        } => {
            if *band {
                root.draw(&Rectangle::new(
                    [(x, y - 7), (x + GLYPH_W, y + 7)],
                    color.mix(BAND_ALPHA).filled(),
                ))
                .map_err(draw_err)?;
            }
            match style {
                LineStyle::Solid | LineStyle::LineMarkers => {
                    root.draw(&PathElement::new(line.to_vec(), color.stroke_width(LINE_W)))
                        .map_err(draw_err)?;
                }
                LineStyle::Dashed => {
                    for seg in dash(&line, 10.0, 6.0) {
                        root.draw(&PathElement::new(seg, color.stroke_width(LINE_W)))
                            .map_err(draw_err)?;
                    }
                }
                LineStyle::Markers | LineStyle::Paper => {}
            }
            if *style == LineStyle::Paper {
                draw_paper_marker(root, (x + GLYPH_W / 2, y))?;
            } else if matches!(style, LineStyle::Markers | LineStyle::LineMarkers) {
                draw_marker(root, (x + GLYPH_W / 2, y), *marker, *color)?;
            }
        }
        Glyph::HLine { pattern } => {
            let (on, off) = HLINE_DASH[pattern % HLINE_DASH.len()];
            for seg in dash(&line, on, off) {
                root.draw(&PathElement::new(seg, GREY.stroke_width(2)))
                    .map_err(draw_err)?;
            }
        }
        Glyph::Below => {
            draw_below(root, (x + GLYPH_W / 2, y + MARKER_R + 2), INK)?;
        }
    }
    root.draw(&Text::new(
        e.label.clone(),
        (x + GLYPH_W + 8, y),
        text_style(LEGEND_PX, INK, HPos::Left, VPos::Center),
    ))
    .map_err(draw_err)?;
    Ok(())
}

/// Pixel samples of everything drawn in a panel, with weights, used to find
/// the legend position that hides the least data.
fn occupancy(
    series: &[Prepared],
    hlines: &[(String, f64)],
    log_y: bool,
    map: &dyn Fn(f64, f64) -> (i32, i32),
    xpix: &std::ops::Range<i32>,
) -> Vec<((i32, i32), f64)> {
    let mut out = Vec::new();
    let densify = |pts: &[(i32, i32)], w: f64, out: &mut Vec<((i32, i32), f64)>| {
        for seg in pts.windows(2) {
            let (a, b) = (seg[0], seg[1]);
            let len = (((b.0 - a.0).pow(2) + (b.1 - a.1).pow(2)) as f64).sqrt();
            let n = (len / 3.0).ceil().max(1.0) as i32;
            for k in 0..=n {
                let t = k as f64 / n as f64;
                let p = (
                    a.0 + ((b.0 - a.0) as f64 * t) as i32,
                    a.1 + ((b.1 - a.1) as f64 * t) as i32,
                );
                out.push((p, w));
            }
        }
        if pts.len() == 1 {
            out.push((pts[0], w));
        }
    };
    for pr in series {
        for run in runs(&pr.pts) {
            let pix: Vec<(i32, i32)> = run.iter().map(|&(x, y)| map(x, y)).collect();
            densify(&pix, 1.0, &mut out);
        }
        for run in runs(&pr.band) {
            for &(x, l, h) in &run {
                // A vertical stroke through the band at each point approximates its area.
                let col = [map(x, l), map(x, h)];
                densify(&col, 0.15, &mut out);
            }
        }
    }
    for (_, v) in hlines {
        let y = map(0.0, scale::fwd(log_y, *v)).1;
        densify(&[(xpix.start, y), (xpix.end, y)], 0.5, &mut out);
    }
    out
}

fn draw_inside_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    (xpix, ypix): (&std::ops::Range<i32>, &std::ops::Range<i32>),
    samples: &[((i32, i32), f64)],
) -> Result<f64, PlotError> {
    let (w, h) = legend_size(entries);
    let inset = 10;
    let (l, r, t, b) = (
        xpix.start + inset,
        xpix.end - inset - w,
        ypix.start + inset,
        ypix.end - inset - h,
    );
    // Preference order on ties: upper right, upper left, lower right, lower left.
    let corners = [(r, t), (l, t), (r, b), (l, b)];
    let score = |(x0, y0): (i32, i32)| -> f64 {
        samples
            .iter()
            .filter(|((x, y), _)| {
                *x >= x0 - 4 && *x <= x0 + w + 4 && *y >= y0 - 4 && *y <= y0 + h + 4
            })
            .map(|(_, wt)| wt)
            .sum()
    };
    let mut best = corners[0];
    let mut best_score = score(best);
    for &c in &corners[1..] {
        let s = score(c);
        if s < best_score - 1e-9 {
            best = c;
            best_score = s;
        }
    }
    draw_legend_box(root, entries, best)?;
    let total: f64 = samples.iter().map(|(_, w)| w).sum();
    Ok(if total > 0.0 { best_score / total } else { 0.0 })
}

/// Legend box (white, semi-opaque so covered data still shows through) with
/// its top-left corner at `(x0, y0)`.
fn draw_legend_box<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    (x0, y0): (i32, i32),
) -> Result<(), PlotError> {
    let (w, h) = legend_size(entries);
    root.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        WHITE.mix(0.85).filled(),
    ))
    .map_err(draw_err)?;
    root.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        RGBColor(0xBB, 0xBB, 0xBB).stroke_width(1),
    ))
    .map_err(draw_err)?;
    for (i, e) in entries.iter().enumerate() {
        draw_entry(
            root,
            e,
            x0 + LEGEND_PAD,
            y0 + LEGEND_PAD - 2 + LEGEND_ROW / 2 + i as i32 * LEGEND_ROW,
        )?;
    }
    Ok(())
}

fn legend_size(entries: &[Entry]) -> (i32, i32) {
    let w = entries.iter().map(entry_width).max().unwrap_or(0) + 2 * LEGEND_PAD;
    let h = entries.len() as i32 * LEGEND_ROW + 2 * LEGEND_PAD - 4;
    (w, h)
}
