//! Small helpers so stage kinds read and build polars frames in one line each: a column as
//! numbers or text with an error that names what there is, a frame built column by column,
//! rows grouped by the values of their keys. Every kind may import them; they are no kind's.

use anyhow::{anyhow, Result};
use polars::prelude::*;

use crate::expr::Groups;

/// A column of a frame as `f64`, with an error naming the available columns when absent
/// or not numeric, and the row of a missing value or of a text that is not a number.
pub(crate) fn f64_col(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let (col, cast) = numbers(df, name)?;
    let values = cast.f64()?;
    if values.null_count() == 0 {
        // Whole chunks at once: a kind that reads a large answer frame per instance (the
        // errors of h14's 2 500 syntheses read 3·10⁵ values each) spent more time in the
        // value-by-value path below than in its own arithmetic.
        let mut out = Vec::with_capacity(values.len());
        for chunk in values.downcast_iter() {
            out.extend_from_slice(chunk.values());
        }
        return Ok(out);
    }
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.ok_or_else(|| {
                // A text that is not a number casts to a missing value: name it as it is.
                match col.get(i) {
                    Ok(AnyValue::String(t)) => {
                        anyhow!("column `{name}` holds `{t}` at row {i}, not a number")
                    }
                    Ok(AnyValue::StringOwned(t)) => {
                        anyhow!("column `{name}` holds `{t}` at row {i}, not a number")
                    }
                    _ => anyhow!("column `{name}` has a missing value at row {i}"),
                }
            })
        })
        .collect()
}

/// A numeric column where missing cells become NaN (plots skip them).
pub(crate) fn f64_col_or_nan(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let (_, cast) = numbers(df, name)?;
    Ok(cast.f64()?.iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

/// The column `name` and its values cast to `f64`, or why it has none.
fn numbers<'a>(df: &'a DataFrame, name: &str) -> Result<(&'a Column, Column)> {
    let col = column(df, name)?;
    let cast = col.cast(&DataType::Float64).map_err(|e| {
        anyhow!(
            "column `{name}` is not numeric (it is {}): {e}",
            col.dtype()
        )
    })?;
    Ok((col, cast))
}

/// A column of a frame as text (numbers are formatted as polars prints them).
pub(crate) fn str_col(df: &DataFrame, name: &str) -> Result<Vec<String>> {
    let col = column(df, name)?;
    let cast = col.cast(&DataType::String)?;
    Ok(cast
        .str()?
        .iter()
        .map(|v| v.unwrap_or("").to_string())
        .collect())
}

/// A column as optional text: numbers as written by polars (integers without `.0`).
pub(crate) fn opt_str_col(df: &DataFrame, name: &str) -> Result<Vec<Option<String>>> {
    let col = column(df, name)?;
    let cast = col.cast(&DataType::String)?;
    Ok(cast.str()?.iter().map(|v| v.map(str::to_string)).collect())
}

/// The column `name`, or an error listing what there is.
pub fn column<'a>(df: &'a DataFrame, name: &str) -> Result<&'a Column> {
    df.column(name).map_err(|_| {
        anyhow::Error::new(crate::kind::MissingColumn {
            name: name.to_string(),
            available: df
                .get_column_names()
                .iter()
                .map(|s| s.to_string())
                .collect(),
        })
    })
}

pub(crate) fn has_col(df: &DataFrame, name: &str) -> bool {
    df.column(name).is_ok()
}

/// Builds a frame column by column.
#[derive(Default)]
pub(crate) struct FrameBuilder {
    cols: Vec<Column>,
}

