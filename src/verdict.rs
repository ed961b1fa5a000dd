//! How a paper's number or claim compares with what we computed: the one vocabulary that the
//! report kinds write in their frames (`verdict_<c>`, `verdict`), that a pipeline's
//! `findings:` state, and that the HTML report shows, colours and counts. It lives beside the
//! stage contract, outside the engine and the stages, because both use it (the engine reads
//! `findings:`, the report kinds write verdicts); it knows nothing about privacy.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The verdict on one compared value or claim. Two agree with the paper, two differ from it;
/// a difference is `explained` exactly when a cause is stated, so the words alone say what
/// the page counts.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize, JsonSchema,
)]
pub enum Verdict {
    /// ours rounds to the printed value (within half a unit of its last printed digit), or
    /// the claim holds as stated
    #[serde(rename = "agrees")]
    Agrees,
    /// the printed value (± half a unit of its last digit) meets our 95% interval
    #[serde(rename = "within CI")]
    WithinCi,
    /// it differs, for a stated cause
    #[serde(rename = "explained")]
    Explained,
    /// it differs, and no cause is known
    #[serde(rename = "unexplained")]
    Unexplained,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Agrees,
        Verdict::WithinCi,
        Verdict::Explained,
        Verdict::Unexplained,
    ];

    /// The word written in frames and shown on the page.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::WithinCi => "within CI",
            Verdict::Explained => "explained",
            Verdict::Unexplained => "unexplained",
        }
    }

    /// The verdict a word names, if it names one (other words a table may hold — `not run`,
    /// `no data`, `side by side` — are not verdicts: nothing was compared).
    pub(crate) fn from_word(word: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.word() == word.trim())
    }

    /// A difference's verdict: `explained` when a cause is stated, else `unexplained`.
    pub fn differs(cause: Option<&str>) -> Verdict {
        if cause.is_some_and(|c| !c.trim().is_empty()) {
            Verdict::Explained
        } else {
            Verdict::Unexplained
        }
    }

    /// Whether it agrees with the paper (`agrees` or `within CI`).
    pub fn agrees(self) -> bool {
        matches!(self, Verdict::Agrees | Verdict::WithinCi)
    }
}

/// The one rule that holds a number a paper printed against ours. A printed `p` whose last
/// digit is worth `2h` (`0.509`: h = 0.0005) stands for `T = [p − h, p + h]`: ours
/// **agrees** when it lies in `T` ([`rounds_to`]); an interval of ours (a 95% interval)
/// holds the printed value when it **meets** `T` ([`meets`]). Both allow a slack of a
/// billionth of `h` plus one ulp of the larger magnitude: the printed text is itself rounded
/// to binary (0.1 is not exact), and that rounding must not decide. The report kinds decide
/// `agrees` and `within CI` with it, and nothing else does.
fn slack(h: f64, a: f64, b: f64) -> f64 {
    h * 1e-9 + f64::EPSILON * a.abs().max(b.abs())
}

/// Whether `ours` rounds to the printed `p` (half a unit of its last digit: `h`); see
/// [`slack`].
pub(crate) fn rounds_to(ours: f64, p: f64, h: f64) -> bool {
    (ours - p).abs() <= h + slack(h, ours, p)
}

/// Whether the interval `[lo, hi]` meets the printed `p ± h`; an interval that is not one
/// (an end not finite, `lo > hi`) meets nothing. See [`slack`].
pub(crate) fn meets(p: f64, h: f64, lo: f64, hi: f64) -> bool {
    if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
        return false;
    }
    let s = slack(h, p, lo.abs().max(hi.abs()));
    p - h <= hi + s && lo - s <= p + h
}

/// What a table writes where nothing was compared: a cell whose σ was not run, a dataset not
/// on this machine, a value shown beside the paper's without a verdict (a time), a cell the
/// paper left empty. Neither agreement nor difference, so never counted.
pub(crate) const NOT_RUN: &str = "not run";
pub(crate) const NO_DATA: &str = "no data";
pub(crate) const SIDE_BY_SIDE: &str = "side by side";
pub(crate) const NO_PAPER_VALUE: &str = "no paper value";
pub(crate) const NOT_COMPARED: [&str; 4] = [NOT_RUN, NO_DATA, SIDE_BY_SIDE, NO_PAPER_VALUE];

