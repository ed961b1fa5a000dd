//! Publication-quality SVG figures from plain data.
//!
//! Two figure kinds are supported, both rendered to an SVG string with
//! plotters' SVG backend (text stays as `<text>` elements, so it remains
//! crisp and searchable):
//!
//! * [`render_lines`]: line/marker plots with optional confidence bands and
//!   labelled horizontal reference lines, faceted into a grid of panels.
//! * [`render_heatmap`]: gridded values as coloured cells with one shared
//!   perceptual colour scale, a colour bar, and an optional contour.
//!
//! Policies, in one place:
//! * Non-finite values (NaN, ±inf) are *skipped*: a line is broken at them, a
//!   heatmap cell becomes "missing" (light grey, hatched). A series or figure
//!   with no finite value at all is an error.
//! * On a log axis, a non-positive *data* value (series x/y, horizontal
//!   reference line, heatmap coordinate, z on a log colour scale) is
//!   **rejected** with [`PlotError::NonPositiveOnLog`], naming the series and
//!   the value. Two exceptions say what they show instead of hiding it: a
//!   band whose lower edge is ≤ 0 on a log y axis is drawn down to the bottom
//!   of the axis ("the interval reaches zero"), and a point a caller lists in
//!   [`Series::below`] is marked on the bottom edge with a legend entry.
//! * Panels of a line figure share the x range; they share the y range too
//!   unless that would squash a panel to under a fifth of its height, in which
//!   case each panel gets its own y range.
//! * Legends: a multi-panel line figure gets one legend strip under the title
//!   (series with the same name share a colour across panels). A single panel
//!   gets its legend inside, in the corner that hides the least data, on a
//!   semi-opaque white box; if every corner would hide more than 2% of the
//!   drawn data, the legend moves to a column right of the plot.
//! * Figure sizes: `width`/`height` are per panel; the SVG adds room for the
//!   title, the shared axis labels, the legend strip or column, and the
//!   colour bar (heatmaps).
//! * Fonts: text is emitted as SVG `<text>` asking for `DejaVu Sans, sans-serif`
//!   ([`FONT_FAMILY`]), and laid out with DejaVu Sans's own advance widths (the
//!   font file is compiled in, `assets/fonts/`). DejaVu Sans is wider than the
//!   usual fallbacks (Arial, Helvetica, Liberation Sans), so text measured to
//!   fit still fits where another sans-serif is drawn. A title too long for its
//!   figure is shrunk (to 80%), then wrapped onto more lines: it never crosses
//!   the edge.

