//! `near_optimal.convergence`: the steps to convergence (Definition 2) of the sets R_i for one
//! neighbour set over a grid of δ, touching intervals merged and kept separate.

use anyhow::{Context, Result};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::{
    check_grid, column_names, grid, max_steps, options, Col, GridOf, MaxSteps, RowBuilder, Set,
};
use crate::mech::interval::Touching;
use crate::mech::near_optimal::{sweep, Options};
use crate::stages::{
    build, check_size_at, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.convergence",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Steps to convergence (Definition 2) of the sets R_i for one V over a grid of δ, with touching intervals merged (closed sets) and kept separate, beside the step predicted by the widest-gap formula; a_n, the largest number of intervals in one R_i (the paper's N) and their total.",
    params: params::<Convergence>,
    gather: Gather::Nothing,
    build: build::<Convergence>,
    verdict: None,
};

/// The columns after the set's, in order.
const COLUMNS: &[(&str, Col)] = &[
    ("delta", Col::F),
    ("steps", Col::I),
    ("steps_separate", Col::I),
    ("steps_gap_formula", Col::I),
    ("a_n", Col::F),
    ("max_intervals", Col::I),
    ("total_intervals", Col::I),
];

/// Columns of the frame: its rows × this are checked against `--max-cells`.
const WIDTH: u64 = (super::SET_COLUMNS.len() + COLUMNS.len()) as u64;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Convergence {
    /// V as "[0, a] ∪ [b, c]" (0 < a < b < c) or "[0, c]"; usually `$V`
    pub neighbour_set: Set,
    /// δ values: numbers ≥ 0, at most 18 decimals (δ = 0 gives the minimal sequence I_i
    /// itself)
    #[schemars(schema_with = "crate::axis::grid_schema")]
    pub delta: Value,
    /// give up if Definition 2 does not hold by this step
    #[serde(default = "max_steps")]
    pub max_steps: MaxSteps,
}

impl Stage for Convergence {
    fn validate(&self) -> Result<(), ParamError> {
        self.neighbour_set.check()?;
        let nd = check_grid("delta", &self.delta, GridOf::Delta)?;
        check_size_at(
            "delta",
            Limit::Cells,
            &format!("δ values × {WIDTH} columns ({nd} × {WIDTH})"),
            product(&[nd, WIDTH]),
        )
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(column_names(true, COLUMNS))
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let v = &*self.neighbour_set;
        let deltas = grid("delta", &self.delta)?;
        let steps = self.max_steps.get() as usize;
        let merged = sweep(v, &deltas, options(steps, false))?;
        let separate = sweep(
            v,
            &deltas,
            Options {
                touching: Touching::Separate,
                ..options(steps, false)
            },
        )?;
        let mut t = RowBuilder::new(COLUMNS);
        for ((&delta, m), s) in deltas.iter().zip(merged).zip(separate) {
            let m = m?;
            let s = s.with_context(|| "with touching intervals kept separate")?;
            t.f("delta", delta);
            t.i("steps", m.steps() as i64);
            t.i("steps_separate", s.steps() as i64);
            t.i(
                "steps_gap_formula",
                v.steps_by_gap_formula(delta).map_or(-1, |n| n as i64),
            );
            t.f("a_n", m.a_n());
            let per_level = m.pieces_per_level();
            t.i(
                "max_intervals",
                per_level.iter().copied().max().unwrap_or(0) as i64,
            );
            t.i("total_intervals", per_level.iter().sum::<usize>() as i64);
        }
        Ok(t.with_set(v).build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run};

    /// Definition 2 for V = [0, 1] ∪ [100, 101]: the wider R_0, the fewer steps (none once δ
    /// covers the gap), and the widest-gap formula predicts each count; δ must be ≥ 0.
    #[test]
    fn steps_fall_as_delta_grows_and_match_the_gap_formula() {
        let with = r#"{neighbour_set: "[0, 1] ∪ [100, 101]", delta: [0, 10, 49.5, 100]}"#;
        let out = run(&KIND, with, &[], 0).unwrap().frame;
        let steps = floats(&out, "steps");
        assert!(steps.windows(2).all(|w| w[0] >= w[1]), "{out}");
        assert!(steps[0] > 0.0 && steps[3] == 0.0, "{out}");
        assert_eq!(floats(&out, "steps_gap_formula"), steps, "{out}");
        let e = refused(&KIND, r#"{neighbour_set: "[0, 1]", delta: [-1]}"#);
        assert_eq!(e, "delta: delta = -1 is invalid: must be ≥ 0");
    }
}
