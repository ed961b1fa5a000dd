//! The table views of the page: a table stage's frame shown as its layout says — its columns
//! cell by cell, every column, a grid in the paper's arrangement, or a link — and its
//! differences from the paper recorded for the list under the experiments.

use std::collections::HashMap;

use super::counts::{class, judgements, Judged, Tally};
use super::markdown;
use super::model::{Cell, Disagreement, Pivot, PivotCell, TableView};
use super::read::{Csv, Outputs};
use super::{anchor, url_segment};
use crate::stages::report::layout::{column_header, Grid, Layout, Role, Show};
use crate::stages::report::{format_column, format_ours};
use crate::text::significant;
use crate::verdict::Verdict;

/// Rows of one table shown on the page (the CSV beside it has them all).
const MAX_SHOWN_ROWS: usize = 400;

/// One table of an experiment — a stage that wrote a layout (`<stage>.json`) beside its frame —
/// shown as its layout says, with its compared cells counted and its differences recorded.
pub(super) fn table(
    exp: &str,
    outputs: &Outputs,
    stage: &str,
    layout: &Result<Layout, String>,
    problems: &mut Vec<String>,
    found: &mut Vec<Disagreement>,
) -> Option<TableView> {
    let csv_name = format!("{stage}.csv");
    let layout = match layout {
        Ok(l) => Some(l),
        Err(e) => {
            problems.push(e.clone());
            None
        }
    };
    // An audit's rows are shown in the Audits section (`audits.rs`), not as a table here.
    if layout.is_some_and(|l| l.show == Show::Audit) {
        return None;
    }
    let mut t = TableView {
        stage: stage.to_string(),
        title: stage.to_string(),
        notes: String::new(),
        csv: format!("{}/{}", url_segment(exp), url_segment(&csv_name)),
        headers: vec![],
        rows: vec![],
        total_rows: 0,
        markdown: String::new(),
        grid: None,
        causes: vec![],
        data_only: false,
        in_audits: layout.is_some_and(|l| l.in_audits),
        numbers: Tally::default(),
        problem: String::new(),
    };
    let frame = outputs.frame(exp, &csv_name);
    let frame = match frame {
        Ok(f) => f,
        Err(e) => {
            problems.push(e.clone());
            t.problem = e;
            return Some(t);
        }
    };
    let md_name = format!("{stage}.md");
    let md = outputs.has(&md_name).then(|| outputs.text(&md_name));
    let md = match md {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            problems.push(e);
            None
        }
        None => None,
    };
    let judged = match judgements(&frame) {
        Ok(j) => j,
        Err(e) => {
            let e = format!("{exp}/{csv_name}: {e}");
            problems.push(e.clone());
            t.problem = e;
            return Some(t);
        }
    };
    if let Some(title) = md
        .as_ref()
        .and_then(|md| md.lines().next())
        .and_then(|l| l.strip_prefix("## "))
    {
        t.title = title.trim().to_string();
    }
    let at: HashMap<(usize, usize), &Judged> =
        judged.iter().map(|j| ((j.row, j.column), j)).collect();
    let view = match layout {
        Some(l) => {
            t.title = l.title.clone();
            t.notes = l
                .notes
                .as_deref()
                .map(markdown::to_html)
                .unwrap_or_default();
            if let Some(md) = md.as_deref().filter(|_| l.markdown) {
                t.markdown = markdown::to_html(md.split_once('\n').map_or("", |x| x.1));
            }
            match &l.show {
                Show::Audit => return None, // (said above)
                Show::Link => {
                    t.data_only = true;
                    t.total_rows = frame.rows.len();
                    return Some(t);
                }
                Show::Columns => view_with_layout(&frame, l, &at),
                Show::Every => Ok(view_every(&frame, &at)),
                // The grid is the table shown: its cells are not repeated one by one.
                Show::Grid(g) => grid_view(&frame, g, &l.ours, &judged).map(|g| {
                    t.grid = Some(g);
                    View {
                        headers: vec![],
                        rows: vec![],
                        causes: vec![],
                    }
                }),
            }
        }
        None => Ok(view_every(&frame, &at)),
    };
    let view = match view {
        Ok(v) => v,
        Err(e) => {
            let e = format!("{exp}/{csv_name}: {e}");
            problems.push(e.clone());
            t.problem = e;
            return Some(t);
        }
    };
    t.headers = view.headers;
    t.causes = view.causes;
    t.total_rows = view.rows.len();
    t.rows = view.rows.into_iter().take(MAX_SHOWN_ROWS).collect();
    for j in &judged {
        t.numbers.add(j.verdict);
    }
    // The list of differences is the printed numbers': a benchmark's rows show their verdicts
    // in its own table.
    if !t.in_audits {
        record_differences(exp, &t.title, &frame, layout, &judged, found);
    }
    Some(t)
}

