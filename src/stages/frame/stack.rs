//! `frame.stack`: puts the results of several stages into one frame, so that a plot or a
//! table can show them side by side.

use anyhow::Result;
use indexmap::IndexMap;
use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "frame.stack",
    version: 2,
    // 2: a column whose type differs between inputs takes the engine's common type
    // (`frames::common_type`: integers of two widths stay integers, an untyped all-null column
    // takes the other's type), where 1 made both floats or text.
    random: false,
    runs_programs: false,
    summary: "Stacks its inputs' rows into one frame: the union of their columns (missing cells empty), optional per-input renames, and a `source` column naming the input each row came from. It varies over the axes all its inputs vary over; an axis only some vary over is gathered and kept as a column, empty on the rows of the inputs that do not vary over it.",
    params: params::<StackFrames>,
    gather: Gather::Unshared,
    build: build::<StackFrames>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StackFrames {
    /// column renames applied to one input before stacking: input stage → {old: new}
    #[serde(default)]
    rename: IndexMap<String, IndexMap<String, String>>,
    /// the value of the `source` column for each input: input stage → label (an input not
    /// named here is labelled by its stage name)
    #[serde(default)]
    source: IndexMap<String, String>,
}

impl Stage for StackFrames {
    /// The renamed columns: each is checked against the inputs' columns (against the one
    /// input it belongs to when the stage runs).
    fn columns_read(&self) -> Vec<(String, String)> {
        self.rename
            .iter()
            .flat_map(|(stage, map)| {
                map.keys()
                    .map(move |old| (format!("rename.{stage}.{old}"), old.clone()))
            })
            .collect()
    }

    /// `source`, then the union of the inputs' columns in first-seen order. With `rename`
    /// they are not known here: renames are keyed by the input's stage name, which this does
    /// not get.
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        if !self.rename.is_empty() {
            return None;
        }
        let mut out = vec!["source".to_string()];
        for cols in inputs {
            for c in cols.as_ref()? {
                if !out.contains(c) {
                    out.push(c.clone());
                }
            }
        }
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        for key in self.rename.keys().chain(self.source.keys()) {
            if !ctx.input_names.contains(key) {
                anyhow::bail!(
                    "frame.stack names `{key}`, which is not one of its inputs ({})",
                    ctx.input_names.join(", ")
                );
            }
        }
        let mut frames = Vec::new();
        for (df, name) in ctx.inputs.iter().zip(ctx.input_names) {
            let mut df = df.clone();
            if let Some(map) = self.rename.get(name) {
                for (old, new) in map {
                    df.rename(old, new.as_str().into()).map_err(|_| {
                        anyhow::anyhow!("input `{name}` has no column `{old}` to rename")
                    })?;
                }
            }
            let label = self
                .source
                .get(name)
                .cloned()
                .unwrap_or_else(|| name.clone());
            let height = df.height();
            let mut cols = vec![Column::new_scalar(
                "source".into(),
                Scalar::from(PlSmallStr::from(label.as_str())),
                height,
            )];
            cols.extend(
                df.columns()
                    .iter()
                    .filter(|c| c.name().as_str() != "source")
                    .cloned(),
            );
            frames.push(DataFrame::new(height, cols)?);
        }
        let refs: Vec<&DataFrame> = frames.iter().collect();
        Ok(crate::frames::concat(&refs)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, run, strings};

    /// The rows of every input, one after the other, under the union of their columns (a
    /// column an input lacks is empty on its rows), each row labelled by its input; a rename
    /// applies to its input only; a name that is not an input is refused.
    #[test]
    fn rows_stack_under_the_union_of_columns() {
        let a = polars::df!("x" => [1.0, 2.0], "y" => [3.0, 4.0]).unwrap();
        let b = polars::df!("x" => [5.0], "z" => ["q"]).unwrap();
        let out = run(&KIND, "{source: {in0: first}}", &[&a, &b], 0)
            .unwrap()
            .frame;
        assert_eq!(names(&out), ["source", "x", "y", "z"]);
        assert_eq!(strings(&out, "source"), ["first", "first", "in1"]);
        assert_eq!(floats(&out, "x"), [1.0, 2.0, 5.0]);
        assert!(floats(&out, "y")[2].is_nan());
        assert_eq!(strings(&out, "z"), ["", "", "q"]);
        let c = polars::df!("x" => [5.0], "w" => [7.0]).unwrap();
        let out = run(&KIND, "{rename: {in1: {w: y}}}", &[&a, &c], 0)
            .unwrap()
            .frame;
        assert_eq!(names(&out), ["source", "x", "y"]);
        assert_eq!(floats(&out, "y"), [3.0, 4.0, 7.0]);
        assert_eq!(
            fails(&KIND, "{source: {other: o}}", &[&a, &b], 0),
            "frame.stack names `other`, which is not one of its inputs (in0, in1)"
        );
    }
}
