//! `dplab compare`: two results directories, frame by frame — the same frames, the same
//! columns, the same number of rows, the same key cells (text and integers), and numbers within
//! tolerance.
//!
//! Frames are read with the `csv` crate (RFC 4180: quoted fields may hold commas, quotes and
//! newlines, as polars' CsvWriter writes them), so a cell is compared as exactly the text that
//! was written. A frame that cannot be read as CSV, a row whose field count differs from the
//! header's (a ragged or truncated row) and a different number of rows are mismatches, never a
//! pass and never a crash.
//!
//! How two cells are compared:
//! - identical text always matches (so do two empty cells, i.e. two nulls);
//! - two integers (`[+-]?[0-9]+`, any length) match only when equal, compared as digit strings
//!   so nothing is rounded through f64 (2^53 + 1 ≠ 2^53);
//! - an integer and a float (a column whose type changed between the runs) match only when the
//!   float is exactly that integer (`3` = `3.0`, `9007199254740993` ≠ `9007199254740992.0`):
//!   integers are counts and keys, so no tolerance applies to them;
//! - two floats match when `|a − b| ≤ atol + rtol·|b|`, or both are NaN, or both are the same
//!   infinity;
//! - anything else (text) must be identical.
//!
//! A frame whose stage the manifest marks not reproducible (a program dplab cannot seed, or a
//! stage reading one's output) is not compared, and is named as such.
//!
//! Wall times are measurements, not results: a column named `*_seconds`, and a row whose
//! `value` cell names such a column (the long format of `aggregate.summary`), are not
//! compared; the count of such cells is reported.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::manifest::WithoutSeeds;

/// Tolerance: `|a − b| ≤ atol + rtol·|b|`. Both are finite and ≥ 0, which [`Tolerance::new`]
/// enforces: an infinite or NaN tolerance would make every comparison pass (or none), and a
/// negative one is meaningless. The fields are private so no other path can build one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    rtol: f64,
    atol: f64,
}

/// An invalid tolerance; the message names the option and the valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToleranceError(String);

impl Tolerance {
    pub fn new(rtol: f64, atol: f64) -> Result<Tolerance, ToleranceError> {
        for (name, v) in [("rtol", rtol), ("atol", atol)] {
            // `!(v >= 0)` also refuses NaN.
            if !(v.is_finite() && v >= 0.0) {
                return Err(ToleranceError(format!(
                    "--{name} {v} is invalid: a tolerance must be a finite number ≥ 0"
                )));
            }
        }
        Ok(Tolerance { rtol, atol })
    }

    pub fn rtol(&self) -> f64 {
        self.rtol
    }

    pub fn atol(&self) -> f64 {
        self.atol
    }
}

/// How a results directory was made, as its `manifest.json` says (its profile and axes; a
/// golden directory keeps a short one with these fields), if it has a readable one.
pub fn made(dir: &Path) -> Option<WithoutSeeds> {
    let path = dir.join("manifest.json");
    let (f, meta) = crate::regular::open_regular(&path).ok()?;
    if !meta.is_file() {
        return None;
    }
    use std::io::Read as _;
    serde_json::from_reader(std::io::BufReader::new(f.take(MAX_FRAME_BYTES))).ok()
}

/// The outcome: `report` is empty when everything matches.
pub struct Comparison {
    pub frames: usize,
    pub cells: usize,
    /// Wall-time cells, not compared.
    pub timings: usize,
    /// Frames not compared: their stage's manifest entry says they are not reproducible bit for
    /// bit (a program dplab cannot seed, or a stage reading one's output).
    pub unreproducible: Vec<String>,
    pub report: String,
}

/// At most this many differing cells (or ragged rows) are listed per frame.
const MAX_LISTED: usize = 10;

