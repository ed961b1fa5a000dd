//! `report.table`: a result table as a frame and as Markdown, with the paper's numbers
//! beside ours (and the difference) where the paper prints them.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use indexmap::IndexMap;
use polars::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::expr::KeyCell;
use crate::stages::columns::{column, f64_col_or_nan, str_col};
use crate::stages::param::Between;
use crate::stages::{
    build, distinct, params, Artifact, Ctx, FileSource, Gather, KindInfo, Output, ParamError, Stage,
};

use super::layout::{Layout, LayoutColumn, Role, Show};
use super::{format_column, format_ours, printed_value, Printed};
use crate::verdict::Verdict;

// Version 4: without `paper:`, the axes are the rows' keys (shown as written); rows that differ
// only in an axis `columns:` leaves out are refused. Version 6: causes are checked (`explain`'s
// `tolerance` and `value`), and a difference without a cause says where the paper's number lies.
pub const KIND: KindInfo = KindInfo {
    name: "report.table",
    version: 6,
    random: false,
    runs_programs: false,
    summary: "A table (frame + Markdown + a layout for the HTML report): chosen columns of its input, optionally joined with the paper's printed numbers (columns paper_<c>: the number as printed, diff_<c> = ours − paper, verdict_<c>: agrees within the paper's printed precision, within CI when the printed value meets our interval, else explained when `explain` states a cause (why_<c>) or unexplained).",
    params: params::<Table>,
    gather: Gather::All,
    build: build::<Table>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Table {
    /// heading of the Markdown table
    title: String,
    /// columns to show, in order (default: all)
    columns: Option<Vec<String>>,
    /// human column headers: column → text (e.g. lambda: λ, distortion: D); a compared column
    /// c shows as `H (ours)`, `H (paper)`, `Δ H`, `verdict`
    #[serde(default)]
    headers: IndexMap<String, String>,
    /// significant digits in the Markdown
    #[serde(default = "digits")]
    digits: Between<1, 17>,
    /// CSV of the paper's numbers, relative to the pipeline file; a value stands for ± half a
    /// unit of its last printed digit
    #[schemars(title = "path")]
    paper: Option<PathBuf>,
    /// key columns shared by our table and the paper's
    #[serde(default)]
    join: Vec<String>,
    /// which of our columns the paper's columns correspond to: ours → paper column
    #[serde(default)]
    compare: IndexMap<String, String>,
    /// columns holding our 95% interval of a stochastic value, ours → [lo, hi]: the paper's
    /// value meeting it is `within CI`
    #[serde(default)]
    ci: IndexMap<String, [String; 2]>,
    /// one-line explanations of known differences: `where` maps key columns to values,
    /// `column` (optional) names the compared column; `tolerance` and `value` say how far the
    /// cause reaches, and are checked: the first that matches a cell that differs and covers
    /// it goes into its column why_<c> (explained); one that matches but does not cover it is
    /// named there as not covering it (unexplained)
    #[serde(default)]
    explain: Vec<Explain>,
    /// text printed under the table (how to read it, deviations)
    notes: Option<String>,
    /// where the report page shows the table: `experiment`, its experiment's section; or `audits`, the head of the Audits section, beside every audit row of the run, its experiment's section linking to it (a benchmark of the audits against a published auditor's bounds)
    #[serde(default)]
    section: Section,
}

/// Where the report page shows a table.
#[derive(Deserialize, Serialize, JsonSchema, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
enum Section {
    #[default]
    Experiment,
    Audits,
}

/// A known difference and its one-line reason (`Serialize` only so that the schema shows
/// the default `[]`).
///
/// A cause is a claim about the difference, and the table checks what it can of it, so that
/// "explained" never stands for a difference the stated cause does not reach (a read-off
/// curve "to about ±0.005" explained a cell 0.0147 off): with `tolerance`, it covers a cell
/// only when ours and the paper's number are that close (beyond the printed half unit); with
/// `value`, only when the paper's number is what the cause says it is — the column holding
/// the cause's own number (the paper's formula on its own printed inputs, say) agrees with
/// the printed one within its printed precision (and `tolerance`, when given); with
/// `interval`, only when the paper's number meets the cause's own interval (our curve at
/// the paper's rounded input, say). A cause written for many rows (no `where`) must say one
/// of them: a sentence alone would explain every difference of its column, however large.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Explain {
    /// key column → value (a number or a string): the rows it explains
    #[serde(rename = "where", default)]
    #[schemars(with = "IndexMap<String, serde_json::Value>")]
    at: IndexMap<String, serde_yaml_ng::Value>,
    /// the compared column it explains (default: any)
    column: Option<String>,
    /// the explanation, one line
    text: String,
    /// how far the cause reaches, ≥ 0: it covers a cell only when |ours − paper| is at most
    /// this plus half a unit of the paper's last printed digit
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tolerance: Option<f64>,
    /// a column of the input holding the cause's own number for the cell (what the cause
    /// says the paper computed): it covers a cell only when that number agrees with the
    /// paper's printed one (within half a printed unit, plus `tolerance`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    /// two columns of the input, [lo, hi], holding the cause's own interval for the cell:
    /// it covers a cell only when the paper's printed number (± half a printed unit, plus
    /// `tolerance`) meets it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interval: Option<[String; 2]>,
}

