//! `only:` — a stage that runs on part of an axis (the classic Gaussian only where ε < 1)
//! without a second axis: `only: {eps: {lt: 1}}` or `only: {mechanism: [laplace, gaussian]}`.
//!
//! The stage has no instance at the other values. Its readers follow: an instance that would
//! read nothing from any of its inputs is not planned either, so the rows are simply absent
//! downstream; one that reads other inputs too (a `frame.stack` of mechanisms) runs with the
//! absent ones as empty frames. Seeds and store keys of the instances that remain are the same
//! as without `only:`: narrowing a stage never changes what it computes where it runs.

use super::*;

/// One axis's condition.
#[derive(Debug, Clone)]
pub(super) enum Cond {
    /// One of these values (canonical text).
    In(Vec<String>),
    /// Numeric bounds: each `(bound, strict)`.
    Range {
        lo: Option<(f64, bool)>,
        hi: Option<(f64, bool)>,
    },
}

impl Cond {
    /// Whether the axis value `v` is kept.
    pub(super) fn admits(&self, v: &AxisValue) -> bool {
        match self {
            Cond::In(list) => list.contains(&v.canonical()),
            Cond::Range { lo, hi } => {
                let Ok(x) = v.cell() else { return false };
                lo.is_none_or(|(b, strict)| if strict { x > b } else { x >= b })
                    && hi.is_none_or(|(b, strict)| if strict { x < b } else { x <= b })
            }
        }
    }
}

/// `only:` of a stage, parsed against the axes it varies over: `(axis, condition)` pairs, or
/// the error's path under the stage and its message.
pub(super) fn parse(
    only: &IndexMap<String, Value>,
    axes: &[String],
    values: &IndexMap<String, Vec<AxisValue>>,
) -> Result<Vec<(String, Cond)>, (String, String)> {
    let mut out = Vec::new();
    for (axis, v) in only {
        if !axes.contains(axis) {
            let hint = crate::text::suggest(axis, axes.iter().map(String::as_str))
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            return Err((
                format!("only.{axis}"),
                format!(
                    "the stage does not vary over `{axis}`: {hint}(its axes: {})",
                    if axes.is_empty() {
                        "none".to_string()
                    } else {
                        axes.join(", ")
                    }
                ),
            ));
        }
        let at = format!("only.{axis}");
        let cond = match v {
            Value::Sequence(items) if items.is_empty() => {
                return Err((at, "an empty list keeps no instance".into()));
            }
            Value::Sequence(_) => {
                let listed = crate::axis::parse_axis(v).map_err(|(p, m)| (format!("{at}.{p}"), m))?;
                let known: Vec<String> = values
                    .get(axis)
                    .map(|vs| vs.iter().map(AxisValue::canonical).collect())
                    .unwrap_or_default();
                for (i, x) in listed.iter().enumerate() {
                    let c = x.canonical();
                    if axis != REP && !known.contains(&c) {
                        return Err((
                            format!("{at}.{i}"),
                            format!(
                                "`{axis}` has no value {c} (its values: {})",
                                crate::text::brief(&known.join(", "), 200)
                            ),
                        ));
                    }
                }
                Cond::In(listed.iter().map(AxisValue::canonical).collect())
            }
            Value::Mapping(m) => {
                let (mut lo, mut hi) = (None, None);
                for (k, b) in m {
                    let key = k.as_str().unwrap_or("");
                    let Some(x) = b.as_f64().filter(|x| x.is_finite()) else {
                        return Err((
                            format!("{at}.{key}"),
                            "a bound is a finite number".into(),
                        ));
                    };
                    match key {
                        "lt" => hi = Some((x, true)),
                        "le" => hi = Some((x, false)),
                        "gt" => lo = Some((x, true)),
                        "ge" => lo = Some((x, false)),
                        _ => {
                            return Err((
                                format!("{at}.{key}"),
                                format!("unknown bound `{key}` (valid: lt, le, gt, ge)"),
                            ))
                        }
                    }
                }
                if lo.is_none() && hi.is_none() {
                    return Err((at, "give a bound: lt, le, gt or ge".into()));
                }
                if let Some(vs) = values.get(axis) {
                    if let Some(t) = vs.iter().find(|v| v.cell().is_err()) {
                        return Err((
                            at,
                            format!("`{axis}` has text values ({t}): list the ones to keep instead of bounds"),
                        ));
                    }
                }
                Cond::Range { lo, hi }
            }
            _ => {
                return Err((
                    at,
                    "give a list of values to keep, or bounds `{lt: …}`, `{le: …}`, `{gt: …}`, `{ge: …}`".into(),
                ))
            }
        };
        out.push((axis.clone(), cond));
    }
    Ok(out)
}

/// Whether an instance at `key` is kept by every condition.
pub(super) fn admits(only: &[(String, Cond)], key: &[(Arc<str>, AxisValue)]) -> bool {
    only.iter().all(|(axis, cond)| {
        key.iter()
            .find(|(a, _)| &**a == axis.as_str())
            .is_none_or(|(_, v)| cond.admits(v))
    })
}
