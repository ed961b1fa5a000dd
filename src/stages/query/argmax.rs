//! `query.argmax`: the row with the largest value of a column, e.g. the optimal price.

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::columns::f64_col;
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "query.argmax",
    version: 1,
    random: false,
    runs_programs: false,
    summary:
        "The row with the largest value of a column (ties: the first), e.g. the optimal price.",
    params: params::<Argmax>,
    gather: Gather::Nothing,
    build: build::<Argmax>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Argmax {
    /// the column to maximise
    column: String,
}

impl Stage for Argmax {
    fn columns_read(&self) -> Vec<(String, String)> {
        vec![("column".into(), self.column.clone())]
    }

    /// One row of the input, all its columns.
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        inputs.first()?.clone()
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let v = f64_col(df, &self.column)?;
        let best = v
            .iter()
            .enumerate()
            .fold(None::<(usize, f64)>, |acc, (i, &x)| match acc {
                Some((_, m)) if m >= x => acc,
                _ => Some((i, x)),
            })
            .ok_or_else(|| anyhow::anyhow!("query.argmax: the input frame is empty"))?;
        Ok(df.slice(best.0 as i64, 1).into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, run, strings};

    /// The whole row of the largest value, the first of tied ones; an empty input fails with
    /// a message instead of a row of nothing.
    #[test]
    fn the_first_row_of_the_largest_value() {
        let input = polars::df!("price" => ["a", "b", "c", "d"], "revenue" => [1.0, 3.0, 3.0, 2.0])
            .unwrap();
        let out = run(&KIND, "{column: revenue}", &[&input], 0).unwrap().frame;
        assert_eq!(
            (strings(&out, "price"), floats(&out, "revenue")),
            (vec!["b".to_string()], vec![3.0])
        );
        assert_eq!(
            fails(&KIND, "{column: revenue}", &[&input.head(Some(0))], 0),
            "query.argmax: the input frame is empty"
        );
    }
}
