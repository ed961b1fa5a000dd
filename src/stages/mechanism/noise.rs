//! `mechanism.noise`: additive noise mechanisms on a numeric column (Laplace, Gaussian,
//! geometric), `samples` noisy releases per row.

use anyhow::Result;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::gaussian::Gaussian;
use crate::mech::geometric::Geometric;
use crate::mech::laplace::Laplace;
use crate::mech::ParamRangeError;
use crate::stages::frame::{f64_col, FrameBuilder};
use crate::stages::param::{Count, Level, Positive};
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "mechanism.noise",
    version: 1,
    random: true,
    runs_programs: false,
    summary:
        "Adds Laplace, Gaussian or geometric noise to a numeric column, `samples` times per row.",
    params: params::<AddNoise>,
    gather: Gather::Nothing,
    build: build::<AddNoise>,
};

/// Draws per sub-stream: the unit of parallel work whose result is independent of threads.
const CHUNK: usize = 1 << 16;

/// Columns of the output frame (row, sample, the input column, the noisy column): each noisy
/// value is one row of them, counted against `--max-cells`.
const OUT_COLUMNS: u64 = 4;

#[derive(Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum NoiseKind {
    /// ε-DP, scale Δ/ε
    Laplace,
    /// (ε, δ)-DP, σ = Δ·sqrt(2 ln(1.25/δ))/ε, ε < 1
    Gaussian,
    /// ε-DP on integers, α = e^(−ε/Δ)
    Geometric,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddNoise {
    /// the numeric column f(x) to perturb
    column: String,
    /// the noise distribution
    noise: NoiseKind,
    /// privacy parameter ε
    epsilon: Positive,
    /// privacy parameter δ (Gaussian only, where it is required)
    delta: Option<Level>,
    /// Δ: ℓ1 sensitivity (ℓ2 for Gaussian) of the column's query
    #[serde(default = "one")]
    sensitivity: Positive,
    /// independent noisy releases per input row (output has `sample` and `noisy` columns)
    #[serde(default = "one_release")]
    samples: Count,
    /// name of the noisy column
    #[serde(default = "noisy")]
    output: String,
}

fn one() -> Positive {
    Positive::of(1.0)
}
fn one_release() -> Count {
    Count::of(1)
}
fn noisy() -> String {
    "noisy".into()
}

enum Sampler {
    Laplace(Laplace),
    Gaussian(Gaussian),
    Geometric(Geometric),
}

impl AddNoise {
    /// The mechanism (whose own checks, such as ε < 1 for Gaussian noise, may still refuse).
    fn sampler(&self) -> Result<Sampler, ParamRangeError> {
        let (epsilon, sensitivity) = (*self.epsilon, *self.sensitivity);
        Ok(match self.noise {
            NoiseKind::Laplace => Sampler::Laplace(Laplace::for_privacy(epsilon, sensitivity)?),
            NoiseKind::Geometric => {
                Sampler::Geometric(Geometric::for_privacy(epsilon, sensitivity)?)
            }
            NoiseKind::Gaussian => Sampler::Gaussian(Gaussian::classic(
                epsilon,
                *self.delta.expect("validated: Gaussian noise has `delta`"),
                sensitivity,
            )?),
        })
    }
}

