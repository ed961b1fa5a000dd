//! Axis scales, tick placement and tick-label formatting.
//!
//! Everything is drawn in *transformed* coordinates (`log10(v)` on a log
//! axis, `v` otherwise) on a plain linear plotters coordinate system, with the
//! tick positions chosen here and bound via `with_key_points`. That keeps a
//! single chart type for all four lin/log combinations and gives us control
//! over log ticks (decades, 1-2-5 sub-decades) and their labels.

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};

/// A finished axis: transformed range plus labelled major ticks and
/// unlabelled minor (light grid) positions, all in transformed units.
#[derive(Clone, Debug)]
pub(crate) struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<(f64, String)>,
    pub minor: Vec<f64>,
}

impl Axis {
    /// Builds an axis over the transformed interval `[lo, hi]` (already
    /// padded), aiming for about `target` labelled ticks.
    pub fn new(log: bool, lo: f64, hi: f64, target: usize) -> Axis {
        let target = target.clamp(2, 12);
        let (ticks, minor) = if log {
            log_ticks(lo, hi, target)
        } else {
            (linear_labelled(lo, hi, target), Vec::new())
        };
        Axis {
            lo,
            hi,
            ticks,
            minor,
        }
    }

    /// Builds an axis whose tick labels fit in `pixels` along the axis:
    /// shrinks the tick count until neighbouring labels (estimated at `char_px`
    /// per character plus a gap) no longer collide.
    pub(crate) fn fitted(
        log: bool,
        lo: f64,
        hi: f64,
        pixels: f64,
        horizontal: bool,
        font_px: f64,
    ) -> Axis {
        // Per-tick pixel budget: horizontal labels need their width, vertical
        // (y axis) ones only their height plus breathing room.
        let mut target = if horizontal {
            (pixels / 70.0) as usize
        } else {
            (pixels / 45.0) as usize
        };
        target = target.clamp(2, 10);
        loop {
            let axis = Axis::new(log, lo, hi, target);
            if target <= 2 || !horizontal {
                return axis;
            }
            let span = (hi - lo).max(f64::MIN_POSITIVE);
            let min_gap = axis
                .ticks
                .windows(2)
                .map(|w| (w[1].0 - w[0].0) / span * pixels)
                .fold(f64::INFINITY, f64::min);
            let widest = axis
                .ticks
                .iter()
                .map(|(_, s)| super::text_width(s, font_px))
                .fold(0.0, f64::max);
            if min_gap >= widest + 12.0 {
                return axis;
            }
            target -= 1;
        }
    }

    /// The label plotters should print at transformed position `t`.
    pub(crate) fn label_for(&self, t: f64) -> String {
        let tol = (self.hi - self.lo).abs() * 1e-9 + 1e-12;
        self.ticks
            .iter()
            .find(|(p, _)| (p - t).abs() <= tol)
            .map(|(_, s)| s.clone())
            .unwrap_or_default()
    }

    pub(crate) fn tick_positions(&self) -> Vec<f64> {
        self.ticks.iter().map(|(t, _)| *t).collect()
    }

    /// Widest tick label in pixels at `font_px`.
    pub(crate) fn widest_label(&self, font_px: f64) -> f64 {
        self.ticks
            .iter()
            .map(|(_, s)| super::text_width(s, font_px))
            .fold(0.0, f64::max)
    }
}

// The axis is its own plotters coordinate: a linear map over transformed
// units whose key points and labels are exactly the ticks chosen above.
// (plotters' `WithKeyPoints<RangedCoordf64>` cannot take a label formatter.)
impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let frac = (v - self.lo) / (self.hi - self.lo);
        let len = (limit.1 - limit.0) as f64;
        if !frac.is_finite() {
            return if frac > 0.0 { limit.1 } else { limit.0 };
        }
        limit.0 + (len * frac).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let mut pts = self.tick_positions();
        if hint.weight().allow_light_points() {
            pts.extend(self.minor.iter().copied());
        }
        pts
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for Axis {
    fn format_ext(&self, value: &f64) -> String {
        self.label_for(*value)
    }
}

pub(crate) fn fwd(log: bool, v: f64) -> f64 {
    if log {
        v.log10()
    } else {
        v
    }
}

/// Pads a transformed data interval so marks do not sit on the frame, and
/// widens degenerate (single-value) intervals to something drawable.
pub(crate) fn pad(log: bool, lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    let span = hi - lo;
    if span.is_nan() || span <= 1e-12 * lo.abs().max(hi.abs()).max(1e-300) {
        let half = if log {
            0.5
        } else if lo != 0.0 {
            lo.abs() * 0.1
        } else {
            1.0
        };
        return (lo - half, hi + half);
    }
    (lo - span * frac, hi + span * frac)
}

