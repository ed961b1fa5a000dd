//! Readers for the file formats of the registered datasets: delimited and whitespace-separated
//! text (optionally gzip-compressed, UTF-8 or Latin-1), Excel `.xls` sheets (via calamine), and
//! the `.names` files that carry column names and types.
//!
//! The text reader streams: a line is split, each field goes straight into its column's
//! typed vector, so the largest file (census-kdd, 52 MB decompressed) is never held whole.
//! Quoting is not supported because none of the registered files quote fields; a field count
//! that does not match is an error naming the file and line.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};

use indexmap::IndexMap;
use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::{DataError, Verified};

#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Delimited,
    Whitespace,
    Xls,
}

#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "latin-1")]
    Latin1,
}

#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Gzip,
}

#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NamesStyle {
    /// `name: continuous.` / `name: v1, v2, ….`; lines starting with `|` are comments.
    Uci,
    /// `@attribute name numeric|string|{…}`.
    Arff,
}

#[derive(Debug, Deserialize, Serialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct NamesFile {
    pub file: String,
    pub style: NamesStyle,
}

/// How one file becomes a frame (see the header of `data/datasets.toml`); written back as
/// the registry has it where a manifest describes a dataset it read.
#[derive(Debug, Deserialize, Serialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    pub file: String,
    #[serde(default)]
    pub format: Format,
    #[serde(default)]
    pub separator: Option<String>,
    #[serde(default)]
    pub compression: Option<Compression>,
    #[serde(default)]
    pub encoding: Encoding,
    #[serde(default)]
    pub skip_lines: usize,
    #[serde(default)]
    pub header: bool,
    #[serde(default)]
    pub trim: bool,
    #[serde(default)]
    pub missing: Vec<String>,
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    #[serde(default)]
    pub names: Option<NamesFile>,
    #[serde(default)]
    pub append_columns: Vec<String>,
    #[serde(default)]
    pub categorical: Vec<String>,
    #[serde(default)]
    pub strip_suffix: IndexMap<String, String>,
    #[serde(default)]
    pub sheet: Option<String>,
    #[serde(default)]
    pub header_row: Option<usize>,
    #[serde(default)]
    pub stop_at_blank_row: bool,
}

impl TableSpec {
    /// The table's column names when the registry lists them (`columns`, then
    /// `append_columns` for text files): known without reading any file. `None` when they come
    /// from the file's header row or a `.names` file.
    pub(crate) fn known_columns(&self) -> Option<Vec<String>> {
        if self.header || self.names.is_some() {
            return None;
        }
        let mut cols = self.columns.clone()?;
        // An xls sheet takes exactly `columns` (read_xls); a text file appends the rest.
        if self.format != Format::Xls {
            cols.extend(self.append_columns.iter().cloned());
        }
        Some(cols)
    }