/// Our value on frame row `r` as the layout shows it beside the paper's (see
/// [`Layout::ours`]); a dash when it gives none.
fn ours_of(layout: Option<&Layout>, r: usize) -> String {
    layout
        .and_then(|l| l.ours.get(r))
        .map_or_else(|| "—".to_string(), String::clone)
}

/// A [`Grid`] filled from the frame: in each cell the paper's value as printed (`paper`), ours
/// (`ours`) and the verdict of the row's `verdict` column with its note, coloured by the
/// judgement read from the frame, or left uncoloured with the frame's word (`not run`) when
/// the cell was not compared. A row the frame lacks is an error, not a panic.
fn grid_view(frame: &Csv, g: &Grid, ours: &[String], judged: &[Judged]) -> Result<Pivot, String> {
    let [paper, verdict, cause] = ["paper", "verdict", "cause"].map(|c| frame.col(c));
    let by_row: HashMap<usize, &Judged> = judged
        .iter()
        .filter(|j| Some(j.column) == verdict)
        .map(|j| (j.row, j))
        .collect();
    let raw = |row: &[String], col: Option<usize>| {
        col.and_then(|c| row.get(c))
            .map_or("", |s| s.trim())
            .to_string()
    };
    let text = |t: String| PivotCell {
        paper: t,
        ours: String::new(),
        verdict: String::new(),
        note: String::new(),
        class: "text",
    };
    let mut rows = Vec::with_capacity(g.rows.len());
    for line in &g.rows {
        let mut cells: Vec<PivotCell> = line.head.iter().cloned().map(text).collect();
        for cell in &line.cells {
            let Some(i) = *cell else {
                cells.push(PivotCell {
                    paper: "—".into(),
                    ..text(String::new())
                });
                continue;
            };
            let row = frame.rows.get(i).ok_or_else(|| {
                format!(
                    "its layout shows row {} of a frame of {} rows",
                    i + 1,
                    frame.rows.len()
                )
            })?;
            let printed = raw(row, paper);
            let j = by_row.get(&i);
            cells.push(PivotCell {
                paper: if printed.is_empty() {
                    "—".to_string()
                } else {
                    printed
                },
                ours: ours.get(i).cloned().unwrap_or_else(|| "—".into()),
                verdict: j.map_or_else(|| raw(row, verdict), |j| j.verdict.word().to_string()),
                note: j.map_or_else(|| raw(row, cause), |j| j.note.clone()),
                class: j.map_or("v-none", |j| class(j.verdict)),
            });
        }
        rows.push(cells);
    }
    Ok(Pivot {
        printed_by: g.printed_by.clone(),
        ours: g.ours.clone(),
        headers: g.headers.clone(),
        rows,
    })
}

struct View {
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
    causes: Vec<String>,
}

fn numbers(frame: &Csv, i: usize) -> Vec<Option<f64>> {
    frame
        .rows
        .iter()
        .map(|r| r.get(i).and_then(|s| s.trim().parse::<f64>().ok()))
        .collect()
}

/// Whether every non-empty cell of column `i` is a number.
fn numeric(frame: &Csv, i: usize) -> bool {
    let mut any = false;
    for r in &frame.rows {
        let s = r.get(i).map_or("", |s| s.trim());
        if s.is_empty() {
            continue;
        }
        if s.parse::<f64>().is_err() {
            return false;
        }
        any = true;
    }
    any
}