impl Stage for AddNoise {
    fn validate(&self) -> Result<(), ParamError> {
        let samples = self.samples.get();
        check_size_at("samples", Limit::Draws, "samples", Some(samples))?;
        check_size_at(
            "samples",
            Limit::Cells,
            &format!("samples × {OUT_COLUMNS} output columns ({samples} × {OUT_COLUMNS})"),
            product(&[samples, OUT_COLUMNS]),
        )?;
        match (self.noise, self.delta) {
            (NoiseKind::Gaussian, None) => Err(ParamError::at(
                "delta",
                "the Gaussian mechanism needs `delta` in (0, 1)",
            )),
            (NoiseKind::Laplace | NoiseKind::Geometric, Some(_)) => Err(ParamError::at(
                "delta",
                "`delta` applies to Gaussian noise only",
            )),
            _ => self
                .sampler()
                .map(|_| ())
                .map_err(|e| ParamError::at(e.name, e.to_string())),
        }
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        vec![("column".into(), self.column.clone())]
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(vec![
            "row".into(),
            "sample".into(),
            self.column.clone(),
            self.output.clone(),
        ])
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let sampler = self.sampler()?;
        let values = f64_col(ctx.input()?, &self.column)?;
        let (rows, samples) = (values.len() as u64, self.samples.get());
        let draws = product(&[rows, samples]);
        check_size_run(
            Limit::Draws,
            &format!("input rows × samples ({rows} × {samples})"),
            draws,
        )?;
        check_size_run(
            Limit::Cells,
            &format!("input rows × samples × {OUT_COLUMNS} output columns ({rows} × {samples} × {OUT_COLUMNS})"),
            product(&[rows, samples, OUT_COLUMNS]),
        )?;
        let per_row = samples as usize;
        let n = values.len() * per_row;
        let mut noise = vec![0.0; n];
        // Fixed chunks, one sub-stream each: identical output for any number of threads.
        noise
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, chunk)| {
                let mut rng = ctx.substream(i as u64);
                match &sampler {
                    Sampler::Laplace(l) => l.fill(&mut rng, chunk),
                    Sampler::Gaussian(g) => g.fill(&mut rng, chunk),
                    Sampler::Geometric(g) => chunk
                        .iter_mut()
                        .for_each(|z| *z = g.sample(&mut rng) as f64),
                }
            });
        let mut row = Vec::with_capacity(n);
        let mut sample = Vec::with_capacity(n);
        let mut original = Vec::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        for (r, &v) in values.iter().enumerate() {
            for s in 0..per_row {
                row.push(r as i64);
                sample.push(s as i64);
                original.push(v);
                out.push(v + noise[r * per_row + s]);
            }
        }
        Ok(FrameBuilder::new()
            .i64("row", row)
            .i64("sample", sample)
            .f64(&self.column, original)
            .f64(&self.output, out)
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run};

    /// Each row gets `samples` releases centred on its value (Laplace of scale Δ/ε = 1: the
    /// mean of 4000 draws is within 0.2 of it, ~9 standard errors); one seed gives one output,
    /// another seed other draws.
    #[test]
    fn releases_centre_on_the_value_and_follow_the_seed() {
        let input = polars::df!("u" => [1.0, 100.0]).unwrap();
        let with = "{column: u, noise: laplace, epsilon: 1, samples: 4000}";
        let out = run(&KIND, with, &[&input], 7).unwrap().frame;
        assert_eq!(out.height(), 8000);
        assert_eq!(floats(&out, "row")[3999..4001], [0.0, 1.0]);
        let noisy = floats(&out, "noisy");
        for (r, v) in [(0, 1.0), (1, 100.0)] {
            let mean = noisy[r * 4000..(r + 1) * 4000].iter().sum::<f64>() / 4000.0;
            assert!((mean - v).abs() < 0.2, "row {r}: mean {mean}, value {v}");
        }
        assert!(out.equals(&run(&KIND, with, &[&input], 7).unwrap().frame));
        assert!(!out.equals(&run(&KIND, with, &[&input], 8).unwrap().frame));
    }

    /// Geometric noise releases integers; `delta` goes with Gaussian noise and only with it.
    #[test]
    fn geometric_noise_is_integral_and_delta_is_gaussian_only() {
        let input = polars::df!("u" => [3.0]).unwrap();
        let with = "{column: u, noise: geometric, epsilon: 0.5, samples: 100, output: z}";
        let out = run(&KIND, with, &[&input], 1).unwrap().frame;
        assert!(floats(&out, "z").iter().all(|z| z.fract() == 0.0));
        assert_eq!(
            refused(&KIND, "{column: u, noise: gaussian, epsilon: 0.5}"),
            "delta: the Gaussian mechanism needs `delta` in (0, 1)"
        );
        assert_eq!(
            refused(
                &KIND,
                "{column: u, noise: laplace, epsilon: 0.5, delta: 0.1}"
            ),
            "delta: `delta` applies to Gaussian noise only"
        );
    }
}
