//! The binary column format a program may write its frame in, `output/out.cols`: each column's
//! values back to back, as numpy and Arrow hold them in memory, so a program that draws 10⁶
//! releases into arrays hands them over with one write per column and dplab reads them with
//! one pass per column. CSV costs a Python loop per row on one side and a parse per cell on the
//! other (an audit of a numpy Gaussian took 501 s through lists and CSV, 21 s through
//! Parquet); Parquet needs pyarrow or polars in the program's environment, which numpy alone
//! does not bring, and encodes pages that are read once and deleted.
//!
//! # Format, version 1
//! ```text
//! b"DPLABCOL"              8 bytes
//! version                  u32, little-endian: 1
//! header length            u32, little-endian: h (at most 1 MiB)
//! header                   h bytes of UTF-8 JSON: {"rows": n, "columns": [{"name": "x", "type": "f64"}, …]}
//! the columns, in order:
//!   f64, i64               n × 8 bytes, little-endian (IEEE 754 for f64; NaN is a value, not a null)
//!   bool                   n bytes, each 0 or 1
//!   str                    (n + 1) u64 offsets, little-endian, from 0, non-decreasing, then
//!                          the UTF-8 bytes they delimit (offsets[n] of them)
//! ```
//! Nothing may follow the last column. Names are distinct and non-empty. There are no nulls:
//! a frame with missing values goes through Parquet or CSV.
//!
//! Every length is checked against the file before anything is allocated for it, and the
//! table against the run's limits (cells, columns), as a Parquet frame's is: a hostile file
//! gets an error naming what is wrong, never a panic or an allocation it asked for.

use polars::prelude::{Column, DataFrame};

use super::error::ProgramError;

/// The first bytes of a file in this format.
pub(crate) const MAGIC: &[u8; 8] = b"DPLABCOL";

/// The one version there is.
const VERSION: u32 = 1;

/// The largest header (a frame of many columns has a long one; 1 MiB holds ~20 000).
const MAX_HEADER: usize = 1 << 20;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    rows: u64,
    columns: Vec<ColumnHeader>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ColumnHeader {
    name: String,
    #[serde(rename = "type")]
    ty: String,
}

