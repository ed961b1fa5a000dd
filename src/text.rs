//! Small text helpers shared by every layer (pipeline errors, the dataset registry).

/// Beyond this many candidates no suggestion is made. Each candidate costs an edit distance,
/// and a file with thousands of names and as many typos (8 000 stages reading a missing one:
/// a 300 KB file) made `validate` quadratic — minutes — for a hint. Real lists (the stage
/// kinds, a pipeline's stages, axes, profiles, parameters, datasets) are far shorter.
pub(crate) const MAX_SUGGEST_CANDIDATES: usize = 1000;

/// The candidate nearest to `word`, if it is plausibly a typo of it.
///
/// The edit distance is at least the difference in length, so candidates whose length is too
/// far from the word's are skipped without computing it: a typo several megabytes long (a
/// `kind:` pasted over with a file) costs one pass over the word, not one per candidate.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&str> = candidates
        .into_iter()
        .take(MAX_SUGGEST_CANDIDATES + 1)
        .collect();
    if candidates.len() > MAX_SUGGEST_CANDIDATES {
        return None;
    }
    let len = word.chars().count();
    candidates
        .into_iter()
        .filter(|c| c.chars().count().abs_diff(len) <= max_distance(c))
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, c)| *d <= max_distance(c))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The largest edit distance at which `candidate` is still suggested.
fn max_distance(candidate: &str) -> usize {
    2.max(candidate.len() / 3)
}

/// `text` cut to `max` characters, with `…` when cut.
pub fn brief(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Control characters other than newline and tab, written as escapes (`\u{1b}`): text from a
/// pipeline file, a file name or a program's output reaches the terminal, where an escape
/// sequence would be obeyed and a carriage return would overwrite what came before.
pub fn scrub(s: &str) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(escaped) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if escaped(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Lower-case hex digits of `bytes` (a formatted string per byte cost a tenth of a large
/// sweep's time: every instance has a key).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// A number for people, to `digits` significant digits without trailing zeros: 0.0532,
/// 149.6, 2 (not 2.000); −0 is 0, and what is not finite is written as Rust writes it. The one
/// rounding formatter of messages, audit events and verdicts; [`number_text`] writes a
/// number exactly.
pub(crate) fn significant(x: f64, digits: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { x.to_string() };
    }
    let digits = digits.max(1);
    let trim = |s: &str| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    // Too small or too large for decimals to say it in a few digits: 1.2e-7, 3e20.
    if !(1e-4..1e15).contains(&x.abs()) {
        let s = format!("{x:.*e}", digits - 1);
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        return format!("{}e{exponent}", trim(mantissa));
    }
    let digits = digits as i32;
    let decimals = (digits - 1 - x.abs().log10().floor() as i32).clamp(0, 17) as usize;
    let s = trim(&format!("{x:.decimals$}"));
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// A number as a person writes it: 1 rather than 1.0, 1e-9 rather than 0.000000001.
pub(crate) fn number_text(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

/// A number a description or a finding quotes from a frame the pipeline writes, written
/// `{{stage.column[row]}}` and shown to 3 significant digits, or `{{stage.column[row]|%}}` as
/// a percentage (0.538 → 54 %), `|N` to N significant digits. The row is a number (from 0, in
/// the frame's order) or conditions on other columns, `[mechanism=Laplace, r=50]`: the first
/// row where each holds (numbers equal as numbers), which stays right under a profile that
/// changes how many rows there are. The report fills it from the frame, so the words cannot
/// drift from the numbers (a description said "some 35 steps" of a frame that held 38).
/// Planning checks that the stage exists and writes a frame, and the column where it is
/// known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CellRef {
    /// Where it stands in its text, braces included.
    pub at: std::ops::Range<usize>,
    pub stage: String,
    pub column: String,
    pub row: RowRef,
    pub format: CellFormat,
}

/// Which row of its frame a [`CellRef`] quotes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RowRef {
    /// The row at this place, from 0.
    At(usize),
    /// The first row whose columns hold these values.
    Where(Vec<(String, String)>),
}

impl RowRef {
    /// The row of a frame given as column names and rows of text.
    pub fn find(&self, names: &[String], rows: &[Vec<String>]) -> Result<usize, String> {
        match self {
            RowRef::At(i) if *i < rows.len() => Ok(*i),
            RowRef::At(_) => Err(format!("the frame has {} rows", rows.len())),
            RowRef::Where(conds) => {
                let cols = conds
                    .iter()
                    .map(|(c, v)| {
                        let i = names
                            .iter()
                            .position(|n| n == c)
                            .ok_or_else(|| format!("no column `{c}`"))?;
                        Ok((i, v.as_str()))
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                let same = |a: &str, b: &str| {
                    a == b
                        || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
                };
                rows.iter()
                    .position(|row| cols.iter().all(|&(i, v)| same(&row[i], v)))
                    .ok_or_else(|| "no row holds those values".to_string())
            }
        }
    }
}

impl std::fmt::Display for RowRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowRef::At(i) => write!(f, "{i}"),
            RowRef::Where(c) => {
                let parts: Vec<String> = c.iter().map(|(k, v)| format!("{k}={v}")).collect();
                f.write_str(&parts.join(", "))
            }
        }
    }
}

/// How a [`CellRef`] shows its cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CellFormat {
    Significant(usize),
    Percent,
}