/// Cells of column `i` as written in the frame (keys, the paper's printed numbers): never
/// re-rounded or padded.
fn as_written(frame: &Csv, i: usize) -> Vec<String> {
    frame
        .rows
        .iter()
        .map(|r| {
            let s = r.get(i).map_or("", |s| s.trim());
            if s.is_empty() || s.eq_ignore_ascii_case("nan") {
                "—".to_string()
            } else {
                s.to_string()
            }
        })
        .collect()
}

/// Key cells as written ([`as_written`]), except numbers written with more digits than a
/// reader takes in (a log-spaced axis: 0.0177827941003892), which get the fewest significant
/// digits, from 4, that keep the column's distinct keys apart (0.01778).
fn keys_shown(frame: &Csv, i: usize) -> Vec<String> {
    let written = as_written(frame, i);
    let long = |s: &str| {
        s.parse::<f64>().is_ok_and(f64::is_finite)
            && s.chars().filter(char::is_ascii_digit).count() > 8
    };
    if !written.iter().any(|s| long(s)) {
        return written;
    }
    let distinct = |cells: &[String]| cells.iter().collect::<std::collections::HashSet<_>>().len();
    let keys = distinct(&written);
    (4..=17)
        .map(|digits| {
            written
                .iter()
                .map(|s| match s.parse::<f64>() {
                    Ok(v) if long(s) => significant(v, digits),
                    _ => s.clone(),
                })
                .collect::<Vec<String>>()
        })
        .find(|shown| distinct(shown) == keys)
        .unwrap_or_else(|| written.clone())
}

/// The class of the cell at (row, column) of the frame: its verdict's when it is a compared
/// cell, else `other`.
fn cell_class(
    at: &HashMap<(usize, usize), &Judged>,
    row: usize,
    col: usize,
    other: &'static str,
) -> &'static str {
    at.get(&(row, col)).map_or(other, |j| class(j.verdict))
}

/// The layout's columns, cell by cell ([`Show::Columns`]).
fn view_with_layout(
    frame: &Csv,
    l: &Layout,
    at: &HashMap<(usize, usize), &Judged>,
) -> Result<View, String> {
    let mut cols: Vec<Vec<Cell>> = Vec::new();
    let mut headers = Vec::new();
    // Each stated cause once, under the table; a verdict cell refers to it as `[k]`.
    let mut causes: Vec<String> = Vec::new();
    for c in &l.columns {
        let i = frame
            .col(&c.name)
            .ok_or_else(|| format!("its layout names a column `{}` the frame lacks", c.name))?;
        if c.role == Role::Explanation {
            continue;
        }
        headers.push(c.header.clone());
        let plain = |texts: Vec<String>, class: &'static str| -> Vec<Cell> {
            texts
                .into_iter()
                .map(|text| Cell {
                    text,
                    class,
                    num: class == "num",
                })
                .collect()
        };
        let col: Vec<Cell> = match c.role {
            Role::Key => plain(
                keys_shown(frame, i),
                if numeric(frame, i) { "num" } else { "text" },
            ),
            Role::Paper => plain(
                as_written(frame, i),
                if numeric(frame, i) { "num" } else { "text" },
            ),
            Role::Verdict => frame
                .rows
                .iter()
                .enumerate()
                .map(|(r, row)| {
                    let s = row.get(i).map_or("", |s| s.trim());
                    let mut text = if s.is_empty() {
                        "—".into()
                    } else {
                        s.to_string()
                    };
                    if let Some(j) = at.get(&(r, i)).filter(|j| j.verdict == Verdict::Explained) {
                        let k = match causes.iter().position(|c| *c == j.note) {
                            Some(k) => k,
                            None => {
                                causes.push(j.note.clone());
                                causes.len() - 1
                            }
                        };
                        text = format!("{text} [{}]", k + 1);
                    }
                    Cell {
                        text,
                        class: cell_class(at, r, i, "v-none"),
                        num: false,
                    }
                })
                .collect(),
            _ if numeric(frame, i) => {
                let v = numbers(frame, i);
                let text = match c.role {
                    Role::Ours => {
                        let printed = frame
                            .col(&format!("paper_{}", c.name))
                            .map(|p| as_written(frame, p))
                            .unwrap_or_default();
                        let texts: Vec<&str> = printed.iter().map(String::as_str).collect();
                        format_ours(&v, &texts, l.digits)
                    }
                    Role::Diff => {
                        let mut t = format_column(&v, 2);
                        for (s, x) in t.iter_mut().zip(&v) {
                            if x.is_some_and(|x| x > 0.0) {
                                s.insert(0, '+');
                            }
                        }
                        t
                    }
                    _ => format_column(&v, l.digits),
                };
                plain(text, "num")
            }
            _ => plain(as_written(frame, i), "text"),
        };
        cols.push(col);
    }
    // Colour each compared column's difference by its verdict.
    let shown = l.columns.iter().filter(|c| c.role != Role::Explanation);
    for (k, c) in shown.enumerate() {
        let Some(ours) = c
            .name
            .strip_prefix("diff_")
            .filter(|_| c.role == Role::Diff)
        else {
            continue;
        };
        let Some(vi) = frame.col(&format!("verdict_{ours}")) else {
            continue;
        };
        for (r, cell) in cols[k].iter_mut().enumerate() {
            cell.class = cell_class(at, r, vi, cell.class);
        }
    }
    Ok(View {
        headers,
        rows: transpose(cols, frame.rows.len()),
        causes,
    })
}

