//! `report.verdict`: a paper's table cell by cell beside our private runs, the partial-noise
//! runs and the no-noise floor, with a verdict per cell by a stated rule ([`judge`]).

use anyhow::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::layout::{Grid, GridRow, Layout, LayoutColumn, Role, Show};
use super::{format_ours, printed_value, Printed};
use crate::stages::columns::{f64_col, f64_col_or_nan, str_col, FrameBuilder};
use crate::stages::param::Fraction;
use crate::stages::{
    build, params, Artifact, Ctx, FileSource, Gather, KindInfo, Output, ParamError, Stage,
};
use crate::verdict::{Verdict, NOT_RUN, NO_DATA, NO_PAPER_VALUE, SIDE_BY_SIDE};

pub const KIND: KindInfo = KindInfo {
    name: "report.verdict",
    version: 6, // 5: `paper_value`, the printed number as a number; 6: `lies`, a factor in an unexplained cause, the keys headed as the thesis heads them
    random: false,
    runs_programs: false,
    summary: "A paper's table cell by cell beside our private runs, partial-noise runs and a no-noise floor, with a verdict per cell by a stated rule (within CI: the printed value meets a private run's 95% interval; explained by a stated cause; unexplained). Input: aggregate.summary rows with a variant column. Output `cells` (one row per paper cell, the paper's number as printed, Markdown in the paper's layout) or `long` (for plot.lines).",
    params: params::<VerdictTable>,
    gather: Gather::All,
    build: build::<VerdictTable>,
    verdict: None,
};

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum VerdictOutput {
    /// one row per paper cell with the verdict
    #[default]
    Cells,
    /// long rows (panel, sigma, series, mean, lo, hi) for a figure
    Long,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VerdictTable {
    /// heading of the Markdown table
    title: String,
    /// CSV of the paper's cells: `source`, `value`, `sigma`, `mean` (judged values) and `max`
    /// (side-by-side values), relative to the pipeline file; each number as printed, standing
    /// for ± half a unit of its last printed digit (`0.010`, not `0.01`)
    #[schemars(title = "path")]
    paper: std::path::PathBuf,
    /// column of the input naming the run (private reading, partial-noise run, floor)
    #[serde(default = "variant_col")]
    variant: String,
    /// column of the input naming the dataset, matched with the paper's `source` column (the
    /// output's `source`)
    #[serde(default = "source_col")]
    dataset: String,
    /// variants that are the private mechanism (each reading); the first is the headline
    ours: Vec<String>,
    /// the variant of the grid floor (no noise at all)
    floor: String,
    /// variants with part of the privacy removed or changed, each a stated cause when the
    /// paper's value falls in its 95% interval
    #[serde(default)]
    causes: Vec<String>,
    /// the `value`s that get a verdict (e.g. max_abs_error, max_rel_error)
    judged: Vec<String>,
    /// `value`s shown beside the paper's `max` without a verdict (e.g. synthesis_seconds)
    #[serde(default)]
    side_by_side: Vec<String>,
    /// the `value` holding the grid size N (shown with the floor)
    grid: Option<String>,
    /// the floor is not a strict bound (an LP fit can land a little below the snapped data):
    /// a paper value counts as below it only under (1 − slack)·floor, and as at it when it
    /// meets [(1 − slack)·floor, floor]
    #[serde(default = "slack")]
    floor_slack: Fraction,
    /// what the output frame holds
    #[serde(default)]
    output: VerdictOutput,
    /// text printed under the table
    notes: Option<String>,
}

fn variant_col() -> String {
    "variant".into()
}

fn source_col() -> String {
    "source".into()
}

fn slack() -> Fraction {
    Fraction::of(0.1)
}

/// One summarised run of one cell: mean and 95% interval (NaN when there is one repetition).
#[derive(Clone, Copy)]
struct Cell {
    mean: f64,
    lo: f64,
    hi: f64,
    max: f64,
}

/// The verdict of one paper cell (see [`judge`]) and what it rests on: the run whose interval
/// holds the paper's value, the stated cause of a difference, or where an unexplained value
/// lies.
#[derive(Debug, PartialEq)]
struct Judgement {
    verdict: Verdict,
    cause: String,
    /// The run whose 95% interval holds the paper's value (the first, for `within CI`; the
    /// cause's run, for a cause), so that a reader is shown that run beside the paper.
    run: Option<String>,
    /// For an unexplained cell, where the paper's value lies: `above` every run of ours,
    /// `below` every run, or `between` them (empty otherwise): what a pipeline counts by.
    lies: &'static str,
}

/// The rule, applied to the paper's value `p` printed to `h` (half a unit of its last digit),
/// so that it stands for `T = [p − h, p + h]`:
/// 1. **within CI**: `T` meets the 95% interval of one of our private readings (named in order);
/// 2. **explained**, the first that applies: (a) `T` lies wholly below `(1 − slack)·floor`,
///    the floor being the error of the snapped data with no noise — the LP's target, so the
///    algorithm as printed does not get far below it (the slack allows for fits that land a
///    little below); (b) `T` meets `[(1 − slack)·floor, floor]`: the paper's value is what
///    snapping alone costs; (c) `T` meets the 95% interval of a run with part of the
///    privacy removed or changed (the cause is that run);
/// 3. **unexplained** otherwise (no cause found), saying whether the paper is above or below
///    our runs (or between them) and by what factor: against our highest run, our lowest,
///    or our first private reading (the column `lies` says which side, for counting).
fn judge(
    p: f64,
    h: f64,
    ours: &[(String, Cell)],
    floor: Option<f64>,
    slack: f64,
    causes: &[(String, Cell)],
) -> Judgement {
    // A run of one repetition has no interval: its mean stands for it.
    let meets = |c: &Cell| {
        let (lo, hi) = if c.lo.is_finite() && c.hi.is_finite() {
            (c.lo, c.hi)
        } else {
            (c.mean, c.mean)
        };
        crate::verdict::meets(p, h, lo, hi)
    };
    let hits: Vec<&str> = ours
        .iter()
        .filter(|(_, c)| meets(c))
        .map(|(l, _)| l.as_str())
        .collect();
    if !hits.is_empty() {
        return Judgement {
            verdict: Verdict::WithinCi,
            cause: format!("inside the 95% interval of {}", hits.join(", ")),
            run: Some(hits[0].to_string()),
            lies: "",
        };
    }
    if let Some(f) = floor.filter(|f| f.is_finite()) {
        if p + h < (1.0 - slack) * f {
            return Judgement {
                verdict: Verdict::Explained,
                cause: format!(
                    "below the grid floor {}: snapping to A^d alone costs more, so not reachable as printed",
                    short(f)
                ),
                run: None,
                lies: "",
            };
        }
        if p - h <= f {
            return Judgement {
                verdict: Verdict::Explained,
                cause: format!(
                    "at the grid floor {}: what snapping alone costs, with no noise and a perfect fit",
                    short(f)
                ),
                run: None,
                lies: "",
            };
        }
    }
    if let Some((l, _)) = causes.iter().find(|(_, c)| meets(c)) {
        return Judgement {
            verdict: Verdict::Explained,
            cause: format!("inside the 95% interval of {l}"),
            run: Some(l.clone()),
            lies: "",
        };
    }
    let all: Vec<f64> = ours
        .iter()
        .chain(causes)
        .map(|(_, c)| c.mean)
        .chain(floor)
        .filter(|v| v.is_finite())
        .collect();
    let lowest = all.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // Where it lies, and by what factor: against the nearest of our runs on that side, or
    // between them against our first private reading (the headline run).
    let factor = |of: f64, what: &str| {
        let r = p / of;
        if r.is_finite() && r > 0.0 {
            format!(
                " (the paper's {} is {}× {what}, {})",
                short(p),
                short(r),
                short(of)
            )
        } else {
            String::new()
        }
    };
    let (lies, cause) = if p - h > highest {
        (
            "above",
            format!(
                "no cause found: above every run of ours{}",
                factor(highest, "our highest")
            ),
        )
    } else if p + h < lowest {
        (
            "below",
            format!(
                "no cause found: below every run of ours{}",
                factor(lowest, "our lowest")
            ),
        )
    } else {
        let first = ours.first().map_or(f64::NAN, |(_, c)| c.mean);
        let name = ours.first().map_or("ours", |(l, _)| l.as_str());
        (
            "between",
            format!(
                "no cause found: between our runs, inside none of their intervals{}",
                factor(first, name)
            ),
        )
    };
    Judgement {
        verdict: Verdict::Unexplained,
        cause,
        run: None,
        lies,
    }
}

/// Three significant digits for messages; "—" for a number that is not there.
fn short(x: f64) -> String {
    if x.is_nan() {
        return "—".into();
    }
    crate::text::significant(x, 3)
}

impl Stage for VerdictTable {
    fn files(&self) -> Vec<(&'static str, &std::path::Path)> {
        vec![("paper", self.paper.as_path())]
    }

    fn validate(&self) -> Result<(), ParamError> {
        if self.ours.is_empty() {
            return Err(ParamError::at("ours", "name at least one private variant"));
        }
        if self.judged.is_empty() {
            return Err(ParamError::at("judged", "name at least one value to judge"));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, l) in self.ours.iter().chain(&self.causes).enumerate() {
            if !seen.insert(l) || *l == self.floor {
                return Err(ParamError::at(
                    if i < self.ours.len() {
                        "ours"
                    } else {
                        "causes"
                    },
                    format!("the variant `{l}` is named twice"),
                ));
            }
        }
        Ok(())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        vec![
            ("variant".into(), self.variant.clone()),
            ("dataset".into(), self.dataset.clone()),
        ]
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(match self.output {
            VerdictOutput::Cells => {
                let mut out: Vec<String> = ["source", "value", "sigma", "paper", "paper_value"]
                    .map(String::from)
                    .into();
                for l in self.ours.iter().chain(&self.causes) {
                    out.extend([l.clone(), format!("{l}_lo"), format!("{l}_hi")]);
                }
                out.extend(
                    ["floor", "grid", "verdict", "cause", "matched", "lies"].map(String::from),
                );
                out
            }
            VerdictOutput::Long => ["panel", "sigma", "series", "mean", "ci_lo", "ci_hi"]
                .map(String::from)
                .into(),
        })
    }

    /// The paper's table has the columns the rule reads and every value named in `judged` and
    /// `side_by_side`: found by `validate`, not after the run.
    fn check_files(&self, files: &dyn FileSource) -> Result<(), ParamError> {
        let Some(bytes) = files.file(&self.paper) else {
            return Ok(());
        };
        let shown = self.paper.display();
        let printed = Printed::read(bytes).map_err(|e| {
            ParamError::at(
                "paper",
                format!("{shown}: not a CSV table with a header row: {e}"),
            )
        })?;
        let mut needed = vec!["source", "value", "sigma", "mean"];
        if !self.side_by_side.is_empty() {
            needed.push("max");
        }
        for col in needed {
            if printed.column(col).is_err() {
                return Err(ParamError::at(
                    "paper",
                    format!(
                        "the paper's table {shown} has no column `{col}` ({}); it needs source, value, sigma, mean{}",
                        printed.has(),
                        if self.side_by_side.is_empty() { "" } else { " and max" }
                    ),
                ));
            }
        }
        let values = printed
            .column("value")
            .map_err(|e| ParamError::at("paper", e.to_string()))?;
        for (key, list) in [
            ("judged", &self.judged),
            ("side_by_side", &self.side_by_side),
        ] {
            for (i, v) in list.iter().enumerate() {
                if !values.contains(v) {
                    return Err(ParamError::at(
                        &format!("{key}.{i}"),
                        format!(
                            "the paper's table {shown} has no row whose `value` is `{v}` (its values: {})",
                            distinct_texts(values)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        use polars::prelude::DataFrame;
        use std::collections::BTreeMap;
        let frames: Vec<&DataFrame> = ctx.inputs.iter().collect();
        let df = crate::frames::concat(&frames)?;
        let (src, var, val) = (
            str_col(&df, &self.dataset)?,
            str_col(&df, &self.variant)?,
            str_col(&df, "value")?,
        );
        let sigma = f64_col(&df, "sigma")?;
        let [mean, lo, hi, max] = ["mean", "ci_lo", "ci_hi", "max"].map(|c| f64_col_or_nan(&df, c));
        let (mean, lo, hi, max) = (mean?, lo?, hi?, max?);
        let printed = Printed::read(ctx.file(&self.paper)?).map_err(|e| {
            anyhow::anyhow!("reading the paper's table {}: {e}", self.paper.display())
        })?;
        let (psrc, pval) = (printed.column("source")?, printed.column("value")?);
        let psig: Vec<f64> = printed
            .column("sigma")?
            .iter()
            .map(|t| t.parse::<f64>().unwrap_or(f64::NAN))
            .collect();
        let (pmean, pmax) = (
            printed.column("mean")?,
            printed.column("max").unwrap_or(&[]),
        );
        self.check_matches(&src, &var, &val, psrc)?;
        // (source, value, σ in thousandths, variant) → cell. σ keys are exact for the
        // printed widths, and the BTreeMap makes every output order deterministic.
        let key = |s: f64| (s * 1000.0).round() as i64;
        let mut cells: BTreeMap<(String, String, i64, String), Cell> = BTreeMap::new();
        for r in 0..df.height() {
            cells.insert(
                (
                    src[r].clone(),
                    val[r].clone(),
                    key(sigma[r]),
                    var[r].clone(),
                ),
                Cell {
                    mean: mean[r],
                    lo: lo[r],
                    hi: hi[r],
                    max: max[r],
                },
            );
        }
        let get = |s: &str, v: &str, sg: i64, variant: &str| {
            cells
                .get(&(s.to_string(), v.to_string(), sg, variant.to_string()))
                .copied()
        };
        let labels: Vec<&String> = self.ours.iter().chain(&self.causes).collect();
        let mut rows = VerdictRows::default();
        for pr in 0..printed.rows {
            let (s, v, sg) = (&psrc[pr], &pval[pr], key(psig[pr]));
            let judged = self.judged.contains(v);
            if !judged && !self.side_by_side.contains(v) {
                continue;
            }
            let have = labels.iter().any(|l| get(s, v, sg, l).is_some());
            let runs: Vec<Option<Cell>> = labels.iter().map(|l| get(s, v, sg, l)).collect();
            let floor = get(s, v, sg, &self.floor).map(|c| c.mean);
            let grid = self
                .grid
                .as_ref()
                .and_then(|g| get(s, g, sg, &self.floor))
                .map(|c| c.mean);
            let text = if judged {
                &pmean[pr]
            } else {
                pmax.get(pr).map_or("", |t| t)
            };
            let paper = printed_value(text);
            let mut matched = String::new();
            let mut lies = "";
            let (verdict, cause) = if !have {
                let any = cells.keys().any(|(cs, ..)| cs == s);
                if any {
                    (NOT_RUN, "σ not in this run's axes".to_string())
                } else {
                    (NO_DATA, "dataset not on this machine".to_string())
                }
            } else if !judged {
                (SIDE_BY_SIDE, "not compared as a difference".to_string())
            } else if let Some((p, h)) = paper {
                let named = |range: std::ops::Range<usize>| -> Vec<(String, Cell)> {
                    range
                        .filter_map(|i| runs[i].map(|c| (labels[i].clone(), c)))
                        .collect()
                };
                let j = judge(
                    p,
                    h,
                    &named(0..self.ours.len()),
                    floor,
                    *self.floor_slack,
                    &named(self.ours.len()..labels.len()),
                );
                matched = j.run.unwrap_or_default();
                lies = j.lies;
                (j.verdict.word(), j.cause)
            } else {
                (NO_PAPER_VALUE, String::new())
            };
            rows.push(
                s, v, psig[pr], text, &runs, judged, floor, grid, verdict, cause, matched, lies,
            );
        }
        let layout = |show: Show| Layout {
            // The Markdown's heading as the report reads it: its first line.
            title: self.title.lines().next().unwrap_or("").trim().to_string(),
            notes: None,
            digits: 4,
            // A cell is named by its dataset, value and σ in the list of differences, in the
            // words of the thesis's layout (its row and column heads).
            columns: [("source", "dataset"), ("value", "error"), ("sigma", "σ")]
                .map(|(c, h)| LayoutColumn {
                    name: c.into(),
                    header: h.into(),
                    role: Role::Key,
                })
                .into(),
            show,
            markdown: false,
            ours: vec![],
            in_audits: false,
        };
        let json = |l: Layout| l.artifact();
        match self.output {
            VerdictOutput::Cells => {
                let md = verdict_markdown(&rows, &labels, &self.title, self.notes.as_deref());
                let frame = rows.frame(&labels)?;
                // The grid when some value is judged; else every column of the frame.
                let shown = Layout {
                    markdown: true,
                    ours: (0..rows.source.len())
                        .map(|r| rows.shown_run(r, &labels))
                        .collect(),
                    ..layout(rows.grid(&labels).map_or(Show::Every, Show::Grid))
                };
                Ok(Output {
                    frame,
                    artifacts: vec![
                        Artifact {
                            ext: "md".into(),
                            bytes: md.into_bytes(),
                        },
                        json(shown)?,
                    ],
                })
            }
            VerdictOutput::Long => Ok(Output {
                frame: rows.long(&labels, &self.floor)?,
                artifacts: vec![json(layout(Show::Link))?],
            }),
        }
    }
}

impl VerdictTable {
    /// Every name the parameters give is found in the input, and the datasets meet the
    /// paper's: a `dataset` column that matches no paper row (a stacked frame's `source`
    /// holding ours/cause/floor) or a variant that never occurs would leave every cell empty
    /// — an empty table and a figure of the paper's points alone — instead of an error.
    fn check_matches(
        &self,
        src: &[String],
        var: &[String],
        val: &[String],
        psrc: &[String],
    ) -> std::result::Result<(), ParamError> {
        let paper: std::collections::HashSet<&str> = psrc.iter().map(String::as_str).collect();
        if !src.iter().any(|s| paper.contains(s.as_str())) {
            return Err(ParamError::at(
                "dataset",
                format!(
                    "no dataset of the input's column `{}` ({}) is one of the paper's `source` values in {} ({}): name the input's column that holds the datasets",
                    self.dataset,
                    distinct_texts(src),
                    self.paper.display(),
                    distinct_texts(psrc)
                ),
            ));
        }
        let named = self
            .ours
            .iter()
            .enumerate()
            .map(|(i, l)| (format!("ours.{i}"), l))
            .chain(
                self.causes
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (format!("causes.{i}"), l)),
            )
            .chain(std::iter::once(("floor".to_string(), &self.floor)));
        for (at, l) in named {
            if !var.contains(l) {
                return Err(ParamError::at(
                    &at,
                    format!(
                        "no row of the input has `{l}` in its column `{}` (it holds {})",
                        self.variant,
                        distinct_texts(var)
                    ),
                ));
            }
        }
        for (i, v) in self.judged.iter().enumerate() {
            if !val.contains(v) {
                return Err(ParamError::at(
                    &format!("judged.{i}"),
                    format!(
                        "no row of the input has `{v}` in its column `value` (it holds {})",
                        distinct_texts(val)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The distinct values of a column, in order of appearance, for messages (at most 12, each cut
/// at 60 characters).
fn distinct_texts(values: &[String]) -> String {
    let seen: indexmap::IndexSet<&str> = values.iter().map(String::as_str).collect();
    let more = seen.len().saturating_sub(12);
    let mut out = seen
        .iter()
        .take(12)
        .map(|v| match v.char_indices().nth(60) {
            Some((i, _)) => format!("`{}…`", &v[..i]),
            None => format!("`{v}`"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    if out.is_empty() {
        out = "nothing".into();
    }
    out
}

/// The cells of a verdict table, column by column.
#[derive(Default)]
struct VerdictRows {
    source: Vec<String>,
    value: Vec<String>,
    sigma: Vec<f64>,
    /// The paper's number as printed.
    paper: Vec<String>,
    runs: Vec<Vec<Option<Cell>>>,
    judged: Vec<bool>,
    floor: Vec<f64>,
    grid: Vec<f64>,
    verdict: Vec<String>,
    cause: Vec<String>,
    matched: Vec<String>,
    lies: Vec<String>,
}

impl VerdictRows {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        s: &str,
        v: &str,
        sigma: f64,
        paper: &str,
        runs: &[Option<Cell>],
        judged: bool,
        floor: Option<f64>,
        grid: Option<f64>,
        verdict: &str,
        cause: String,
        matched: String,
        lies: &str,
    ) {
        self.source.push(s.into());
        self.value.push(v.into());
        self.sigma.push(sigma);
        self.paper.push(paper.to_string());
        self.runs.push(runs.to_vec());
        self.judged.push(judged);
        self.floor.push(floor.unwrap_or(f64::NAN));
        self.grid.push(grid.unwrap_or(f64::NAN));
        self.verdict.push(verdict.into());
        self.cause.push(cause);
        self.matched.push(matched);
        self.lies.push(lies.into());
    }

    /// The paper's number on row `r` (NaN when it printed none).
    fn paper_value(&self, r: usize) -> f64 {
        printed_value(&self.paper[r]).map_or(f64::NAN, |(v, _)| v)
    }

    /// One row per paper cell: for a judged value each run's mean and interval, for a
    /// side-by-side value each run's worst case (`max`).
    fn frame(&self, labels: &[&String]) -> Result<polars::prelude::DataFrame> {
        let mut fb = FrameBuilder::new()
            .str("source", self.source.clone())
            .str("value", self.value.clone())
            .f64("sigma", self.sigma.clone())
            .str("paper", self.paper.clone())
            // The printed number as a number, for what a pipeline computes from the cells (a
            // description's counts and ratios): `paper` is the text as printed.
            .f64(
                "paper_value",
                (0..self.paper.len()).map(|r| self.paper_value(r)).collect(),
            );
        for (i, l) in labels.iter().enumerate() {
            let pick = |f: fn(&Cell) -> f64, judged_only: bool| -> Vec<f64> {
                self.runs
                    .iter()
                    .zip(&self.judged)
                    .map(|(r, &j)| match r[i] {
                        Some(c) if j => f(&c),
                        Some(c) if !judged_only => c.max,
                        _ => f64::NAN,
                    })
                    .collect()
            };
            fb = fb
                .f64(l, pick(|c| c.mean, false))
                .f64(&format!("{l}_lo"), pick(|c| c.lo, true))
                .f64(&format!("{l}_hi"), pick(|c| c.hi, true));
        }
        fb.f64("floor", self.floor.clone())
            .f64("grid", self.grid.clone())
            .str("verdict", self.verdict.clone())
            .str("cause", self.cause.clone())
            .str("matched", self.matched.clone())
            .str("lies", self.lies.clone())
            .build()
    }

    /// The table as the thesis lays it out, for the report: datasets and errors down, σ
    /// across, in each cell the row of that dataset, error and σ. Values shown side by side
    /// (times) are left out, as the thesis's error tables do, also where their σ was not run.
    /// `None` when no row is left.
    fn grid(&self, labels: &[&String]) -> Option<Grid> {
        let n = self.source.len();
        let beside: Vec<&String> = (0..n)
            .filter(|&r| self.verdict[r] == SIDE_BY_SIDE)
            .map(|r| &self.value[r])
            .collect();
        let shown: Vec<usize> = (0..n)
            .filter(|&r| !beside.contains(&&self.value[r]))
            .collect();
        let mut sigmas: Vec<f64> = Vec::new();
        let mut keys: Vec<(&String, &String)> = Vec::new();
        for &r in &shown {
            if !sigmas.contains(&self.sigma[r]) {
                sigmas.push(self.sigma[r]);
            }
            let k = (&self.source[r], &self.value[r]);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        if keys.is_empty() {
            return None;
        }
        sigmas.sort_by(f64::total_cmp);
        let mut headers = vec!["dataset".to_string(), "error".to_string()];
        headers.extend(sigmas.iter().map(|s| format!("σ = {s}")));
        let rows = keys
            .iter()
            .map(|&(src, val)| GridRow {
                head: vec![src.clone(), val.replace('_', " ")],
                cells: sigmas
                    .iter()
                    .map(|s| {
                        shown.iter().copied().find(|&r| {
                            self.source[r] == *src && self.value[r] == *val && self.sigma[r] == *s
                        })
                    })
                    .collect(),
            })
            .collect();
        Some(Grid {
            printed_by: "the thesis".into(),
            ours: labels.first().map_or_else(String::new, |l| l.to_string()),
            headers,
            rows,
        })
    }

    /// Ours on row `r` as shown beside the paper's value: the run whose interval holds the
    /// paper's value (`matched`), named when it is not the headline run, else the headline run.
    fn shown_run(&self, r: usize, labels: &[&String]) -> String {
        let matched = labels
            .iter()
            .position(|l| !self.matched[r].is_empty() && **l == self.matched[r]);
        match matched {
            Some(i) if i != 0 => format!("{} ({})", self.run_text(r, i), labels[i]),
            _ => self.run_text(r, 0),
        }
    }

    /// Run `i`'s value on row `r` as the frame holds it — mean and 95% interval of a judged
    /// value, the worst case of one shown side by side — in one format
    /// (`0.0534 [0.0501, 0.0567]`), a decimal more than the paper prints (see
    /// [`format_ours`]); `—` when the run has no value.
    fn run_text(&self, r: usize, i: usize) -> String {
        let finite = |x: f64| Some(x).filter(|x| x.is_finite());
        let (m, l, h) = match self.runs[r].get(i).copied().flatten() {
            Some(c) if self.judged[r] => (finite(c.mean), finite(c.lo), finite(c.hi)),
            Some(c) => (finite(c.max), None, None),
            None => (None, None, None),
        };
        let printed = self.paper[r].trim();
        match (m, l, h) {
            (None, ..) => "—".to_string(),
            (Some(m), Some(l), Some(h)) => {
                let t = format_ours(&[Some(m), Some(l), Some(h)], &[printed; 3], 3);
                format!("{} [{}, {}]", t[0], t[1], t[2])
            }
            (m, ..) => format_ours(&[m], &[printed], 3).remove(0),
        }
    }

    /// Long rows for a figure: one per (panel = source · value, σ, series), the paper's value
    /// as the series `paper`, the floor as `floor`.
    fn long(&self, labels: &[&String], floor: &str) -> Result<polars::prelude::DataFrame> {
        let (mut panel, mut sigma, mut series) = (Vec::new(), Vec::new(), Vec::new());
        let (mut mean, mut lo, mut hi) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..self.source.len() {
            if !self.judged[r] {
                continue;
            }
            let p = format!("{} · {}", self.source[r], self.value[r]);
            let mut add = |s: &str, c: Cell| {
                panel.push(p.clone());
                sigma.push(self.sigma[r]);
                series.push(s.to_string());
                mean.push(c.mean);
                lo.push(c.lo);
                hi.push(c.hi);
            };
            let point = |x: f64| Cell {
                mean: x,
                lo: f64::NAN,
                hi: f64::NAN,
                max: x,
            };
            add("paper", point(self.paper_value(r)));
            add(floor, point(self.floor[r]));
            for (i, l) in labels.iter().enumerate() {
                if let Some(c) = self.runs[r][i] {
                    add(l, c);
                }
            }
        }
        FrameBuilder::new()
            .str("panel", panel)
            .f64("sigma", sigma)
            .str("series", series)
            .f64("mean", mean)
            .f64("ci_lo", lo)
            .f64("ci_hi", hi)
            .build()
    }
}

mod markdown;
use markdown::verdict_markdown;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod kind_tests {
    use super::KIND;
    use crate::kind::testing::{strings, Instance};

    /// The rule applied to whole cells, matched by dataset, value and σ: a printed value inside
    /// our run's interval is `within CI` (naming the run), one inside a cause's interval is
    /// `explained` by it, one inside no interval `unexplained`, and a σ the run did not cover
    /// is `not run`.
    #[test]
    fn each_printed_cell_gets_the_verdict_of_the_rule() {
        let summary = polars::df!(
            "source" => ["D"; 6],
            "variant" => ["ours", "noiseless", "floor", "ours", "noiseless", "floor"],
            "value" => ["err"; 6],
            "sigma" => [1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
            "mean" => [0.10, 0.03, 0.001, 0.20, 0.05, 0.001],
            "ci_lo" => [0.09, 0.028, f64::NAN, 0.19, 0.045, f64::NAN],
            "ci_hi" => [0.11, 0.032, f64::NAN, 0.21, 0.055, f64::NAN],
            "max" => [f64::NAN; 6]
        )
        .unwrap();
        let with = "{title: T, paper: p.csv, ours: [ours], causes: [noiseless], floor: floor, judged: [err]}";
        // σ = 2's printed 0.030 lies in the noiseless run's interval at σ = 1, not at σ = 2.
        let paper = b"source,value,sigma,mean,max\nD,err,1,0.105,\nD,err,2,0.030,\nD,err,2,0.050,\nD,err,3,0.5,\n";
        let out = Instance::new(&KIND, with)
            .inputs(&[&summary])
            .file("p.csv", paper)
            .run()
            .unwrap();
        let f = &out.frame;
        assert_eq!(
            strings(f, "verdict"),
            ["within CI", "unexplained", "explained", "not run"],
            "{f}"
        );
        assert_eq!(strings(f, "matched"), ["ours", "", "noiseless", ""]);
        assert_eq!(
            strings(f, "cause")[1..3],
            [
                "no cause found: between our runs, inside none of their intervals (the paper's 0.03 is 0.15× ours, 0.2)",
                "inside the 95% interval of noiseless"
            ]
        );
        // Where an unexplained cell lies, as a column a pipeline counts by.
        assert_eq!(strings(f, "lies"), ["", "between", "", ""]);
        assert!(out.artifacts.iter().any(|a| a.ext == "md"));
    }
}
