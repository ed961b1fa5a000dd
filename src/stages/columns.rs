//! Small helpers so stage kinds read and build polars frames in one line each: a column as
//! numbers or text with an error that names what there is, a frame built column by column,
//! rows grouped by the text of their keys. Every kind may import them; they are no kind's.

use anyhow::{anyhow, Result};
use polars::prelude::*;

/// A column of a frame as `f64`, with an error naming the available columns when absent
/// or not numeric.
pub fn f64_col(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let col = column(df, name)?;
    let cast = col.cast(&DataType::Float64).map_err(|e| {
        anyhow!(
            "column `{name}` is not numeric (it is {}): {e}",
            col.dtype()
        )
    })?;
    let ca = cast.f64()?;
    ca.iter()
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
pub fn f64_col_or_nan(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let col = column(df, name)?;
    let cast = col.cast(&DataType::Float64).map_err(|e| {
        anyhow!(
            "column `{name}` is not numeric (it is {}): {e}",
            col.dtype()
        )
    })?;
    Ok(cast.f64()?.iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

/// A column of a frame as text (numbers are formatted as polars prints them).
pub fn str_col(df: &DataFrame, name: &str) -> Result<Vec<String>> {
    let col = column(df, name)?;
    let cast = col.cast(&DataType::String)?;
    Ok(cast
        .str()?
        .iter()
        .map(|v| v.unwrap_or("").to_string())
        .collect())
}

/// A column as optional text: numbers as written by polars (integers without `.0`).
pub fn opt_str_col(df: &DataFrame, name: &str) -> Result<Vec<Option<String>>> {
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

pub fn has_col(df: &DataFrame, name: &str) -> bool {
    df.column(name).is_ok()
}

/// Builds a frame column by column.
#[derive(Default)]
pub struct FrameBuilder {
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
    pub fn opt_f64(mut self, name: &str, values: Vec<Option<f64>>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    pub fn i64(mut self, name: &str, values: Vec<i64>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    pub fn str(mut self, name: &str, values: Vec<String>) -> Self {
        self.cols.push(Column::new(name.into(), values));
        self
    }

    /// Group-key columns ([`group_rows`]'s keys, as text) of the type they have in `df`: an
    /// integer key stays an integer, text stays text. A column `df` lacks, or one its text
    /// does not cast back to, is numeric when every key parses as a number (so it can be a
    /// plot axis), text otherwise.
    pub fn keys(mut self, df: &DataFrame, names: &[String], keys: Vec<Vec<String>>) -> Self {
        for (name, kc) in names.iter().zip(keys) {
            let text = Column::new(name.into(), kc.as_slice());
            let typed = df
                .column(name)
                .ok()
                .map(|c| c.dtype().clone())
                .filter(|t| t != &DataType::String)
                .and_then(|t| text.strict_cast(&t).ok());
            self = match typed {
                Some(c) => {
                    self.cols.push(c);
                    self
                }
                None if kc.iter().all(|s| s.parse::<f64>().is_ok()) => self.f64(
                    name,
                    kc.iter().map(|s| s.parse().unwrap_or(f64::NAN)).collect(),
                ),
                None => self.str(name, kc),
            };
        }
        self
    }

    pub fn build(self) -> Result<DataFrame> {
        Ok(DataFrame::new_infer_height(self.cols)?)
    }
}

/// Row indices grouped by the values of `keys` (first-seen order), for group-wise stages.
/// Each group's key is the text [`str_col`] gives its row.
///
/// The key columns are read as text a window of rows at a time, and a group's key is owned
/// once (its parts, length-prefixed, in one byte string), not once per row: a summary of 10⁶
/// groups by two axes held 6·10⁶ strings, a third of a gigabyte, before it grouped them.
pub fn group_rows(df: &DataFrame, keys: &[String]) -> Result<Vec<(Vec<String>, Vec<usize>)>> {
    const WINDOW: usize = 1 << 16;
    let cols: Vec<&Column> = keys.iter().map(|k| column(df, k)).collect::<Result<_>>()?;
    let mut groups: indexmap::IndexMap<Vec<u8>, Vec<usize>> = indexmap::IndexMap::new();
    let mut key: Vec<u8> = Vec::new();
    for start in (0..df.height()).step_by(WINDOW) {
        let len = WINDOW.min(df.height() - start);
        let text: Vec<Column> = cols
            .iter()
            .map(|c| {
                Ok(c.slice(start as i64, len)
                    .cast(&DataType::String)?
                    .rechunk())
            })
            .collect::<Result<_>>()?;
        let text: Vec<&StringChunked> =
            text.iter().map(|c| c.str()).collect::<PolarsResult<_>>()?;
        for row in 0..len {
            key.clear();
            for c in &text {
                let part = c.get(row).unwrap_or("");
                key.extend_from_slice(&(part.len() as u64).to_le_bytes());
                key.extend_from_slice(part.as_bytes());
            }
            match groups.get_mut(key.as_slice()) {
                Some(rows) => rows.push(start + row),
                None => {
                    groups.insert(key.clone(), vec![start + row]);
                }
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|(k, rows)| (key_parts(&k), rows))
        .collect())
}

/// The parts of a [`group_rows`] key, each written as its length (8 bytes) and its text.
fn key_parts(mut k: &[u8]) -> Vec<String> {
    let mut parts = Vec::new();
    while let Some((len, rest)) = k.split_first_chunk::<8>() {
        let n = u64::from_le_bytes(*len) as usize;
        parts.push(String::from_utf8_lossy(&rest[..n]).into_owned());
        k = &rest[n..];
    }
    parts
}

/// Column `name` restricted to `rows`, keeping its type.
pub fn take_rows(col: &Column, rows: &[usize]) -> Result<Column> {
    let idx: Vec<IdxSize> = rows.iter().map(|&r| r as IdxSize).collect();
    let idx = IdxCa::from_vec("idx".into(), idx);
    Ok(col.take(&idx)?)
}

/// The numeric columns of `df` not rejected by `skip`, as one row-major matrix: (values, names).
/// Stages that treat a frame as a point set use it, skipping axis and bookkeeping columns.
pub fn numeric_matrix(
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
