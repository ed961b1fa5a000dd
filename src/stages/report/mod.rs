//! `report.*`: the kinds that present results as tables (frame, Markdown and a layout for the
//! HTML report).

pub mod layout;
pub mod table;
pub mod verdict;

/// A column's numbers in one format: integers when every value is whole, else `digits`
/// significant digits, in scientific notation for the whole column when its magnitudes need it
/// (one format per column, not 0.001 above 1e-4; a value between 1 and 10 is written without
/// its `e0`). Shared by the report kinds' Markdown and the HTML report's tables.
pub(crate) fn format_column(values: &[Option<f64>], digits: usize) -> Vec<String> {
    let finite: Vec<f64> = values
        .iter()
        .flatten()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    let whole = finite.iter().all(|x| x.fract() == 0.0 && x.abs() < 1e15);
    let nonzero = finite.iter().filter(|x| **x != 0.0).map(|x| x.abs());
    let (lo, hi) = nonzero.fold((f64::INFINITY, 0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let scientific = !whole && (hi >= 1e6 || (lo.is_finite() && lo < 1e-3));
    // A column of short decimals (a paper's printed values, a grid of λ) is written with the
    // decimals that write every value exactly, when that is no more than the digits allow
    // each: 0.509 and 0.081 as printed, not 0.5090 and 0.08100, which claim digits nobody
    // printed. A computed value is no short decimal, and keeps the column's usual format.
    let sig_decimals =
        |x: f64| (digits as i32 - 1 - x.abs().log10().floor() as i32).clamp(0, 17) as usize;
    let exact = finite
        .iter()
        .filter(|x| **x != 0.0)
        .map(|&x| exact_decimals(x).filter(|&d| d <= sig_decimals(x)))
        .try_fold(0, |most, d| d.map(|d| most.max(d)));
    values
        .iter()
        .map(|v| match v {
            None => "—".to_string(),
            Some(x) if x.is_nan() => "—".to_string(),
            Some(x) if x.is_infinite() => if *x > 0.0 { "∞" } else { "−∞" }.to_string(),
            // Zero (and −0) reads as 0 in every format of the column.
            Some(x) if *x == 0.0 => "0".to_string(),
            Some(x) if whole => format!("{x:.0}"),
            // Powers of ten, but a value between 1 and 10 without its `e0` (which the review
            // read as a code): 4.215e-5 beside 1.000.
            Some(x) if scientific => {
                let t = format!("{x:.*e}", digits.saturating_sub(1));
                t.strip_suffix("e0").map(str::to_string).unwrap_or(t)
            }
            Some(x) => {
                let mag = if *x == 0.0 {
                    0
                } else {
                    x.abs().log10().floor() as i32
                };
                let decimals = (digits as i32 - 1 - mag).clamp(0, 17) as usize;
                let decimals = exact.unwrap_or(decimals);
                format!("{x:.decimals$}")
            }
        })
        .collect()
}

/// The fewest decimals (up to 17) at which `x` is written exactly: 0.509 → 3, 2.0 → 0;
/// `None` for a value no short decimal is (0.50858000001, ⅓).
fn exact_decimals(x: f64) -> Option<usize> {
    (0..=17).find(|&d| format!("{x:.d$}").parse::<f64>().ok() == Some(x))
}

/// A printed number and half a unit of its last printed digit: `0.509` → (0.509, 0.0005),
/// `100000` → (100000, 0.5), `1.5e-3` → (0.0015, 0.00005). Empty text or `NA` is no number.
pub(crate) fn printed_value(text: &str) -> Option<(f64, f64)> {
    let t = text.trim();
    let v: f64 = t.parse().ok().filter(|v: &f64| v.is_finite())?;
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let decimals = mantissa.find('.').map_or(0, |i| mantissa.len() - i - 1) as i32;
    Some((v, 0.5 * 10f64.powi(exp - decimals)))
}

/// Decimals a printed number shows (`0.050` → 3, `1.5e-3` → 4, `12` → 0); `None` when the
/// text is not a number.
pub(crate) fn printed_decimals(text: &str) -> Option<usize> {
    let (_, half) = printed_value(text)?;
    Some((-(2.0 * half).log10()).round().max(0.0) as usize)
}

/// Our values of a column compared with the paper's printed `texts`, in one format: the
/// column's ([`format_column`]) with at least one decimal more than the paper prints on any of
/// its rows, so that ours never looks equal to a printed value it differs from (1.54286 beside
/// the printed 1.5428, not 1.543). Columns of whole numbers and columns in scientific notation
/// keep their format: their digits already differ where the values do.
pub(crate) fn format_ours(values: &[Option<f64>], texts: &[&str], digits: usize) -> Vec<String> {
    let base = format_column(values, digits);
    // A column in powers of ten keeps them (its 1.000 stands without `e0`, not as a decimal).
    if base.iter().any(|t| t.contains('e')) {
        return base;
    }
    let Some(need) = texts.iter().filter_map(|t| printed_decimals(t)).max() else {
        return base;
    };
    let need = (need + 1).min(17);
    // The fewest decimals any value shows (a fixed-point column shows more on small values).
    let shown = base
        .iter()
        .filter(|t| t.contains('.') && !t.contains('e'))
        .map(|t| t.len() - t.find('.').unwrap_or(t.len()) - 1)
        .min();
    match shown {
        Some(d) if d < need => values
            .iter()
            .zip(base)
            .map(|(v, b)| match v {
                Some(x) if x.is_finite() && *x != 0.0 => format!("{x:.need$}"),
                _ => b,
            })
            .collect(),
        _ => base,
    }
}

/// A paper's CSV as text, so that each value keeps the digits it was printed with.
pub(crate) struct Printed {
    pub names: Vec<String>,
    pub cells: Vec<Vec<String>>,
    pub rows: usize,
}

impl Printed {
    pub fn read(bytes: &[u8]) -> anyhow::Result<Printed> {
        let mut r = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(bytes);
        let names: Vec<String> = r.headers()?.iter().map(|h| h.trim().to_string()).collect();
        let mut cells = vec![Vec::new(); names.len()];
        let mut rows = 0;
        for rec in r.records() {
            let rec = rec?;
            for (i, col) in cells.iter_mut().enumerate() {
                col.push(rec.get(i).unwrap_or("").trim().to_string());
            }
            rows += 1;
        }
        Ok(Printed { names, cells, rows })
    }

    /// The column `name`, or an error naming the columns the table has.
    pub fn column(&self, name: &str) -> anyhow::Result<&[String]> {
        let i = self
            .names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| anyhow::anyhow!("no column `{name}` ({})", self.has()))?;
        Ok(&self.cells[i])
    }

    /// "it has a, b, c": for messages about a column it lacks.
    pub fn has(&self) -> String {
        format!("it has {}", self.names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_precision_is_half_a_unit_of_the_last_digit() {
        assert_eq!(printed_value("0.509"), Some((0.509, 0.0005)));
        assert_eq!(printed_value("100000"), Some((100000.0, 0.5)));
        let (v, h) = printed_value("1.5e-3").unwrap();
        assert!((v - 0.0015).abs() < 1e-18 && (h - 0.00005).abs() < 1e-18);
        assert_eq!(printed_value(""), None);
        assert_eq!(printed_value("NA"), None);
        assert_eq!(printed_value("inf"), None);
        assert_eq!(printed_decimals("0.050"), Some(3));
        assert_eq!(printed_decimals("1.5e-3"), Some(4));
        assert_eq!(printed_decimals("12"), Some(0));
        assert_eq!(printed_decimals("—"), None);
    }

    /// A value that differs from the printed one is never shown with digits that hide it.
    #[test]
    fn ours_shows_a_digit_more_than_the_paper_prints() {
        // With 4 significant digits 1.54286 would read 1.543 beside the printed 1.5428.
        let ours = format_ours(
            &[Some(1.54286), Some(0.33970), None],
            &["1.5428", "0.3397", ""],
            4,
        );
        assert_eq!(ours, ["1.54286", "0.33970", "—"]);
        // The small values' decimals do not stand for the large ones' (0.01543 and 1.015).
        let ours = format_ours(&[Some(0.015431), Some(1.014312)], &["0.0154", "1.0143"], 4);
        assert_eq!(ours, ["0.01543", "1.01431"]);
        // Already enough decimals, whole numbers, scientific columns: unchanged.
        assert_eq!(format_ours(&[Some(0.50858)], &["0.509"], 4), ["0.5086"]);
        assert_eq!(format_ours(&[Some(99762.0)], &["100000"], 4), ["99762"]);
        assert_eq!(format_ours(&[Some(1.1e-4)], &["0.000"], 3), ["1.10e-4"]);
        assert_eq!(
            format_ours(&[Some(1.1e-4), Some(1.0)], &["0.000", "1.000"], 3),
            ["1.10e-4", "1.00"]
        );
        // Every value the paper's digits cannot tell from ours is shown apart from it.
        for (x, p) in [(1.0185_f64 + 6e-5, "1.0185"), (0.0513 - 6e-5, "0.0513")] {
            let t = format_ours(&[Some(x)], &[p], 4).remove(0);
            assert_ne!(
                t.trim_end_matches('0'),
                p.trim_end_matches('0'),
                "{x} shown as {t}"
            );
        }
    }

    #[test]
    fn a_column_has_one_number_format() {
        let col = format_column(&[Some(2.0), Some(0.50858), None], 4);
        assert_eq!(col, ["2.000", "0.5086", "—"]);
        // Short decimals as they were printed: the fewest decimals that write all exactly.
        let printed = format_column(&[Some(0.509), Some(0.081), Some(0.27), Some(0.0)], 4);
        assert_eq!(printed, ["0.509", "0.081", "0.270", "0"]);
        let grid = format_column(&[Some(0.5), Some(1.0), Some(1.5)], 4);
        assert_eq!(grid, ["0.5", "1.0", "1.5"]);
        // One value that is not short, or needs more digits than allowed: the usual format.
        let mixed = format_column(&[Some(0.509), Some(0.50900001)], 4);
        assert_eq!(mixed, ["0.5090", "0.5090"]);
        let long = format_column(&[Some(0.12346)], 4);
        assert_eq!(long, ["0.1235"]);
        let whole = format_column(&[Some(1993.0), Some(100000.0)], 4);
        assert_eq!(whole, ["1993", "100000"]);
        let small = format_column(&[Some(0.001), Some(0.00012345), Some(-0.0)], 3);
        assert_eq!(small, ["1.00e-3", "1.23e-4", "0"]);
        // Between 1 and 10 a power of ten is no power: 1.000, not 1.000e0.
        let tail = format_column(&[Some(4.406e-4), Some(1.0), Some(-1.5), Some(50.0)], 4);
        assert_eq!(tail, ["4.406e-4", "1.000", "-1.500", "5.000e1"]);
    }
}
