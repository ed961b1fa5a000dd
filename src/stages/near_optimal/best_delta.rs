//! `near_optimal.best_delta`: per set and ε of a gathered `near_optimal.rate` frame, the δ of
//! the grid with the smallest rate.

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{column_names, Col, RateFrame, RowBuilder};
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.best_delta",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "From a `near_optimal.rate` frame gathered over V: per set and ε, the δ of the grid with the smallest rate (the paper's δ* of problem (9), on the grid), that rate, and the share of the δ grid where rate < 1.",
    params: params::<BestDelta>,
    gather: Gather::All,
    build: build::<BestDelta>,
    verdict: None,
};

/// The columns, in order (the set's own, read from the input's rows).
const COLUMNS: &[(&str, Col)] = &[
    ("V", Col::S),
    ("sensitivity", Col::F),
    ("measure", Col::F),
    ("epsilon", Col::F),
    ("best_delta", Col::F),
    ("best_rate", Col::F),
    ("share_below_one", Col::F),
];

/// No parameters: the input's columns (those of a `near_optimal.rate` frame) are fixed.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BestDelta {}

impl Stage for BestDelta {
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(column_names(false, COLUMNS))
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let f = RateFrame::read(ctx.input()?)?;
        let mut t = RowBuilder::new(COLUMNS);
        for ((set, _), b) in f.best_delta() {
            t.s("V", set);
            t.f("sensitivity", f.sensitivity[b.row]);
            t.f("measure", f.measure[b.row]);
            t.f("epsilon", f.epsilon[b.row]);
            t.f("best_delta", b.delta);
            t.f("best_rate", b.rate);
            t.f("share_below_one", b.below_one as f64 / b.points as f64);
        }
        Ok(t.build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, run, strings};

    /// Per set and ε, the δ of the grid with the smallest rate, that rate, and the share of
    /// the grid where the rate is below 1 (the near-optimal mechanism beats the staircase).
    #[test]
    fn the_best_delta_of_the_grid_per_set_and_epsilon() {
        let rates = polars::df!(
            "V" => ["A", "A", "A", "B", "B", "B"],
            "sensitivity" => [3.0; 6],
            "measure" => [1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
            "delta" => [1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
            "epsilon" => [1.0; 6],
            "rate" => [1.2, 0.8, 0.9, 1.1, 1.3, 1.05]
        )
        .unwrap();
        let out = run(&KIND, "{}", &[&rates], 0).unwrap().frame;
        assert_eq!(strings(&out, "V"), ["A", "B"]);
        assert_eq!(floats(&out, "best_delta"), [2.0, 3.0]);
        assert_eq!(floats(&out, "best_rate"), [0.8, 1.05]);
        assert_eq!(floats(&out, "share_below_one"), [2.0 / 3.0, 0.0]);
        let e = fails(&KIND, "{}", &[&rates.drop("rate").unwrap()], 0);
        assert!(
            e.starts_with("the input must be a `near_optimal.rate` frame gathered over V"),
            "{e}"
        );
    }
}
