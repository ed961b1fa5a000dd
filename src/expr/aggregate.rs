//! Aggregates (`frame.group`): one value per group, missing values skipped.

use super::syntax::Agg;
use super::values::*;
use super::Pos;

/// One value per group of `kind` over `vals` (`None`: `count(*)`).
pub(super) fn aggregate(
    kind: Agg,
    vals: Option<&Vals>,
    groups: &[Vec<usize>],
    pos: Pos,
) -> Result<Vals, String> {
    let Some(vals) = vals else {
        return Ok(Vals::Int(
            groups.iter().map(|g| Some(g.len() as i64)).collect(),
        ));
    };
    let name = match kind {
        Agg::Count => "count",
        Agg::Sum => "sum",
        Agg::Mean => "mean",
        Agg::Min => "min",
        Agg::Max => "max",
        Agg::Quantile(_) => "quantile",
        Agg::Std => "std",
        Agg::Var => "var",
    };
    if kind == Agg::Count {
        return Ok(Vals::Int(
            groups
                .iter()
                .map(|g| Some(g.iter().filter(|&&r| !is_null(vals, r)).count() as i64))
                .collect(),
        ));
    }
    // Min and max of text: the first and last in byte order.
    if let (Agg::Min | Agg::Max, Vals::Str(v)) = (kind, vals) {
        return Ok(Vals::Str(
            groups
                .iter()
                .map(|g| {
                    let present = g.iter().filter_map(|&r| v[r].as_ref());
                    if kind == Agg::Min {
                        present.min().cloned()
                    } else {
                        present.max().cloned()
                    }
                })
                .collect(),
        ));
    }
    match (kind, numeric(vals.clone(), pos, name)?) {
        (Agg::Sum | Agg::Min | Agg::Max, Num::Int(v)) => {
            let mut out = Vec::with_capacity(groups.len());
            for g in groups {
                let mut present = g.iter().filter_map(|&r| v[r]);
                let Some(first) = present.next() else {
                    out.push(None);
                    continue;
                };
                let mut acc = Some(first);
                for x in present {
                    acc = match kind {
                        Agg::Sum => acc.and_then(|a| a.checked_add(x)),
                        Agg::Min => acc.map(|a| a.min(x)),
                        _ => acc.map(|a| a.max(x)),
                    };
                }
                out.push(Some(acc.ok_or_else(|| {
                    format!("{pos}`sum` overflows 64-bit integers")
                })?));
            }
            Ok(Vals::Int(out))
        }
        (_, num) => {
            let v = num.floats();
            Ok(Vals::Float(
                groups
                    .iter()
                    .map(|g| {
                        let mut xs: Vec<f64> = g
                            .iter()
                            .filter_map(|&r| v[r])
                            .filter(|x| !x.is_nan())
                            .collect();
                        if xs.is_empty() {
                            return None;
                        }
                        let n = xs.len() as f64;
                        let mean = xs.iter().sum::<f64>() / n;
                        let var = || {
                            (xs.len() > 1).then(|| {
                                xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
                            })
                        };
                        finite(match kind {
                            Agg::Sum => xs.iter().sum(),
                            Agg::Mean => mean,
                            Agg::Min => xs.iter().copied().fold(f64::INFINITY, f64::min),
                            Agg::Max => xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            Agg::Var => var()?,
                            Agg::Std => var()?.sqrt(),
                            Agg::Quantile(q) => {
                                xs.sort_by(f64::total_cmp);
                                crate::mech::stats::quantile_sorted(&xs, q)
                            }
                            Agg::Count => n,
                        })
                    })
                    .collect(),
            ))
        }
    }
}