impl CellFormat {
    /// The cell's text as shown: a number formatted, anything else as it is.
    pub fn show(self, cell: &str) -> String {
        match (cell.trim().parse::<f64>(), self) {
            (Ok(x), CellFormat::Percent) if x.is_finite() => format!("{:.0} %", x * 100.0),
            (Ok(x), CellFormat::Significant(d)) if x.is_finite() => significant(x, d),
            _ => cell.to_string(),
        }
    }
}

/// The [`CellRef`]s of `text`, in order; an error names the first one that cannot be read.
pub(crate) fn cell_refs(text: &str) -> Result<Vec<CellRef>, String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("{{").map(|i| from + i) {
        let close = text[open..]
            .find("}}")
            .map(|i| open + i)
            .ok_or_else(|| format!("`{}`: `{{{{` without its `}}}}`", brief(&text[open..], 40)))?;
        let inner = text[open + 2..close].trim();
        let bad = |why: &str| {
            format!("`{{{{{}}}}}`: {why}: write {{{{stage.column[row]}}}}, {{{{stage.column[row]|%}}}} or {{{{stage.column[row]|4}}}}", brief(inner, 60))
        };
        let (cell, format) = match inner.split_once('|') {
            None => (inner, CellFormat::Significant(3)),
            Some((c, "%")) => (c.trim(), CellFormat::Percent),
            Some((c, d)) => match d.trim().parse::<usize>() {
                Ok(d @ 1..=17) => (c.trim(), CellFormat::Significant(d)),
                _ => return Err(bad("the format is `%` or a number of digits from 1 to 17")),
            },
        };
        let (name, row) = cell
            .strip_suffix(']')
            .and_then(|c| c.split_once('['))
            .ok_or_else(|| bad("no [row]"))?;
        let row = match row.trim().parse::<usize>() {
            Ok(i) => RowRef::At(i),
            Err(_) => RowRef::Where(
                row.split(',')
                    .map(|c| {
                        let (k, v) = c
                            .split_once('=')
                            .ok_or_else(|| bad("the row is a number from 0 or column=value, …"))?;
                        Ok((k.trim().to_string(), v.trim().to_string()))
                    })
                    .collect::<Result<_, String>>()?,
            ),
        };
        let (stage, column) = name.split_once('.').ok_or_else(|| bad("no stage.column"))?;
        if stage.trim().is_empty() || column.trim().is_empty() {
            return Err(bad("no stage.column"));
        }
        out.push(CellRef {
            at: open..close + 2,
            stage: stage.trim().to_string(),
            column: column.trim().to_string(),
            row,
            format,
        });
        from = close + 2;
    }
    Ok(out)
}