/// Compares the `*.csv` frames of two directories. Errors are for unreadable directories and
/// files (I/O); anything wrong with a frame's contents goes into the report.
pub fn compare_dirs(a: &Path, b: &Path, tol: Tolerance) -> Result<Comparison> {
    let list = |d: &Path| -> Result<BTreeSet<String>> {
        let mut s = BTreeSet::new();
        for e in std::fs::read_dir(d).with_context(|| format!("reading {}", d.display()))? {
            let name = e?.file_name().to_string_lossy().to_string();
            if name.ends_with(".csv") && !name.starts_with('.') {
                s.insert(name);
            }
        }
        Ok(s)
    };
    let (fa, fb) = (list(a)?, list(b)?);
    let mut report = String::new();
    for only in fa.difference(&fb) {
        writeln!(report, "{only}: only in {}", a.display())?;
    }
    for only in fb.difference(&fa) {
        writeln!(report, "{only}: only in {}", b.display())?;
    }
    let (mut cells, mut timings) = (0, 0);
    // Axis columns are keys whatever their type; `rep` is the axis `repeat` adds.
    let mut axes: BTreeSet<String> = [a, b]
        .iter()
        .filter_map(|d| made(d))
        .flat_map(|m| m.axes.into_keys())
        .collect();
    axes.insert("rep".into());
    // Frames of stages that no seed decides are not compared (either side's manifest says).
    let unseeded: BTreeSet<String> = [a, b]
        .iter()
        .filter_map(|d| made(d))
        .flat_map(|m| m.stages.into_iter().filter(|s| !s.reproducible))
        .map(|s| format!("{}.csv", s.name))
        .collect();
    let (both, unreproducible): (Vec<&String>, Vec<&String>) =
        fa.intersection(&fb).partition(|n| !unseeded.contains(*n));
    let unreproducible = unreproducible.into_iter().cloned().collect();
    for name in &both {
        let ta = read_frame(&a.join(name))?;
        let tb = read_frame(&b.join(name))?;
        let (c, t) = match (ta, tb) {
            (Ok(ta), Ok(tb)) => compare_tables(name, &ta, &tb, tol, &axes, &mut report),
            (ra, rb) => {
                for (side, r) in [("A", ra), ("B", rb)] {
                    if let Err(m) = r {
                        writeln!(report, "{name}: {side} is not a readable CSV frame: {m}")?;
                    }
                }
                (0, 0)
            }
        };
        cells += c;
        timings += t;
    }
    Ok(Comparison {
        frames: both.len(),
        cells,
        timings,
        unreproducible,
        report,
    })
}

struct CsvFrame {
    header: Vec<String>,
    rows: Vec<Row>,
}

struct Row {
    /// 1-based line of the file where the row starts, for messages.
    line: u64,
    cells: Vec<String>,
}

/// Reads a frame: `Err` for I/O, `Ok(Err(message))` for contents that are not valid CSV.
fn read_frame(path: &Path) -> Result<Result<CsvFrame, String>> {
    // A regular file of bounded size: a FIFO or device named `x.csv` would block or never
    // end, and both frames are held in memory.
    let bytes = super::spec::read_regular_file(path, MAX_FRAME_BYTES)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(parse_csv(&bytes))
}

/// The largest frame file compared.
const MAX_FRAME_BYTES: u64 = 1 << 30;

/// Parses CSV as polars writes it: a header record, then one record per row.
///
/// The csv crate skips blank lines, but polars writes a row of a one-column frame whose cell is
/// null as an empty line, so skipped lines are counted back in as rows with one empty field
/// (in a wider frame such a row is then reported as ragged, never silently dropped).
fn parse_csv(bytes: &[u8]) -> Result<CsvFrame, String> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        // Ragged rows are read and reported by the comparison rather than failing the parse.
        .flexible(true)
        .from_reader(bytes);
    let text = |rec: &csv::ByteRecord| -> Result<Vec<String>, String> {
        rec.iter()
            .enumerate()
            .map(|(i, f)| {
                String::from_utf8(f.to_vec()).map_err(|e| {
                    let line = rec.position().map_or(0, |p| p.line());
                    format!("line {line}, field {}: not UTF-8 ({e})", i + 1)
                })
            })
            .collect()
    };
    let mut rec = csv::ByteRecord::new();
    let header = match rdr.read_byte_record(&mut rec) {
        Ok(true) => text(&rec)?,
        Ok(false) => return Err("empty file (no header)".into()),
        Err(e) => return Err(e.to_string()),
    };
    let mut end = rdr.position().byte();
    let mut rows = Vec::new();
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(true) => {
                // The csv crate gives a record the position where reading it began, so the
                // blank lines it skipped come first.
                let pos = rec.position().cloned().unwrap_or_else(csv::Position::new);
                let blank = blank_lines(bytes, pos.byte());
                for i in 0..blank {
                    rows.push(Row {
                        line: pos.line() + i,
                        cells: vec![String::new()],
                    });
                }
                rows.push(Row {
                    line: pos.line() + blank,
                    cells: text(&rec)?,
                });
                end = rdr.position().byte();
            }
            Ok(false) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    // Blank lines after the last record are rows too.
    let last_line = rows.last().map_or(2, |r| r.line + 1);
    for i in 0..blank_lines(bytes, end) {
        rows.push(Row {
            line: last_line + i,
            cells: vec![String::new()],
        });
    }
    Ok(CsvFrame { header, rows })
}