mod heatmap;
mod lines;
pub mod mathtext;
mod scale;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Why a figure could not be rendered. Rendering never panics on user data.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlotError {
    /// The figure has no panels at all.
    #[error("figure `{figure}` has no panels")]
    NoPanels { figure: String },
    /// A panel has nothing to draw (no series and no reference lines).
    #[error("panel `{panel}` has no series to draw")]
    EmptyPanel { panel: String },
    /// A series (or heatmap panel) has no finite value to plot.
    #[error("series `{series}` has no finite values to plot (all NaN/inf or empty)")]
    NoFiniteData { series: String },
    /// Parallel vectors of a series/panel differ in length.
    #[error("`{series}`: {what} has {got} values but {expected} were expected")]
    LengthMismatch {
        series: String,
        what: String,
        expected: usize,
        got: usize,
    },
    /// A value that must be > 0 on a logarithmic axis is not.
    #[error("`{series}`: {axis} value {value} cannot be shown on a logarithmic {axis} axis (must be > 0)")]
    NonPositiveOnLog {
        series: String,
        axis: &'static str,
        value: f64,
    },
    /// A value that must be finite (e.g. a reference line, a grid coordinate) is not.
    #[error("`{series}`: {what} must be finite, got {value}")]
    NonFinite {
        series: String,
        what: String,
        value: f64,
    },
    /// Heatmap grid coordinates must be strictly increasing.
    #[error("heatmap panel `{panel}`: {axis} coordinates must be strictly ascending ({prev} then {next})")]
    NotAscending {
        panel: String,
        axis: &'static str,
        prev: f64,
        next: f64,
    },
    /// Panel size too small to lay out a chart.
    #[error("panel size {width}x{height} px is too small (need at least {min}x{min})")]
    TooSmall { width: u32, height: u32, min: u32 },
    /// The drawing backend failed.
    #[error("drawing failed: {0}")]
    Drawing(String),
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum LineStyle {
    /// A solid line.
    #[default]
    Solid,
    /// A dashed line (e.g. a theoretical bound next to measurements).
    Dashed,
    /// Markers only, no connecting line.
    Markers,
    /// A solid line with a marker at every point.
    LineMarkers,
    /// The values a figure is held against (a paper's printed numbers): large near-black
    /// diamonds with a white rim, no line, drawn over every other series and first in the
    /// legend, so the reference is what one sees first; it takes no palette colour.
    Paper,
}

/// One named curve. `x`, `y` and the band vectors are parallel.
pub(crate) struct Series {
    /// Legend entry; series with the same name in different panels share a colour.
    pub name: String,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    /// Optional (lower, upper) envelope, e.g. a 95% confidence interval,
    /// drawn as a translucent area in the series colour beneath all lines.
    pub band: Option<(Vec<f64>, Vec<f64>)>,
    pub style: LineStyle,
    /// The x of points below the y axis: y ≤ 0 on a logarithmic axis, or below the lower end
    /// a figure sets. They have no position on it, yet "the estimate is 0" is a result (a
    /// thesis's printed 0.000, a Monte-Carlo count of 0): each is drawn as an open triangle
    /// pointing down in a strip under the panel's x tick labels, in the series' colour, and the legend says
    /// what the triangle means ([`LineFigure::below_label`]). Their `y` stays NaN.
    pub below: Vec<f64>,
}

/// One facet of a line figure.
pub(crate) struct Panel {
    /// Shown above the panel; may be empty.
    pub title: String,
    pub series: Vec<Series>,
    /// Labelled horizontal reference lines, e.g. `("OPT = 3.01", 3.01)`;
    /// drawn grey dashed and listed in the legend.
    pub hlines: Vec<(String, f64)>,
    /// This panel's own y label (panels that show different measures); empty: the figure's
    /// `y_label` alone.
    pub y_label: String,
    /// This panel's own y scale (`Some(true)` logarithmic, `Some(false)` linear), for panels
    /// that show different measures; `None`: the figure's `log_y`. Panels of different scale
    /// types never share a y range.
    pub log_y: Option<bool>,
}

/// A faceted line figure.
pub(crate) struct LineFigure {
    pub title: String,
    /// Axis labels, shared by all panels (include units).
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub panels: Vec<Panel>,
    /// Panels per row; 0 chooses automatically.
    pub columns: usize,
    /// Each panel its own x range (panels that sweep different settings); otherwise one x
    /// range for all, as facets of one sweep are compared across panels.
    pub free_x: bool,
    /// Size of one panel in px.
    pub width: u32,
    pub height: u32,
    /// What the legend says of the marks of [`Series::below`] (empty: "value ≤ 0, below the
    /// log axis").
    pub below_label: String,
    /// The lower end of every panel's y range, when the caller sets one (values below it are
    /// the caller's [`Series::below`] marks).
    pub y_min: Option<f64>,
    /// Series names whose palette colour the caller fixes (an index into [`PALETTE`]); the
    /// others get theirs from their names.
    pub colours: Vec<(String, usize)>,
}

/// Renders a line figure to an SVG document (`^` and `_` in its texts as in [`mathtext`]).
pub(crate) fn render_lines(fig: &LineFigure) -> Result<String, PlotError> {
    lines::render(fig).map(|svg| mathtext::svg(&svg))
}

/// One facet of a heatmap: values on a rectilinear grid.
pub(crate) struct HeatPanel {
    /// Shown above the panel; may be empty.
    pub title: String,
    /// Cell-centre coordinates, strictly ascending.
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    /// Row-major values, `z[iy * x.len() + ix]`; NaN marks a missing cell.
    pub z: Vec<f64>,
}

/// A faceted heatmap with one colour scale shared by all panels.
pub(crate) struct HeatmapFigure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Colour-bar label.
    pub z_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub panels: Vec<HeatPanel>,
    /// Panels per row; 0 chooses automatically.
    pub columns: usize,
    /// If set, the level set `z = contour` is drawn in black, interpolated
    /// between cell centres (marching squares), and marked on the colour bar.
    pub contour: Option<f64>,
    /// Logarithmic colour scale.
    pub log_z: bool,
    /// A diverging colour map whose white is this value (blue below, red above), for a ratio
    /// against a reference; `None`: the sequential viridis map.
    pub centre: Option<f64>,
    /// Size of one panel in px.
    pub width: u32,
    pub height: u32,
}

