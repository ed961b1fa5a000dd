//! A tree evaluated over a frame's rows (or one row per group): columns looked up, operators
//! and row-wise functions applied with the rules of [`super::values`].

use polars::prelude::DataFrame;

use super::aggregate::aggregate;
use super::syntax::{Bin, Node};
use super::values::*;
use super::Pos;

/// What an expression is evaluated on: a frame's rows, or (aggregating) one row per group of
/// another frame's rows.
pub(super) struct Env<'a> {
    pub(super) frame: &'a DataFrame,
    pub(super) n: usize,
    pub(super) groups: Option<(&'a DataFrame, &'a [Vec<usize>])>,
}

impl Env<'_> {
    pub(super) fn column(&self, frame: &DataFrame, name: &str, pos: Pos) -> Result<Vals, String> {
        match frame.column(name) {
            Ok(c) => load(c).map_err(|m| format!("{pos}{m}")),
            Err(_) => {
                let names: Vec<&str> = frame
                    .get_column_names()
                    .iter()
                    .map(|c| c.as_str())
                    .collect();
                if self.groups.is_some() {
                    return Err(format!(
                        "{pos}`{name}` is neither a `by` column nor inside an aggregate (sum({name}), mean({name}) …): outside aggregates an expression names the group's keys only (keys: {})",
                        names.join(", ")
                    ));
                }
                Err(format!("{pos}{}", no_column(name, &names)))
            }
        }
    }
}

/// "no column `c` in its input (columns: …); did you mean `d`?"
pub(crate) fn no_column(name: &str, available: &[&str]) -> String {
    let hint = crate::text::suggest(name, available.iter().copied())
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    format!(
        "no column `{name}` in its input (columns: {}){hint}",
        available.join(", ")
    )
}

pub(super) fn eval(n: &Node, env: &Env) -> Result<Vals, String> {
    let len = env.n;
    Ok(match n {
        Node::Col(c, p) => env.column(env.frame, c, *p)?,
        Node::Int(i) => Vals::Int(vec![Some(*i); len]),
        Node::Float(x) => Vals::Float(vec![Some(*x); len]),
        Node::Str(s) => Vals::Str(vec![Some(s.clone()); len]),
        Node::Bool(b) => Vals::Bool(vec![Some(*b); len]),
        Node::Null => Vals::Null(len),
        Node::Neg(a, p) => match numeric(eval(a, env)?, *p, "-")? {
            Num::Int(v) => Vals::Int(checked(&v, *p, "-x", |x| x.checked_neg())?),
            Num::Float(v) => Vals::Float(v.iter().map(|x| x.map(|x| -x)).collect()),
        },
        Node::Not(a, p) => Vals::Bool(
            truth(eval(a, env)?, *p, "NOT")?
                .iter()
                .map(|x| x.map(|b| !b))
                .collect(),
        ),
        Node::IsNull(a, negated) => {
            let v = eval(a, env)?;
            Vals::Bool(
                (0..v.len())
                    .map(|i| Some(is_null(&v, i) != *negated))
                    .collect(),
            )
        }
        Node::Bin(op, a, b, p) => binary(*op, eval(a, env)?, eval(b, env)?, *p)?,
        Node::Call(f, args, p) => {
            let vals = args
                .iter()
                .map(|a| eval(a, env))
                .collect::<Result<Vec<_>, _>>()?;
            call(f, vals, *p, len)?
        }
        Node::Case {
            operand,
            whens,
            otherwise,
            pos,
        } => {
            let operand = operand.as_ref().map(|o| eval(o, env)).transpose()?;
            let mut conds = Vec::with_capacity(whens.len());
            let mut results = Vec::with_capacity(whens.len() + 1);
            for (w, t) in whens {
                let w = eval(w, env)?;
                let cond = match &operand {
                    Some(o) => binary(Bin::Eq, o.clone(), w, *pos)?,
                    None => w,
                };
                conds.push(truth(cond, *pos, "WHEN")?);
                results.push(eval(t, env)?);
            }
            results.push(match otherwise {
                Some(o) => eval(o, env)?,
                None => Vals::Null(len),
            });
            let results = unify(results, *pos, "the branches of CASE")?;
            let pick = (0..len).map(|i| {
                conds
                    .iter()
                    .position(|c| c[i] == Some(true))
                    .unwrap_or(conds.len())
            });
            let rows: Vec<usize> = pick.collect();
            gather(&results, &rows)
        }
        Node::Agg(kind, arg, p) => {
            let Some((rows, groups)) = env.groups else {
                return Err(format!("{p}aggregates are computed by frame.group"));
            };
            let inner = Env {
                frame: rows,
                n: rows.height(),
                groups: None,
            };
            let vals = match arg {
                Some(a) => Some(eval(a, &inner)?),
                None => None,
            };
            aggregate(*kind, vals.as_ref(), groups, *p)?
        }
    })
}

