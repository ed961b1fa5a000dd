//! The table layout: how the HTML report shows a table stage's frame, written beside it as
//! `<stage>.json`. The kinds that make tables write it and `crate::report` reads it back, with
//! this one type on both sides, so a change of the format is a change of this file. A stage
//! that writes a layout is a table of the report, shown as its layout says: the report names
//! no kind, and a new table kind needs no change there.

use serde::{Deserialize, Serialize};

use crate::kind::Artifact;

/// The header a column gets when the pipeline names none (`report.table headers:`), for every
/// table of the report: a frame's column names are identifiers (`tv_mc_ci_lo`), which a reader
/// should not have to decode. Words are split at `_`; Greek letters' names become the letters
/// (`eps` → ε); the abbreviations of this field's frames are written out or capitalised (`mc` →
/// Monte-Carlo, `ci` → CI, `lo`/`hi` → low/high, `tv` → TV, `pr` → Pr, `mi` → MI, `lb` → lower
/// bound). A name without `_` that is no such word stays as written (`source`, `D`).
pub(crate) fn column_header(name: &str) -> String {
    let word = |w: &str| -> String {
        match w {
            "eps" | "epsilon" => "ε",
            "delta" => "δ",
            "lambda" => "λ",
            "sigma" => "σ",
            "rho" => "ρ",
            "mu" => "μ",
            "kappa" => "κ",
            "zcdp" => "zCDP",
            "mc" => "Monte-Carlo",
            "ci" => "CI",
            "lo" => "low",
            "hi" => "high",
            "tv" => "TV",
            "pr" => "Pr",
            "mi" => "MI",
            "lb" => "lower bound",
            "q95" => "95% quantile",
            other => other,
        }
        .to_string()
    };
    name.split('_')
        .filter(|w| !w.is_empty())
        .map(word)
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the report shows one table: its title, notes, digits, which frame columns, in what
/// order, under which headers and in which role, and in which view.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    /// The table's heading.
    pub title: String,
    /// Markdown printed under the table (how to read it, deviations).
    #[serde(default)]
    pub notes: Option<String>,
    /// Significant digits of the numbers shown.
    #[serde(default = "four")]
    pub digits: usize,
    /// The frame's columns shown, in order (in the view [`Show::Columns`]); the [`Role::Key`]
    /// ones, in every view, name a row in the report's list of differences.
    pub columns: Vec<LayoutColumn>,
    /// What the report shows of the frame.
    #[serde(default, skip_serializing_if = "Show::is_columns")]
    pub show: Show,
    /// Whether `<stage>.md`, its heading left out, is shown folded under the table: a layout
    /// the page does not draw itself (e.g. every run, cell by cell).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub markdown: bool,
    /// Per frame row, our value as shown beside the paper's (its `paper` column) where the
    /// row's `verdict` column compares them: for frames whose compared value is not one column
    /// (`0.0534 [0.0501, 0.0567]`, a run's mean and 95% interval, with the run's name when it
    /// is not the headline run). The grid's cells and the list of differences show it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ours: Vec<String>,
    /// Shown at the head of the page's Audits section, its experiment's section linking to
    /// it: a benchmark of the run's audits against a published auditor's bounds, read beside
    /// the audit rows it sums up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_audits: bool,
}

impl Layout {
    /// The layout as the file `<stage>.json` the report reads.
    pub(crate) fn artifact(&self) -> anyhow::Result<Artifact> {
        Ok(Artifact {
            ext: "json".into(),
            bytes: serde_json::to_vec_pretty(self)?,
        })
    }
}

/// The view of a table's frame.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Show {
    /// The layout's `columns`, cell by cell.
    #[default]
    Columns,
    /// Every column of the frame as it is (`x` with `x_lo` and `x_hi` as one cell
    /// `x [lo, hi]`), verdict columns coloured.
    Every,
    /// The frame's rows placed as the paper prints them (each cell once).
    Grid(Grid),
    /// A link to the frame only: the data behind a figure, no table of its own.
    Link,
    /// An audit's rows: shown in the page's Audits section with every other audit of the run
    /// (flagged mechanisms first), not as a table of its experiment. The frame has the
    /// columns of `crate::stages::audit::epsilon::COLUMNS`, the format its writer owns.
    Audit,
}

impl Show {
    fn is_columns(&self) -> bool {
        *self == Show::Columns
    }
}