/// How an explanation stands to a cell that differs.
enum Cause {
    /// It matches the cell and covers the difference: the cell is explained.
    Covers(String),
    /// It matches the cell but does not reach the difference: said, and the cell stays
    /// unexplained.
    Short(String),
}

fn digits() -> Between<1, 17> {
    Between::of(4)
}

impl Stage for Table {
    /// The input columns it names: `columns`, the `join` keys, `compare`'s keys (our compared
    /// columns; the paper's columns are checked when it runs, in the paper's CSV) and the `ci`
    /// bounds.
    fn columns_read(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (i, c) in self.columns.iter().flatten().enumerate() {
            out.push((format!("columns.{i}"), c.clone()));
        }
        for (i, c) in self.join.iter().enumerate() {
            out.push((format!("join.{i}"), c.clone()));
        }
        for ours in self.compare.keys() {
            out.push((format!("compare.{ours}"), ours.clone()));
        }
        for (ours, bounds) in &self.ci {
            for (i, c) in bounds.iter().enumerate() {
                out.push((format!("ci.{ours}.{i}"), c.clone()));
            }
        }
        for (i, e) in self.explain.iter().enumerate() {
            if let Some(v) = &e.value {
                out.push((format!("explain.{i}.value"), v.clone()));
            }
            for (j, c) in e.interval.iter().flatten().enumerate() {
                out.push((format!("explain.{i}.interval.{j}"), c.clone()));
            }
        }
        out
    }