pub(super) fn binary(op: Bin, a: Vals, b: Vals, pos: Pos) -> Result<Vals, String> {
    use std::cmp::Ordering;
    match op {
        Bin::And | Bin::Or => {
            let (x, y) = (truth(a, pos, op.text())?, truth(b, pos, op.text())?);
            // SQL's three-valued logic: a known false (AND) or true (OR) decides.
            let decides = op == Bin::Or;
            Ok(Vals::Bool(
                x.iter()
                    .zip(&y)
                    .map(|(x, y)| match (x, y) {
                        (Some(v), _) | (_, Some(v)) if *v == decides => Some(decides),
                        (Some(_), Some(_)) => Some(!decides),
                        _ => None,
                    })
                    .collect(),
            ))
        }
        Bin::Eq | Bin::Ne | Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge => {
            let holds = move |o: Ordering| match op {
                Bin::Eq => o == Ordering::Equal,
                Bin::Ne => o != Ordering::Equal,
                Bin::Lt => o == Ordering::Less,
                Bin::Le => o != Ordering::Greater,
                Bin::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            };
            let n = a.len();
            Ok(Vals::Bool(match (a, b) {
                (Vals::Null(_), _) | (_, Vals::Null(_)) => vec![None; n],
                (Vals::Int(x), Vals::Int(y)) => zip_with(&x, &y, |x, y| Some(holds(x.cmp(&y)))),
                (x @ (Vals::Int(_) | Vals::Float(_)), y @ (Vals::Int(_) | Vals::Float(_))) => {
                    let x = numeric(x, pos, op.text())?.floats();
                    let y = numeric(y, pos, op.text())?.floats();
                    zip_with(&x, &y, |x, y| x.partial_cmp(&y).map(holds))
                }
                (Vals::Str(x), Vals::Str(y)) => x
                    .iter()
                    .zip(&y)
                    .map(|(x, y)| Some(holds(x.as_ref()?.cmp(y.as_ref()?))))
                    .collect(),
                (Vals::Bool(x), Vals::Bool(y)) => zip_with(&x, &y, |x, y| Some(holds(x.cmp(&y)))),
                (x, y) => {
                    return Err(format!(
                        "{pos}`{}` compares {} with {}: compare numbers with numbers, text with text ('laplace')",
                        op.text(),
                        x.type_name(),
                        y.type_name()
                    ))
                }
            }))
        }
        Bin::Add | Bin::Sub | Bin::Mul | Bin::Div | Bin::Rem => {
            let sym = op.text();
            let (x, y) = (numeric(a, pos, sym)?, numeric(b, pos, sym)?);
            Ok(match (op, x, y) {
                (Bin::Div, x, y) => {
                    Vals::Float(zip_with(&x.floats(), &y.floats(), |x, y| finite(x / y)))
                }
                (_, Num::Int(x), Num::Int(y)) => {
                    let mut out = Vec::with_capacity(x.len());
                    for (i, (a, b)) in x.iter().zip(&y).enumerate() {
                        let (Some(a), Some(b)) = (*a, *b) else {
                            out.push(None);
                            continue;
                        };
                        let r = match op {
                            Bin::Add => a.checked_add(b),
                            Bin::Sub => a.checked_sub(b),
                            Bin::Mul => a.checked_mul(b),
                            // By zero: missing, as a number's; MIN % -1 is 0.
                            _ if b == 0 => {
                                out.push(None);
                                continue;
                            }
                            _ => Some(a.wrapping_rem(b)),
                        };
                        out.push(Some(r.ok_or_else(|| {
                            format!(
                                "{pos}`{a} {sym} {b}` overflows 64-bit integers at row {}",
                                i + 1
                            )
                        })?));
                    }
                    Vals::Int(out)
                }
                (_, x, y) => Vals::Float(zip_with(&x.floats(), &y.floats(), |a, b| {
                    finite(match op {
                        Bin::Add => a + b,
                        Bin::Sub => a - b,
                        Bin::Mul => a * b,
                        _ => a % b,
                    })
                })),
            })
        }
    }
}

