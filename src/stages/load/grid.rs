//! `load.grid`: one column holding a grid of values fixed in advance.

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::axis::AxisValue;
use crate::stages::columns::FrameBuilder;
use crate::stages::{
    build, check_grid_param, grid_param, params, Ctx, Gather, KindInfo, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "load.grid",
    version: 1,
    random: false,
    runs_programs: false,
    summary:
        "One column holding a grid fixed in advance (e.g. the candidate prices of an auction).",
    params: params::<LoadGrid>,
    gather: Gather::Nothing,
    build: build::<LoadGrid>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadGrid {
    /// name of the column
    column: String,
    /// a list, {from, to, step}, {linspace: {from, to, num}} or {logspace: {from, to, num}}
    #[schemars(schema_with = "crate::axis::grid_schema")]
    values: Value,
}

impl Stage for LoadGrid {
    fn validate(&self) -> Result<(), ParamError> {
        check_grid_param("values", &self.values, &mut |_| Ok(())).map(|_| ())
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(vec![self.column.clone()])
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let vals = grid_param("values", &self.values).map_err(|e| anyhow::anyhow!(e.message))?;
        let fb = FrameBuilder::new();
        let fb = if vals.iter().all(|v| matches!(v, AxisValue::Num(_))) {
            fb.f64(
                &self.column,
                vals.iter()
                    .map(|v| {
                        if let AxisValue::Num(x) = v {
                            *x
                        } else {
                            f64::NAN
                        }
                    })
                    .collect(),
            )
        } else {
            fb.str(
                &self.column,
                vals.iter().map(AxisValue::canonical).collect(),
            )
        };
        Ok(fb.build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run, strings};

    /// Every grid form gives its points in order: a range with a step, a linspace, a list of
    /// names; an empty list is refused at `values`.
    #[test]
    fn grids_give_their_points_in_order() {
        let grid = |v: &str| {
            run(&KIND, &format!("{{column: p, values: {v}}}"), &[], 0)
                .unwrap()
                .frame
        };
        assert_eq!(
            floats(&grid("{from: 1, to: 2, step: 0.25}"), "p"),
            [1.0, 1.25, 1.5, 1.75, 2.0]
        );
        assert_eq!(
            floats(&grid("{linspace: {from: 0, to: 1, num: 3}}"), "p"),
            [0.0, 0.5, 1.0]
        );
        assert_eq!(strings(&grid("[low, high]"), "p"), ["low", "high"]);
        assert!(refused(&KIND, "{column: p, values: []}").starts_with("values: "));
    }
}