    /// Relations serde cannot express.
    pub fn check(&self) -> Result<(), String> {
        let sources = [self.header, self.columns.is_some(), self.names.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        match self.format {
            Format::Xls => {
                if self.sheet.is_none() || self.header_row.is_none() {
                    return Err("an xls table needs `sheet` and `header_row`".into());
                }
                if self.header || self.names.is_some() {
                    return Err(
                        "an xls table takes its names from `header_row` (or `columns`)".into(),
                    );
                }
            }
            _ => {
                if sources != 1 {
                    return Err("give exactly one of `header = true`, `columns` or `names`".into());
                }
                if self.sheet.is_some() || self.header_row.is_some() {
                    return Err("`sheet` and `header_row` are for xls tables".into());
                }
            }
        }
        if self.format == Format::Delimited {
            match self.separator.as_deref().map(|s| s.chars().count()) {
                Some(1) => {}
                _ => return Err("a delimited table needs a one-character `separator`".into()),
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Declared continuous: every present value must be a number.
    Numeric,
    /// Declared categorical: kept as text.
    Text,
    /// Not declared: numeric if every present value is a number, else text.
    Infer,
}

enum Values {
    Num {
        v: Vec<Option<f64>>,
        all_int: bool,
    },
    /// Text goes straight into arrow string storage (short values inline, no allocation per
    /// cell): declared text, and undeclared columns, which wait there for the whole file
    /// before their type is known.
    Arrow(StringChunkedBuilder),
}

impl ColumnBuf {
    /// Room for `rows` more values, allocated once (see [`read_text`]).
    fn reserve(&mut self, rows: usize) {
        match &mut self.values {
            Values::Num { v, .. } => v.reserve_exact(rows),
            // Called before the first value: the builder is empty.
            Values::Arrow(b) => {
                *b = StringChunkedBuilder::new(self.name.as_str().into(), rows);
            }
        }
    }
}

struct ColumnBuf {
    name: String,
    kind: Kind,
    values: Values,
}

impl ColumnBuf {
    fn new(name: String, kind: Kind) -> Self {
        let values = match kind {
            Kind::Numeric => Values::Num {
                v: Vec::new(),
                all_int: true,
            },
            Kind::Text | Kind::Infer => {
                Values::Arrow(StringChunkedBuilder::new(name.as_str().into(), 1024))
            }
        };
        ColumnBuf { name, kind, values }
    }

    fn into_column(self) -> Column {
        let name: PlSmallStr = self.name.as_str().into();
        match self.values {
            Values::Num { v, all_int } => num_column(name, v, all_int),
            Values::Arrow(b) if self.kind == Kind::Infer => {
                let text = b.finish();
                if text.null_count() == text.len() {
                    return text.into_column();
                }
                // Allocated once, at its size (see `limits::BYTES_PER_CELL_READ`).
                let mut nums = Vec::with_capacity(text.len());
                let mut all_int = true;
                let numeric = text.iter().all(|s| match s.map(parse_number) {
                    None => {
                        nums.push(None);
                        true
                    }
                    Some(Some((x, int))) => {
                        all_int &= int;
                        nums.push(Some(x));
                        true
                    }
                    Some(None) => false,
                });
                if !numeric {
                    return text.into_column();
                }
                drop(text);
                num_column(name, nums, all_int)
            }
            Values::Arrow(b) => b.finish().into_column(),
        }
    }
}

fn num_column(name: PlSmallStr, v: Vec<Option<f64>>, all_int: bool) -> Column {
    if all_int && v.iter().flatten().all(|x| x.abs() < 9.0e15) {
        Column::new(
            name,
            v.into_iter()
                .map(|x| x.map(|x| x as i64))
                .collect::<Vec<_>>(),
        )
    } else {
        Column::new(name, v)
    }
}

/// A number and whether it was written as an integer. Accepts Matlab-style `3.38e-005`.
fn parse_number(s: &str) -> Option<(f64, bool)> {
    if let Ok(i) = s.parse::<i64>() {
        return Some((i as f64, true));
    }
    let x: f64 = s.parse().ok()?;
    // "nan"/"inf" parse as f64 but are not data values in any registered file.
    x.is_finite().then_some((x, false))
}

/// Column names and kinds from the verified bytes of a `.names` file.
pub(crate) fn read_names(
    names: &Verified,
    style: NamesStyle,
) -> Result<Vec<(String, bool)>, DataError> {
    parse_names(names.bytes(), &names.display_name(), style)
}

/// Column names and kinds from the text of a `.names` file; `file` names it in messages.
pub(crate) fn parse_names(
    bytes: &[u8],
    file: &str,
    style: NamesStyle,
) -> Result<Vec<(String, bool)>, DataError> {
    // .names files are ASCII in practice; Latin-1 decoding never fails and keeps any stray byte.
    let text: String = bytes.iter().map(|&b| b as char).collect();
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        match style {
            NamesStyle::Uci => {
                if l.is_empty() || l.starts_with('|') {
                    continue;
                }
                let Some((name, spec)) = l.split_once(':') else {
                    continue;
                };
                let spec = spec.trim().trim_end_matches('.').trim();
                out.push((name.trim().to_string(), spec == "continuous"));
            }
            NamesStyle::Arff => {
                let lower = l.to_ascii_lowercase();
                if !lower.starts_with("@attribute") {
                    continue;
                }
                let rest = l["@attribute".len()..].trim();
                let (name, ty) = if let Some(q) = rest.strip_prefix('\'') {
                    let end = q.find('\'').unwrap_or(q.len());
                    (
                        q[..end].to_string(),
                        q[end..].trim_start_matches('\'').trim(),
                    )
                } else {
                    let mut it = rest.splitn(2, char::is_whitespace);
                    (
                        it.next().unwrap_or("").to_string(),
                        it.next().unwrap_or("").trim(),
                    )
                };
                let t = ty.to_ascii_lowercase();
                out.push((name, matches!(t.as_str(), "numeric" | "real" | "integer")));
            }
        }
    }
    if out.is_empty() {
        return Err(DataError::Parse(format!(
            "{file}: no column names found ({style:?} style)"
        )));
    }
    Ok(out)
}

/// Reads a registered table from the verified bytes of its file (and of its `.names` file, if
/// any). There is deliberately no variant taking a path: parsing reopens nothing, so the data is
/// exactly what was hashed.
pub(crate) fn read_table(
    spec: &TableSpec,
    data: &Verified,
    names: Option<&Verified>,
) -> Result<DataFrame, DataError> {
    let file = data.display_name();
    if spec.format == Format::Xls {
        return read_xls(spec, data.bytes(), &file);
    }
    let bytes: &[u8] = data.bytes();
    let compression = spec.compression;
    // Read twice (see `read_text`): each pass decompresses the verified bytes afresh.
    let open = || -> Box<dyn BufRead + '_> {
        let raw: Box<dyn Read + '_> = match compression {
            Some(Compression::Gzip) => Box::new(flate2::read::MultiGzDecoder::new(bytes)),
            None => Box::new(bytes),
        };
        Box::new(BufReader::with_capacity(1 << 20, raw))
    };
    let declared: Option<Vec<(String, bool)>> = match (&spec.names, names) {
        (Some(n), Some(v)) => Some(read_names(v, n.style)?),
        _ => None,
    };
    read_text(spec, &file, open, declared)
}

/// The longest line a data file may have. A line is held whole while it is split, so one line
/// of a gigabyte (a gzip bomb: a few MB that decompress to one endless line) would be a
/// gigabyte of memory, and doubling it as it grows aborted the process. The widest registered
/// file (communities) has lines of 1.2 KB; a table of 10⁵ columns fits in this.
pub(crate) const MAX_LINE_BYTES: usize = 16 << 20;

/// Reads one line (with its `\n`) into `buf`, refusing one longer than [`MAX_LINE_BYTES`]
/// before more than that is held. Returns the bytes read (0 at the end).
fn next_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    file: &str,
    line_no: usize,
) -> Result<usize, DataError> {
    buf.clear();
    let n = input
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', buf)
        .map_err(|e| DataError::Io(format!("{file}:{line_no}: {e}")))?;
    if buf.len() > MAX_LINE_BYTES {
        return Err(DataError::Parse(format!(
            "{file}:{line_no}: the line is longer than {} MiB, the most a line of a data file may hold (not a table of text: a damaged or hostile file?)",
            MAX_LINE_BYTES >> 20
        )));
    }
    Ok(n)
}