impl FrameBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn f64(mut self, name: &str, values: Vec<f64>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    /// A float column where `None` is a missing value (written as an empty CSV cell).
    pub(crate) fn opt_f64(mut self, name: &str, values: Vec<Option<f64>>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    /// An integer column where `None` is a missing value.
    pub(crate) fn opt_i64(mut self, name: &str, values: Vec<Option<i64>>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    pub fn i64(mut self, name: &str, values: Vec<i64>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    /// A column built elsewhere (e.g. from an iterator, without a vector of its values).
    pub(crate) fn column(mut self, col: Column) -> Self {
        self.cols.push(col);
        self
    }

    pub fn str(mut self, name: &str, values: Vec<String>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    /// Group-key columns: each of `names` taken from `df` at `rows` (for each output row,
    /// a row of its group), so a key keeps its type and a missing key stays missing.
    pub fn keys(mut self, df: &DataFrame, names: &[String], rows: &[usize]) -> Result<Self> {
        for name in names {
            self.cols.push(take_rows(column(df, name)?, rows)?);
        }
        Ok(self)
    }

    pub fn build(self) -> Result<DataFrame> {
        Ok(DataFrame::new_infer_height(self.cols)?)
    }
}

/// Row indices grouped by the values of `keys` (first-seen order), for group-wise stages,
/// each group with its key as text ([`key_texts`]) for labels and messages. Rows are one
/// group when their keys are equal *as values*, by the rule of the expression language
/// ([`crate::expr::KeyCell`]): 1 and 1.0 are one key, −0 is 0, a missing key is a group of
/// its own (not the empty text) — the rule `frame.group` groups by, so every kind that groups
/// means the same by "one group". An output's key columns come from a row of each group
/// ([`FrameBuilder::keys`]), with their type.
pub(crate) fn group_by(df: &DataFrame, keys: &[String]) -> Result<Vec<(Vec<String>, Vec<usize>)>> {
    let groups = group_rows_by(df, keys)?;
    let firsts: Vec<usize> = groups.iter().map(|rows| rows[0] as usize).collect();
    let mut texts: Vec<std::vec::IntoIter<String>> = key_texts(df, keys, &firsts)?
        .into_iter()
        .map(Vec::into_iter)
        .collect();
    // Each text moved into its group's key, not copied: 10⁶ groups of two keys held 2·10⁶
    // strings twice.
    Ok(groups
        .iter()
        .map(|rows| {
            let key = texts
                .iter_mut()
                .map(|t| t.next().unwrap_or_default())
                .collect();
            (key, rows.iter().map(|&r| r as usize).collect())
        })
        .collect())
}

/// [`group_by`]'s groups without their keys' texts, as one index ([`Groups`]), for a kind
/// that names a group only when it fails ([`key_texts`] of its first row then):
/// `aggregate.summary` of 10⁶ groups held 2·10⁶ texts it never read. The key columns are
/// read one at a time.
pub(crate) fn group_rows_by(df: &DataFrame, keys: &[String]) -> Result<Groups> {
    crate::expr::group_keys(
        df.height(),
        keys.iter()
            .map(|k| crate::expr::load(column(df, k)?).map_err(anyhow::Error::msg)),
    )
}

/// Per key column, its values at `rows` as text ([`str_col`]'s; `""` for a missing key).
pub(crate) fn key_texts(
    df: &DataFrame,
    keys: &[String],
    rows: &[usize],
) -> Result<Vec<Vec<String>>> {
    keys.iter()
        .map(|k| {
            let text = take_rows(column(df, k)?, rows)?.cast(&DataType::String)?;
            Ok(text
                .str()?
                .iter()
                .map(|v| v.unwrap_or("").to_string())
                .collect())
        })
        .collect()
}

/// Column `name` restricted to `rows`, keeping its type.
pub(crate) fn take_rows(col: &Column, rows: &[usize]) -> Result<Column> {
    let idx: Vec<IdxSize> = rows.iter().map(|&r| r as IdxSize).collect();
    let idx = IdxCa::from_vec("idx".into(), idx);
    Ok(col.take(&idx)?)
}

/// The numeric columns of `df` not rejected by `skip`, as one row-major matrix: (values, names).
/// Stages that treat a frame as a point set use it, skipping axis and bookkeeping columns.
pub(crate) fn numeric_matrix(
    df: &DataFrame,
    skip: impl Fn(&str) -> bool,
) -> Result<(Vec<f64>, Vec<String>)> {
    let names: Vec<String> = df
        .columns()
        .iter()
        .filter(|c| c.dtype().is_primitive_numeric() && !skip(c.name().as_str()))
        .map(|c| c.name().to_string())
        .collect();
    let cols: Vec<Vec<f64>> = names
        .iter()
        .map(|n| f64_col(df, n))
        .collect::<Result<_>>()?;
    let mut out = Vec::with_capacity(df.height() * names.len());
    for row in 0..df.height() {
        out.extend(cols.iter().map(|c| c[row]));
    }
    Ok((out, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups are equal values, as `frame.group` has them: −0 and 0 are one key, a missing key
    /// is a group apart from the empty text, and the output's keys keep their type and their
    /// missing values.
    #[test]
    fn rows_are_grouped_by_value_and_keys_keep_their_type() {
        let df = df!(
            "x" => [Some(0.0), Some(-0.0), None, Some(0.5)],
            "t" => [Some(""), Some(""), None, Some("")],
            "v" => [1.0, 2.0, 3.0, 4.0]
        )
        .unwrap();
        let by = |keys: &[&str]| {
            let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            group_by(&df, &keys).unwrap()
        };
        let rows =
            |g: Vec<(Vec<String>, Vec<usize>)>| g.into_iter().map(|(_, r)| r).collect::<Vec<_>>();
        assert_eq!(rows(by(&["x"])), [vec![0, 1], vec![2], vec![3]]);
        assert_eq!(rows(by(&["t"])), [vec![0, 1, 3], vec![2]]);
        assert_eq!(
            by(&["x", "t"])[1].0,
            ["", ""],
            "a missing key reads as empty text"
        );
        assert_eq!(rows(by(&[])), [vec![0, 1, 2, 3]]);
        let keys = FrameBuilder::new()
            .keys(&df, &["x".to_string()], &[0, 2, 3])
            .unwrap()
            .build()
            .unwrap();
        let x = keys.column("x").unwrap();
        assert_eq!(x.dtype(), &DataType::Float64);
        assert_eq!(x.null_count(), 1);
    }
}