/// The number of blank lines at `from`: the line ends before the next other byte. CRLF counts
/// once, and a `\n` completing the CRLF that ended the previous record is not a line.
fn blank_lines(bytes: &[u8], from: u64) -> u64 {
    let from = (from as usize).min(bytes.len());
    let mut n = 0;
    let mut i = from;
    if i > 0 && bytes[i - 1] == b'\r' && bytes.get(i) == Some(&b'\n') {
        i += 1;
    }
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => i += 1,
            b'\r' | b'\n' => {}
            _ => break,
        }
        n += 1;
        i += 1;
    }
    n
}

/// What a cell holds, for comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value<'a> {
    /// An integer literal: sign and digits without leading zeros (`-0` is `0`).
    Int {
        negative: bool,
        digits: &'a str,
    },
    Float(f64),
    Text,
}

fn classify(s: &str) -> Value<'_> {
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        let digits = unsigned.trim_start_matches('0');
        let digits = if digits.is_empty() { "0" } else { digits };
        return Value::Int {
            negative: negative && digits != "0",
            digits,
        };
    }
    // Rust's float syntax: decimal and exponent forms, and inf/infinity/NaN in any case
    // (polars writes `NaN`, `inf`, `-inf`); no whitespace, so ` 1` stays text.
    match s.parse::<f64>() {
        Ok(x) => Value::Float(x),
        Err(_) => Value::Text,
    }
}

/// Text and integers identify a row (keys); floats are measurements.
fn is_key(cell: &str) -> bool {
    !matches!(classify(cell), Value::Float(_))
}

/// A cell for a message: as is when plain, else quoted with escapes (newlines, quotes, commas,
/// empty).
fn show(cell: &str) -> String {
    if cell.is_empty() || cell.contains(|c: char| c.is_control() || c == '"' || c == ',') {
        format!("{cell:?}")
    } else {
        cell.to_string()
    }
}

/// The columns that identify a row: the axes', and those holding only text (neither
/// integers nor floats) on both sides.
fn key_columns(a: &CsvFrame, b: &CsvFrame, axes: &BTreeSet<String>) -> Vec<usize> {
    (0..a.header.len())
        .filter(|&c| {
            axes.contains(&a.header[c])
                || [a, b].iter().all(|t| {
                    t.rows.iter().all(|r| {
                        r.cells
                            .get(c)
                            .is_some_and(|v| !v.is_empty() && classify(v) == Value::Text)
                    })
                })
        })
        .collect()
}

