//! The page's "Audits" section: every row of every audit frame of the run, flagged mechanisms
//! first. An audit frame is one whose layout says so ([`Show::Audit`]), as a table is one with
//! a layout: the page names no kind. Its columns are the audit's format
//! ([`COLUMNS`], beside the kind that writes it; its [`SURE`] columns are shown where a frame
//! has them, as frames of version 1 do not). The rows are read from the frames as they are,
//! checked against the manifest like every file the page shows.

use serde::Serialize;

use super::anchor;
use super::read::Outputs;
use crate::stages::audit::epsilon::{CLAIM, COLUMNS, SURE};
use crate::stages::report::layout::{Layout, Show};
use crate::text::significant;

/// One audited instance as the page shows it.
#[derive(Serialize, Debug, Clone)]
pub struct AuditRow {
    pub experiment: String,
    pub anchor: String,
    pub stage: String,
    /// The instance's axis values in words (`eps = 0.5`), empty when it has none.
    pub instance: String,
    /// The claim in words: `0.5`, or `0.5 (δ = 1e-5)`.
    pub claim: String,
    pub epsilon: String,
    pub delta: String,
    pub epsilon_lb: String,
    /// epsilon_lb as the frame holds it (full precision), for checks.
    pub epsilon_lb_exact: String,
    pub confidence: String,
    pub samples: String,
    pub pair: String,
    /// The event in words, cut at [`EVENT_SHOWN`] characters (a learnt score of thirty
    /// terms made the section 30 000 px tall); `event_full` holds all of it then, shown on
    /// hover, as the frame does.
    pub event: String,
    pub event_full: String,
    pub violation: bool,
    /// The least loss these draws would have flagged on the event, to 3 digits; empty when
    /// the frame does not say.
    pub detectable: String,
    /// How the search split scored the event: "k₁ / k₂ of n, bound b"; empty when unknown.
    pub search: String,
    /// What the stage expected (`violation`, `none`), empty when it says nothing.
    pub expect: String,
    /// Whether the verdict differs from that (with no expectation: any flag), as the frame
    /// says; a frame without the column: whether it is flagged.
    pub unexpected: bool,
    /// The draws per side that would flag the claim were the mechanism 10 % worse on the
    /// event; empty when the frame does not say.
    pub draws_to_flag: String,
}

/// Characters of an event's description the table shows.
pub(super) const EVENT_SHOWN: usize = 160;

/// A number of the frame to 4 significant digits ([`significant`], the one rounding
/// formatter); a whole number or text as it is.
fn shown(s: &str) -> String {
    match s.parse::<f64>() {
        Ok(v) if v.fract() != 0.0 => significant(v, 4),
        _ => s.to_string(),
    }
}

/// The audit rows of one experiment, in stage and row order; a frame that cannot be read is a
/// problem, not a row.
pub(super) fn rows(
    exp: &str,
    outputs: &Outputs,
    layouts: &[(String, Result<Layout, String>)],
    problems: &mut Vec<String>,
) -> Vec<AuditRow> {
    let mut out = Vec::new();
    // A layout that cannot be read is the tables' problem to report (`tables.rs`).
    let audits = layouts
        .iter()
        .filter(|(_, l)| l.as_ref().is_ok_and(|l| l.show == Show::Audit));
    for (stage, _) in audits {
        let csv_name = format!("{stage}.csv");
        let frame = outputs.frame(exp, &csv_name);
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let mut at = Vec::new();
        for c in COLUMNS {
            match frame.col(c) {
                Some(i) => at.push(i),
                None => {
                    problems.push(format!(
                        "{exp}/{csv_name}: an audit frame without its `{c}` column"
                    ));
                    break;
                }
            }
        }
        if at.len() != COLUMNS.len() {
            continue;
        }
        let axes: Vec<usize> = (0..frame.names.len())
            .filter(|&i| {
                let n = frame.names[i].as_str();
                !at.contains(&i) && !SURE.contains(&n) && !CLAIM.contains(&n)
            })
            .collect();
        for r in &frame.rows {
            let get = |c: &str| {
                let i = at[COLUMNS.iter().position(|x| *x == c).unwrap_or(0)];
                r[i].clone()
            };
            // Empty where a frame of version 1 has no such column.
            let sure = |c: &str| frame.col(c).map_or(String::new(), |i| r[i].clone());
            let search = match (sure("search_k1"), sure("search_k2"), sure("search_samples")) {
                (k1, k2, n) if !k1.is_empty() && !k2.is_empty() && !n.is_empty() => format!(
                    "chosen on {k1} / {k2} of {n} search draws, bound {}",
                    shown(&sure("search_score"))
                ),
                _ => String::new(),
            };
            let detectable = match sure("detectable").parse::<f64>() {
                Ok(d) => significant(d, 3),
                Err(_) => String::new(),
            };
            let full = get("event");
            let (event, event_full) = if full.chars().count() > EVENT_SHOWN {
                let cut: String = full.chars().take(EVENT_SHOWN).collect();
                (format!("{cut} …"), full)
            } else {
                (full, String::new())
            };
            let delta = get("delta");
            let epsilon = get("epsilon");
            // The claim as written (version 4 on): a curve's tested point beside it.
            let claim = match (sure("claim"), delta.parse::<f64>()) {
                (c, Ok(d)) if !c.is_empty() && c.starts_with(['μ', 'ρ', 'R']) => {
                    format!("{c}, at ε = {}, δ = {}", shown(&epsilon), significant(d, 3))
                }
                (c, _) if !c.is_empty() => c,
                (_, Ok(d)) if d > 0.0 => format!("{} (δ = {delta})", shown(&epsilon)),
                _ => shown(&epsilon),
            };
            let violation = get("violation") == "true";
            let instance = axes
                .iter()
                .filter(|&&i| !r[i].is_empty())
                .map(|&i| format!("{} = {}", frame.names[i], r[i]))
                .collect::<Vec<_>>()
                .join(", ");
            out.push(AuditRow {
                experiment: exp.to_string(),
                anchor: anchor(exp),
                stage: stage.clone(),
                instance,
                claim,
                epsilon,
                delta,
                epsilon_lb: shown(&get("epsilon_lb")),
                epsilon_lb_exact: get("epsilon_lb"),
                confidence: get("confidence"),
                samples: get("samples"),
                pair: get("pair"),
                event,
                event_full,
                violation,
                detectable,
                search,
                expect: sure("expect"),
                unexpected: match sure("unexpected").as_str() {
                    "" => violation,
                    u => u == "true",
                },
                draws_to_flag: sure("draws_to_flag"),
            });
        }
    }
    out
}