/// A table in the paper's own arrangement: row headings down, column headings across, and in
/// each cell one row of the frame — the paper's value as printed (`paper`), below it ours
/// (the layout's `ours` of that row: a run's mean [95% CI], or the run named beside it whose
/// interval holds the paper's value) and the verdict (`verdict`, with its note `cause`),
/// coloured by it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Grid {
    /// Who printed the values, as the legend names it (`the thesis`).
    pub printed_by: String,
    /// The headline run "ours" stands for.
    pub ours: String,
    /// Column headings, those of the row headings first.
    pub headers: Vec<String>,
    pub rows: Vec<GridRow>,
}

/// One line of a [`Grid`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GridRow {
    /// Its headings (e.g. the dataset and the error).
    pub head: Vec<String>,
    /// Per column, the frame row shown there; none: the paper prints a value we have no row
    /// for, shown as a dash.
    pub cells: Vec<Option<usize>>,
}

fn four() -> usize {
    4
}

/// One column of the frame as the table shows it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct LayoutColumn {
    /// The frame's column.
    pub name: String,
    /// Its header on the page.
    pub header: String,
    pub role: Role,
}

/// What a column is to the comparison with the paper, which decides how its cells are shown.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// Names the row (a `join` key): shown as written, and it names the row's differences.
    Key,
    /// A value of ours that is not compared.
    Value,
    /// A value of ours compared with `paper_<name>`: a decimal more than the paper prints.
    Ours,
    /// The paper's number, as printed.
    Paper,
    /// Ours − paper, signed.
    Diff,
    /// The verdict word of the comparison, coloured by it.
    Verdict,
    /// The stated cause of a difference: listed under the table, not as a column.
    Explanation,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format on disk: what `report.table` writes is read back as the same layout, and
    /// its text is the one results directories already hold (the report reads those too).
    #[test]
    fn a_layout_is_read_back_as_written() {
        let layout = Layout {
            title: "T".into(),
            notes: None,
            digits: 3,
            show: Show::Columns,
            markdown: false,
            ours: vec![],
            in_audits: false,
            columns: vec![
                LayoutColumn {
                    name: "lambda".into(),
                    header: "λ".into(),
                    role: Role::Key,
                },
                LayoutColumn {
                    name: "why_d".into(),
                    header: "why D differs".into(),
                    role: Role::Explanation,
                },
            ],
        };
        let text = serde_json::to_string(&layout).unwrap();
        assert_eq!(
            text,
            r#"{"title":"T","notes":null,"digits":3,"columns":[{"name":"lambda","header":"λ","role":"key"},{"name":"why_d","header":"why D differs","role":"explanation"}]}"#
        );
        assert_eq!(serde_json::from_str::<Layout>(&text).unwrap(), layout);
        // Notes and digits may be left out; a role the report does not know is refused.
        let short: Layout = serde_json::from_str(r#"{"title":"T","columns":[]}"#).unwrap();
        assert_eq!((short.notes, short.digits), (None, 4));
        let e = serde_json::from_str::<Layout>(
            r#"{"title":"T","columns":[{"name":"a","header":"a","role":"colour"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown variant `colour`"), "{e}");
        // A grid, a link: the view is said in words.
        let grid = Layout {
            show: Show::Grid(Grid {
                printed_by: "the thesis".into(),
                ours: "private".into(),
                headers: vec!["dataset".into(), "σ = 2".into()],
                rows: vec![GridRow {
                    head: vec!["CRM".into()],
                    cells: vec![Some(0), None],
                }],
            }),
            markdown: true,
            ours: vec!["0.1 [0.09, 0.11]".into()],
            ..layout.clone()
        };
        let text = serde_json::to_string(&grid).unwrap();
        assert!(text.ends_with(r#""show":{"grid":{"printed_by":"the thesis","ours":"private","headers":["dataset","σ = 2"],"rows":[{"head":["CRM"],"cells":[0,null]}]}},"markdown":true,"ours":["0.1 [0.09, 0.11]"]}"#), "{text}");
        assert_eq!(serde_json::from_str::<Layout>(&text).unwrap(), grid);
        let link: Layout =
            serde_json::from_str(r#"{"title":"T","columns":[],"show":"link"}"#).unwrap();
        assert_eq!(link.show, Show::Link);
    }
}

#[cfg(test)]
mod header_tests {
    use super::column_header;

    #[test]
    fn a_column_without_a_header_is_named_for_people() {
        for (name, header) in [
            ("tv_mc_ci_lo", "TV Monte-Carlo CI low"),
            ("eps", "ε"),
            ("scale_eps", "scale ε"),
            ("pr_exact", "Pr exact"),
            ("tv_null_q95", "TV null 95% quantile"),
            ("epsilon_lb", "ε lower bound"),
            ("source", "source"),
            ("D", "D"),
            ("_x__y_", "x y"),
        ] {
            assert_eq!(column_header(name), header, "{name}");
        }
    }
}