fn transpose(cols: Vec<Vec<Cell>>, n: usize) -> Vec<Vec<Cell>> {
    (0..n)
        .map(|r| cols.iter().map(|c| c[r].clone()).collect())
        .collect()
}

/// Every column of a frame (its layout's [`Show::Every`], or no layout): `x` with `x_lo`/`x_hi` (or `mean` with
/// `ci_lo`/`ci_hi`) shown as one cell `x [lo, hi]`; a `paper` column as written; verdict
/// columns coloured.
fn view_every(frame: &Csv, at: &HashMap<(usize, usize), &Judged>) -> View {
    let mut used = vec![false; frame.names.len()];
    let mut headers = Vec::new();
    let mut cols: Vec<Vec<Cell>> = Vec::new();
    for (i, name) in frame.names.iter().enumerate() {
        if used[i] {
            continue;
        }
        used[i] = true;
        let pair = [("_lo", "_hi"), ("_ci_lo", "_ci_hi")]
            .iter()
            .find_map(|(a, b)| {
                Some((
                    frame.col(&format!("{name}{a}"))?,
                    frame.col(&format!("{name}{b}"))?,
                ))
            })
            .or_else(|| {
                (name == "mean").then(|| Some((frame.col("ci_lo")?, frame.col("ci_hi")?)))?
            });
        let verdict = name == "verdict" || name.starts_with("verdict_");
        let header = column_header(name);
        if name == "paper" || name.starts_with("paper_") {
            headers.push(header);
            cols.push(
                as_written(frame, i)
                    .into_iter()
                    .map(|text| Cell {
                        text,
                        class: "num",
                        num: true,
                    })
                    .collect(),
            );
        } else if numeric(frame, i) {
            let v = numbers(frame, i);
            let mut text = format_column(&v, 4);
            if let Some((lo, hi)) =
                pair.filter(|(lo, hi)| numeric(frame, *lo) && numeric(frame, *hi))
            {
                used[lo] = true;
                used[hi] = true;
                let l = format_column(&numbers(frame, lo), 3);
                let h = format_column(&numbers(frame, hi), 3);
                for (r, t) in text.iter_mut().enumerate() {
                    if l[r] != "—" {
                        *t = format!("{t} [{}, {}]", l[r], h[r]);
                    }
                }
                headers.push(format!("{header} [95% CI]"));
            } else {
                headers.push(header);
            }
            cols.push(
                text.into_iter()
                    .map(|text| Cell {
                        text,
                        class: "num",
                        num: true,
                    })
                    .collect(),
            );
        } else {
            headers.push(header);
            cols.push(
                as_written(frame, i)
                    .into_iter()
                    .enumerate()
                    .map(|(r, text)| Cell {
                        class: if verdict {
                            cell_class(at, r, i, "v-none")
                        } else {
                            "text"
                        },
                        text,
                        num: false,
                    })
                    .collect(),
            );
        }
    }
    View {
        headers,
        rows: transpose(cols, frame.rows.len()),
        causes: vec![],
    }
}