/// A row's key as people read it: `eps=0.5, c=3, source=…`.
fn key_text(header: &[String], cols: &[usize], row: &[String]) -> String {
    cols.iter()
        .filter_map(|&c| Some(format!("{}={}", header.get(c)?, show(row.get(c)?))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A key's cells (one per key column).
type RowKey<'t> = Vec<&'t str>;

/// Each key's rows, in order, and the keys in the order of their first row.
fn groups<'t>(
    t: &'t CsvFrame,
    cols: &[usize],
) -> (Vec<RowKey<'t>>, HashMap<RowKey<'t>, Vec<usize>>) {
    let mut order = Vec::new();
    let mut m: HashMap<Vec<&str>, Vec<usize>> = HashMap::new();
    for (i, r) in t.rows.iter().enumerate() {
        let k: Vec<&str> = cols
            .iter()
            .map(|&c| r.cells.get(c).map_or("", String::as_str))
            .collect();
        m.entry(k.clone())
            .or_insert_with(|| {
                order.push(k);
                Vec::new()
            })
            .push(i);
    }
    (order, m)
}

/// Rows of two tables of different lengths paired by key — the axis and text columns — and,
/// where a key has several rows (an instance's releases, a figure's points), by their order
/// within it: the i-th row of a key in A with the i-th in B. What has no partner is listed.
/// Without key columns, rows are paired in order. Says in `report` how it paired them.
fn paired_by_key(
    name: &str,
    a: &CsvFrame,
    b: &CsvFrame,
    keys: &[usize],
    report: &mut String,
) -> Vec<(usize, usize)> {
    let key_names: Vec<&str> = keys.iter().map(|&c| a.header[c].as_str()).collect();
    let (order_a, ga) = groups(a, keys);
    let (order_b, gb) = groups(b, keys);
    let mut pairs: Vec<(usize, usize)> = ga
        .iter()
        .filter_map(|(k, ra)| Some(ra.iter().copied().zip(gb.get(k)?.iter().copied())))
        .flatten()
        .collect();
    pairs.sort_unstable();
    let unique = ga.values().chain(gb.values()).all(|rows| rows.len() == 1);
    let how = if keys.is_empty() {
        "no axis or text columns identify them: paired in order".to_string()
    } else if unique {
        format!("key: {}", key_names.join(", "))
    } else {
        format!(
            "paired by key ({}) and by order within a key",
            key_names.join(", ")
        )
    };
    let _ = writeln!(
        report,
        "{name}: {} rows in A, {} in B; the {} rows present in both are compared ({how})",
        a.rows.len(),
        b.rows.len(),
        pairs.len(),
    );
    // What has no partner: a key on one side only, or a key with more rows on one side.
    let mut unpaired = Vec::new();
    for (side, order, mine, theirs, t) in [
        ("missing from A (only in B)", &order_b, &gb, &ga, b),
        ("extra in A (not in B)", &order_a, &ga, &gb, a),
    ] {
        for k in order {
            let rows = &mine[k];
            let paired = theirs.get(k).map_or(0, Vec::len);
            if rows.len() <= paired {
                continue;
            }
            let key = if keys.is_empty() {
                "rows".to_string()
            } else {
                key_text(&t.header, keys, &t.rows[rows[0]].cells)
            };
            unpaired.push(match (rows.len(), paired) {
                (1, 0) => format!("{name}: row {side}: {key}"),
                (n, 0) => format!("{name}: {n} rows {side}: {key}"),
                (n, p) => format!(
                    "{name}: {key}: {} rows {side} ({n} against {p}: its last {} not compared)",
                    n - p,
                    n - p
                ),
            });
        }
    }
    for line in unpaired.iter().take(MAX_LISTED) {
        let _ = writeln!(report, "{line}");
    }
    if unpaired.len() > MAX_LISTED {
        let _ = writeln!(
            report,
            "{name}: … and {} more keys whose rows differ in number",
            unpaired.len() - MAX_LISTED
        );
    }
    pairs
}

/// Compares two tables; returns (cells compared, wall-time cells skipped). Rows are paired in
/// order when both have as many; otherwise by key (the axis columns and text columns), the
/// rows present in both are compared and the missing and extra keys listed.
fn compare_tables(
    name: &str,
    a: &CsvFrame,
    b: &CsvFrame,
    tol: Tolerance,
    axes: &BTreeSet<String>,
    report: &mut String,
) -> (usize, usize) {
    if a.header != b.header {
        let _ = writeln!(
            report,
            "{name}: columns differ\n  A: {}\n  B: {}",
            a.header
                .iter()
                .map(|h| show(h))
                .collect::<Vec<_>>()
                .join(", "),
            b.header
                .iter()
                .map(|h| show(h))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return (0, 0);
    }
    let width = a.header.len();
    // Ragged rows (a truncated last line, a lost or extra separator) on either side.
    let mut ragged = 0;
    for (side, t) in [("A", a), ("B", b)] {
        for (r, row) in t.rows.iter().enumerate() {
            if row.cells.len() != width {
                ragged += 1;
                if ragged <= MAX_LISTED {
                    let _ = writeln!(
                        report,
                        "{name}: {side} row {} (line {}) has {} fields, the header has {width}",
                        r + 1,
                        row.line,
                        row.cells.len()
                    );
                }
            }
        }
    }
    if ragged > MAX_LISTED {
        let _ = writeln!(
            report,
            "{name}: … and {} more ragged rows",
            ragged - MAX_LISTED
        );
    }
    let keys = key_columns(a, b, axes);
    let pairs: Vec<(usize, usize)> = if a.rows.len() == b.rows.len() {
        (0..a.rows.len()).map(|r| (r, r)).collect()
    } else {
        paired_by_key(name, a, b, &keys, report)
    };
    let value_col = a.header.iter().position(|h| h == "value");
    let mut listed = 0;
    let mut bad = 0;
    let mut cells = 0;
    let mut timings = 0;
    for (ia, ib) in pairs {
        let (ra, rb) = (&a.rows[ia].cells, &b.rows[ib].cells);
        let timing_row = value_col.is_some_and(|c| {
            ra.get(c)
                .is_some_and(|v| is_timing(v) && rb.get(c) == Some(v))
        });
        // Row context: the key columns, then the other key-like cells (text, integers) of A's row.
        let context = || {
            a.header
                .iter()
                .zip(ra)
                .enumerate()
                .filter(|(c, (_, v))| keys.contains(c) || is_key(v))
                .map(|(_, (h, v))| format!("{h}={}", show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // A ragged row is compared over the fields both sides have; it is already reported.
        for (c, (va, vb)) in ra.iter().zip(rb).enumerate() {
            let key_cell = is_key(va) && is_key(vb);
            if a.header.get(c).is_some_and(|h| is_timing(h)) || (timing_row && !key_cell) {
                timings += 1;
                continue;
            }
            cells += 1;
            if cell_matches(va, vb, tol) {
                continue;
            }
            bad += 1;
            if listed < MAX_LISTED {
                listed += 1;
                let diff = match (classify(va), classify(vb)) {
                    (Value::Float(x), Value::Float(y)) => format!(
                        " (|Δ| = {:.3e}, rel {:.3e})",
                        (x - y).abs(),
                        ((x - y) / y).abs()
                    ),
                    _ => String::new(),
                };
                let _ = writeln!(
                    report,
                    "{name}: row {} [{}] column `{}`: A = {}, B = {}{diff}",
                    ia + 1,
                    context(),
                    a.header.get(c).map_or("?", |s| s.as_str()),
                    show(va),
                    show(vb)
                );
            }
        }
    }
    if bad > listed {
        let _ = writeln!(
            report,
            "{name}: … and {} more differing cells",
            bad - listed
        );
    }
    (cells, timings)
}

/// A name of a wall-time measurement.
fn is_timing(name: &str) -> bool {
    name.ends_with("_seconds")
}

fn cell_matches(a: &str, b: &str, tol: Tolerance) -> bool {
    if a == b {
        return true;
    }
    match (classify(a), classify(b)) {
        (Value::Int { .. }, Value::Int { .. }) => classify(a) == classify(b),
        (Value::Int { negative, digits }, Value::Float(x))
        | (Value::Float(x), Value::Int { negative, digits }) => float_is_int(x, negative, digits),
        (Value::Float(x), Value::Float(y)) => {
            // Tolerance only between finite numbers: with an infinite `b` the bound would be
            // infinite and let anything through.
            (x.is_nan() && y.is_nan())
                || x == y
                || (x.is_finite()
                    && y.is_finite()
                    && (x - y).abs() <= tol.atol + tol.rtol * y.abs())
        }
        _ => false,
    }
}

/// Whether the float `x` is exactly the integer `±digits`: compared as decimal digits (an
/// integral f64 prints exactly with `{:.0}`), so no integer is rounded to a float.
fn float_is_int(x: f64, negative: bool, digits: &str) -> bool {
    x.is_finite()
        && x.fract() == 0.0
        && (x < 0.0) == negative
        && format!("{:.0}", x.abs()) == digits
}

#[cfg(test)]
mod tests {
    use super::*;
    use polars::prelude::*;

    fn tol(rtol: f64, atol: f64) -> Tolerance {
        Tolerance::new(rtol, atol).unwrap()
    }

    fn table(header: &[&str], rows: &[&[&str]]) -> CsvFrame {
        CsvFrame {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: rows
                .iter()
                .enumerate()
                .map(|(i, r)| Row {
                    line: i as u64 + 2,
                    cells: r.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
        }
    }

    /// Writes `a` and `b` as `t.csv` into two directories and compares them.
    fn compare_texts(a: &[u8], b: &[u8], t: Tolerance) -> Comparison {
        let dir = tempfile::tempdir().unwrap();
        let (da, db) = (dir.path().join("a"), dir.path().join("b"));
        for (d, text) in [(&da, a), (&db, b)] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("t.csv"), text).unwrap();
        }
        compare_dirs(&da, &db, t).unwrap()
    }

    fn polars_csv(df: &mut DataFrame) -> Vec<u8> {
        let mut out = Vec::new();
        CsvWriter::new(&mut out)
            .include_header(true)
            .finish(df)
            .unwrap();
        out
    }

    #[test]
    fn tolerance_and_cells() {
        let t = tol(1e-6, 0.0);
        assert!(cell_matches("1.0000001", "1.0", t));
        assert!(!cell_matches("1.01", "1.0", t));
        assert!(!cell_matches("A", "B", t));
        assert!(cell_matches("NaN", "NaN", t));
        assert!(!cell_matches("NaN", "1.0", t));
        assert!(cell_matches("inf", "inf", t));
        assert!(!cell_matches("inf", "-inf", t));
        assert!(!cell_matches("inf", "1e308", t));
        assert!(!cell_matches("1.0", "inf", t));
        assert!(!cell_matches("-1e308", "1e308", tol(1.0, 0.0)));
        assert!(cell_matches("", "", t));
        assert!(!cell_matches("", "0.0", t));
        // Text is never compared numerically: a leading space keeps it text.
        assert!(!cell_matches(" 1.0", "1.0", t));
    }

    #[test]
    fn integers_compare_exactly_beyond_2_pow_53() {
        let t = tol(1e-3, 1.0);
        // 2^53 + 1 and 2^53 are the same f64: compared as integers, they differ.
        assert!(!cell_matches("9007199254740993", "9007199254740992", t));
        assert!(cell_matches("9007199254740993", "9007199254740993", t));
        assert!(cell_matches(
            "123456789012345678901234567890",
            "+0123456789012345678901234567890",
            t
        ));
        assert!(!cell_matches(
            "18446744073709551617",
            "18446744073709551616",
            t
        ));
        assert!(cell_matches("-0", "0", t));
        assert!(!cell_matches("-5", "5", t));
        // No tolerance for integers: they are counts and keys.
        assert!(!cell_matches("100", "101", t));
        // Integer vs float: equal only when the float is exactly that integer.
        assert!(cell_matches("3", "3.0", t));
        assert!(cell_matches("-3.0", "-3", t));
        assert!(!cell_matches("3", "-3.0", t));
        assert!(!cell_matches("3", "3.0000001", t));
        assert!(cell_matches("9007199254740992", "9007199254740992.0", t));
        assert!(!cell_matches("9007199254740993", "9007199254740992.0", t));
        assert!(!cell_matches("9007199254740993", "9.007199254740993e15", t));
        assert!(!cell_matches("1", "NaN", t));
        assert!(!cell_matches("1", "inf", t));

        let c = compare_texts(b"id\n9007199254740993\n", b"id\n9007199254740992\n", t);
        assert!(
            c.report
                .contains("A = 9007199254740993, B = 9007199254740992"),
            "{}",
            c.report
        );
    }

    #[test]
    fn bad_tolerances_are_refused() {
        for (r, a) in [
            (f64::INFINITY, 0.0),
            (0.0, f64::INFINITY),
            (f64::NAN, 0.0),
            (0.0, f64::NAN),
            (-1e-9, 0.0),
            (0.0, -1.0),
            (f64::NEG_INFINITY, 0.0),
        ] {
            let e = Tolerance::new(r, a).unwrap_err().to_string();
            assert!(e.contains("finite number ≥ 0"), "{e}");
        }
        assert!(Tolerance::new(0.0, 0.0).is_ok());
        assert!(Tolerance::new(1e-9, 1e-12).is_ok());
    }

    #[test]
    fn embedded_newlines_quotes_and_commas_in_text_written_by_polars() {
        let frame = |note: &str| {
            let mut df = df!(
                "method" => ["a\nb", "say \"hi\", then\r\nleave", ""],
                "x" => [1.0, 2.0, 3.0],
                "note" => [note, "plain", "multi\n\nline"],
            )
            .unwrap();
            polars_csv(&mut df)
        };
        let a = frame("line one\nline two");
        // The old line-splitting reader panicked here (exit 101) on the short "line two\"" row.
        let c = compare_texts(&a, &a, tol(1e-9, 0.0));
        assert_eq!(c.report, "");
        assert_eq!(c.cells, 9);
        // The text read back is exactly the text written.
        let t = parse_csv(&a).unwrap();
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[1].cells[0], "say \"hi\", then\r\nleave");
        assert_eq!(t.rows[2].cells[2], "multi\n\nline");
        // A change inside a multi-line cell is found and shown escaped.
        let b = frame("line one\nline 2");
        let c = compare_texts(&a, &b, tol(1e-9, 0.0));
        assert!(
            c.report
                .contains("column `note`: A = \"line one\\nline two\", B = \"line one\\nline 2\""),
            "{}",
            c.report
        );
    }

    #[test]
    fn truncated_file_is_a_mismatch() {
        let a = b"k,p\n1,0.5\n2,0.25\n";
        for b in [&b"k,p\n1,0.5\n2"[..], b"k,p\n1,0.5\n2,", b"k,p\n1,0.5\n"] {
            let c = compare_texts(a, b, tol(1e-9, 0.0));
            assert!(
                !c.report.is_empty(),
                "{:?} passed",
                String::from_utf8_lossy(b)
            );
        }
        let c = compare_texts(a, b"k,p\n1,0.5\n2", tol(1e-9, 0.0));
        assert!(
            c.report
                .contains("B row 2 (line 3) has 1 fields, the header has 2"),
            "{}",
            c.report
        );
        // A file cut inside a quoted field, or empty, is reported too.
        let c = compare_texts(b"k,s\n1,\"ab\"\n", b"k,s\n1,\"a", tol(1e-9, 0.0));
        assert!(!c.report.is_empty());
        let c = compare_texts(a, b"", tol(1e-9, 0.0));
        assert!(
            c.report.contains("B is not a readable CSV frame"),
            "{}",
            c.report
        );
    }

    #[test]
    fn ragged_rows_are_mismatches_even_when_both_sides_agree() {
        let t = tol(1e-9, 0.0);
        let ragged = b"k,p\n1,0.5,7\n2\n";
        let c = compare_texts(ragged, ragged, t);
        assert!(
            c.report.contains("A row 1 (line 2) has 3 fields"),
            "{}",
            c.report
        );
        assert!(
            c.report.contains("B row 2 (line 3) has 1 fields"),
            "{}",
            c.report
        );
        let c = compare_texts(b"k,p\n1,0.5\n", b"k,p\n1,0.5,\n", t);
        assert!(
            c.report.contains("B row 1 (line 2) has 3 fields"),
            "{}",
            c.report
        );
        // A blank line is a row: ragged in a wide frame…
        let c = compare_texts(b"k,p\n1,0.5\n2,0.5\n", b"k,p\n1,0.5\n\n2,0.5\n", t);
        assert!(
            c.report.contains("B row 2 (line 3) has 1 fields"),
            "{}",
            c.report
        );
        // …and a null cell in a one-column frame, as polars writes it.
        let mut df = df!("s" => [Some("x"), None, None]).unwrap();
        let three = polars_csv(&mut df);
        let mut df = df!("s" => [Some("x"), None]).unwrap();
        let two = polars_csv(&mut df);
        assert_eq!(parse_csv(&three).unwrap().rows.len(), 3);
        let cells = |text: &[u8]| -> Vec<String> {
            let t = parse_csv(text).unwrap();
            t.rows.iter().map(|r| r.cells.join("|")).collect()
        };
        assert_eq!(cells(b"k\nx\n\n\ny\n"), ["x", "", "", "y"]);
        assert_eq!(cells(b"k\r\nx\r\n\r\ny\r\n"), ["x", "", "y"]);
        assert_eq!(cells(b"k\nx\n\n"), ["x", ""]);
        assert_eq!(cells(b"k\n\"a\nb\"\n\n"), ["a\nb", ""]);
        assert_eq!(cells(b"k\nx"), ["x"]);
        let c = compare_texts(&three, &two, t);
        assert!(c.report.contains("3 rows in A, 2 in B"), "{}", c.report);
        assert_eq!(compare_texts(&three, &three, t).report, "");
    }

    #[test]
    fn rows_are_matched_by_axis_and_text_keys_when_counts_differ() {
        let dir = tempfile::tempdir().unwrap();
        let (da, db) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&da).unwrap();
        std::fs::create_dir_all(&db).unwrap();
        let manifest = |p: Option<&str>| {
            serde_json::json!({"profile": p, "axes": {"eps": ["0.5", "1"], "c": ["1", "3"]}})
                .to_string()
        };
        std::fs::write(da.join("manifest.json"), manifest(None)).unwrap();
        std::fs::write(db.join("manifest.json"), manifest(Some("ci"))).unwrap();
        std::fs::write(
            da.join("t.csv"),
            "eps,c,source,p\n0.5,1.0,x,0.25\n0.5,3.0,x,0.5\n1.0,3.0,x,0.75\n",
        )
        .unwrap();
        std::fs::write(
            db.join("t.csv"),
            "eps,c,source,p\n0.5,3.0,x,0.5\n1.0,3.0,x,0.7\n2.0,1.0,x,0.1\n2.0,3.0,x,0.2\n",
        )
        .unwrap();
        let c = compare_dirs(&da, &db, tol(1e-9, 0.0)).unwrap();
        let r = &c.report;
        assert!(r.contains("3 rows in A, 4 in B; the 2 rows present in both are compared (key: eps, c, source)"), "{r}");
        assert!(
            r.contains("row missing from A (only in B): eps=2.0, c=1.0, source=x"),
            "{r}"
        );
        assert!(
            r.contains("row missing from A (only in B): eps=2.0, c=3.0, source=x"),
            "{r}"
        );
        assert!(
            r.contains("row extra in A (not in B): eps=0.5, c=1.0, source=x"),
            "{r}"
        );
        // The differing cell names its row by the axis values too.
        assert!(
            r.contains("[eps=1.0, c=3.0, source=x] column `p`: A = 0.75, B = 0.7"),
            "{r}"
        );
        assert_eq!(c.cells, 8);
        let (ma, mb) = (made(&da).unwrap(), made(&db).unwrap());
        assert_eq!(ma.profile_name(), "no profile (full settings)");
        assert_eq!(mb.profile_name(), "profile `ci`");
    }

    /// An instance's releases (many rows per key) after an edit that changed their number:
    /// paired by key and by order within it, and what has no partner counted.
    #[test]
    fn rows_sharing_a_key_are_paired_in_order_within_it() {
        let dir = tempfile::tempdir().unwrap();
        let (da, db) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&da, &db] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(
                d.join("manifest.json"),
                serde_json::json!({"axes": {"eps": ["0.5", "1"]}}).to_string(),
            )
            .unwrap();
        }
        std::fs::write(
            da.join("noisy.csv"),
            "eps,release,x\n0.5,0,1.5\n0.5,1,2.5\n0.5,2,3.5\n1.0,0,4.5\n1.0,1,5.5\n",
        )
        .unwrap();
        std::fs::write(
            db.join("noisy.csv"),
            "eps,release,x\n0.5,0,1.5\n0.5,1,2.75\n1.0,0,4.5\n1.0,1,5.5\n2.0,0,9.5\n2.0,1,9.5\n",
        )
        .unwrap();
        let c = compare_dirs(&da, &db, tol(1e-9, 0.0)).unwrap();
        let r = &c.report;
        assert!(
            r.contains("noisy.csv: 5 rows in A, 6 in B; the 4 rows present in both are compared (paired by key (eps) and by order within a key)"),
            "{r}"
        );
        assert!(
            r.contains("noisy.csv: 2 rows missing from A (only in B): eps=2.0"),
            "{r}"
        );
        assert!(
            r.contains("noisy.csv: eps=0.5: 1 rows extra in A (not in B) (3 against 2: its last 1 not compared)"),
            "{r}"
        );
        assert!(
            r.contains("row 2 [eps=0.5, release=1] column `x`: A = 2.5, B = 2.75"),
            "{r}"
        );
        // 4 pairs of 3 cells.
        assert_eq!(c.cells, 12);
    }

    #[test]
    fn different_row_counts_are_mismatches() {
        let c = compare_texts(b"k,p\n1,0.5\n2,0.25\n", b"k,p\n1,0.5\n", tol(1.0, 1.0));
        assert!(c.report.contains("2 rows in A, 1 in B"), "{}", c.report);
        let c = compare_texts(b"k,p\n", b"k,p\n1,0.5\n", tol(1.0, 1.0));
        assert!(c.report.contains("0 rows in A, 1 in B"), "{}", c.report);
    }

    #[test]
    fn invalid_utf8_is_reported_not_fatal() {
        let c = compare_texts(b"k\nabc\n", b"k\nab\xff\n", tol(0.0, 0.0));
        assert!(
            c.report.contains("B is not a readable CSV frame"),
            "{}",
            c.report
        );
    }

    #[test]
    fn wall_times_are_not_compared() {
        let t = tol(1e-9, 0.0);
        let header = ["value", "mean", "lp_seconds"];
        let a = table(
            &header,
            &[
                &["error", "0.5", "1.0"],
                &["synthesis_seconds", "2.0", "3.0"],
            ],
        );
        let b = table(
            &header,
            &[
                &["error", "0.5", "9.0"],
                &["synthesis_seconds", "7.0", "3.0"],
            ],
        );
        let mut report = String::new();
        assert_eq!(
            compare_tables("x", &a, &b, t, &Default::default(), &mut report),
            (3, 3)
        );
        assert!(report.is_empty(), "{report}");
        let c = table(
            &header,
            &[
                &["error", "0.6", "1.0"],
                &["synthesis_seconds", "2.0", "3.0"],
            ],
        );
        compare_tables("x", &a, &c, t, &Default::default(), &mut report);
        assert!(report.contains("`mean`"), "{report}");
        // A ragged timing row does not crash the `value` lookup.
        let d = table(&header, &[&["error", "0.5", "1.0"], &[]]);
        let mut report = String::new();
        compare_tables("x", &a, &d, t, &Default::default(), &mut report);
        assert!(report.contains("B row 2"), "{report}");
    }
}