    /// `columns` (else the first input's columns: the inputs are stacked), then per compared
    /// column c: paper_c, diff_c, verdict_c. With `paper` they are not known here: a column
    /// why_c is added only when some row differs (its cause, or where the paper's number lies),
    /// which the data decide.
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        if self.paper.is_some() {
            return None;
        }
        match &self.columns {
            Some(cols) => Some(cols.clone()),
            None => inputs.first()?.clone(),
        }
    }

    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.columns {
            distinct("columns", c)?;
        }
        distinct("join", &self.join)?;
        if self.paper.is_some() && (self.join.is_empty() || self.compare.is_empty()) {
            return Err(ParamError::at(
                "paper",
                "with `paper`, give `join` (key columns) and `compare` (ours → paper columns)",
            ));
        }
        if self.paper.is_none() && (!self.ci.is_empty() || !self.explain.is_empty()) {
            return Err(ParamError::at(
                if self.ci.is_empty() { "explain" } else { "ci" },
                "`ci` and `explain` judge comparisons with the paper: give `paper` too",
            ));
        }
        for ours in self.ci.keys() {
            if !self.compare.contains_key(ours) {
                return Err(ParamError::at(
                    &format!("ci.{ours}"),
                    format!("`{ours}` is not compared with the paper (not a key of `compare`)"),
                ));
            }
        }
        for (i, e) in self.explain.iter().enumerate() {
            if e.text.trim().is_empty() || e.text.contains('\n') {
                return Err(ParamError::at(
                    &format!("explain.{i}.text"),
                    "an explanation is one non-empty line",
                ));
            }
            if let Some(t) = e.tolerance {
                if !(t.is_finite() && t >= 0.0) {
                    return Err(ParamError::at(
                        &format!("explain.{i}.tolerance"),
                        format!("{t}: a tolerance is a finite number ≥ 0"),
                    ));
                }
            }
            if e.value.is_some() && e.interval.is_some() {
                return Err(ParamError::at(
                    &format!("explain.{i}.interval"),
                    "a cause gives its own number (`value`) or its own interval (`interval`), not both",
                ));
            }
            if e.at.is_empty() && e.tolerance.is_none() && e.value.is_none() && e.interval.is_none()
            {
                return Err(ParamError::at(
                    &format!("explain.{i}"),
                    "a cause for every row (no `where`) says how far it reaches, and is checked: give `tolerance` (how close ours and the paper's number are where it holds) `value` (a column with the cause's own number for the paper's) or `interval` (two columns with its own interval), or name its rows with `where`",
                ));
            }
            if let Some(c) = &e.column {
                if !self.compare.contains_key(c) {
                    return Err(ParamError::at(
                        &format!("explain.{i}.column"),
                        format!("`{c}` is not compared with the paper (not a key of `compare`)"),
                    ));
                }
            }
            for (k, v) in &e.at {
                if !self.join.contains(k) {
                    return Err(ParamError::at(
                        &format!("explain.{i}.where.{k}"),
                        format!(
                            "`{k}` is not a key column (give one of `join`: {:?})",
                            self.join
                        ),
                    ));
                }
                if key_text(v).is_none() {
                    return Err(ParamError::at(
                        &format!("explain.{i}.where.{k}"),
                        "a key value is a number or a string",
                    ));
                }
            }
        }
        Ok(())
    }

    fn files(&self) -> Vec<(&'static str, &std::path::Path)> {
        self.paper.iter().map(|p| ("paper", p.as_path())).collect()
    }

    /// The paper's table has the `join` keys and the columns `compare` names, and some row of
    /// it a number in each compared column: found by `validate`, not after the run.
    fn check_files(&self, files: &dyn FileSource) -> Result<(), ParamError> {
        let Some(paper) = &self.paper else {
            return Ok(());
        };
        let Some(bytes) = files.file(paper) else {
            return Ok(());
        };
        let printed = Printed::read(bytes).map_err(|e| {
            ParamError::at(
                "paper",
                format!(
                    "{}: not a CSV table with a header row: {e}",
                    paper.display()
                ),
            )
        })?;
        let lacks = |key: String, col: &str| {
            let near = crate::text::suggest(col, printed.names.iter().map(String::as_str))
                .map_or_else(String::new, |n| format!("; did you mean `{n}`?"));
            ParamError::at(
                &key,
                format!(
                    "the paper's table {} has no column `{col}` ({}){near}",
                    paper.display(),
                    printed.has()
                ),
            )
        };
        for (i, k) in self.join.iter().enumerate() {
            if printed.column(k).is_err() {
                return Err(lacks(format!("join.{i}"), k));
            }
        }
        for (ours, theirs) in &self.compare {
            let Ok(texts) = printed.column(theirs) else {
                return Err(lacks(format!("compare.{ours}"), theirs));
            };
            if !texts.iter().any(|t| printed_value(t).is_some()) {
                return Err(ParamError::at(
                    &format!("compare.{ours}"),
                    format!(
                        "the paper's column `{theirs}` in {} holds no number",
                        paper.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let frames: Vec<&DataFrame> = ctx.inputs.iter().collect();
        let mut df = crate::frames::concat(&frames)?;
        // The causes' own numbers (`explain.value`), which `columns` need not show.
        let mut cause_values = std::collections::HashMap::new();
        for e in &self.explain {
            for c in e.value.iter().chain(e.interval.iter().flatten()) {
                cause_values.insert(c.clone(), f64_col_or_nan(&df, c)?);
            }
        }
        if let Some(cols) = &self.columns {
            for c in cols {
                column(&df, c)?;
            }
            refuse_hidden_axes(&df, cols, ctx.axis_names)?;
            df = df.select(cols.iter().map(|s| s.as_str()))?;
        }
        let mut layout = Layout {
            title: self.title.clone(),
            notes: self.notes.clone(),
            digits: self.digits.get() as usize,
            columns: Vec::new(),
            show: Show::Columns,
            markdown: false,
            ours: Vec::new(),
            in_audits: self.section == Section::Audits,
        };
        let header = |c: &str| {
            self.headers
                .get(c)
                .cloned()
                .unwrap_or_else(|| super::layout::column_header(c))
        };
        for name in df.get_column_names() {
            let name = name.to_string();
            // Without the paper's table, the axes name the rows: shown as written (`0.1`, not
            // `0.1000`), as join keys are.
            let axis_key = self.paper.is_none() && ctx.axis_names.contains(&name);
            let role = if self.join.contains(&name) || axis_key {
                Role::Key
            } else {
                Role::Value
            };
            layout.columns.push(LayoutColumn {
                header: header(&name),
                role,
                name,
            });
        }
        if let Some(paper) = &self.paper {
            let printed = Printed::read(ctx.file(paper)?).map_err(|e| {
                anyhow::anyhow!("reading the paper's table {}: {e}", paper.display())
            })?;
            let ours_keys: Vec<Vec<KeyCell>> = self
                .join
                .iter()
                .map(|k| KeyCell::column(column(&df, k)?).map_err(anyhow::Error::msg))
                .collect::<Result<_>>()?;
            let paper_keys: Vec<&[String]> = self
                .join
                .iter()
                .map(|k| printed.column(k))
                .collect::<Result<_>>()?;
            let hits: Vec<Option<usize>> = (0..df.height())
                .map(|row| {
                    (0..printed.rows).find(|&pr| {
                        ours_keys
                            .iter()
                            .zip(&paper_keys)
                            .all(|(a, b)| KeyCell::read_as(&b[pr], &a[row]) == a[row])
                    })
                })
                .collect();
            for (ours, theirs) in &self.compare {
                // Our cell may be empty (e.g. a dataset not on this machine): no difference then.
                let mine = f64_col_or_nan(&df, ours)?;
                let interval = match self.ci.get(ours) {
                    Some([lo, hi]) => Some((f64_col_or_nan(&df, lo)?, f64_col_or_nan(&df, hi)?)),
                    None => None,
                };
                // The paper may print a number on some rows only.
                let texts = printed.column(theirs)?;
                // The paper's number as printed (text: `0.050` keeps its last digit).
                let mut pv: Vec<Option<String>> = Vec::with_capacity(df.height());
                let mut diff = Vec::with_capacity(df.height());
                let mut verdict: Vec<Option<&str>> = Vec::with_capacity(df.height());
                let mut why: Vec<Option<String>> = vec![None; df.height()];
                for (row, hit) in hits.iter().enumerate() {
                    let text = hit.map(|pr| texts[pr].as_str());
                    let cell = text.and_then(printed_value);
                    let m = mine[row];
                    let judged = cell.filter(|_| m.is_finite());
                    pv.push(cell.and(text).map(str::to_string));
                    diff.push(judged.map(|(v, _)| m - v));
                    let v = match judged {
                        None => None,
                        Some((v, half)) => {
                            let ci = interval.as_ref().map(|(lo, hi)| (lo[row], hi[row]));
                            Some(match judge(m, v, half, ci) {
                                Some(agrees) => agrees,
                                None => match self.explanation(
                                    &df,
                                    &cause_values,
                                    row,
                                    ours,
                                    m,
                                    v,
                                    half,
                                )? {
                                    Some(Cause::Covers(text)) => {
                                        why[row] = Some(text);
                                        Verdict::Explained
                                    }
                                    Some(Cause::Short(text)) => {
                                        why[row] = Some(text);
                                        Verdict::Unexplained
                                    }
                                    None => {
                                        why[row] = Some(located(m, v));
                                        Verdict::Unexplained
                                    }
                                },
                            })
                        }
                    };
                    verdict.push(v.map(Verdict::word));
                }
                df.with_column(Column::new(format!("paper_{ours}").into(), pv))?;
                df.with_column(Column::new(format!("diff_{ours}").into(), diff))?;
                df.with_column(Column::new(format!("verdict_{ours}").into(), verdict))?;
                // A cause that covers a cell, or one said not to.
                let explained = why.iter().any(Option::is_some);
                if explained {
                    df.with_column(Column::new(format!("why_{ours}").into(), why))?;
                }
                let h = header(ours);
                let at = layout
                    .columns
                    .iter()
                    .position(|c| &c.name == ours)
                    .ok_or_else(|| anyhow::anyhow!("`{ours}` is not among the table's columns"))?;
                layout.columns[at].header = format!("{h} (ours)");
                layout.columns[at].role = Role::Ours;
                layout.columns.splice(
                    at + 1..at + 1,
                    [
                        LayoutColumn {
                            name: format!("paper_{ours}"),
                            header: format!("{h} (paper)"),
                            role: Role::Paper,
                        },
                        LayoutColumn {
                            name: format!("diff_{ours}"),
                            header: format!("Δ {h}"),
                            role: Role::Diff,
                        },
                        LayoutColumn {
                            name: format!("verdict_{ours}"),
                            header: "verdict".into(),
                            role: Role::Verdict,
                        },
                    ],
                );
                if explained {
                    layout.columns.insert(
                        at + 4,
                        LayoutColumn {
                            name: format!("why_{ours}"),
                            header: format!("why {h} differs"),
                            role: Role::Explanation,
                        },
                    );
                }
            }
        }
        let md = markdown(&df, &layout, ctx.stage)?;
        Ok(Output {
            frame: df,
            artifacts: vec![
                Artifact {
                    ext: "md".into(),
                    bytes: md.into_bytes(),
                },
                layout.artifact()?,
            ],
        })
    }
}

impl Table {
    /// The first explanation whose `where` matches the row, whose column (if named) is `ours`
    /// and which covers the difference between ours (`m`) and the paper's `paper` ± `half`
    /// (see [`Explain`]); else the first that matches without covering it, said as such.
    #[allow(clippy::too_many_arguments)]
    fn explanation(
        &self,
        df: &DataFrame,
        cause_values: &std::collections::HashMap<String, Vec<f64>>,
        row: usize,
        ours: &str,
        m: f64,
        paper: f64,
        half: f64,
    ) -> Result<Option<Cause>> {
        let mut short = None;
        for e in &self.explain {
            if e.column.as_deref().is_some_and(|c| c != ours) {
                continue;
            }
            let mut all = true;
            for (k, v) in &e.at {
                let cell = &KeyCell::column(column(df, k)?).map_err(anyhow::Error::msg)?[row];
                all &= key_text(v).is_some_and(|t| KeyCell::read_as(&t, cell) == *cell);
            }
            if !all {
                continue;
            }
            let text = e.text.trim();
            let reach = half + e.tolerance.unwrap_or(0.0);
            let cell = |c: &String| cause_values.get(c).map_or(f64::NAN, |v| v[row]);
            let gap = match (&e.value, &e.interval) {
                (Some(c), _) => {
                    let theirs = cell(c);
                    (!crate::verdict::rounds_to(theirs, paper, reach)).then(|| {
                        format!(
                            "its own number, {c} = {}, is not the paper's",
                            significant(theirs)
                        )
                    })
                }
                (None, Some([lo, hi])) => {
                    let (a, b) = (cell(lo), cell(hi));
                    (!crate::verdict::meets(paper, reach, a, b)).then(|| {
                        format!(
                            "its own interval, [{}, {}], misses the paper's number",
                            significant(a),
                            significant(b)
                        )
                    })
                }
                (None, None) if e.tolerance.is_some() => {
                    (!crate::verdict::rounds_to(m, paper, reach))
                        .then(|| format!("ours differs by {}", significant((m - paper).abs())))
                }
                (None, None) => None,
            };
            match gap {
                None => return Ok(Some(Cause::Covers(text.to_string()))),
                Some(gap) if short.is_none() => {
                    let within = e
                        .tolerance
                        .map_or_else(String::new, |t| format!(", beyond its ±{}", significant(t)));
                    short = Some(Cause::Short(format!(
                        "not covered by: {text}: {gap}{within}"
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(short)
    }
}

/// Where the paper's number `paper` lies from ours `m` when no cause covers the difference:
/// the side, by how much and by what factor, so that a difference without a cause still
/// says how large it is (the list of differences showed "—").
fn located(m: f64, paper: f64) -> String {
    let side = if paper > m { "above" } else { "below" };
    let ratio = paper / m;
    let factor = if ratio.is_finite() && ratio > 0.0 {
        format!(", {}× ours", crate::text::significant(ratio, 5))
    } else {
        String::new()
    };
    format!(
        "no cause found: the paper's number is {} {side} ours{factor}",
        significant((paper - m).abs())
    )
}

/// A number in a cause's message, to 4 significant digits.
fn significant(v: f64) -> String {
    crate::text::significant(v, 4)
}

/// A key value written in YAML, as text.
/// Rows that agree on every axis the table shows but differ in one it leaves out (an axis a
/// `--sweep` added, say) would look like one row repeated, under a title that speaks for one
/// value of it: refused, naming the axis, its values and the ways out (as `plot.lines`
/// refuses a line that would zigzag).
///
/// What names a row: the axes it shows and its other columns that are not floats (text,
/// integers: a `samples` column that stands for a hidden `size` axis tells rows apart).
fn refuse_hidden_axes(df: &DataFrame, shown: &[String], axes: &[String]) -> Result<()> {
    let keys: Vec<&String> = shown
        .iter()
        .filter(|c| axes.contains(c) || df.column(c).is_ok_and(|col| !col.dtype().is_float()))
        .collect();
    let hidden: Vec<&String> = axes
        .iter()
        .filter(|a| !shown.contains(a) && df.column(a).is_ok())
        .collect();
    if hidden.is_empty() {
        return Ok(());
    }
    let key_cols: Vec<Vec<String>> = keys.iter().map(|k| str_col(df, k)).collect::<Result<_>>()?;
    for axis in hidden {
        let values = str_col(df, axis)?;
        let mut first: std::collections::HashMap<Vec<&str>, usize> = Default::default();
        for row in 0..df.height() {
            let key: Vec<&str> = key_cols.iter().map(|c| c[row].as_str()).collect();
            let at = *first.entry(key.clone()).or_insert(row);
            if values[at] != values[row] {
                let all: Vec<String> = {
                    let mut v: Vec<String> = values.clone();
                    v.sort();
                    v.dedup();
                    v.into_iter().take(6).collect()
                };
                let same = if keys.is_empty() {
                    String::new()
                } else {
                    format!(
                        " with the same {}",
                        keys.iter()
                            .zip(&key)
                            .map(|(k, v)| format!("{k} = {v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                return Err(ParamError::at(
                    "columns",
                    format!(
                        "rows{same} differ in axis `{axis}` ({}), which `columns:` leaves out: they would show as one row repeated. Add `{axis}` to `columns:`, or keep one value of it with `only: {{{axis}: [{}]}}` on this stage",
                        all.join(", "),
                        values[at]
                    ),
                )
                .into());
            }
        }
    }
    Ok(())
}

fn key_text(v: &serde_yaml_ng::Value) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether our value `ours` agrees with the paper's printed `paper`, which stands for
/// [paper − half, paper + half]: `agrees` when ours rounds to what was printed; `within CI`
/// when that printed interval meets our 95% interval `ci`; `None` when it differs (then a
/// stated cause makes it `explained`, else it is `unexplained`).
pub(crate) fn judge(ours: f64, paper: f64, half: f64, ci: Option<(f64, f64)>) -> Option<Verdict> {
    if crate::verdict::rounds_to(ours, paper, half) {
        return Some(Verdict::Agrees);
    }
    match ci {
        Some((lo, hi)) if crate::verdict::meets(paper, half, lo, hi) => Some(Verdict::WithinCi),
        _ => None,
    }
}

fn markdown(df: &DataFrame, layout: &Layout, stage: &str) -> Result<String> {
    let mut s = format!("## {}\n\n", layout.title);
    let cells: Vec<Vec<String>> = layout
        .columns
        .iter()
        .map(|c| -> Result<Vec<String>> {
            let col = column(df, &c.name)?;
            // A key names its row: written as the frame holds it (`0.1`, not `0.1000`), as the
            // HTML report shows it.
            let numeric = col.dtype().is_float() || col.dtype().is_integer();
            if numeric && c.role != Role::Key {
                let v = col.cast(&DataType::Float64)?;
                let v: Vec<Option<f64>> = v.f64()?.iter().collect();
                let mut out = if c.role == Role::Ours {
                    let printed = str_col(df, &format!("paper_{}", c.name))?;
                    let texts: Vec<&str> = printed.iter().map(String::as_str).collect();
                    format_ours(&v, &texts, layout.digits)
                } else {
                    format_column(&v, layout.digits)
                };
                if c.role == Role::Diff {
                    for (t, x) in out.iter_mut().zip(&v) {
                        if x.is_some_and(|x| x > 0.0) {
                            t.insert(0, '+');
                        }
                    }
                }
                Ok(out)
            } else {
                let v = col.cast(&DataType::String)?;
                Ok(v.str()?
                    .iter()
                    .map(|x| x.unwrap_or("—").replace('|', "\\|"))
                    .collect())
            }
        })
        .collect::<Result<_>>()?;
    let headers: Vec<String> = layout
        .columns
        .iter()
        .map(|c| c.header.replace('|', "\\|"))
        .collect();
    writeln!(s, "| {} |", headers.join(" | "))?;
    writeln!(
        s,
        "|{}|",
        headers.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    )?;
    for r in 0..df.height() {
        writeln!(
            s,
            "| {} |",
            cells
                .iter()
                .map(|c| c[r].as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        )?;
    }
    if let Some(n) = &layout.notes {
        write!(s, "\n{}\n", n.trim())?;
    }
    writeln!(s, "\n_Stage `{stage}`; full precision in `{stage}.csv`._")?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_printed_precision_and_our_interval() {
        let (agrees, within) = (Some(Verdict::Agrees), Some(Verdict::WithinCi));
        // 0.5086 rounds to the printed 0.509 (3 decimals): agrees.
        assert_eq!(judge(0.50859, 0.509, 0.0005, None), agrees);
        // 0.7947 is not 0.78 ± 0.005.
        assert_eq!(judge(0.7947, 0.78, 0.005, None), None);
        // Printed 0.05 ± 0.0005 meets our interval [0.0502, 0.06]: within CI.
        assert_eq!(judge(0.055, 0.05, 0.0005, Some((0.0502, 0.06))), within);
        assert_eq!(judge(0.055, 0.04, 0.0005, Some((0.0502, 0.06))), None);
        // A broken interval judges nothing.
        assert_eq!(judge(0.055, 0.05, 0.0005, Some((f64::NAN, 0.06))), None);
        // The binary value of the printed text does not decide the boundary.
        assert_eq!(judge(0.1235, 0.123, 0.0005, None), agrees);
    }
}

#[cfg(test)]
mod kind_tests {
    use super::KIND;
    use crate::kind::testing::{floats, names, strings, Instance};

    /// Joined with the paper's printed numbers by the key: Δ = ours − paper, `agrees` within
    /// half a unit of the last printed digit, `unexplained` beyond it, `explained` with the
    /// reason in why_<c> when `explain` covers the row; the Markdown table is written beside.
    #[test]
    fn ours_beside_the_paper_with_a_verdict_per_cell() {
        let ours = polars::df!("eps" => [0.5, 1.0, 2.0], "mean" => [0.1234, 0.2, 0.31]).unwrap();
        let paper = b"eps,value\n0.5,0.123\n1,0.25\n2,0.35\n";
        let with = "{title: T, paper: p.csv, join: [eps], compare: {mean: value}}";
        let out = Instance::new(&KIND, with)
            .inputs(&[&ours])
            .file("p.csv", paper)
            .run()
            .unwrap();
        let f = &out.frame;
        assert_eq!(
            names(f),
            [
                "eps",
                "mean",
                "paper_mean",
                "diff_mean",
                "verdict_mean",
                "why_mean"
            ]
        );
        assert_eq!(
            strings(f, "verdict_mean"),
            ["agrees", "unexplained", "unexplained"]
        );
        // A difference without a cause says where the paper's number lies.
        assert_eq!(
            strings(f, "why_mean"),
            [
                "",
                "no cause found: the paper's number is 0.05 above ours, 1.25× ours",
                "no cause found: the paper's number is 0.04 above ours, 1.129× ours"
            ]
        );
        let diff = floats(f, "diff_mean");
        assert!((diff[1] + 0.05).abs() < 1e-12, "{f}");
        let md = out.artifacts.iter().find(|a| a.ext == "md").unwrap();
        let md = String::from_utf8_lossy(&md.bytes);
        assert!(md.contains("## T"), "{md}");
        // Keys as the frame holds them, not padded to the table's digits (`0.5000`).
        assert!(md.contains("| 0.5 | 0.1234 |"), "{md}");
        assert!(md.contains("| 2.0 | 0.3100 |"), "{md}");
        let with = "{title: T, paper: p.csv, join: [eps], compare: {mean: value}, explain: [{where: {eps: 2}, text: fewer runs}]}";
        let f = Instance::new(&KIND, with)
            .inputs(&[&ours])
            .file("p.csv", paper)
            .run()
            .unwrap()
            .frame;
        assert_eq!(
            strings(&f, "verdict_mean"),
            ["agrees", "unexplained", "explained"]
        );
        assert_eq!(strings(&f, "why_mean")[2], "fewer runs");
    }

    /// A cause says how far it reaches, and the table checks it (issue #58: "read off a curve,
    /// to about ±0.005" explained a cell 0.0147 off): a `tolerance` covers a cell only as far
    /// as it says, a `value` only where the cause's own number is the paper's; a cell it does
    /// not cover stays unexplained, the cause named as not covering it.
    #[test]
    fn a_cause_explains_only_the_differences_it_covers() {
        let ours = polars::df!(
            "lambda" => [0.5, 1.0, 1.5],
            "d" => [0.7947, 0.651, 0.5],
            // The cause's own number: what the paper's formula gives on its printed inputs.
            "d_read" => [0.78, 0.66, 0.4],
            // The cause's own interval.
            "lo" => [0.77, 0.65, 0.39],
            "hi" => [0.79, 0.67, 0.41]
        )
        .unwrap();
        let paper = b"lambda,d\n0.5,0.780\n1,0.655\n1.5,0.420\n";
        let run = |explain: &str| {
            let with = format!(
                "{{title: T, paper: p.csv, join: [lambda], compare: {{d: d}}, explain: [{explain}]}}"
            );
            Instance::new(&KIND, &with)
                .inputs(&[&ours])
                .file("p.csv", paper)
                .run()
                .map(|o| o.frame)
        };
        // ±0.005 covers 0.651 against 0.655 (Δ 0.004), not 0.7947 against 0.780 (Δ 0.0147)
        // nor 0.5 against 0.420.
        let f = run("{column: d, text: read off a curve, tolerance: 0.005}").unwrap();
        assert_eq!(
            strings(&f, "verdict_d"),
            ["unexplained", "explained", "unexplained"]
        );
        let why = strings(&f, "why_d");
        assert_eq!(why[1], "read off a curve");
        assert!(
            why[0] == "not covered by: read off a curve: ours differs by 0.0147, beyond its ±0.005",
            "{why:?}"
        );
        // The cause's own numbers: 0.78 is the printed 0.780, 0.66 is not 0.655, 0.4 not 0.420.
        let f = run("{column: d, text: the paper's formula on its inputs, value: d_read}").unwrap();
        assert_eq!(
            strings(&f, "verdict_d"),
            ["explained", "unexplained", "unexplained"]
        );
        assert!(strings(&f, "why_d")[1].contains("d_read = 0.66, is not the paper's"));
        // With a tolerance beside the value: 0.66 is within 0.005 + 0.0005 of 0.655.
        let f = run("{column: d, text: formula, value: d_read, tolerance: 0.005}").unwrap();
        assert_eq!(
            strings(&f, "verdict_d"),
            ["explained", "explained", "unexplained"]
        );
        // The cause's own interval: [0.77, 0.79] holds 0.780 and [0.65, 0.67] 0.655;
        // [0.39, 0.41] misses 0.420.
        let f = run("{column: d, text: on the curve, interval: [lo, hi]}").unwrap();
        assert_eq!(
            strings(&f, "verdict_d"),
            ["explained", "explained", "unexplained"]
        );
        assert!(
            strings(&f, "why_d")[2].contains("its own interval, [0.39, 0.41], misses"),
            "{f}"
        );
        // A cause for every row must say how far it reaches; a negative tolerance is no reach.
        let e = run("{column: d, text: read off a curve}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("give `tolerance`"), "{e}");
        let e = run("{column: d, text: t, tolerance: -1}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a tolerance is a finite number ≥ 0"), "{e}");
        // A cause named for one row stays a statement about that row.
        let f = run("{where: {lambda: 1.5}, text: another grid}").unwrap();
        assert_eq!(
            strings(&f, "verdict_d"),
            ["unexplained", "unexplained", "explained"]
        );
    }
}