/// Renders a heatmap figure to an SVG document (`^` and `_` in its texts as in [`mathtext`]).
pub(crate) fn render_heatmap(fig: &HeatmapFigure) -> Result<String, PlotError> {
    heatmap::render(fig).map(|svg| mathtext::svg(&svg))
}

// ---------------------------------------------------------------------------
// Shared helpers.

/// Width of the strip left of a panel that holds its own y label.
const PANEL_YLAB_W: i32 = 20;

/// Smallest panel we can lay out without labels colliding.
const MIN_PANEL: u32 = 160;

/// Real on-screen font sizes in px. plotters' SVG backend writes
/// `font-size = size / 1.24`, so [`font`] compensates.
const TITLE_PX: f64 = 24.0;
/// Room left free beside a title, in all (px).
const TITLE_MARGIN: i32 = 16;
const PANEL_TITLE_PX: f64 = 20.0;
const LABEL_PX: f64 = 17.0;
const TICK_PX: f64 = 14.0;
const LEGEND_PX: f64 = 14.0;

/// The font family every figure's text asks for: the font its layout is measured with, then
/// any sans-serif.
pub(crate) const FONT_FAMILY: &str = "DejaVu Sans, sans-serif";

/// DejaVu Sans 2.37 (Bitstream Vera licence, `assets/fonts/LICENSE-DejaVu.txt`): only its
/// advance widths are read.
const FONT_FILE: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// A font whose SVG `font-size` will be `px`.
fn font(px: f64) -> FontDesc<'static> {
    FontDesc::new(FontFamily::Name(FONT_FAMILY), px * 1.24, FontStyle::Normal)
}

/// Advance widths in em, by character, from the compiled-in font.
struct Advances {
    face: Option<ttf_parser::Face<'static>>,
    /// For a character the font lacks (drawn by some fallback font): the widest digit's.
    fallback: f64,
}

fn advances() -> &'static Advances {
    static A: std::sync::OnceLock<Advances> = std::sync::OnceLock::new();
    A.get_or_init(|| {
        let face = ttf_parser::Face::parse(FONT_FILE, 0).ok();
        let mut a = Advances {
            face,
            fallback: 0.64,
        };
        if let Some(w) = a.em('0') {
            a.fallback = w;
        }
        a
    })
}

impl Advances {
    fn em(&self, c: char) -> Option<f64> {
        let f = self.face.as_ref()?;
        let g = f.glyph_index(c)?;
        Some(f64::from(f.glyph_hor_advance(g)?) / f64::from(f.units_per_em()))
    }
}

/// The width of `s` drawn at `px` in DejaVu Sans, as the figures draw it: `^` and `_`
/// groups as 75% superscripts and subscripts ([`mathtext`]), no kerning (which only narrows).
fn text_width(s: &str, px: f64) -> f64 {
    let a = advances();
    let run = |t: &str, px: f64| -> f64 {
        t.chars()
            .map(|c| a.em(c).unwrap_or(a.fallback))
            .sum::<f64>()
            * px
    };
    mathtext::pieces(s)
        .iter()
        .map(|p| match p {
            mathtext::Piece::Plain(t) => run(t, px),
            mathtext::Piece::Sup(t) | mathtext::Piece::Sub(t) => run(t, px * 0.75),
        })
        .sum()
}

/// A title's lines and font size so that every line fits in `avail` px: full size if it fits,
/// else shrunk down to 80%, else wrapped at spaces outside brackets onto as few lines as fit
/// (at 90% down to 70% of full size), a word wider than the whole width broken inside.
fn fit_title(title: &str, avail: f64) -> (Vec<String>, f64) {
    let avail = avail.max(1.0);
    for scale in [1.0, 0.9, 0.8] {
        let px = TITLE_PX * scale;
        if text_width(title, px) <= avail {
            return (vec![title.to_string()], px);
        }
    }
    let mut best = None;
    for scale in [0.9, 0.8, 0.7] {
        let px = TITLE_PX * scale;
        let lines = wrap(title, avail, px);
        let better = best
            .as_ref()
            .is_none_or(|(b, _): &(Vec<String>, f64)| lines.len() < b.len());
        if better {
            best = Some((lines, px));
        }
    }
    best.unwrap_or_else(|| (vec![title.to_string()], TITLE_PX))
}