/// Records the differences among a table's compared cells, each named by its row's keys,
/// with our value (digits enough to see the difference) beside the paper's as printed.
fn record_differences(
    exp: &str,
    title: &str,
    frame: &Csv,
    layout: Option<&Layout>,
    judged: &[Judged],
    found: &mut Vec<Disagreement>,
) {
    let header = |name: &str| -> String {
        layout
            .and_then(|l| l.columns.iter().find(|c| c.name == name))
            .map_or_else(|| name.to_string(), |c| c.header.clone())
    };
    let keys: Vec<usize> = layout
        .iter()
        .flat_map(|l| &l.columns)
        .filter(|c| c.role == Role::Key)
        .filter_map(|c| frame.col(&c.name))
        .collect();
    let mut first = true;
    for j in judged.iter().filter(|j| !j.verdict.agrees()) {
        let row = &frame.rows[j.row];
        let cell_of = |name: &str| {
            frame
                .col(name)
                .and_then(|i| row.get(i))
                .map_or_else(String::new, |s| s.trim().to_string())
        };
        // A table laid out as the paper prints it names its cells as its heads do (`max abs
        // error`, `σ = 4`), so that the list's name is the one a reader finds in the grid.
        let grid = layout.is_some_and(|l| matches!(l.show, Show::Grid(_)));
        let key = |v: &str| match v.trim().parse::<f64>() {
            Ok(x) if grid && x.is_finite() => x.to_string(),
            _ if grid => v.trim().replace('_', " "),
            _ => v.trim().to_string(),
        };
        let mut label: Vec<String> = keys
            .iter()
            .map(|&k| format!("{} = {}", header(&frame.names[k]), key(&row[k])))
            .collect();
        let (ours, paper) = match &j.ours {
            Some(o) => {
                label.push(header(o).trim_end_matches(" (ours)").to_string());
                let paper = cell_of(&format!("paper_{o}"));
                let v = cell_of(o).parse::<f64>().ok();
                (format_ours(&[v], &[paper.as_str()], 4).remove(0), paper)
            }
            None => (ours_of(layout, j.row), cell_of("paper")),
        };
        found.push(Disagreement {
            experiment: exp.to_string(),
            anchor: anchor(exp),
            table: title.to_string(),
            cell: label.join(", "),
            ours,
            paper,
            verdict: j.verdict,
            class: class(j.verdict),
            note: j.note.clone(),
            first_of_table: std::mem::take(&mut first),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log-spaced axis is shown to the digits that keep its keys apart; short keys, text and
    /// a paper's printed numbers stay as written.
    #[test]
    fn long_keys_are_shortened_only_as_far_as_they_stay_apart() {
        let csv = |col: &[&str]| Csv {
            names: vec!["k".into()],
            rows: col.iter().map(|s| vec![s.to_string()]).collect(),
        };
        assert_eq!(
            keys_shown(&csv(&["0.01", "0.0177827941003892", "0.1", "10"]), 0),
            ["0.01", "0.01778", "0.1", "10"]
        );
        // Two keys equal to four digits get the fifth.
        assert_eq!(
            keys_shown(&csv(&["1.000012345678", "1.000045678912"]), 0),
            ["1.00001", "1.00005"]
        );
        assert_eq!(
            keys_shown(&csv(&["0.5", "", "CSV"]), 0),
            ["0.5", "—", "CSV"]
        );
    }
}