/// What the first pass over a text file finds: its data rows, its bytes and the fields of its
/// first line, so the second can check the table's size before it allocates anything and then
/// allocate each column once.
struct Survey {
    rows: usize,
    bytes: u64,
    /// Fields of the first line that is not blank (the header, when the file has one).
    width: usize,
}

/// The text of one line as the encoding reads it, without its line ending.
fn decode<'b>(
    spec: &TableSpec,
    buf: &'b [u8],
    file: &str,
    line_no: usize,
) -> Result<std::borrow::Cow<'b, str>, DataError> {
    let mut end = buf.len();
    while end > 0 && matches!(buf[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let buf = &buf[..end];
    match spec.encoding {
        Encoding::Utf8 => std::str::from_utf8(buf).map(Into::into).map_err(|e| {
            DataError::Parse(format!(
                "{file}:{line_no}:{}: not valid UTF-8 (byte 0x{:02x}); if the file is Latin-1, say `encoding = \"latin-1\"`",
                e.valid_up_to() + 1,
                buf[e.valid_up_to()]
            ))
        }),
        Encoding::Latin1 => Ok(buf.iter().map(|&b| b as char).collect::<String>().into()),
    }
}

/// The fields of one line, as the format splits it.
fn split_fields<'l>(spec: &TableSpec, sep: char, line: &'l str, fields: &mut Vec<&'l str>) {
    match spec.format {
        Format::Whitespace => fields.extend(line.split_whitespace()),
        _ => fields.extend(
            line.split(sep)
                .map(|f| if spec.trim { f.trim() } else { f }),
        ),
    }
}

