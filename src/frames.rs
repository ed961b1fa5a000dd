//! Frame helpers shared by the engine (gathering instance frames), stage kinds (reading
//! gathered inputs) and the program sandbox (reading a program's CSV), kept below all three
//! so none imports another.

use anyhow::Result;
use polars::prelude::*;

/// Row-wise concatenation of frames (instance frames in plan order, or the inputs of
/// `frame.stack`), losing nothing when their columns differ: the result has the union of
/// their columns in first-seen order, a frame's rows are empty (null) in the columns it
/// lacks, and a column whose type differs between frames takes the type [`common_type`]
/// gives. A stage swept over a records axis of datasets (`normalise` of tables with 129 and
/// 43 columns) thus keeps every column of every instance; frames with one schema, the usual
/// case, are stacked as they are.
pub(crate) fn concat(frames: &[&DataFrame]) -> Result<DataFrame> {
    let Some((first, rest)) = frames.split_first() else {
        return Ok(DataFrame::empty());
    };
    let mut out = if rest.iter().all(|f| f.schema() == first.schema()) {
        let mut out = (*first).clone();
        for f in rest {
            out.vstack_mut(f)?;
        }
        out
    } else {
        let schema = union_schema(frames.iter().copied());
        let mut out = aligned(first, &schema)?;
        for f in rest {
            out.vstack_mut_owned(aligned(f, &schema)?)?;
        }
        out
    };
    out.rechunk_mut();
    Ok(out)
}

/// The union of the frames' columns in first-seen order, each with the type every frame's
/// values fit ([`common_type`]).
pub(crate) fn union_schema<'a>(frames: impl IntoIterator<Item = &'a DataFrame>) -> Schema {
    let mut schema = Schema::default();
    for f in frames {
        for c in f.columns() {
            let t = match schema.get(c.name()) {
                Some(have) => common_type(have, c.dtype()),
                None => c.dtype().clone(),
            };
            schema.with_column(c.name().clone(), t);
        }
    }
    schema
}

/// The type a column takes when frames that hold it with types `a` and `b` are stacked: the
/// same type; the other one when a frame's column is all nulls of no type; 64-bit integers
/// for integers of other widths; 64-bit floats for other pairs of numbers (integers up to
/// 2⁵³ are exact); otherwise text, in which every value is
/// written as it prints, so nothing is lost.
pub(crate) fn common_type(a: &DataType, b: &DataType) -> DataType {
    match (a, b) {
        _ if a == b => a.clone(),
        (DataType::Null, t) | (t, DataType::Null) => t.clone(),
        _ if a.is_integer() && b.is_integer() && ![a, b].contains(&&DataType::UInt64) => {
            DataType::Int64
        }
        _ if a.is_primitive_numeric() && b.is_primitive_numeric() => DataType::Float64,
        _ => DataType::String,
    }
}

/// `df` with the columns of `schema`, in its order and types: a column `df` lacks is nulls.
pub(crate) fn aligned(df: &DataFrame, schema: &Schema) -> Result<DataFrame> {
    let height = df.height();
    let cols = schema
        .iter()
        .map(|(name, t)| match df.column(name) {
            Ok(c) if c.dtype() == t => Ok(c.clone()),
            Ok(c) => c.cast(t),
            Err(_) => Ok(Column::full_null(name.clone(), height, t)),
        })
        .collect::<PolarsResult<Vec<_>>>()?;
    Ok(DataFrame::new(height, cols)?)
}