/// The frame in `bytes` (the file `shown`, for messages).
pub(crate) fn read_columns(bytes: &[u8], shown: &str) -> Result<DataFrame, ProgramError> {
    let bad = |message: String| ProgramError::MalformedFrame {
        file: shown.into(),
        message,
    };
    let mut at = Cursor { bytes, pos: 0 };
    let magic = at
        .take(8)
        .ok_or_else(|| bad("shorter than its 8-byte magic".into()))?;
    if magic != MAGIC {
        return Err(bad(format!(
            "it does not start with {:?}: not a dplab column file",
            String::from_utf8_lossy(MAGIC)
        )));
    }
    let version = at
        .u32()
        .ok_or_else(|| bad("it ends inside its version".into()))?;
    if version != VERSION {
        return Err(bad(format!(
            "version {version}, where this dplab reads version {VERSION}: use the dplab_external.py dplab wrote next to the program"
        )));
    }
    let len = at
        .u32()
        .ok_or_else(|| bad("it ends inside its header length".into()))? as usize;
    if len > MAX_HEADER {
        return Err(bad(format!(
            "its header is {len} bytes, more than the {MAX_HEADER} allowed"
        )));
    }
    let header = at
        .take(len)
        .ok_or_else(|| bad(format!("it ends inside its header of {len} bytes")))?;
    let header: Header = serde_json::from_slice(header)
        .map_err(|e| bad(format!("its header is not the JSON expected: {e}")))?;
    let what = format!("the program's frame {shown}");
    crate::limits::check_table_read(
        &what,
        header.rows,
        header.columns.len() as u64,
        bytes.len() as u64,
    )
    .map_err(ProgramError::TooLarge)?;
    let n = usize::try_from(header.rows).map_err(|_| bad("too many rows".into()))?;
    let mut seen = std::collections::HashSet::new();
    let mut columns = Vec::with_capacity(header.columns.len());
    for c in &header.columns {
        if c.name.is_empty() || !seen.insert(c.name.as_str()) {
            return Err(bad(format!(
                "column name {:?} is empty or given twice",
                c.name
            )));
        }
        let short = |what: &str| bad(format!("it ends inside column `{}` ({what})", c.name));
        let col = match c.ty.as_str() {
            "f64" => {
                let v: Vec<f64> = at
                    .words(n)
                    .ok_or_else(|| short(&format!("{n} values of 8 bytes")))?
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().unwrap_or_default()))
                    .collect();
                Column::new(c.name.as_str().into(), v)
            }
            "i64" => {
                let v: Vec<i64> = at
                    .words(n)
                    .ok_or_else(|| short(&format!("{n} values of 8 bytes")))?
                    .chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().unwrap_or_default()))
                    .collect();
                Column::new(c.name.as_str().into(), v)
            }
            "bool" => {
                let raw = at.take(n).ok_or_else(|| short(&format!("{n} bytes")))?;
                if let Some(b) = raw.iter().find(|b| **b > 1) {
                    return Err(bad(format!(
                        "bool column `{}` holds the byte {b}: each is 0 or 1",
                        c.name
                    )));
                }
                let v: Vec<bool> = raw.iter().map(|b| *b == 1).collect();
                Column::new(c.name.as_str().into(), v)
            }
            "str" => {
                let count = n.checked_add(1).ok_or_else(|| short("its size"))?;
                let size = count.checked_mul(8).ok_or_else(|| short("its size"))?;
                let offsets: Vec<u64> = at
                    .take(size)
                    .ok_or_else(|| short(&format!("{count} offsets")))?
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                    .collect();
                if offsets.first() != Some(&0) || offsets.windows(2).any(|w| w[1] < w[0]) {
                    return Err(bad(format!(
                        "the offsets of text column `{}` do not start at 0 and never decrease",
                        c.name
                    )));
                }
                let total = usize::try_from(offsets[n]).map_err(|_| short("its text"))?;
                let text = at
                    .take(total)
                    .ok_or_else(|| short(&format!("{total} bytes of text")))?;
                let text = std::str::from_utf8(text)
                    .map_err(|e| bad(format!("text column `{}` is not UTF-8: {e}", c.name)))?;
                let mut v = Vec::with_capacity(n);
                for w in offsets.windows(2) {
                    let (a, b) = (w[0] as usize, w[1] as usize);
                    let s = text.get(a..b).ok_or_else(|| {
                        bad(format!(
                            "an offset of text column `{}` splits a UTF-8 character",
                            c.name
                        ))
                    })?;
                    v.push(s);
                }
                Column::new(c.name.as_str().into(), v)
            }
            other => {
                return Err(bad(format!(
                    "column `{}` has type {other:?}: the types are f64, i64, bool and str",
                    c.name
                )))
            }
        };
        columns.push(col);
    }
    if at.pos != bytes.len() {
        return Err(bad(format!(
            "{} bytes follow its last column",
            bytes.len() - at.pos
        )));
    }
    DataFrame::new(n, columns).map_err(|e| bad(e.to_string()))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// `n` values of 8 bytes.
    fn words(&mut self, n: usize) -> Option<&'a [u8]> {
        self.take(n.checked_mul(8)?)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, body: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend(1u32.to_le_bytes());
        b.extend((header.len() as u32).to_le_bytes());
        b.extend(header.as_bytes());
        b.extend(body);
        b
    }

    #[test]
    fn reads_every_type() {
        let mut body = Vec::new();
        for v in [1.5f64, -0.0, f64::NAN] {
            body.extend(v.to_le_bytes());
        }
        for v in [7i64, -1, i64::MAX] {
            body.extend(v.to_le_bytes());
        }
        body.extend([1u8, 0, 1]);
        for o in [0u64, 1, 1, 3] {
            body.extend(o.to_le_bytes());
        }
        body.extend("aé".as_bytes());
        let h = r#"{"rows": 3, "columns": [{"name": "x", "type": "f64"}, {"name": "k", "type": "i64"}, {"name": "b", "type": "bool"}, {"name": "s", "type": "str"}]}"#;
        let df = read_columns(&file(h, &body), "out.cols").unwrap();
        assert_eq!(df.shape(), (3, 4));
        let x: Vec<Option<f64>> = df.column("x").unwrap().f64().unwrap().iter().collect();
        assert_eq!(x[0], Some(1.5));
        assert!(x[1].unwrap().is_sign_negative());
        assert!(x[2].unwrap().is_nan());
        let s: Vec<Option<&str>> = df.column("s").unwrap().str().unwrap().iter().collect();
        assert_eq!(s, [Some("a"), Some(""), Some("é")]);
    }

    /// Hostile or broken files: each an error that says what, never a panic.
    #[test]
    fn refuses_what_is_malformed() {
        let h1 = r#"{"rows": 2, "columns": [{"name": "x", "type": "f64"}]}"#;
        let huge = r#"{"rows": 4000000000000000000, "columns": [{"name": "x", "type": "f64"}]}"#;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"DPLAB".to_vec(), "magic"),
            (
                b"NOTDPLAB\x01\0\0\0\0\0\0\0".to_vec(),
                "not a dplab column file",
            ),
            (file(h1, &[0; 8]), "ends inside column"),
            (file(h1, &[0; 17]), "follow its last column"),
            (file(huge, &[]), "rows"),
            (
                file(
                    r#"{"rows": 1, "columns": [{"name": "x", "type": "u8"}]}"#,
                    &[0],
                ),
                "types are",
            ),
            (
                file(
                    r#"{"rows": 1, "columns": [{"name": "x", "type": "bool"}]}"#,
                    &[2],
                ),
                "0 or 1",
            ),
            (
                file(
                    r#"{"rows": 0, "columns": [{"name": "x", "type": "f64"}, {"name": "x", "type": "f64"}]}"#,
                    &[],
                ),
                "twice",
            ),
            (file(r#"{"rows": 1}"#, &[]), "JSON"),
        ];
        for (bytes, says) in cases {
            let e = read_columns(&bytes, "out.cols").unwrap_err().to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
        let mut bad_utf8 = Vec::new();
        for o in [0u64, 2] {
            bad_utf8.extend(o.to_le_bytes());
        }
        bad_utf8.extend([0xff, 0xfe]);
        let h = r#"{"rows": 1, "columns": [{"name": "s", "type": "str"}]}"#;
        let e = read_columns(&file(h, &bad_utf8), "out.cols")
            .unwrap_err()
            .to_string();
        assert!(e.contains("UTF-8"), "{e}");
        let mut split = Vec::new();
        for o in [0u64, 1, 2] {
            split.extend(o.to_le_bytes());
        }
        split.extend("é".as_bytes());
        let h = r#"{"rows": 2, "columns": [{"name": "s", "type": "str"}]}"#;
        let e = read_columns(&file(h, &split), "out.cols")
            .unwrap_err()
            .to_string();
        assert!(e.contains("splits"), "{e}");
    }
}