/// "Nice" step from the 1–2–2.5–5 sequence that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let e = raw.log10().floor();
    let base = 10f64.powf(e);
    let m = raw / base;
    let n = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 2.5 {
        2.5
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * base
}

fn linear_positions(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let step = nice_step((hi - lo) / target as f64);
    let start = (lo / step - 1e-9).ceil() as i64;
    let end = (hi / step + 1e-9).floor() as i64;
    // Only reachable with non-finite or float-saturated ranges; keep it bounded.
    if !(0..=1000).contains(&(end.saturating_sub(start))) {
        return (vec![lo, hi], step);
    }
    let mut out = Vec::new();
    for k in start..=end {
        let mut v = k as f64 * step;
        // Snap float noise (e.g. 0.30000000000000004, -0) to the intended value.
        if v.abs() < step * 1e-9 {
            v = 0.0;
        }
        out.push(v);
    }
    (out, step)
}

fn linear_labelled(lo: f64, hi: f64, target: usize) -> Vec<(f64, String)> {
    let (pos, step) = linear_positions(lo, hi, target);
    let labels = format_group(&pos, step);
    pos.into_iter().zip(labels).collect()
}

/// Ticks for a log axis, given the transformed (log10) range.
fn log_ticks(lo: f64, hi: f64, target: usize) -> (Vec<(f64, String)>, Vec<f64>) {
    let d0 = (lo - 1e-9).ceil() as i64;
    let d1 = (hi + 1e-9).floor() as i64;
    let ndec = (d1 - d0 + 1).max(0) as usize;
    let inside = |t: f64| t >= lo - 1e-9 && t <= hi + 1e-9;

    if ndec >= 3 {
        // Whole decades; thin them out when there are too many to label.
        let stride = ndec.div_ceil(target).max(1) as i64;
        let mut decades = Vec::new();
        let mut minor = Vec::new();
        for d in d0..=d1 {
            if d.rem_euclid(stride) == 0 {
                decades.push(d);
            } else {
                minor.push(d as f64);
            }
        }
        if decades.len() < 2 {
            decades = (d0..=d1).collect();
            minor.clear();
        }
        let major: Vec<(f64, String)> = decades
            .iter()
            .map(|&d| d as f64)
            .zip(decade_labels(&decades))
            .collect();
        if stride == 1 && ndec <= 8 {
            for d in (lo.floor() as i64)..=d1 {
                for m in 2..=9 {
                    let t = d as f64 + (m as f64).log10();
                    if inside(t) {
                        minor.push(t);
                    }
                }
            }
        }
        return (major, minor);
    }

    // Less than ~2 decades: try 1-2-5 multiples, which read naturally.
    let mut major = Vec::new();
    let mut minor = Vec::new();
    for d in (lo.floor() as i64 - 1)..=(hi.ceil() as i64) {
        for m in 1..=9 {
            let t = d as f64 + (m as f64).log10();
            if !inside(t) {
                continue;
            }
            if matches!(m, 1 | 2 | 5) {
                major.push(t);
            } else {
                minor.push(t);
            }
        }
    }
    if major.len() >= 3 && major.len() <= target + 2 {
        let vals: Vec<f64> = major.iter().map(|t| 10f64.powf(*t)).collect();
        let labels = format_log_values(&vals);
        return (major.into_iter().zip(labels).collect(), minor);
    }
    if ndec == 2 {
        let decades: Vec<i64> = (d0..=d1).collect();
        return (
            decades
                .iter()
                .map(|&d| d as f64)
                .zip(decade_labels(&decades))
                .collect(),
            minor,
        );
    }
    // Very narrow range: evenly spaced values, placed on the log axis.
    let (vlo, vhi) = (10f64.powf(lo), 10f64.powf(hi));
    let (pos, step) = linear_positions(vlo, vhi, target);
    let pos: Vec<f64> = pos.into_iter().filter(|v| *v > 0.0).collect();
    let labels = format_group(&pos, step);
    (
        pos.iter().map(|v| v.log10()).zip(labels).collect(),
        Vec::new(),
    )
}

/// Tick labels of a log axis in one format: plain numbers when every tick reads well so
/// (10⁻³ … 10⁴), else every one as ×10ⁿ — never 0.001 beside 10⁻⁴ on one axis.
fn format_log_values(vals: &[f64]) -> Vec<String> {
    let plain = vals
        .iter()
        .all(|v| (-3..=4).contains(&(v.log10().floor() as i64)));
    vals.iter()
        .map(|v| {
            let e = v.log10().floor() as i64;
            if plain {
                trim_float(&format!("{:.*}", (-e).max(0) as usize + 1, v))
            } else {
                let m = v / 10f64.powi(e as i32);
                let m = (m * 10.0).round() / 10.0;
                if (m - 1.0).abs() < 1e-9 {
                    format!("10{}", superscript(e))
                } else {
                    format!("{}×10{}", trim_float(&format!("{m:.1}")), superscript(e))
                }
            }
        })
        .collect()
}