/// A compact binary form of a frame for the instance store: per column its name, type,
/// null mask and raw little-endian values, so a frame decodes to the same values bit for
/// bit. Hand-written instead of Parquet (about 0.2 ms and 4 KB for a 3-row frame, most of it
/// metadata; a sweep of 10⁵ tiny instances spent 90% of its time there) or Arrow IPC (a
/// further polars feature to build); `None` for a column type it does not cover, which the
/// store then writes as Parquet.
pub(crate) fn encode(df: &DataFrame) -> Option<Vec<u8>> {
    let h = df.height();
    let mut out = Vec::with_capacity(64 + df.width() * (16 + 9 * h));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(df.width() as u32).to_le_bytes());
    out.extend_from_slice(&(h as u64).to_le_bytes());
    for c in df.columns() {
        let name = c.name().as_bytes();
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name);
        let s = c.as_materialized_series();
        let tag = match s.dtype() {
            DataType::Float64 => 1u8,
            DataType::Float32 => 2,
            DataType::Int64 => 3,
            DataType::Int32 => 4,
            DataType::UInt64 => 5,
            DataType::UInt32 => 6,
            DataType::Boolean => 7,
            DataType::String => 8,
            _ => return None,
        };
        out.push(tag);
        let nulls = s.null_count() > 0;
        out.push(u8::from(nulls));
        if nulls {
            let mask = s.is_not_null();
            let mut byte = 0u8;
            for (i, v) in mask.iter().enumerate() {
                if v == Some(true) {
                    byte |= 1 << (i % 8);
                }
                if i % 8 == 7 {
                    out.push(byte);
                    byte = 0;
                }
            }
            if !h.is_multiple_of(8) {
                out.push(byte);
            }
        }
        macro_rules! raw {
            ($ca:expr) => {
                for v in $ca.iter() {
                    out.extend_from_slice(&v.unwrap_or_default().to_le_bytes());
                }
            };
        }
        match tag {
            1 => raw!(s.f64().ok()?),
            2 => raw!(s.f32().ok()?),
            3 => raw!(s.i64().ok()?),
            4 => raw!(s.i32().ok()?),
            5 => raw!(s.u64().ok()?),
            6 => raw!(s.u32().ok()?),
            7 => {
                for v in s.bool().ok()?.iter() {
                    out.push(u8::from(v.unwrap_or(false)));
                }
            }
            _ => {
                for v in s.str().ok()?.iter() {
                    let v = v.unwrap_or("");
                    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                    out.extend_from_slice(v.as_bytes());
                }
            }
        }
    }
    Some(out)
}

const MAGIC: &[u8; 4] = b"DPF1";

/// The frame [`encode`] wrote; an error for anything else (a short or garbled input).
pub fn decode(bytes: &[u8]) -> Result<DataFrame> {
    let mut r = Reader { bytes, at: 0 };
    anyhow::ensure!(r.take(4)? == MAGIC, "not an encoded frame");
    let width = r.u32()? as usize;
    let h = usize::try_from(r.u64()?)?;
    // Every column needs at least `h` bytes per row of its type: a corrupt height is caught
    // before anything of that size is allocated.
    anyhow::ensure!(
        width == 0 || h <= bytes.len(),
        "an encoded frame's height exceeds its size"
    );
    let mut cols = Vec::with_capacity(width.min(bytes.len()));
    for _ in 0..width {
        let n = r.u32()? as usize;
        let name = std::str::from_utf8(r.take(n)?)?.to_string();
        let tag = r.take(1)?[0];
        let nulls = r.take(1)?[0] != 0;
        let valid: Option<Vec<bool>> = if nulls {
            let m = r.take(h.div_ceil(8))?;
            Some((0..h).map(|i| m[i / 8] >> (i % 8) & 1 == 1).collect())
        } else {
            None
        };
        let ok = |i: usize| valid.as_ref().is_none_or(|v| v[i]);
        macro_rules! raw {
            ($t:ty) => {{
                const W: usize = std::mem::size_of::<$t>();
                let b = r.take(
                    h.checked_mul(W)
                        .ok_or_else(|| anyhow::anyhow!("overflow"))?,
                )?;
                let at = |i: usize| {
                    <$t>::from_le_bytes(b[i * W..(i + 1) * W].try_into().expect("width"))
                };
                // Without nulls, no validity mask: the frame a run computed has none either.
                if valid.is_none() {
                    let vals: Vec<$t> = (0..h).map(at).collect();
                    Column::new(name.into(), vals)
                } else {
                    let vals: Vec<Option<$t>> = (0..h).map(|i| ok(i).then(|| at(i))).collect();
                    Column::new(name.into(), vals)
                }
            }};
        }
        let col = match tag {
            1 => raw!(f64),
            2 => raw!(f32),
            3 => raw!(i64),
            4 => raw!(i32),
            5 => raw!(u64),
            6 => raw!(u32),
            7 => {
                let b = r.take(h)?;
                let vals: Vec<Option<bool>> = (0..h).map(|i| ok(i).then(|| b[i] != 0)).collect();
                Column::new(name.into(), vals)
            }
            8 => {
                let mut vals: Vec<Option<String>> = Vec::with_capacity(h);
                for i in 0..h {
                    let n = usize::try_from(r.u64()?)?;
                    let s = std::str::from_utf8(r.take(n)?)?.to_string();
                    vals.push(ok(i).then_some(s));
                }
                Column::new(name.into(), vals)
            }
            t => anyhow::bail!("unknown column type {t} in an encoded frame"),
        };
        cols.push(col);
    }
    anyhow::ensure!(r.at == bytes.len(), "trailing bytes after an encoded frame");
    Ok(DataFrame::new(h, cols)?)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| anyhow::anyhow!("an encoded frame ends early"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }
}