/// The number of fields [`split_fields`] finds in `line`, counted without collecting them.
fn count_fields(spec: &TableSpec, sep: char, line: &str) -> usize {
    match spec.format {
        Format::Whitespace => line.split_whitespace().count(),
        _ => line.matches(sep).count() + 1,
    }
}

/// The separator of a delimited table (`check` made sure it is one character).
fn separator(spec: &TableSpec) -> char {
    spec.separator
        .as_deref()
        .and_then(|s| s.chars().next())
        .unwrap_or(',')
}

/// The first pass: every line read (bounded by [`MAX_LINE_BYTES`]) and dropped, counting the
/// rows that will hold data and the bytes, which may be at most
/// [`crate::limits::table_bytes`] (the text is
/// what text columns keep; and a file that decompresses to terabytes of blank lines would
/// otherwise take hours to read), and the fields of the first line: a header of 10⁶ names
/// is refused from this count, before a column is made for each.
fn survey(spec: &TableSpec, file: &str, mut input: impl BufRead) -> Result<Survey, DataError> {
    let budget = crate::limits::table_bytes();
    let sep = separator(spec);
    let mut buf = Vec::new();
    let (mut rows, mut line_no, mut bytes) = (0usize, 0usize, 0u64);
    let mut width = None;
    loop {
        let n = next_line(&mut input, &mut buf, file, line_no + 1)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        bytes += n as u64;
        if bytes > budget {
            return Err(DataError::Parse(format!(
                "{file}: more than {budget} bytes of text, the most a table read from a file may take (8 bytes for each of the {} cells --max-cells allows; raise it with --max-cells if you mean it)",
                crate::limits::get().cells
            )));
        }
        if line_no > spec.skip_lines && !buf.iter().all(u8::is_ascii_whitespace) {
            rows += 1;
            if width.is_none() {
                let line = decode(spec, &buf, file, line_no)?;
                if !line.trim().is_empty() {
                    width = Some(count_fields(spec, sep, &line));
                }
            }
        }
    }
    if spec.header {
        rows = rows.saturating_sub(1);
    }
    Ok(Survey {
        rows,
        bytes,
        width: width.unwrap_or(0),
    })
}