/// Labels of decade ticks in one format: plain (0.001 … 10000) when all are in that range,
/// else all as powers of ten (10⁻⁴ … 10²), so one axis never mixes 0.001 and 10⁻⁴.
fn decade_labels(ds: &[i64]) -> Vec<String> {
    let plain = ds.iter().all(|d| (-3..=4).contains(d));
    ds.iter()
        .map(|&d| {
            if !plain {
                format!("10{}", superscript(d))
            } else if d >= 0 {
                format!("{}", 10i64.pow(d as u32))
            } else {
                format!("{:.*}", (-d) as usize, 10f64.powi(d as i32))
            }
        })
        .collect()
}

fn superscript(e: i64) -> String {
    e.to_string()
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            _ => '⁹',
        })
        .collect()
}

fn trim_float(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// Formats evenly spaced tick values with a common number of decimals (so
/// "0.5, 1.0, 1.5" rather than "0.5, 1, 1.5"), switching to ×10ⁿ notation for
/// very large or very small magnitudes.
pub(crate) fn format_group(vals: &[f64], step: f64) -> Vec<String> {
    let max_abs = vals.iter().map(|v| v.abs()).fold(0.0, f64::max);
    if max_abs >= 1e5 || (max_abs > 0.0 && max_abs < 1e-3) {
        let e = max_abs.log10().floor() as i32;
        let scale = 10f64.powi(e);
        let dec = decimals_for(step / scale);
        return vals
            .iter()
            .map(|v| {
                if *v == 0.0 {
                    "0".to_string()
                } else {
                    format!("{:.*}×10{}", dec, v / scale, superscript(e as i64))
                }
            })
            .collect();
    }
    let dec = decimals_for(step);
    vals.iter().map(|v| format!("{v:.dec$}")).collect()
}

fn decimals_for(step: f64) -> usize {
    (0..=12)
        .find(|&d| {
            let p = 10f64.powi(d as i32);
            ((step * p).round() - step * p).abs() < 1e-6 * step * p.max(1.0)
        })
        .unwrap_or(12)
}

/// Compact human formatting of a single value (legend/colour-bar text).
pub(crate) fn format_value(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let e = v.abs().log10().floor() as i64;
    if (-4..=5).contains(&e) {
        // Six significant digits is plenty for a label and hides float noise.
        let dec = (5 - e).max(0) as usize;
        trim_float(&format!("{v:.dec$}"))
    } else {
        let m = v / 10f64.powi(e as i32);
        format!("{}×10{}", trim_float(&format!("{m:.3}")), superscript(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_nice() {
        let a = Axis::new(false, -0.05, 1.05, 6);
        let labels: Vec<&str> = a.ticks.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(labels, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
    }

    #[test]
    fn log_ticks_decades() {
        let a = Axis::new(true, -3.1, 2.2, 8);
        let labels: Vec<&str> = a.ticks.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(labels, ["0.001", "0.01", "0.1", "1", "10", "100"]);
        let b = Axis::new(true, -9.0, -5.0, 8);
        assert_eq!(b.ticks[0].1, "10⁻⁹");
    }

    #[test]
    fn one_axis_has_one_tick_format() {
        // 10⁻⁵ … 10⁻¹: not "0.1, 0.01, 0.001, 10⁻⁴, 10⁻⁵".
        let a = Axis::new(true, -5.0, -1.0, 8);
        let labels: Vec<&str> = a.ticks.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(labels, ["10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²", "10⁻¹"]);
        // 1 … 10⁵: not "10000, 10⁵".
        let b = Axis::new(true, 0.0, 5.0, 8);
        let labels: Vec<&str> = b.ticks.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(labels, ["10⁰", "10¹", "10²", "10³", "10⁴", "10⁵"]);
        // 1-2-5 ticks from 2·10⁴ to 2·10⁵: every one as a power of ten, not 20000 beside 10⁵.
        let c = Axis::new(true, 4.2, 5.5, 6);
        let labels: Vec<&str> = c.ticks.iter().map(|(_, s)| s.as_str()).collect();
        assert!(labels.len() >= 3, "{labels:?}");
        assert!(
            labels
                .iter()
                .all(|l| l.contains("10⁴") || l.contains("10⁵")),
            "{labels:?}"
        );
    }

    #[test]
    fn log_ticks_narrow() {
        let a = Axis::new(true, 0.0, 1.0, 6);
        let labels: Vec<&str> = a.ticks.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(labels, ["1", "2", "5", "10"]);
    }

    #[test]
    fn value_format() {
        assert_eq!(format_value(1.0), "1");
        assert_eq!(format_value(3.01), "3.01");
        assert_eq!(format_value(0.1 + 0.2), "0.3");
    }
}
