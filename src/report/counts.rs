//! Counting what was compared with the paper: the one reading of a frame's verdict columns
//! ([`judgements`]) from which the page colours its tables, counts the printed numbers and lists
//! the differences, and the tallies of those counts.

use serde::Serialize;

use super::read::Csv;
use crate::verdict::{Verdict, NOT_COMPARED};

/// The CSS class of a verdict: one colour per word, everywhere on the page.
pub fn class(v: Verdict) -> &'static str {
    match v {
        Verdict::Agrees => "v-agree",
        Verdict::WithinCi => "v-within",
        Verdict::Explained => "v-explained",
        Verdict::Unexplained => "v-unexplained",
    }
}

/// How many compared things got each verdict.
#[derive(Serialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub compared: usize,
    /// `agrees` + `within CI`.
    pub agree: usize,
    pub agrees: usize,
    pub within_ci: usize,
    /// `explained` + `unexplained`.
    pub differ: usize,
    pub explained: usize,
    pub unexplained: usize,
}

impl Tally {
    pub fn add(&mut self, v: Verdict) {
        self.compared += 1;
        let slot = match v {
            Verdict::Agrees => &mut self.agrees,
            Verdict::WithinCi => &mut self.within_ci,
            Verdict::Explained => &mut self.explained,
            Verdict::Unexplained => &mut self.unexplained,
        };
        *slot += 1;
        if v.agrees() {
            self.agree += 1;
        } else {
            self.differ += 1;
        }
    }

    /// `4 printed numbers: 1 agree, 2 explained, 1 unexplained` (`one`, `many`: the name of
    /// the things).
    pub fn text(&self, one: &str, many: &str) -> String {
        let what = if self.compared == 1 { one } else { many };
        let parts: Vec<String> = [
            (self.agrees, "agree"),
            (self.within_ci, "within CI"),
            (self.explained, "explained"),
            (self.unexplained, "unexplained"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
        if parts.is_empty() {
            format!("{} {what}", self.compared)
        } else {
            format!("{} {what}: {}", self.compared, parts.join(", "))
        }
    }

    pub(super) fn merge(&mut self, o: &Tally) {
        self.compared += o.compared;
        self.agree += o.agree;
        self.agrees += o.agrees;
        self.within_ci += o.within_ci;
        self.differ += o.differ;
        self.explained += o.explained;
        self.unexplained += o.unexplained;
    }
}

/// One compared cell of a table frame: its row, the column of its verdict word, our compared
/// column (`c` of `verdict_<c>`; `None` for the `verdict` column of a cell-by-cell table), the
/// verdict, and its note (the stated cause, or what an agreement or an unexplained difference
/// rests on).
#[derive(Debug, Clone)]
pub(crate) struct Judged {
    pub row: usize,
    pub column: usize,
    pub ours: Option<String>,
    pub verdict: Verdict,
    pub note: String,
}

/// The compared cells of a table frame, read from its verdict columns (`verdict_<c>`, with the
/// cause in `why_<c>`; `verdict`, with `cause`): the one reading from which the page colours
/// the tables, counts the numbers and lists the differences. A word that is neither a verdict
/// nor one of the words for "not compared" is an error (a frame of another dplab, or damage),
/// not a cell silently left out.
pub(crate) fn judgements(frame: &Csv) -> Result<Vec<Judged>, String> {
    let mut out = Vec::new();
    for (vi, vname) in frame.names.iter().enumerate() {
        let ours = if vname == "verdict" {
            None
        } else if let Some(o) = vname.strip_prefix("verdict_") {
            Some(o.to_string())
        } else {
            continue;
        };
        let note_col = match &ours {
            Some(o) => frame.col(&format!("why_{o}")),
            None => frame.col("cause"),
        };
        for (r, row) in frame.rows.iter().enumerate() {
            let word = row.get(vi).map_or("", |w| w.trim());
            if word.is_empty() || NOT_COMPARED.contains(&word) {
                continue;
            }
            let Some(verdict) = Verdict::from_word(word) else {
                return Err(format!(
                    "row {}: `{word}` in column `{vname}` is not a verdict ({}) nor a word for a cell not compared ({}); a results directory of an older dplab is read again after `dplab run`",
                    r + 1,
                    Verdict::ALL.map(Verdict::word).join(", "),
                    NOT_COMPARED.join(", ")
                ));
            };
            let note = note_col
                .and_then(|i| row.get(i))
                .map_or_else(String::new, |s| s.trim().to_string());
            out.push(Judged {
                row: r,
                column: vi,
                ours: ours.clone(),
                verdict,
                note,
            });
        }
    }
    Ok(out)
}
