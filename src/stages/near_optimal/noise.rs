//! `near_optimal.noise`: adds the noise of Wu, He & Xia's near-optimal mechanism (Algorithm 1's
//! density, drawn by Algorithm 2) to a numeric column, `samples` releases per row — the
//! mechanism itself, so that it can be audited and used, not only its density and error.
//!
//! # Guarantee
//! Releasing `f(x) + X` is ε-DP for every linear query whose neighbouring answers differ by a
//! value of ±V (`neighbour_set`): the guarantee of [`crate::mech::near_optimal`], for Algorithm
//! 2 with the geometric variable counted from 1 (the reading the density requires). With
//! V = [0, Δ] it is the optimal staircase mechanism (`mechanism.noise` with `noise:
//! staircase`); with V = [0, a] ∪ [b, c] it spends less noise on the gap (a, b) than Laplace
//! or staircase noise calibrated to Δ = c would.

use anyhow::Result;
use polars::prelude::Column;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{check_decimals, options, Set};
use crate::mech::near_optimal::{construct, GeometricSupport, MAX_STEPS};
use crate::stages::columns::f64_col;
use crate::stages::mechanism::noise::{
    check_added_names, check_output_name, draws, release_columns, releases,
};
use crate::stages::param::{Count, NonNegative, Positive};
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "near_optimal.noise",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Adds the noise of Wu–He–Xia's near-optimal mechanism (Algorithm 1's density for neighbour set V, drawn by Algorithm 2) to a numeric column, `samples` times per row, keeping the row's other columns: ε-DP for queries whose neighbouring answers differ by a value of ±V.",
    params: params::<NearOptimalNoise>,
    gather: Gather::Nothing,
    build: build::<NearOptimalNoise>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NearOptimalNoise {
    /// the numeric column f(x) to perturb
    column: String,
    /// V as "[0, a] ∪ [b, c]" (0 < a < b < c) or "[0, c]": the values by which neighbouring answers differ
    neighbour_set: Set,
    /// the paper's δ, the widening of the sets (not a privacy δ; at most 18 decimals)
    delta: NonNegative,
    /// privacy parameter ε
    epsilon: Positive,
    /// independent noisy releases per input row (output has `row`, `sample`, the input's columns and the noisy column)
    #[serde(default = "crate::stages::param::count::<1>")]
    samples: Count,
    /// name of the noisy column
    #[serde(default = "noisy")]
    output: String,
}

fn noisy() -> String {
    "noisy".into()
}

impl Stage for NearOptimalNoise {
    /// ε-DP for the neighbour set it was built for (Wu, He & Xia 2017, Theorem 3).
    fn privacy(&self) -> Option<crate::mech::Privacy> {
        Some(crate::mech::Privacy::Approx {
            epsilon: *self.epsilon,
            delta: 0.0,
        })
    }

    fn validate(&self) -> Result<(), ParamError> {
        self.neighbour_set.check()?;
        check_decimals("delta", *self.delta)?;
        check_size_at("samples", Limit::Draws, "samples", Some(self.samples.get()))?;
        check_output_name(&self.output, &self.column)?;
        // The density must exist (Definition 2's convergence, a tail of one interval).
        construct(&self.neighbour_set, *self.delta, options(MAX_STEPS, true))
            .and_then(|levels| levels.mechanism(*self.epsilon).map(|_| ()))
            .map_err(|e| ParamError::at("neighbour_set", e.to_string()))
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        vec![("column".into(), self.column.clone())]
    }

    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        release_columns(inputs, &self.output)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let input = ctx.input()?;
        let values = f64_col(input, &self.column)?;
        check_added_names(input, &self.output)?;
        let (rows, samples) = (input.height() as u64, self.samples.get());
        let width = input.width() as u64 + 3;
        check_size_run(
            Limit::Cells,
            &format!(
                "input rows × samples × {width} output columns ({rows} × {samples} × {width})"
            ),
            product(&[rows, samples, width]),
        )?;
        let levels = construct(&self.neighbour_set, *self.delta, options(MAX_STEPS, true))?;
        let m = levels.mechanism(*self.epsilon)?;
        let per_row = samples as usize;
        let n = input.height() * per_row;
        let noise = draws(ctx, n, 0.0, |rng, chunk| {
            for x in chunk {
                *x = m.sample(rng, GeometricSupport::FromOne);
            }
        });
        let noisy = Column::new(
            self.output.as_str().into(),
            (0..n)
                .map(|i| values[i / per_row] + noise[i])
                .collect::<Vec<f64>>(),
        );
        Ok(releases(input, per_row, noisy)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run};
    use crate::stages::columns::FrameBuilder;

    /// Through the stage, the noise's mean |X| is Algorithm 1's closed form, as
    /// `near_optimal.rate` reports it, within 5 standard errors (4·10⁴ draws); the released
    /// value is the column's plus the noise, for every row.
    #[test]
    fn the_noise_has_the_density_of_algorithm_1() {
        let v = r#"neighbour_set: "[0, 1] ∪ [3, 4]""#;
        let input = FrameBuilder::new()
            .f64("value", vec![10.0, -5.0])
            .build()
            .unwrap();
        let out = run(
            &KIND,
            &format!("{{column: value, {v}, delta: 0.25, epsilon: 1, samples: 20000}}"),
            &[&input],
            5,
        )
        .unwrap()
        .frame;
        assert_eq!(out.height(), 40_000);
        let (value, noisy) = (floats(&out, "value"), floats(&out, "noisy"));
        let abs: Vec<f64> = value
            .iter()
            .zip(&noisy)
            .map(|(v, y)| (y - v).abs())
            .collect();
        let n = abs.len() as f64;
        let mean = abs.iter().sum::<f64>() / n;
        let sd = (abs.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let rate = run(
            &crate::stages::near_optimal::rate::KIND,
            &format!("{{{v}, delta: [0.25], epsilon: [1]}}"),
            &[],
            0,
        )
        .unwrap()
        .frame;
        let closed = floats(&rate, "mean_abs")[0];
        assert!(
            (mean - closed).abs() < 5.0 * sd / n.sqrt(),
            "{mean} vs {closed}"
        );
    }

    #[test]
    fn refuses_a_set_that_is_not_one() {
        let e = refused(
            &KIND,
            r#"{column: value, neighbour_set: "[1, 2]", delta: 0.1, epsilon: 1}"#,
        );
        assert!(e.starts_with("neighbour_set: "), "{e}");
        let e = refused(
            &KIND,
            r#"{column: value, neighbour_set: "[0, 1]", delta: 0.1, epsilon: 1, output: row}"#,
        );
        assert!(e.starts_with("output: "), "{e}");
    }
}