/// Greedy wrap at spaces that are outside brackets (so `[−1, 1]^d` and `e^(−c ε)` stay whole);
/// a piece still too wide is cut between characters.
fn wrap(text: &str, avail: f64, px: f64) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = (depth - 1).max(0),
            _ => {}
        }
        if c == ' ' && depth == 0 {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    // Widths add up (no kerning; a `^` group never spans a space outside brackets), so each
    // word and character is measured once: a title of any length is wrapped in linear time.
    let space = text_width(" ", px);
    let mut lines: Vec<String> = Vec::new();
    let (mut line, mut line_w) = (String::new(), 0.0);
    for w in words {
        let ww = text_width(&w, px);
        if line.is_empty() && ww <= avail {
            (line, line_w) = (w, ww);
            continue;
        }
        if !line.is_empty() && line_w + space + ww <= avail {
            line.push(' ');
            line.push_str(&w);
            line_w += space + ww;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
            line_w = 0.0;
        }
        if ww <= avail {
            (line, line_w) = (w, ww);
            continue;
        }
        // Alone too wide: cut it where it stops fitting.
        for c in w.chars() {
            let cw = text_width(c.encode_utf8(&mut [0; 4]), px);
            if !line.is_empty() && line_w + cw > avail {
                lines.push(std::mem::take(&mut line));
                line_w = 0.0;
            }
            line.push(c);
            line_w += cw;
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The height above the panel grid that a title laid out by [`fit_title`] takes.
fn title_height(lines: &[String], px: f64) -> i32 {
    if lines.is_empty() {
        8
    } else {
        12 + (lines.len() as f64 * px * 1.2).ceil() as i32 + 9
    }
}

/// Text style with an explicit anchor.
fn text_style(px: f64, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle {
        font: font(px),
        color: color.to_backend_color(),
        pos: Pos::new(h, v),
    }
}

/// Colour-blind-safe Okabe–Ito palette, reordered so the first few colours
/// are the most distinct on white; the pale yellow is left out, and black, which a line
/// would make read as an axis, is the paper's ([`LineStyle::Paper`]). Wine and olive (from
/// Paul Tol's muted set) make eight, so that a figure of seven series plus the paper's
/// rarely needs two names to compete for a colour.
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x88, 0x22, 0x55), // wine
    RGBColor(0x99, 0x99, 0x33), // olive
];

const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const GREY: RGBColor = RGBColor(0x66, 0x66, 0x66);

/// The widest the panels of one row may be together, in px: two panels of the stages' usual
/// 640. The report shows a figure in a column of about 1 060 px at 1 400 px: a strip of three
/// such panels (1 964 px with its labels) was shown at 54 %, its ticks 5–6 px high, while a
/// figure of two stays at 80 %.
const ROW_WIDTH: u32 = 1280;

/// The width of each of `cols` panels of a row: the one asked for, or less, so that the row
/// stays within [`ROW_WIDTH`] (never below [`MIN_PANEL`], which keeps labels apart).
fn panel_width(asked: u32, cols: usize) -> u32 {
    let cols = u32::try_from(cols.max(1)).unwrap_or(u32::MAX);
    asked.min((ROW_WIDTH / cols).max(MIN_PANEL))
}

/// (columns, rows) of the facet grid.
fn grid(n: usize, columns: usize) -> (usize, usize) {
    let cols = if columns > 0 {
        columns.min(n)
    } else if n <= 3 {
        n
    } else if n == 4 {
        2
    } else {
        3
    };
    let cols = cols.max(1);
    (cols, n.div_ceil(cols))
}

fn check_size(width: u32, height: u32) -> Result<(), PlotError> {
    if width < MIN_PANEL || height < MIN_PANEL {
        return Err(PlotError::TooSmall {
            width,
            height,
            min: MIN_PANEL,
        });
    }
    Ok(())
}

fn draw_err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError::Drawing(format!("{e:?}"))
}