pub(super) fn call(f: &str, args: Vec<Vals>, pos: Pos, len: usize) -> Result<Vals, String> {
    let float1 = |args: Vec<Vals>, g: fn(f64) -> f64| -> Result<Vals, String> {
        let x = numeric(args.into_iter().next().unwrap_or(Vals::Null(len)), pos, f)?;
        Ok(Vals::Float(
            x.floats()
                .iter()
                .map(|x| x.and_then(|x| finite(g(x))))
                .collect(),
        ))
    };
    match f {
        "abs" => match numeric(args.into_iter().next().unwrap_or(Vals::Null(len)), pos, f)? {
            Num::Int(v) => Ok(Vals::Int(checked(&v, pos, "abs", i64::checked_abs)?)),
            Num::Float(v) => Ok(Vals::Float(v.iter().map(|x| x.map(f64::abs)).collect())),
        },
        "floor" | "ceil" | "round" if args.len() == 1 && matches!(args[0], Vals::Int(_)) => {
            Ok(args.into_iter().next().unwrap_or(Vals::Null(len)))
        }
        "sqrt" => float1(args, f64::sqrt),
        "ln" => float1(args, f64::ln),
        "log" if args.len() == 1 => float1(args, f64::log10),
        "log10" => float1(args, f64::log10),
        "log2" => float1(args, f64::log2),
        "exp" => float1(args, f64::exp),
        "floor" => float1(args, f64::floor),
        "ceil" => float1(args, f64::ceil),
        "round" if args.len() == 1 => float1(args, f64::round),
        "log" | "pow" | "power" | "round" => {
            let mut it = args.into_iter();
            let x = numeric(it.next().unwrap_or(Vals::Null(len)), pos, f)?.floats();
            let y = numeric(it.next().unwrap_or(Vals::Null(len)), pos, f)?.floats();
            Ok(Vals::Float(zip_with(&x, &y, |x, y| {
                finite(match f {
                    // log(b, x), as PostgreSQL writes it.
                    "log" => y.ln() / x.ln(),
                    "round" => {
                        let scale = 10f64.powf(y.round());
                        (x * scale).round() / scale
                    }
                    _ => x.powf(y),
                })
            })))
        }
        "least" | "greatest" => {
            let want = if f == "least" {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            };
            let vals = unify(args, pos, &format!("the arguments of `{f}`"))?;
            let pick = |cmp: &dyn Fn(usize, usize, usize) -> Option<std::cmp::Ordering>| {
                (0..len)
                    .map(|i| {
                        let mut best = 0;
                        for k in 1..vals.len() {
                            match cmp(k, best, i) {
                                None => return None,
                                Some(o) if o == want => best = k,
                                Some(_) => {}
                            }
                        }
                        // A missing value in any argument (the first too) makes it missing.
                        if vals.iter().any(|v| is_null(v, i)) {
                            None
                        } else {
                            Some(best)
                        }
                    })
                    .collect::<Vec<_>>()
            };
            let chosen = match &vals[0] {
                Vals::Int(_) => pick(&|k, b, i| match (&vals[k], &vals[b]) {
                    (Vals::Int(x), Vals::Int(y)) => Some(x[i]?.cmp(&y[i]?)),
                    _ => None,
                }),
                Vals::Float(_) => pick(&|k, b, i| match (&vals[k], &vals[b]) {
                    (Vals::Float(x), Vals::Float(y)) => x[i]?.partial_cmp(&y[i]?),
                    _ => None,
                }),
                Vals::Str(_) => pick(&|k, b, i| match (&vals[k], &vals[b]) {
                    (Vals::Str(x), Vals::Str(y)) => Some(x[i].as_ref()?.cmp(y[i].as_ref()?)),
                    _ => None,
                }),
                Vals::Null(_) => return Ok(Vals::Null(len)),
                Vals::Bool(_) => {
                    return Err(format!(
                        "{pos}`{f}` compares numbers or text, not truth values"
                    ))
                }
            };
            // Rows with a missing choice get an all-missing source: one past the values.
            let mut vals = vals;
            vals.push(match &vals[0] {
                Vals::Int(_) => Vals::Int(vec![None; len]),
                Vals::Float(_) => Vals::Float(vec![None; len]),
                _ => Vals::Str(vec![None; len]),
            });
            let rows: Vec<usize> = chosen.iter().map(|c| c.unwrap_or(vals.len() - 1)).collect();
            Ok(gather(&vals, &rows))
        }
        "coalesce" => {
            let vals = unify(args, pos, "the arguments of `coalesce`")?;
            let rows: Vec<usize> = (0..len)
                .map(|i| {
                    vals.iter()
                        .position(|v| !is_null(v, i))
                        .unwrap_or(vals.len() - 1)
                })
                .collect();
            Ok(gather(&vals, &rows))
        }
        other => Err(format!("{pos}no function `{other}`")),
    }
}
