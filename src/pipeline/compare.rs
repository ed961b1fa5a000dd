//! `dplab compare`: two results directories, frame by frame — the same frames, the same
//! columns, the same key cells (text and integers), and numbers within tolerance.
//!
//! Wall times are measurements, not results: a column named `*_seconds`, and a row whose
//! `value` cell names such a column (the long format of `aggregate.summary`), are not
//! compared; the count of such cells is reported.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

/// Tolerance: `|a − b| ≤ atol + rtol·|b|`; NaN equals NaN; empty equals empty.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

/// The outcome: `report` is empty when everything matches.
pub struct Comparison {
    pub frames: usize,
    pub cells: usize,
    /// Wall-time cells, not compared.
    pub timings: usize,
    pub report: String,
}

/// At most this many differing cells are listed per frame.
const MAX_LISTED: usize = 10;

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
    let both: Vec<&String> = fa.intersection(&fb).collect();
    for name in &both {
        let ta = read_csv(&a.join(name))?;
        let tb = read_csv(&b.join(name))?;
        let (c, t) = compare_tables(name, &ta, &tb, tol, &mut report);
        cells += c;
        timings += t;
    }
    Ok(Comparison {
        frames: both.len(),
        cells,
        timings,
        report,
    })
}

struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn read_csv(path: &Path) -> Result<Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header = split_csv(lines.next().unwrap_or(""));
    let rows = lines.filter(|l| !l.is_empty()).map(split_csv).collect();
    Ok(Table { header, rows })
}

/// Splits one CSV line (RFC 4180 quoting, as polars writes it).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn is_key(cell: &str) -> bool {
    cell.parse::<f64>().is_err() || cell.parse::<i64>().is_ok()
}

/// Compares two tables; returns (cells compared, wall-time cells skipped).
fn compare_tables(
    name: &str,
    a: &Table,
    b: &Table,
    tol: Tolerance,
    report: &mut String,
) -> (usize, usize) {
    if a.header != b.header {
        let _ = writeln!(
            report,
            "{name}: columns differ\n  A: {}\n  B: {}",
            a.header.join(", "),
            b.header.join(", ")
        );
        return (0, 0);
    }
    if a.rows.len() != b.rows.len() {
        let _ = writeln!(
            report,
            "{name}: {} rows in A, {} in B",
            a.rows.len(),
            b.rows.len()
        );
        return (0, 0);
    }
    let value_col = a.header.iter().position(|h| h == "value");
    let mut listed = 0;
    let mut bad = 0;
    let mut cells = 0;
    let mut timings = 0;
    for (r, (ra, rb)) in a.rows.iter().zip(&b.rows).enumerate() {
        let timing_row = value_col.is_some_and(|c| is_timing(&ra[c]) && ra[c] == rb[c]);
        // Row context: the key-like cells (text, integers) of A's row.
        let context = || {
            a.header
                .iter()
                .zip(ra)
                .filter(|(_, v)| is_key(v))
                .map(|(h, v)| format!("{h}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
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
                let diff = match (va.parse::<f64>(), vb.parse::<f64>()) {
                    (Ok(x), Ok(y)) => format!(
                        " (|Δ| = {:.3e}, rel {:.3e})",
                        (x - y).abs(),
                        ((x - y) / y).abs()
                    ),
                    _ => String::new(),
                };
                let _ = writeln!(
                    report,
                    "{name}: row {} [{}] column `{}`: A = {va}, B = {vb}{diff}",
                    r + 1,
                    context(),
                    a.header.get(c).map_or("?", |s| s.as_str())
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
    if is_key(a) || is_key(b) {
        return false;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => {
            (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol.atol + tol.rtol * y.abs()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_split_and_tolerance() {
        assert_eq!(split_csv("a,\"b,c\",\"d\"\"e\""), ["a", "b,c", "d\"e"]);
        let t = Tolerance {
            rtol: 1e-6,
            atol: 0.0,
        };
        assert!(cell_matches("1.0000001", "1.0", t));
        assert!(!cell_matches("1.01", "1.0", t));
        assert!(!cell_matches("A", "B", t));
        assert!(cell_matches("NaN", "NaN", t));
    }

    #[test]
    fn wall_times_are_not_compared() {
        let t = Tolerance {
            rtol: 1e-9,
            atol: 0.0,
        };
        let table = |rows: &[&[&str]]| Table {
            header: vec!["value".into(), "mean".into(), "lp_seconds".into()],
            rows: rows
                .iter()
                .map(|r| r.iter().map(|s| s.to_string()).collect())
                .collect(),
        };
        let a = table(&[
            &["error", "0.5", "1.0"],
            &["synthesis_seconds", "2.0", "3.0"],
        ]);
        let b = table(&[
            &["error", "0.5", "9.0"],
            &["synthesis_seconds", "7.0", "3.0"],
        ]);
        let mut report = String::new();
        assert_eq!(compare_tables("x", &a, &b, t, &mut report), (3, 3));
        assert!(report.is_empty(), "{report}");
        let c = table(&[
            &["error", "0.6", "1.0"],
            &["synthesis_seconds", "2.0", "3.0"],
        ]);
        compare_tables("x", &a, &c, t, &mut report);
        assert!(report.contains("`mean`"), "{report}");
    }
}