/// A CSV file with a header row, parsed from bytes the engine already read and checked. Its
/// rows and columns are counted first and checked against what `--max-cells` allows a table
/// read from text (`limits::check_table_read`): a 250 MB file of one short column aborted the
/// process, and so did a header of 2·10⁷ names.
pub(crate) fn read_csv(bytes: &[u8]) -> Result<DataFrame> {
    check_csv(bytes)?;
    // Every row decides a column's type, not the first 100: a float column whose first rows
    // hold `-1000` was read as integers, and the first `0.5` failed the file.
    let read = |infer: Option<usize>| csv_reader(bytes, infer);
    match read(None) {
        Ok(df) => Ok(df),
        // Polars reads integers as i64 only: an integer beyond it (a u64 such as the seed dplab
        // hands programs) fails. Read as text, each column takes the first type all its
        // values have.
        Err(first) => {
            let text = read(Some(0)).map_err(|_| first)?;
            let cols = text
                .columns()
                .iter()
                .map(|c| {
                    [DataType::Int64, DataType::UInt64, DataType::Float64]
                        .iter()
                        .find_map(|t| c.strict_cast(t).ok())
                        .unwrap_or_else(|| c.clone())
                })
                .collect();
            Ok(DataFrame::new(text.height(), cols)?)
        }
    }
}

/// A CSV file's columns as the text it writes, each cell as it is (a paper's printed `0.050`,
/// which read as a number is 0.05), under [`read_csv`]'s limits.
pub(crate) fn read_csv_text(bytes: &[u8]) -> Result<DataFrame> {
    check_csv(bytes)?;
    Ok(csv_reader(bytes, Some(0))?)
}

/// A table read from a file is held to the limits before it is parsed.
fn check_csv(bytes: &[u8]) -> Result<()> {
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64
        + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
    let header = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let cols = header.iter().filter(|&&b| b == b',').count() as u64 + 1;
    crate::limits::check_table_read(
        "its table",
        lines.saturating_sub(1),
        cols,
        bytes.len() as u64,
    )
    .map_err(anyhow::Error::msg)
}

/// Polars' CSV reader on `bytes` with a header row; `infer`: how many rows decide a column's
/// type (`None`: all; `Some(0)`: none, every column is text).
fn csv_reader(bytes: &[u8], infer: Option<usize>) -> PolarsResult<DataFrame> {
    CsvReadOptions::default()
        .with_has_header(true)
        .with_infer_schema_length(infer)
        .into_reader_with_file_handle(std::io::Cursor::new(bytes))
        .finish()
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_decode_to_the_same_bits() {
        let df = DataFrame::new(
            3,
            vec![
                Column::new("f".into(), [Some(-0.0f64), None, Some(f64::NAN)]),
                Column::new("g".into(), [1.5f32, 2.0, f32::MIN_POSITIVE]),
                Column::new("i".into(), [Some(i64::MIN), Some(0), None]),
                Column::new("j".into(), [1i32, -2, 3]),
                Column::new("u".into(), [u64::MAX, 0, 7]),
                Column::new("v".into(), [Some(1u32), None, Some(3)]),
                Column::new("b".into(), [Some(true), None, Some(false)]),
                Column::new("s".into(), [Some("a,b"), None, Some("ü\n")]),
                Column::new_scalar("axis".into(), Scalar::from(0.5f64), 3),
            ],
        )
        .unwrap();
        let bytes = encode(&df).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(back.get_column_names(), df.get_column_names());
        for (a, b) in df.columns().iter().zip(back.columns()) {
            assert_eq!(a.dtype(), b.dtype(), "{}", a.name());
            assert_eq!(a.null_count(), b.null_count(), "{}", a.name());
            assert_eq!(
                format!("{:?}", a.as_materialized_series()),
                format!("{:?}", b.as_materialized_series()),
                "{}",
                a.name()
            );
        }
        let f = back.column("f").unwrap().f64().unwrap();
        assert!(f.get(0).unwrap().is_sign_negative() && f.get(2).unwrap().is_nan());
        // No columns, some rows; and every truncation of a frame is an error, not a panic.
        let empty = DataFrame::empty_with_height(4);
        assert_eq!(decode(&encode(&empty).unwrap()).unwrap().height(), 4);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn other_column_types_are_left_to_parquet() {
        let df =
            DataFrame::new(1, vec![Column::full_null("x".into(), 1, &DataType::Null)]).unwrap();
        assert!(encode(&df).is_none());
    }
}