/// Splits a pixel polyline into dash segments of `on` px separated by `off`
/// px. Done by hand (rather than with plotters' dashed series) so legend
/// glyphs and data lines share one dash implementation in pixel space.
fn dash(points: &[(i32, i32)], on: f64, off: f64) -> Vec<Vec<(i32, i32)>> {
    let mut out = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    let mut drawing = true;
    let mut left = on; // length remaining in the current on/off phase
    for w in points.windows(2) {
        let (a, b) = (
            (w[0].0 as f64, w[0].1 as f64),
            (w[1].0 as f64, w[1].1 as f64),
        );
        let len = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
        let mut t = 0.0;
        if drawing && cur.is_empty() {
            cur.push(a);
        }
        while len - t > left {
            t += left;
            let p = (a.0 + (b.0 - a.0) * t / len, a.1 + (b.1 - a.1) * t / len);
            if drawing {
                cur.push(p);
                out.push(std::mem::take(&mut cur));
                left = off;
            } else {
                cur.push(p);
                left = on;
            }
            drawing = !drawing;
        }
        left -= len - t;
        if drawing {
            cur.push(b);
        }
    }
    if drawing && cur.len() >= 2 {
        out.push(cur);
    }
    out.into_iter()
        .map(|seg| {
            seg.into_iter()
                .map(|(x, y)| (x.round() as i32, y.round() as i32))
                .collect()
        })
        .collect()
}

/// Draws the figure title, the shared x label (below the panel grid) and the
/// rotated shared y label (left edge), each centred on the panel grid
/// `(left, top, right, bottom)` in pixels.
fn draw_frame_text<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    [title, x_label, y_label]: [&str; 3],
    (grid_left, grid_top, grid_right, grid_bottom): (i32, i32, i32, i32),
    total_w: i32,
) -> Result<(), PlotError> {
    if !title.is_empty() {
        let (lines, px) = fit_title(title, f64::from(total_w - TITLE_MARGIN));
        for (i, line) in lines.iter().enumerate() {
            root.draw(&Text::new(
                line.clone(),
                (total_w / 2, 12 + (i as f64 * px * 1.2).round() as i32),
                text_style(px, INK, HPos::Center, VPos::Top),
            ))
            .map_err(draw_err)?;
        }
    }
    if !x_label.is_empty() {
        root.draw(&Text::new(
            x_label.to_string(),
            ((grid_left + grid_right) / 2, grid_bottom + 6),
            text_style(LABEL_PX, INK, HPos::Center, VPos::Top),
        ))
        .map_err(draw_err)?;
    }
    if !y_label.is_empty() {
        root.draw(&Text::new(
            y_label.to_string(),
            (10, (grid_top + grid_bottom) / 2),
            text_style(LABEL_PX, INK, HPos::Center, VPos::Top).transform(FontTransform::Rotate270),
        ))
        .map_err(draw_err)?;
    }
    Ok(())
}

/// Axes and chart of one panel, laid out the same way in line and heatmap figures (so their
/// panels align): the y axis is fitted first, because the width of its tick labels decides
/// how much room is left for the x axis.
#[allow(clippy::type_complexity)]
fn panel_chart<'a, 'b>(
    cell: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    (log_x, log_y): (bool, bool),
    (x_lo, x_hi): (f64, f64),
    (y_lo, y_hi): (f64, f64),
    (pw, ph, ptitle_h, x_area): (i32, i32, i32, i32),
) -> Result<
    (
        ChartContext<'a, SVGBackend<'b>, Cartesian2d<scale::Axis, scale::Axis>>,
        scale::Axis,
        scale::Axis,
    ),
    PlotError,
> {
    let plot_h = (ph - ptitle_h - x_area - 10) as f64;
    let ya = scale::Axis::fitted(log_y, y_lo, y_hi, plot_h, false, TICK_PX);
    let y_area = (ya.widest_label(TICK_PX) + 14.0).ceil() as i32;
    let plot_w = (pw - y_area - 24) as f64;
    let xa = scale::Axis::fitted(log_x, x_lo, x_hi, plot_w, true, TICK_PX);
    let chart = ChartBuilder::on(cell)
        .margin_top(4)
        .margin_bottom(6)
        .margin_left(4)
        .margin_right(20)
        .x_label_area_size(x_area)
        .y_label_area_size(y_area)
        .build_cartesian_2d(xa.clone(), ya.clone())
        .map_err(draw_err)?;
    Ok((chart, xa, ya))
}

#[cfg(test)]
mod tests;
