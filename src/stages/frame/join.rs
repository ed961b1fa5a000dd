//! `frame.join`: the rows of two inputs side by side where their key columns are equal.
//!
//! `input: [noisy, truth]`, `with: {on: [bin]}` gives every column of the first input, then
//! the columns of the second other than the keys:
//!
//! - **Matching.** Rows match when every key is equal: numbers as numbers (an integer 1 and a
//!   number 1.0 are equal), text as text; a key of text in one input and numbers in the other is
//!   an error. A missing key value matches nothing (as in SQL).
//! - **`how`.** `inner`: one row per matching pair; `left`: besides, each row of the first
//!   input that matches nothing, once, with the second's columns missing.
//! - **Order.** The first input's rows in order, each followed by its matches in the second
//!   input's order: deterministic.
//! - **Names.** The keys appear once, with the first input's values and type. A column of the
//!   second input the first has too is renamed with `suffix` (`count` → `count_true` with
//!   `suffix: _true`) or, without one, is an error naming it. An axis column both inputs carry
//!   holds the same value in both (an instance reads the instances of its own axis values), so
//!   it appears once.

use anyhow::{bail, Result};
use polars::prelude::{Column, DataFrame, IdxCa, IdxSize, NewChunkedArray};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::expr::{load, KeyCell, Vals};
use crate::stages::columns::column;
use crate::stages::{
    build, check_size_run, distinct, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "frame.join",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "The rows of two inputs side by side where the key columns `on:` are equal (inner or left join, in the first input's order); a clashing column of the second takes `suffix`.",
    params: params::<Join>,
    gather: Gather::Nothing,
    build: build::<Join>,
    verdict: None,
};

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum How {
    /// rows of the first input with a match in the second, once per match
    Inner,
    /// every row of the first input; where nothing matches, the second's columns are missing
    Left,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Join {
    /// the key columns, which both inputs have
    on: Vec<String>,
    /// which rows of the first input are kept
    #[serde(default = "inner")]
    how: How,
    /// appended to the name of a column of the second input that the first has too (not a
    /// key); without it such a column is an error
    #[serde(default)]
    suffix: Option<String>,
}

fn inner() -> How {
    How::Inner
}

impl Stage for Join {
    fn validate(&self) -> Result<(), ParamError> {
        if self.on.is_empty() {
            return Err(ParamError::at(
                "on",
                "name at least one key column (`on: [bin]`)",
            ));
        }
        distinct("on", &self.on)?;
        if self.suffix.as_deref() == Some("") {
            return Err(ParamError::at(
                "suffix",
                "an empty suffix renames nothing: give one such as `_right`",
            ));
        }
        Ok(())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        self.on
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("on.{i}"), c.clone()))
            .collect()
    }

    /// Known when both inputs' are and no column of the second clashes with the first's: a
    /// clash may be an axis column both carry (kept once) or a column to rename, which only the
    /// run can tell (planning does not say which columns are axes).
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let [Some(left), Some(right)] = inputs else {
            return None;
        };
        let mut out = left.clone();
        for c in right.iter().filter(|c| !self.on.contains(c)) {
            if left.contains(c) {
                return None;
            }
            out.push(c.clone());
        }
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let [left, right] = ctx.inputs else {
            bail!(
                "frame.join joins two inputs (`input: [first, second]`), not {}",
                ctx.inputs.len()
            );
        };
        let key_of = |df: &DataFrame, which: &str| -> Result<Vec<Vals>> {
            self.on
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    load(column(df, k)?).map_err(|m| {
                        anyhow::Error::new(ParamError {
                            path: vec!["on".into(), i.to_string()],
                            message: format!("in the {which} input: {m}"),
                        })
                    })
                })
                .collect()
        };
        let (lk, rk) = (key_of(left, "first")?, key_of(right, "second")?);
        for (i, (l, r)) in lk.iter().zip(&rk).enumerate() {
            let kind = |v: &Vals| match v {
                Vals::Int(_) | Vals::Float(_) => Some("numbers"),
                Vals::Str(_) => Some("text"),
                Vals::Bool(_) => Some("truth values"),
                Vals::Null(_) => None,
            };
            if let (Some(a), Some(b)) = (kind(l), kind(r)) {
                if a != b {
                    return Err(ParamError {
                        path: vec!["on".into(), i.to_string()],
                        message: format!(
                            "the key `{}` holds {a} in the first input and {b} in the second: they can never be equal",
                            self.on[i]
                        ),
                    }
                    .into());
                }
            }
        }
        let key = |keys: &[Vals], r: usize| -> Option<Vec<KeyCell>> {
            let k: Vec<KeyCell> = keys.iter().map(|v| KeyCell::of(v, r)).collect();
            (!k.contains(&KeyCell::Missing)).then_some(k)
        };
        let mut index: std::collections::HashMap<Vec<KeyCell>, Vec<IdxSize>> =
            std::collections::HashMap::new();
        for r in 0..right.height() {
            if let Some(k) = key(&rk, r) {
                index.entry(k).or_default().push(r as IdxSize);
            }
        }
        // The second input's columns, renamed where they clash; an axis column both carry
        // holds this instance's value in both, and appears once.
        let mut taken: Vec<(&Column, String)> = Vec::new();
        for c in right.columns() {
            let name = c.name().as_str();
            if self.on.iter().any(|k| k == name) {
                continue;
            }
            if left.column(name).is_err() {
                taken.push((c, name.to_string()));
            } else if ctx.is_axis(name) {
                continue;
            } else if let Some(s) = &self.suffix {
                taken.push((c, format!("{name}{s}")));
            } else {
                return Err(ParamError {
                    path: vec!["on".into()],
                    message: format!(
                        "both inputs have a column `{name}`, which is not a key: add it to `on:` if it is one, or give `suffix:` (e.g. `_right`) to keep the second's as `{name}_right`"
                    ),
                }
                .into());
            }
        }
        for (_, name) in &taken {
            if left.column(name).is_ok() {
                bail!("the renamed column `{name}` is a column of the first input too: choose another `suffix`");
            }
        }
        // The pairs of rows, counted before they are made.
        let mut rows = 0u64;
        for r in 0..left.height() {
            let n = key(&lk, r)
                .and_then(|k| index.get(&k))
                .map_or(0, |m| m.len() as u64);
            rows += if n == 0 && self.how == How::Left {
                1
            } else {
                n
            };
        }
        let width = (left.width() + taken.len()) as u64;
        check_size_run(
            Limit::Cells,
            &format!("rows × columns of the joined frame ({rows} × {width})"),
            product(&[rows, width]),
        )?;
        let mut li: Vec<IdxSize> = Vec::new();
        let mut ri: Vec<Option<IdxSize>> = Vec::new();
        for r in 0..left.height() {
            match key(&lk, r).and_then(|k| index.get(&k)) {
                Some(m) => {
                    for &j in m {
                        li.push(r as IdxSize);
                        ri.push(Some(j));
                    }
                }
                None if self.how == How::Left => {
                    li.push(r as IdxSize);
                    ri.push(None);
                }
                None => {}
            }
        }
        let li = IdxCa::from_vec("idx".into(), li);
        let ri = IdxCa::from_slice_options("idx".into(), &ri);
        let mut cols: Vec<Column> = left
            .columns()
            .iter()
            .map(|c| c.take(&li))
            .collect::<polars::prelude::PolarsResult<_>>()?;
        for (c, name) in taken {
            let mut t = c.take(&ri)?;
            t.rename(name.as_str().into());
            cols.push(t);
        }
        Ok(DataFrame::new(li.len(), cols)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, refused, run, strings, Instance};
    use polars::prelude::DataType;

    fn noisy() -> polars::prelude::DataFrame {
        polars::df!(
            "bin" => [3i64, 1, 2, 9],
            "noisy" => [30.5, 10.5, 19.0, 1.0]
        )
        .unwrap()
    }

    fn truth() -> polars::prelude::DataFrame {
        polars::df!("bin" => [1.0, 2.0, 3.0], "count" => [10i64, 20, 30], "noisy" => [0.0, 0.0, 0.0])
            .unwrap()
    }

    /// Inner and left joins keep the first input's order and key type; an integer key matches
    /// a number key of equal value; a clashing column takes the suffix.
    #[test]
    fn joins_in_the_first_inputs_order() {
        let out = run(
            &KIND,
            "{on: [bin], suffix: _true}",
            &[&noisy(), &truth()],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(names(&out), ["bin", "noisy", "count", "noisy_true"]);
        assert_eq!(floats(&out, "bin"), [3.0, 1.0, 2.0]);
        assert_eq!(out.column("bin").unwrap().dtype(), &DataType::Int64);
        assert_eq!(out.column("count").unwrap().dtype(), &DataType::Int64);
        assert_eq!(floats(&out, "count"), [30.0, 10.0, 20.0]);
        let out = run(
            &KIND,
            "{on: [bin], how: left, suffix: _true}",
            &[&noisy(), &truth()],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(floats(&out, "bin"), [3.0, 1.0, 2.0, 9.0]);
        assert!(floats(&out, "count")[3].is_nan());
    }

    /// A row matches every row of equal key, in the second input's order.
    #[test]
    fn many_matches_and_missing_keys() {
        let a = polars::df!("k" => [Some("x"), None, Some("y")], "a" => [1, 2, 3]).unwrap();
        let b = polars::df!("k" => [Some("x"), None, Some("x")], "b" => [7, 8, 9]).unwrap();
        let out = run(&KIND, "{on: [k], how: left}", &[&a, &b], 0)
            .unwrap()
            .frame;
        assert_eq!(strings(&out, "k"), ["x", "x", "", "y"]);
        assert_eq!(floats(&out, "b")[..2], [7.0, 9.0]);
        assert!(floats(&out, "b")[2].is_nan());
    }

    /// An axis column both inputs carry appears once.
    #[test]
    fn shared_axis_columns_appear_once() {
        let mut a = noisy();
        a.with_column(polars::prelude::Column::new("eps".into(), [1.0; 4]))
            .unwrap();
        let mut b = truth();
        b.with_column(polars::prelude::Column::new("eps".into(), [1.0; 3]))
            .unwrap();
        let out = Instance::new(&KIND, "{on: [bin], suffix: _t}")
            .inputs(&[&a, &b])
            .axes(&["eps"])
            .run()
            .unwrap()
            .frame;
        assert_eq!(names(&out), ["bin", "noisy", "eps", "count", "noisy_t"]);
    }

    #[test]
    fn clashes_and_mismatched_keys_are_errors() {
        let e = fails(&KIND, "{on: [bin]}", &[&noisy(), &truth()], 0);
        assert!(
            e.contains("both inputs have a column `noisy`") && e.contains("suffix"),
            "{e}"
        );
        let text = polars::df!("bin" => ["1"], "c" => [1]).unwrap();
        let e = fails(&KIND, "{on: [bin]}", &[&noisy(), &text], 0);
        assert!(
            e.contains("holds numbers in the first input and text"),
            "{e}"
        );
        let e = fails(&KIND, "{on: [bin]}", &[&noisy()], 0);
        assert!(e.contains("joins two inputs"), "{e}");
        assert!(refused(&KIND, "{on: []}").contains("at least one key"));
        assert!(refused(&KIND, "{on: [bin], how: outer}").starts_with("how"));
    }
}
