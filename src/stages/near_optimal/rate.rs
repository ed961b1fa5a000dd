//! `near_optimal.rate`: Algorithm 1 of Wu–He–Xia 2017 over a grid of δ and ε for one
//! neighbour set, with the staircase and Laplace E|X| beside it.

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::{
    check_grid, column_names, grid, max_steps, options, Col, GridOf, MaxSteps, RowBuilder, Set,
};
use crate::mech::laplace::Laplace;
use crate::mech::near_optimal::sweep;
use crate::mech::staircase::Staircase;
use crate::stages::{
    build, check_size_at, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.rate",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Algorithm 1 of Wu–He–Xia 2017 over a grid of δ and ε for one neighbour set V: per (δ, ε) the steps n to convergence, E|X| (closed form with the geometric tail), the staircase and Laplace E|X|, rate = E|X|(e^ε − 1)/(Δf e^(ε/2)) and the tail's probability. The sets I_i are built once and shared by every δ.",
    params: params::<Rate>,
    gather: Gather::Nothing,
    build: build::<Rate>,
    verdict: None,
};

/// The columns after the set's, in order.
const COLUMNS: &[(&str, Col)] = &[
    ("delta", Col::F),
    ("epsilon", Col::F),
    ("steps", Col::I),
    ("a_n", Col::F),
    ("mean_abs", Col::F),
    ("staircase_mean_abs", Col::F),
    ("laplace_mean_abs", Col::F),
    ("rate", Col::F),
    ("tail_mass", Col::F),
];

/// Columns of the frame: its rows × this are checked against `--max-cells`.
const WIDTH: u64 = (super::SET_COLUMNS.len() + COLUMNS.len()) as u64;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rate {
    /// V as "[0, a] ∪ [b, c]" (0 < a < b < c) or "[0, c]"; usually `$V`
    pub neighbour_set: Set,
    /// δ, the half-width of R_0: numbers ≥ 0, at most 18 decimals (a list or {from, to,
    /// step}, {linspace}, {logspace})
    #[schemars(schema_with = "crate::axis::grid_schema")]
    pub delta: Value,
    /// privacy parameters ε: numbers > 0 (a list or a generated grid, as `delta`)
    #[schemars(schema_with = "crate::axis::grid_schema")]
    pub epsilon: Value,
    /// give up if Definition 2 does not hold by this step
    #[serde(default = "max_steps")]
    pub max_steps: MaxSteps,
}

impl Stage for Rate {
    fn validate(&self) -> Result<(), ParamError> {
        self.neighbour_set.check()?;
        let nd = check_grid("delta", &self.delta, GridOf::Delta)?;
        let ne = check_grid("epsilon", &self.epsilon, GridOf::Epsilon)?;
        check_size_at(
            "epsilon",
            Limit::Cells,
            &format!("δ values × ε values × {WIDTH} columns ({nd} × {ne} × {WIDTH})"),
            product(&[nd, ne, WIDTH]),
        )
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(column_names(true, COLUMNS))
    }

    fn run(&self, _ctx: &mut Ctx) -> Result<Output> {
        let v = &*self.neighbour_set;
        let deltas = grid("delta", &self.delta)?;
        let eps = grid("epsilon", &self.epsilon)?;
        let results = sweep(v, &deltas, options(self.max_steps.get() as usize, false))?;
        let df = v.sensitivity();
        let mut t = RowBuilder::new(COLUMNS);
        for (&delta, levels) in deltas.iter().zip(results) {
            let levels = levels?;
            for &e in &eps {
                let s = levels.summary(e)?;
                t.f("delta", delta);
                t.f("epsilon", e);
                t.i("steps", levels.steps() as i64);
                t.f("a_n", levels.a_n());
                t.f("mean_abs", s.mean_abs);
                t.f("staircase_mean_abs", Staircase::optimal(e, df)?.mean_abs());
                t.f("laplace_mean_abs", Laplace::for_privacy(e, df)?.mean_abs());
                t.f("rate", s.rate);
                t.f("tail_mass", s.tail_mass);
            }
        }
        Ok(t.with_set(v).build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run, strings};

    /// Per (δ, ε) of the grids: the set's Δf and μ(V), the Laplace mechanism's E|X| = Δf/ε,
    /// the optimal staircase below it, and rate = E|X|(e^ε − 1)/(Δf e^(ε/2)) from the same
    /// row's E|X|; a set that is not one is refused at `neighbour_set`.
    #[test]
    fn rates_follow_from_the_row_s_mean() {
        let with = r#"{neighbour_set: "[0, 1] ∪ [100, 101]", delta: [2, 60], epsilon: [0.5, 2]}"#;
        let out = run(&KIND, with, &[], 0).unwrap().frame;
        assert_eq!(out.height(), 4);
        assert_eq!(strings(&out, "V")[0], "[0, 1] ∪ [100, 101]");
        assert_eq!(
            (floats(&out, "sensitivity")[0], floats(&out, "measure")[0]),
            (101.0, 2.0)
        );
        let (eps, mean) = (floats(&out, "epsilon"), floats(&out, "mean_abs"));
        let (lap, stair, rate) = (
            floats(&out, "laplace_mean_abs"),
            floats(&out, "staircase_mean_abs"),
            floats(&out, "rate"),
        );
        for i in 0..4 {
            assert!((lap[i] - 101.0 / eps[i]).abs() < 1e-9 * lap[i], "{out}");
            assert!(stair[i] <= lap[i], "{out}");
            let want = mean[i] * (eps[i].exp() - 1.0) / (101.0 * (eps[i] / 2.0).exp());
            assert!((rate[i] - want).abs() < 1e-12 * want, "{out}");
        }
        let e = refused(
            &KIND,
            r#"{neighbour_set: "[0, 2] ∪ [1, 3]", delta: [1], epsilon: [1]}"#,
        );
        assert!(e.starts_with("neighbour_set: "), "{e}");
    }
}