/// The text reader, separate from file opening so tests can feed it inline samples. `open`
/// gives the text from its start, and is called twice: a first pass ([`survey`]) counts the
/// rows and the columns, so that the table's columns and cells (rows × columns) are checked
/// against `--max-cells` before anything of that size is allocated, and every column is then
/// allocated once at its final size (a growing one needs up to three times its size while it
/// is copied).
pub(crate) fn read_text<'a, R: BufRead + 'a>(
    spec: &TableSpec,
    file: &str,
    open: impl Fn() -> R,
    declared: Option<Vec<(String, bool)>>,
) -> Result<DataFrame, DataError> {
    let Survey { rows, bytes, width } = survey(spec, file, open())?;
    // Names the registry or a `.names` file declares make the columns; else the header, the
    // first line the survey split. A row of another width is an error at its line below.
    let named = match (&declared, &spec.columns) {
        (Some(d), _) => Some(d.len()),
        (None, Some(c)) => Some(c.len()),
        (None, None) => None,
    };
    let width = named.map_or(width, |n| n + spec.append_columns.len());
    crate::limits::check_table_read(file, rows as u64, width as u64, bytes)
        .map_err(DataError::Parse)?;
    let mut input = open();
    let categorical: HashSet<&str> = spec.categorical.iter().map(String::as_str).collect();
    let sep = separator(spec);
    let mut cols: Vec<ColumnBuf> = Vec::new();
    let make_cols = |names: Vec<(String, Option<bool>)>| -> Vec<ColumnBuf> {
        names
            .into_iter()
            .map(|(n, numeric)| {
                let kind = if categorical.contains(n.as_str()) {
                    Kind::Text
                } else {
                    match numeric {
                        Some(true) => Kind::Numeric,
                        Some(false) => Kind::Text,
                        None => Kind::Infer,
                    }
                };
                let mut col = ColumnBuf::new(n, kind);
                col.reserve(rows);
                col
            })
            .collect()
    };
    if let Some(d) = declared {
        let mut names: Vec<(String, Option<bool>)> =
            d.into_iter().map(|(n, c)| (n, Some(c))).collect();
        names.extend(spec.append_columns.iter().map(|n| (n.clone(), None)));
        cols = make_cols(names);
    } else if let Some(c) = &spec.columns {
        let mut names: Vec<(String, Option<bool>)> = c.iter().map(|n| (n.clone(), None)).collect();
        names.extend(spec.append_columns.iter().map(|n| (n.clone(), None)));
        cols = make_cols(names);
    }
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    let mut need_header = spec.header;
    loop {
        let n = next_line(&mut input, &mut buf, file, line_no + 1)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line_no <= spec.skip_lines {
            continue;
        }
        let line = decode(spec, &buf, file, line_no)?;
        if line.trim().is_empty() {
            continue;
        }
        let mut fields: Vec<&str> = Vec::with_capacity(cols.len().max(8));
        split_fields(spec, sep, &line, &mut fields);
        if need_header {
            need_header = false;
            let names = fields
                .iter()
                .map(|f| (f.trim().to_string(), None))
                .collect();
            cols = make_cols(names);
            check_unique(&cols, file)?;
            continue;
        }
        if cols.is_empty() {
            return Err(DataError::Parse(format!("{file}: no column names")));
        }
        if fields.len() != cols.len() {
            return Err(DataError::Parse(format!(
                "{file}:{line_no}: {} fields, expected {} ({} … {})",
                fields.len(),
                cols.len(),
                cols[0].name,
                cols[cols.len() - 1].name
            )));
        }
        for (i, (raw, col)) in fields.iter().zip(cols.iter_mut()).enumerate() {
            let mut v: &str = raw;
            if let Some(suf) = spec.strip_suffix.get(&col.name) {
                v = v.strip_suffix(suf.as_str()).unwrap_or(v);
            }
            let present = !(v.is_empty() || spec.missing.iter().any(|m| m == v));
            match &mut col.values {
                Values::Num { v: out, all_int } => {
                    if !present {
                        out.push(None);
                        continue;
                    }
                    let (x, int) = parse_number(v).ok_or_else(|| {
                        DataError::Parse(format!(
                            "{file}:{line_no}: field {} (`{}`) is `{v}`, which is not a number (the column is declared continuous)",
                            i + 1,
                            col.name
                        ))
                    })?;
                    *all_int &= int;
                    out.push(Some(x));
                }
                Values::Arrow(b) if present => b.append_value(v),
                Values::Arrow(b) => b.append_null(),
            }
        }
    }
    if cols.is_empty() {
        return Err(DataError::Parse(format!("{file}: empty file")));
    }
    check_unique(&cols, file)?;
    let columns: Vec<Column> = cols.into_iter().map(ColumnBuf::into_column).collect();
    DataFrame::new_infer_height(columns).map_err(|e| DataError::Parse(format!("{file}: {e}")))
}

fn check_unique(cols: &[ColumnBuf], file: &str) -> Result<(), DataError> {
    let mut seen = HashSet::new();
    for c in cols {
        if !seen.insert(c.name.as_str()) {
            return Err(DataError::Parse(format!(
                "{file}: column name `{}` occurs twice; give distinct `columns` in the registry",
                c.name
            )));
        }
    }
    Ok(())
}

