//! `report.verdict`: a paper's table cell by cell beside our private runs, the partial-noise
//! runs and the no-noise floor, with a verdict per cell by a stated rule ([`judge`]).

use anyhow::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::stages::frame::{f64_col, f64_col_or_nan, read_csv, str_col, FrameBuilder};
use crate::stages::param::{Between, Fraction};
use crate::stages::{build, params, Artifact, Ctx, Gather, KindInfo, Output, ParamError, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "report.verdict",
    version: 1,
    random: false,
    summary: "A paper's table cell by cell beside our private runs, partial-noise runs and a no-noise floor, with a verdict per cell by a stated rule (within our 95% interval; explained by a stated cause; unexplained). Input: aggregate.summary rows with a variant column. Output `cells` (one row per paper cell, Markdown in the paper's layout) or `long` (for plot.lines).",
    params: params::<Verdict>,
    gather: Gather::All,
    build: build::<Verdict>,
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
struct Verdict {
    /// heading of the Markdown table
    title: String,
    /// CSV of the paper's cells: the key columns, `mean` (judged values) and `max`
    /// (side-by-side values), relative to the pipeline file
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
    /// decimals the paper prints: its value stands for the interval ± half a unit of the
    /// last digit
    #[serde(default = "three")]
    printed_digits: Between<0, 12>,
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

fn three() -> Between<0, 12> {
    Between::of(3)
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

/// The verdict of one paper cell (see [`judge`]).
#[derive(Debug, PartialEq)]
struct Judgement {
    verdict: &'static str,
    cause: String,
}

/// The rule, applied to the paper's value `p` printed to `h` (half a unit of its last digit),
/// so that it stands for `T = [p − h, p + h]`:
/// 1. **within**: `T` meets the 95% interval of one of our private readings (named in order);
/// 2. **explained**, the first that applies: (a) `T` lies wholly below `(1 − slack)·floor`,
///    the floor being the error of the snapped data with no noise — the LP's target, so the
///    algorithm as printed does not get far below it (the slack allows for fits that land a
///    little below); (b) `T` meets `[(1 − slack)·floor, floor]`: the paper's value is what
///    snapping alone costs; (c) `T` meets the 95% interval of a run with part of the
///    privacy removed or changed (the cause is that run);
/// 3. **unexplained** otherwise, saying whether the paper is above or below our runs.
fn judge(
    p: f64,
    h: f64,
    ours: &[(String, Cell)],
    floor: Option<f64>,
    slack: f64,
    causes: &[(String, Cell)],
) -> Judgement {
    let meets = |c: &Cell| {
        let (lo, hi) = if c.lo.is_finite() && c.hi.is_finite() {
            (c.lo, c.hi)
        } else {
            (c.mean, c.mean)
        };
        p - h <= hi && lo <= p + h
    };
    let hits: Vec<&str> = ours
        .iter()
        .filter(|(_, c)| meets(c))
        .map(|(l, _)| l.as_str())
        .collect();
    if !hits.is_empty() {
        return Judgement {
            verdict: "within",
            cause: format!("inside the 95% interval of {}", hits.join(", ")),
        };
    }
    if let Some(f) = floor.filter(|f| f.is_finite()) {
        if p + h < (1.0 - slack) * f {
            return Judgement {
                verdict: "explained",
                cause: format!(
                    "below the grid floor {}: snapping to A^d alone costs more, so not reachable as printed",
                    short(f)
                ),
            };
        }
        if p - h <= f {
            return Judgement {
                verdict: "explained",
                cause: format!(
                    "at the grid floor {}: what snapping alone costs, with no noise and a perfect fit",
                    short(f)
                ),
            };
        }
    }
    if let Some((l, _)) = causes.iter().find(|(_, c)| meets(c)) {
        return Judgement {
            verdict: "explained",
            cause: format!("inside the 95% interval of {l}"),
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
    let cause = if p - h > highest {
        "above every run of ours".to_string()
    } else if p + h < lowest {
        "below every run of ours".to_string()
    } else {
        "between our runs, inside none of their intervals".to_string()
    };
    Judgement {
        verdict: "unexplained",
        cause,
    }
}

/// Three significant digits for messages.
fn short(x: f64) -> String {
    if x.is_nan() {
        return "—".into();
    }
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (2 - x.abs().log10().floor() as i32).clamp(0, 12) as usize;
    format!("{x:.decimals$}")
}

impl Stage for Verdict {
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
                let mut out: Vec<String> = ["source", "value", "sigma", "paper"]
                    .map(String::from)
                    .into();
                for l in self.ours.iter().chain(&self.causes) {
                    out.extend([l.clone(), format!("{l}_lo"), format!("{l}_hi")]);
                }
                out.extend(["floor", "grid", "verdict", "cause"].map(String::from));
                out
            }
            VerdictOutput::Long => ["panel", "sigma", "series", "mean", "ci_lo", "ci_hi"]
                .map(String::from)
                .into(),
        })
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
        let pdf = read_csv(ctx.file(&self.paper)?).map_err(|e| {
            anyhow::anyhow!("reading the paper's table {}: {e}", self.paper.display())
        })?;
        let (psrc, pval, psig) = (
            str_col(&pdf, "source")?,
            str_col(&pdf, "value")?,
            f64_col(&pdf, "sigma")?,
        );
        let (pmean, pmax) = (f64_col_or_nan(&pdf, "mean")?, f64_col_or_nan(&pdf, "max")?);
        let h = 0.5 * 10f64.powi(-(self.printed_digits.get() as i32));
        let get = |s: &str, v: &str, sg: i64, variant: &str| {
            cells
                .get(&(s.to_string(), v.to_string(), sg, variant.to_string()))
                .copied()
        };
        let labels: Vec<&String> = self.ours.iter().chain(&self.causes).collect();
        let mut rows = VerdictRows::default();
        for pr in 0..pdf.height() {
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
            let paper = if judged { pmean[pr] } else { pmax[pr] };
            let (verdict, cause) = if !have {
                let any = cells.keys().any(|(cs, ..)| cs == s);
                if any {
                    ("not run", "σ not in this run's axes".to_string())
                } else {
                    ("no data", "dataset not on this machine".to_string())
                }
            } else if !judged {
                ("side by side", "not compared as a difference".to_string())
            } else if !paper.is_finite() {
                ("no paper value", String::new())
            } else {
                let named = |range: std::ops::Range<usize>| -> Vec<(String, Cell)> {
                    range
                        .filter_map(|i| runs[i].map(|c| (labels[i].clone(), c)))
                        .collect()
                };
                let j = judge(
                    paper,
                    h,
                    &named(0..self.ours.len()),
                    floor,
                    *self.floor_slack,
                    &named(self.ours.len()..labels.len()),
                );
                (j.verdict, j.cause)
            };
            rows.push(
                s, v, psig[pr], paper, &runs, judged, floor, grid, verdict, cause,
            );
        }
        match self.output {
            VerdictOutput::Cells => {
                let md = verdict_markdown(&rows, &labels, h, &self.title, self.notes.as_deref());
                let frame = rows.frame(&labels)?;
                Ok(Output {
                    frame,
                    artifacts: vec![Artifact {
                        ext: "md",
                        bytes: md.into_bytes(),
                    }],
                })
            }
            VerdictOutput::Long => Ok(rows.long(&labels, &self.floor)?.into()),
        }
    }
}

/// The cells of a verdict table, column by column.
#[derive(Default)]
struct VerdictRows {
    source: Vec<String>,
    value: Vec<String>,
    sigma: Vec<f64>,
    paper: Vec<f64>,
    runs: Vec<Vec<Option<Cell>>>,
    judged: Vec<bool>,
    floor: Vec<f64>,
    grid: Vec<f64>,
    verdict: Vec<String>,
    cause: Vec<String>,
}

impl VerdictRows {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        s: &str,
        v: &str,
        sigma: f64,
        paper: f64,
        runs: &[Option<Cell>],
        judged: bool,
        floor: Option<f64>,
        grid: Option<f64>,
        verdict: &str,
        cause: String,
    ) {
        self.source.push(s.into());
        self.value.push(v.into());
        self.sigma.push(sigma);
        self.paper.push(paper);
        self.runs.push(runs.to_vec());
        self.judged.push(judged);
        self.floor.push(floor.unwrap_or(f64::NAN));
        self.grid.push(grid.unwrap_or(f64::NAN));
        self.verdict.push(verdict.into());
        self.cause.push(cause);
    }

    /// One row per paper cell: for a judged value each run's mean and interval, for a
    /// side-by-side value each run's worst case (`max`).
    fn frame(&self, labels: &[&String]) -> Result<polars::prelude::DataFrame> {
        let mut fb = FrameBuilder::new()
            .str("source", self.source.clone())
            .str("value", self.value.clone())
            .f64("sigma", self.sigma.clone())
            .f64("paper", self.paper.clone());
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
            .build()
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
            add("paper", point(self.paper[r]));
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

/// The paper's layout: per dataset and error type, one line per run with a column per σ,
/// then the floor and the verdicts; side-by-side values (times) in a last column.
fn verdict_markdown(
    rows: &VerdictRows,
    labels: &[&String],
    h: f64,
    title: &str,
    notes: Option<&str>,
) -> String {
    use std::fmt::Write as _;
    let mut sigmas: Vec<f64> = rows.sigma.clone();
    sigmas.sort_by(f64::total_cmp);
    sigmas.dedup();
    let mut s = format!("## {title}\n\n| dataset | value | row |");
    for sg in &sigmas {
        let _ = write!(s, " σ = {sg} |");
    }
    s.push_str(" worst time (s) |\n|---|---|---|");
    for _ in &sigmas {
        s.push_str("---|");
    }
    s.push_str("---|\n");
    let mut sources: Vec<&String> = Vec::new();
    for x in &rows.source {
        if !sources.contains(&x) {
            sources.push(x);
        }
    }
    let find = |src: &str, val: &str, sg: f64| {
        (0..rows.source.len())
            .find(|&r| rows.source[r] == src && rows.value[r] == val && rows.sigma[r] == sg)
    };
    for src in sources {
        // The side-by-side value (time): the paper's and our worst over σ, per run.
        let times: Vec<usize> = (0..rows.source.len())
            .filter(|&r| rows.source[r] == *src && !rows.judged[r])
            .collect();
        let time_cell = |line: &str| -> String {
            match line {
                "paper" => times
                    .first()
                    .map(|&r| short(rows.paper[r]))
                    .unwrap_or_default(),
                _ => {
                    let Some(i) = labels.iter().position(|l| l.as_str() == line) else {
                        return String::new();
                    };
                    let worst = times
                        .iter()
                        .filter_map(|&r| rows.runs[r][i].map(|c| c.max))
                        .fold(f64::NAN, f64::max);
                    if worst.is_finite() {
                        short(worst)
                    } else {
                        String::new()
                    }
                }
            }
        };
        let mut values: Vec<&String> = Vec::new();
        for r in 0..rows.source.len() {
            if rows.source[r] == *src && rows.judged[r] && !values.contains(&&rows.value[r]) {
                values.push(&rows.value[r]);
            }
        }
        for val in values {
            let mut line = |name: &str, cell: &dyn Fn(usize) -> String, time: String| {
                let _ = write!(s, "| {src} | {val} | {name} |");
                for sg in &sigmas {
                    let c = find(src, val, *sg).map(cell).unwrap_or_default();
                    let _ = write!(s, " {c} |");
                }
                let _ = writeln!(s, " {time} |");
            };
            line("paper", &|r| short(rows.paper[r]), time_cell("paper"));
            for (i, l) in labels.iter().enumerate() {
                line(
                    l,
                    &|r| match rows.runs[r][i] {
                        Some(c) if c.lo.is_finite() => {
                            format!("{} [{}, {}]", short(c.mean), short(c.lo), short(c.hi))
                        }
                        Some(c) => short(c.mean),
                        None => "—".into(),
                    },
                    time_cell(l),
                );
            }
            line(
                "grid floor (N)",
                &|r| {
                    if rows.grid[r].is_finite() {
                        format!("{} (N = {})", short(rows.floor[r]), rows.grid[r])
                    } else {
                        short(rows.floor[r])
                    }
                },
                String::new(),
            );
            line(
                "verdict",
                &|r| format!("**{}**: {}", rows.verdict[r], rows.cause[r]),
                String::new(),
            );
        }
    }
    let count = |v: &str| rows.verdict.iter().filter(|x| x.as_str() == v).count();
    let _ = writeln!(
        s,
        "\nVerdicts: {} within, {} explained, {} unexplained, {} without our data, {} not run.",
        count("within"),
        count("explained"),
        count("unexplained"),
        count("no data"),
        count("not run")
    );
    // How close each run is to the paper over all judged cells: how many of the paper's values
    // fall in its interval, and the median and range of ours/paper.
    let _ = writeln!(
        s,
        "\n| run | paper inside its 95% interval | median ours / paper | range of ours / paper |\n|---|---|---|---|"
    );
    for (i, l) in labels.iter().enumerate() {
        let mut ratios = Vec::new();
        let mut inside = 0;
        for r in 0..rows.source.len() {
            let (Some(c), true) = (rows.runs[r][i], rows.judged[r]) else {
                continue;
            };
            let p = rows.paper[r];
            if !(p.is_finite() && c.mean.is_finite()) {
                continue;
            }
            if p > 0.0 {
                ratios.push(c.mean / p);
            }
            if c.lo.is_finite() && p - h <= c.hi && c.lo <= p + h {
                inside += 1;
            }
        }
        if ratios.is_empty() {
            continue;
        }
        ratios.sort_by(f64::total_cmp);
        let median = crate::mech::stats::quantile_sorted(&ratios, 0.5);
        let _ = writeln!(
            s,
            "| {l} | {inside} of {} | {} | {} – {} |",
            ratios.len(),
            short(median),
            short(ratios[0]),
            short(ratios[ratios.len() - 1])
        );
    }
    if let Some(n) = notes {
        let _ = write!(s, "\n{}\n", n.trim());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(mean: f64, lo: f64, hi: f64) -> Cell {
        Cell {
            mean,
            lo,
            hi,
            max: hi,
        }
    }

    #[test]
    fn the_rule_in_order() {
        let ours = vec![("text".to_string(), cell(0.10, 0.09, 0.11))];
        let causes = vec![("no_noise".to_string(), cell(0.03, 0.028, 0.032))];
        // 0.1105 ± 0.0005 meets [0.09, 0.11].
        assert_eq!(
            judge(0.1105, 5e-4, &ours, Some(0.01), 0.1, &causes).verdict,
            "within"
        );
        // Below the floor, even though the cause's interval would not contain it.
        let j = judge(0.005, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert_eq!(j.verdict, "explained");
        assert!(j.cause.contains("below the grid floor"), "{}", j.cause);
        // At the floor (0.0102 ± 0.0005 meets [0.009, 0.01]), and a little under it.
        let j = judge(0.0102, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert!(j.cause.contains("at the grid floor"), "{}", j.cause);
        let j = judge(0.0093, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert!(j.cause.contains("at the grid floor"), "{}", j.cause);
        // Inside a partial-noise run's interval.
        let j = judge(0.03, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert_eq!(
            (j.verdict, j.cause.contains("no_noise")),
            ("explained", true)
        );
        // Nothing fits.
        let j = judge(0.5, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert_eq!(j.verdict, "unexplained");
        assert!(j.cause.contains("above"));
        let j = judge(0.06, 5e-4, &ours, Some(0.01), 0.1, &causes);
        assert!(j.cause.contains("between"));
        // A run with one repetition (no interval) counts by its mean.
        let single = vec![("one".to_string(), cell(0.2, f64::NAN, f64::NAN))];
        assert_eq!(
            judge(0.2004, 5e-4, &single, None, 0.1, &[]).verdict,
            "within"
        );
    }
}
