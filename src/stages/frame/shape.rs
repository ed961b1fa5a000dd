//! `frame.shape`: the number of rows and columns of each input, for dataset tables.

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::columns::FrameBuilder;
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "frame.shape",
    version: 2, // 2: the axis columns are not counted in d
    random: false,
    runs_programs: false,
    summary: "One row per input: its number of rows n and columns d, and the column names; an input with no columns is reported as `no data`.",
    params: params::<Shape>,
    gather: Gather::Nothing,
    build: build::<Shape>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Shape {
    /// the label of each input in the `source` column (default: the stage's name)
    #[serde(default)]
    #[schemars(title = "map stage → label")]
    source: IndexMap<String, String>,
}

impl Stage for Shape {
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(
            ["source", "n", "d", "status", "columns"]
                .map(String::from)
                .to_vec(),
        )
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let mut source = Vec::new();
        let mut n = Vec::new();
        let mut d = Vec::new();
        let mut status = Vec::new();
        let mut names = Vec::new();
        for (df, stage) in ctx.inputs.iter().zip(ctx.input_names) {
            source.push(
                self.source
                    .get(stage)
                    .cloned()
                    .unwrap_or_else(|| stage.clone()),
            );
            // The axis columns the engine added say which instance the frame is: not data.
            let data: Vec<&str> = df
                .get_column_names()
                .iter()
                .map(|s| s.as_str())
                .filter(|c| !ctx.is_axis(c))
                .collect();
            if data.is_empty() {
                n.push(None);
                d.push(None);
                status.push("no data".to_string());
                names.push(String::new());
            } else {
                n.push(Some(df.height() as f64));
                d.push(Some(data.len() as f64));
                status.push("ok".to_string());
                names.push(data.join(" "));
            }
        }
        Ok(FrameBuilder::new()
            .str("source", source)
            .opt_f64("n", n)
            .opt_f64("d", d)
            .str("status", status)
            .str("columns", names)
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, strings, Instance};

    /// One row per input: n rows and d data columns (the axis columns the engine added are not
    /// data), the column names, and `no data` for an input with nothing but axis columns.
    #[test]
    fn rows_and_data_columns_per_input() {
        let a = polars::df!("x" => [1.0, 2.0, 3.0], "y" => ["a", "b", "c"], "rep" => [0, 0, 0])
            .unwrap();
        let empty = polars::df!("rep" => [0]).unwrap();
        let out = Instance::new(&KIND, "{source: {in0: Adult}}")
            .inputs(&[&a, &empty])
            .axes(&["rep"])
            .run()
            .unwrap()
            .frame;
        assert_eq!(strings(&out, "source"), ["Adult", "in1"]);
        assert_eq!(floats(&out, "n")[0], 3.0);
        assert_eq!(floats(&out, "d")[0], 2.0);
        assert!(floats(&out, "d")[1].is_nan());
        assert_eq!(strings(&out, "status"), ["ok", "no data"]);
        assert_eq!(strings(&out, "columns"), ["x y", ""]);
    }
}