/// One sheet of an Excel workbook. Names come from `header_row` (1-based, as Excel numbers
/// rows); columns with an empty header cell are spacers and dropped; data starts at the first
/// non-blank row below the header and, with `stop_at_blank_row`, ends before the next blank
/// row (CTG.xls keeps column totals below a blank row).
fn read_xls(spec: &TableSpec, bytes: &[u8], file: &str) -> Result<DataFrame, DataError> {
    use calamine::{Data, Reader, Xls};
    let file = file.to_string();
    let sheet = spec.sheet.as_deref().unwrap_or_default();
    // Only the binary format the registry says (BIFF in a compound file), not whatever the
    // bytes look like: an `.xlsx` or `.ods` is a zip archive, and a zip bomb inside one would
    // be decompressed whole.
    let mut wb = Xls::new(std::io::Cursor::new(bytes)).map_err(|e| {
        DataError::Parse(format!(
            "{file}: not a readable Excel 97–2003 (.xls) workbook: {e}"
        ))
    })?;
    let range = wb.worksheet_range(sheet).map_err(|e| {
        DataError::Parse(format!(
            "{file}: sheet `{sheet}`: {e} (sheets: {})",
            wb.sheet_names().join(", ")
        ))
    })?;
    let header_row = spec.header_row.unwrap_or(1);
    let (r0, _) = range.start().unwrap_or((0, 0));
    let rows: Vec<&[Data]> = range.rows().collect();
    let hidx = (header_row - 1)
        .checked_sub(r0 as usize)
        .filter(|i| *i < rows.len())
        .ok_or_else(|| {
            DataError::Parse(format!("{file}: sheet `{sheet}` has no row {header_row}"))
        })?;
    let cell_text = |d: &Data| -> Option<String> {
        match d {
            Data::Empty => None,
            Data::String(s) if s.trim().is_empty() => None,
            Data::String(s) => Some(s.trim().to_string()),
            other => Some(other.to_string()),
        }
    };
    let keep: Vec<(usize, String)> = rows[hidx]
        .iter()
        .enumerate()
        .filter_map(|(i, d)| cell_text(d).map(|t| (i, t)))
        .collect();
    let names: Vec<String> = match &spec.columns {
        Some(c) if c.len() != keep.len() => {
            return Err(DataError::Parse(format!(
            "{file}: sheet `{sheet}` row {header_row} has {} named columns, the registry lists {}",
            keep.len(),
            c.len()
        )))
        }
        Some(c) => c.clone(),
        None => keep.iter().map(|(_, t)| t.clone()).collect(),
    };
    let categorical: HashSet<&str> = spec.categorical.iter().map(String::as_str).collect();
    let mut cols: Vec<ColumnBuf> = names
        .into_iter()
        .map(|n| {
            let kind = if categorical.contains(n.as_str()) {
                Kind::Text
            } else {
                Kind::Infer
            };
            ColumnBuf::new(n, kind)
        })
        .collect();
    check_unique(&cols, &file)?;
    // Numbers are kept as numbers (not re-parsed from text) so no precision is lost.
    let mut nums: Vec<Vec<Option<f64>>> = vec![Vec::new(); cols.len()];
    let mut numeric = vec![true; cols.len()];
    let mut started = false;
    for row in rows.iter().skip(hidx + 1) {
        let blank = keep
            .iter()
            .all(|(ci, _)| row.get(*ci).and_then(cell_text).is_none());
        if blank {
            if started && spec.stop_at_blank_row {
                break;
            }
            continue;
        }
        started = true;
        for (k, (ci, _)) in keep.iter().enumerate() {
            let cell = row.get(*ci).unwrap_or(&Data::Empty);
            let num = match cell {
                Data::Float(x) => Some(*x),
                Data::Int(i) => Some(*i as f64),
                Data::Bool(b) => Some(f64::from(u8::from(*b))),
                Data::DateTime(d) => Some(d.as_f64()),
                _ => None,
            };
            let text = cell_text(cell);
            if text.is_some() && num.is_none() {
                numeric[k] = false;
            }
            nums[k].push(num);
            match &mut cols[k].values {
                Values::Arrow(b) => match text {
                    Some(t) => b.append_value(t),
                    None => b.append_null(),
                },
                Values::Num { .. } => {}
            }
        }
    }
    let columns: Vec<Column> = cols
        .into_iter()
        .zip(nums)
        .zip(numeric)
        .map(|((c, n), is_num)| {
            if c.kind == Kind::Infer && is_num && n.iter().any(Option::is_some) {
                let all_int = n.iter().flatten().all(|x| x.fract() == 0.0);
                num_column(c.name.as_str().into(), n, all_int)
            } else {
                let name: PlSmallStr = c.name.as_str().into();
                match c.values {
                    Values::Arrow(b) => b.finish().into_column(),
                    Values::Num { v, .. } => Column::new(name, v),
                }
            }
        })
        .collect();
    DataFrame::new_infer_height(columns).map_err(|e| DataError::Parse(format!("{file}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(toml_text: &str) -> TableSpec {
        let s: TableSpec = toml::from_str(toml_text).unwrap();
        s.check().unwrap();
        s
    }

    fn read(
        spec: &TableSpec,
        text: &[u8],
        declared: Option<Vec<(String, bool)>>,
    ) -> Result<DataFrame, DataError> {
        read_text(spec, "sample.data", || text, declared)
    }

    #[test]
    fn delimited_with_trim_missing_and_suffix() {
        let s = spec(
            "file='x'\nseparator=','\ntrim=true\nmissing=['?']\nskip_lines=1\ncolumns=['age','job','income']\ncategorical=['income']\nstrip_suffix={income='.'}",
        );
        let df = read(
            &s,
            b"|banner\n39, State-gov, <=50K.\n50, ?, >50K.\n\n",
            None,
        )
        .unwrap();
        assert_eq!(df.shape(), (2, 3));
        assert_eq!(df.column("age").unwrap().dtype(), &DataType::Int64);
        let job = df.column("job").unwrap().str().unwrap().clone();
        assert_eq!(job.get(0), Some("State-gov"));
        assert_eq!(job.get(1), None);
        assert_eq!(
            df.column("income").unwrap().str().unwrap().get(1),
            Some(">50K")
        );
    }

    #[test]
    fn header_whitespace_and_floats() {
        let s = spec("file='x'\nseparator=','\nheader=true");
        let df = read(&s, b"a,b\r\n1,3.38e-005\r\n2,0.5\r\n", None).unwrap();
        assert_eq!(df.column("b").unwrap().dtype(), &DataType::Float64);
        assert_eq!(df.column("b").unwrap().f64().unwrap().get(0), Some(3.38e-5));
        let s = spec("file='x'\nformat='whitespace'\ncolumns=['u','i']");
        let df = read(&s, b"1\t785\n 2   3 \n", None).unwrap();
        assert_eq!(df.column("i").unwrap().i64().unwrap().get(0), Some(785));
    }

    #[test]
    fn wrong_field_count_names_file_and_line() {
        let s = spec("file='x'\nseparator=','\ncolumns=['a','b']");
        let e = read(&s, b"1,2\n3\n", None).unwrap_err().to_string();
        assert!(
            e.contains("sample.data:2") && e.contains("1 fields, expected 2"),
            "{e}"
        );
    }

    #[test]
    fn declared_continuous_rejects_text() {
        let s = spec("file='x'\nseparator=','\nnames={file='n', style='uci'}");
        let decl = vec![("age".to_string(), true), ("job".to_string(), false)];
        let e = read(&s, b"1,a\nx,b\n", Some(decl.clone()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sample.data:2") && e.contains("`age`") && e.contains("`x`"),
            "{e}"
        );
        // A nominal code column stays text even though it looks numeric.
        let df = read(&s, b"1,40\n2,44\n", Some(decl)).unwrap();
        assert_eq!(df.column("job").unwrap().dtype(), &DataType::String);
    }

    #[test]
    fn encodings() {
        let s = spec("file='x'\nseparator='|'\ncolumns=['id','title']");
        let e = read(&s, b"1|Les Mis\xe9rables\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sample.data:1:") && e.contains("latin-1"), "{e}");
        let s = spec("file='x'\nseparator='|'\nencoding='latin-1'\ncolumns=['id','title']");
        let df = read(&s, b"1|Les Mis\xe9rables\n", None).unwrap();
        assert_eq!(
            df.column("title").unwrap().str().unwrap().get(0),
            Some("Les Misérables")
        );
    }

    #[test]
    fn names_files() {
        let uci =
            b"| comment: x\n>50K, <=50K.\n\nage: continuous.\nworkclass: Private, Never-worked.\n";
        assert_eq!(
            parse_names(uci, "a.names", NamesStyle::Uci).unwrap(),
            vec![("age".into(), true), ("workclass".into(), false)]
        );
        let arff = b"@relation x\n@attribute state numeric\n@attribute communityname string\n";
        assert_eq!(
            parse_names(arff, "a.names", NamesStyle::Arff).unwrap(),
            vec![("state".into(), true), ("communityname".into(), false)]
        );
        let e = parse_names(b"nothing here\n", "a.names", NamesStyle::Arff).unwrap_err();
        assert!(e.to_string().contains("a.names"), "{e}");
    }

    /// Verified bytes of a file written to a temporary directory, as `load_table` gets them.
    fn verified(dir: &std::path::Path, name: &str, bytes: &[u8]) -> Verified {
        let entry = crate::data::FileEntry {
            name: name.into(),
            url: "https://example.invalid/".into(),
            sha256: Some(crate::data::sha256_hex(bytes)),
            size: Some(bytes.len() as u64),
        };
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        crate::data::read_verified(&entry, &p).unwrap()
    }

    #[test]
    fn gzip_stream() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"1, 2\n3, 4\n").unwrap();
        let gz = enc.finish().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let v = verified(dir.path(), "t.gz", &gz);
        let s =
            spec("file='t.gz'\ncompression='gzip'\nseparator=','\ntrim=true\ncolumns=['a','b']");
        let df = read_table(&s, &v, None).unwrap();
        assert_eq!(df.column("b").unwrap().i64().unwrap().get(1), Some(4));
    }

    /// The race this API closes: the file (and its `.names` file) replaced on disk after it was
    /// verified. What is parsed is still the verified bytes; the tampered rows never appear.
    #[test]
    fn a_file_replaced_after_verification_cannot_change_what_is_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let data = verified(dir.path(), "t.data", b"1,ok\n2,ok\n");
        let names = verified(dir.path(), "t.names", b"a: continuous.\nb: x, y.\n");
        // Same sizes, different contents: only the hash would tell them apart.
        std::fs::write(dir.path().join("t.data"), b"9,XX\n9,XX\n").unwrap();
        std::fs::write(dir.path().join("t.names"), b"z: x, y, zz.\nb: x, y.\n").unwrap();
        let s = spec("file='t.data'\nseparator=','\nnames={file='t.names', style='uci'}");
        let df = read_table(&s, &data, Some(&names)).unwrap();
        assert_eq!(df.column("a").unwrap().i64().unwrap().get(1), Some(2));
        assert_eq!(df.column("b").unwrap().str().unwrap().get(0), Some("ok"));
        assert_eq!(data.bytes(), b"1,ok\n2,ok\n");
    }

    #[test]
    fn bad_specs_are_rejected() {
        let s: TableSpec = toml::from_str("file='x'\nseparator=','").unwrap();
        assert!(s.check().unwrap_err().contains("exactly one"));
        let s: TableSpec = toml::from_str("file='x'\nseparator=',,'\nheader=true").unwrap();
        assert!(s.check().unwrap_err().contains("one-character"));
        let s: TableSpec = toml::from_str("file='x'\nformat='xls'").unwrap();
        assert!(s.check().unwrap_err().contains("sheet"));
    }
}