/// A pipeline's finding about a claim of the paper that is not a printed number (a theorem, a
/// figure's trend, a number in the text): the claim, what our frames show, and the verdict. The
/// engine passes findings through to the manifest; the report shows and counts them beside
/// the printed numbers.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(try_from = "FindingFields")]
pub struct Finding {
    /// What the paper claims, and where (`Figure 10: at fixed T the distortion grows with λ`).
    pub claim: String,
    /// What our frames show, with the numbers that show it.
    pub found: String,
    /// agrees, within CI, explained or unexplained.
    pub verdict: Verdict,
    /// The stated cause of the difference: given exactly when the verdict is `explained`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A finding as written, before its fields are checked against each other (its doc comments
/// are what `dplab schema` shows).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FindingFields {
    /// What the paper claims, and where (`Figure 10: at fixed T the distortion grows with λ`).
    claim: String,
    /// What our frames show, with the numbers that show it.
    found: String,
    /// agrees, within CI, explained or unexplained.
    verdict: Verdict,
    /// The stated cause of the difference: given exactly when the verdict is `explained`.
    #[serde(default)]
    why: Option<String>,
}

impl TryFrom<FindingFields> for Finding {
    type Error = String;

    fn try_from(f: FindingFields) -> Result<Finding, String> {
        for (key, text) in [("claim", &f.claim), ("found", &f.found)] {
            if text.trim().is_empty() {
                return Err(format!("a finding's `{key}` is empty: say it in words"));
            }
        }
        let why = f.why.filter(|w| !w.trim().is_empty());
        match (f.verdict, &why) {
            (Verdict::Explained, None) => {
                return Err("a finding whose verdict is `explained` states its cause in `why`".into())
            }
            (Verdict::Explained, Some(_)) => {}
            (v, Some(_)) => {
                return Err(format!(
                    "`why` states the cause of a difference, and the verdict is `{v}`: make it `explained`, or say it in `found`"
                ))
            }
            (_, None) => {}
        }
        Ok(Finding {
            claim: f.claim,
            found: f.found,
            verdict: f.verdict,
            why,
        })
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The printed 0.1 to one decimal stands for [0.05, 0.15]: its ends belong to it, though
    /// neither 0.05 nor 0.15 is exact in binary; an interval meets it by touching an end, and
    /// what is not an interval meets nothing.
    #[test]
    fn a_printed_number_stands_for_half_a_unit_of_its_last_digit_either_side() {
        assert!(rounds_to(0.15, 0.1, 0.05) && rounds_to(0.05, 0.1, 0.05));
        assert!(rounds_to(0.509, 0.509, 0.0005) && rounds_to(0.5085, 0.509, 0.0005));
        assert!(!rounds_to(0.1501, 0.1, 0.05) && !rounds_to(0.5084, 0.509, 0.0005));
        assert!(meets(0.1, 0.05, 0.15, 0.3) && meets(0.1, 0.05, -1.0, 0.05));
        assert!(!meets(0.1, 0.05, 0.1501, 0.3) && !meets(0.1, 0.05, -1.0, 0.0499));
        assert!(!meets(0.1, 0.05, f64::NAN, 0.3) && !meets(0.1, 0.05, 0.3, 0.2));
        assert!(meets(0.1, 0.05, 0.12, 0.12), "a point is an interval");
    }

    #[test]
    fn words_round_trip_and_serde_writes_the_same_words() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::from_word(v.word()), Some(v));
            assert_eq!(serde_json::to_value(v).unwrap(), v.word());
        }
        assert_eq!(Verdict::from_word("not run"), None);
        assert_eq!(Verdict::from_word("differs"), None);
        assert_eq!(Verdict::differs(Some("rounded")), Verdict::Explained);
        assert_eq!(Verdict::differs(Some("  ")), Verdict::Unexplained);
        assert_eq!(Verdict::differs(None), Verdict::Unexplained);
    }

    #[test]
    fn a_finding_is_explained_exactly_when_it_states_a_cause() {
        let f = |yaml: &str| serde_yaml_ng::from_str::<Finding>(yaml).map_err(|e| e.to_string());
        let ok = f("{claim: c, found: f, verdict: explained, why: w}").unwrap();
        assert_eq!(
            (ok.verdict, ok.why.as_deref()),
            (Verdict::Explained, Some("w"))
        );
        assert!(f("{claim: c, found: f, verdict: agrees}").is_ok());
        assert!(f("{claim: c, found: f, verdict: within CI}").is_ok());
        let e = f("{claim: c, found: f, verdict: explained}").unwrap_err();
        assert!(e.contains("states its cause in `why`"), "{e}");
        let e = f("{claim: c, found: f, verdict: unexplained, why: w}").unwrap_err();
        assert!(e.contains("make it `explained`"), "{e}");
        let e = f("{claim: ' ', found: f, verdict: agrees}").unwrap_err();
        assert!(e.contains("`claim` is empty"), "{e}");
        let e = f("{claim: c, found: f, verdict: differs}").unwrap_err();
        assert!(e.contains("unknown variant"), "{e}");
        let e = f("{claim: c, found: f, verdict: agrees, cause: x}").unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
    }
}
