//! `report.*`: the kinds that present results as tables (frame, Markdown and a layout for the
//! HTML report).

pub mod table;
pub mod verdict;

/// A column's numbers in one format: integers when every value is whole, else `digits`
/// significant digits, in scientific notation for the whole column when its magnitudes need it
/// (one format per column, not 0.001 above 1e-4). Shared by the report kinds' Markdown and
/// the HTML report's tables.
pub fn format_column(values: &[Option<f64>], digits: usize) -> Vec<String> {
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
    values
        .iter()
        .map(|v| match v {
            None => "—".to_string(),
            Some(x) if x.is_nan() => "—".to_string(),
            Some(x) if x.is_infinite() => if *x > 0.0 { "∞" } else { "−∞" }.to_string(),
            // Zero (and −0) reads as 0 in every format of the column.
            Some(x) if *x == 0.0 => "0".to_string(),
            Some(x) if whole => format!("{x:.0}"),
            Some(x) if scientific => format!("{x:.*e}", digits.saturating_sub(1)),
            Some(x) => {
                let mag = if *x == 0.0 {
                    0
                } else {
                    x.abs().log10().floor() as i32
                };
                let decimals = (digits as i32 - 1 - mag).clamp(0, 17) as usize;
                format!("{x:.decimals$}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_has_one_number_format() {
        let col = format_column(&[Some(2.0), Some(0.50858), None], 4);
        assert_eq!(col, ["2.000", "0.5086", "—"]);
        let whole = format_column(&[Some(1993.0), Some(100000.0)], 4);
        assert_eq!(whole, ["1993", "100000"]);
        let small = format_column(&[Some(0.001), Some(0.00012345), Some(-0.0)], 3);
        assert_eq!(small, ["1.00e-3", "1.23e-4", "0"]);
    }
}