/// `text` with each of its [`CellRef`]s replaced by what `cell` gives for it (the cell's text,
/// or why there is none, which is shown in its place, marked).
pub(crate) fn fill_cells(text: &str, cell: impl Fn(&CellRef) -> Result<String, String>) -> String {
    let Ok(refs) = cell_refs(text) else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for r in refs {
        out.push_str(&text[last..r.at.start]);
        match cell(&r) {
            Ok(v) => out.push_str(&r.format.show(&v)),
            Err(why) => out.push_str(&format!("[{}.{}[{}]: {why}]", r.stage, r.column, r.row)),
        }
        last = r.at.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Whether `ext` is a plain file name, as an artifact's name must be (and an external
/// program's input file is named): 1 to 100 letters, digits, `.`, `_`, `-`, starting with a
/// letter or digit — nothing a path could read as more than a name.
pub(crate) fn plain_file_name(ext: &str) -> bool {
    (1..=100).contains(&ext.len())
        && ext.starts_with(|c: char| c.is_ascii_alphanumeric())
        && ext
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_for_people_have_the_digits_asked_and_no_trailing_zeros() {
        for (x, digits, says) in [
            (0.0532, 3, "0.0532"),
            (149.6, 4, "149.6"),
            (2.0, 4, "2"),
            (-0.0, 3, "0"),
            (-0.00001, 3, "-1e-5"),
            (1.23456e-7, 3, "1.23e-7"),
            (3e20, 4, "3e20"),
            (123456.7, 3, "123457"),
            (0.999_96, 4, "1"),
            (-2.6, 1, "-3"),
            (f64::INFINITY, 3, "inf"),
        ] {
            assert_eq!(significant(x, digits), says, "{x} to {digits}");
        }
        assert!(significant(f64::NAN, 3).contains("NaN"));
        assert_eq!(number_text(1e-9), "1e-9");
        assert_eq!(number_text(1.0), "1");
    }

    /// A quoted cell is read with its format, filled from what the frame holds, and a
    /// reference that cannot be read is an error that says how to write one.
    #[test]
    fn cells_quoted_in_text_are_read_and_filled() {
        let text = "holds at {{conclusions.holds_share[0]|%}} of {{ conclusions.grid_points[0] }} points, worst {{c.worst[1]|2}}";
        let refs = cell_refs(text).unwrap();
        assert_eq!(refs.len(), 3);
        assert_eq!(
            (
                refs[0].stage.as_str(),
                refs[0].column.as_str(),
                &refs[0].row
            ),
            ("conclusions", "holds_share", &RowRef::At(0))
        );
        assert_eq!(refs[1].format, CellFormat::Significant(3));
        let filled = fill_cells(text, |r| match (r.column.as_str(), &r.row) {
            ("holds_share", RowRef::At(0)) => Ok("0.5383".into()),
            ("grid_points", RowRef::At(0)) => Ok("961".into()),
            _ => Err("no such row".into()),
        });
        assert_eq!(
            filled,
            "holds at 54 % of 961 points, worst [c.worst[1]: no such row]"
        );
        for bad in [
            "{{a.b}}",
            "{{a[0]}}",
            "{{a.b[x]}}",
            "{{a.b[0]|0}}",
            "{{a.b[0]",
        ] {
            assert!(cell_refs(bad).is_err(), "{bad}");
        }
        assert_eq!(cell_refs("no braces { here }").unwrap(), []);
        // A row by the values of other columns: the first that holds them, numbers as numbers.
        let r = &cell_refs("{{d.level[mechanism=Algorithm 1, r=50]}}").unwrap()[0];
        let names = ["mechanism", "r", "level"].map(String::from);
        let rows: Vec<Vec<String>> = [
            ["Laplace", "50.0", "1"],
            ["Algorithm 1", "-50.0", "36"],
            ["Algorithm 1", "50.0", "35"],
        ]
        .iter()
        .map(|r| r.map(String::from).to_vec())
        .collect();
        assert_eq!(r.row.find(&names, &rows), Ok(2));
        assert_eq!(
            RowRef::At(3).find(&names, &rows),
            Err("the frame has 3 rows".into())
        );
        assert!(cell_refs("{{d.level[r]}}").is_err());
    }

    #[test]
    fn scrub_escapes_control_characters_but_newline_and_tab() {
        assert_eq!(scrub("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            scrub("abc\rXYZ\x1b[31m\u{9b}"),
            "abc\\u{d}XYZ\\u{1b}[31m\\u{9b}"
        );
    }

    #[test]
    fn suggests_the_nearest_plausible_candidate() {
        let kinds = ["load.table", "load.grid", "mechanism.noise"];
        assert_eq!(suggest("load.tabel", kinds), Some("load.table"));
        assert_eq!(suggest("mechanism.nose", kinds), Some("mechanism.noise"));
        assert_eq!(suggest("lod.grid", kinds), Some("load.grid"));
        assert_eq!(suggest("plot.lines", kinds), None);
        assert_eq!(suggest("", ["ab", "abcdefghij"]), Some("ab"));
    }

    #[test]
    fn a_huge_word_or_candidate_list_gets_no_suggestion_and_costs_little() {
        let long = "x".repeat(4 << 20);
        let kinds: Vec<String> = (0..40).map(|i| format!("mechanism.kind{i}")).collect();
        let t0 = std::time::Instant::now();
        assert_eq!(suggest(&long, kinds.iter().map(String::as_str)), None);
        let names: Vec<String> = (0..MAX_SUGGEST_CANDIDATES + 1)
            .map(|i| format!("s{i}"))
            .collect();
        assert_eq!(suggest("s1", names.iter().map(String::as_str)), None);
        assert_eq!(
            suggest(
                "s1",
                names[..MAX_SUGGEST_CANDIDATES].iter().map(String::as_str)
            ),
            Some("s1")
        );
        // Before the length filter the long word alone took seconds (a distance per candidate).
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
    }
}
