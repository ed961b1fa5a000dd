//! `mechanism.noise`: additive noise mechanisms on a numeric column (Laplace, Gaussian with a
//! choice of calibration, geometric, discrete Gaussian, the optimal staircase), `samples` noisy
//! releases per row, each with every column of its input row.

use anyhow::Result;
use polars::prelude::{Column, DataFrame, DataType, IdxCa, IdxSize};
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::discrete_gaussian::DiscreteGaussian;
use crate::mech::gaussian::Gaussian;
use crate::mech::geometric::Geometric;
use crate::mech::laplace::Laplace;
use crate::mech::staircase::Staircase;
use crate::mech::ParamRangeError;
use crate::stages::columns::{column, f64_col};
use crate::stages::param::{Count, Level, Positive};
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

// Version 2: the output keeps every input column, integer noise on an integer column is an
// integer column, and non-integer values under integer noise are refused.
pub const KIND: KindInfo = KindInfo {
    name: "mechanism.noise",
    version: 2,
    random: true,
    runs_programs: false,
    summary: "Adds Laplace, Gaussian (classic, analytic or zCDP calibration), geometric, discrete Gaussian or optimal staircase noise to a numeric column, `samples` times per row, keeping the row's other columns.",
    params: params::<AddNoise>,
    gather: Gather::Nothing,
    build: build::<AddNoise>,
    verdict: None,
};

/// Draws per sub-stream: the unit of parallel work whose result is independent of threads.
const CHUNK: usize = 1 << 16;

/// The columns the stage adds to its input's: `row`, `sample` and the noisy column.
const ADDED_COLUMNS: u64 = 3;

#[derive(Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum NoiseKind {
    /// ε-DP, scale Δ/ε
    Laplace,
    /// (ε, δ)-DP or ρ-zCDP, σ as `calibration` says
    Gaussian,
    /// ε-DP on integers, α = e^(−ε/Δ)
    Geometric,
    /// ρ-zCDP on integers, σ² = Δ²/(2ρ), exact sampler (Canonne, Kamath & Steinke 2020)
    DiscreteGaussian,
    /// ε-DP, the staircase of Geng & Viswanath with the E|X|-optimal step γ* = 1/(1 + e^(ε/2))
    Staircase,
}

impl NoiseKind {
    fn name(self) -> &'static str {
        match self {
            NoiseKind::Laplace => "laplace",
            NoiseKind::Gaussian => "gaussian",
            NoiseKind::Geometric => "geometric",
            NoiseKind::DiscreteGaussian => "discrete_gaussian",
            NoiseKind::Staircase => "staircase",
        }
    }

    /// Noise on the integers: the query must be integer-valued.
    fn integer(self) -> bool {
        matches!(self, NoiseKind::Geometric | NoiseKind::DiscreteGaussian)
    }
}

#[derive(Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Calibration {
    /// σ = Δ·sqrt(2 ln(1.25/δ))/ε, (ε, δ)-DP for ε < 1 (Dwork & Roth Thm 3.22)
    Classic,
    /// the smallest σ that is (ε, δ)-DP, any ε > 0 (Balle & Wang 2018, Algorithm 1)
    Analytic,
    /// σ = Δ/√(2ρ), ρ-zCDP (Bun & Steinke 2016): takes `rho` instead of `epsilon` and `delta`
    Zcdp,
}

impl Calibration {
    fn name(self) -> &'static str {
        match self {
            Calibration::Classic => "classic",
            Calibration::Analytic => "analytic",
            Calibration::Zcdp => "zcdp",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddNoise {
    /// the numeric column f(x) to perturb (integer-valued for geometric and discrete Gaussian noise)
    column: String,
    /// the noise distribution
    noise: NoiseKind,
    /// privacy parameter ε (all noise but ρ-zCDP noise, where it is required)
    epsilon: Option<Positive>,
    /// privacy parameter δ (Gaussian noise calibrated classic or analytic, where it is required)
    delta: Option<Level>,
    /// how σ of Gaussian noise follows from the privacy parameters (Gaussian only); absent: classic
    calibration: Option<Calibration>,
    /// ρ of ρ-zCDP (discrete Gaussian, and Gaussian with `calibration: zcdp`, where it is required)
    rho: Option<Positive>,
    /// Δ: ℓ1 sensitivity (ℓ2 for Gaussian and discrete Gaussian) of the column's query
    #[serde(default = "one")]
    sensitivity: Positive,
    /// independent noisy releases per input row (output has `row`, `sample`, the input's columns and the noisy column)
    #[serde(default = "crate::stages::param::count::<1>")]
    samples: Count,
    /// name of the noisy column
    #[serde(default = "noisy")]
    output: String,
}

fn one() -> Positive {
    Positive::of(1.0)
}
fn noisy() -> String {
    "noisy".into()
}

enum Sampler {
    Laplace(Laplace),
    Gaussian(Gaussian),
    Geometric(Geometric),
    DiscreteGaussian(DiscreteGaussian),
    Staircase(Staircase),
}

/// The perturbed column's values: integers stay integers under integer noise.
enum Values {
    Float(Vec<f64>),
    Integer(Vec<i64>),
}

impl AddNoise {
    fn calibration(&self) -> Calibration {
        self.calibration.unwrap_or(Calibration::Classic)
    }

    /// Whether the noise is calibrated by ρ (ρ-zCDP) rather than by ε (and δ).
    fn by_rho(&self) -> bool {
        self.noise == NoiseKind::DiscreteGaussian
            || (self.noise == NoiseKind::Gaussian && self.calibration() == Calibration::Zcdp)
    }

    /// The noise and calibration in the words of the pipeline file, for messages.
    fn choice(&self) -> String {
        match (self.noise, self.calibration) {
            (NoiseKind::Gaussian, Some(c)) => {
                format!("`noise: gaussian` with `calibration: {}`", c.name())
            }
            (noise, _) => format!("`noise: {}`", noise.name()),
        }
    }

    /// Each noise takes its own privacy parameters: ε (Laplace, geometric), ε and δ (Gaussian,
    /// classic or analytic), or ρ (Gaussian with the zCDP calibration, discrete Gaussian).
    fn check_parameters(&self) -> Result<(), ParamError> {
        if let (Some(c), false) = (self.calibration, self.noise == NoiseKind::Gaussian) {
            return Err(ParamError::at(
                "calibration",
                format!(
                    "`calibration: {}` applies to `noise: gaussian` only, not to `noise: {}`",
                    c.name(),
                    self.noise.name()
                ),
            ));
        }
        let choice = self.choice();
        if self.by_rho() {
            for (key, given) in [
                ("epsilon", self.epsilon.is_some()),
                ("delta", self.delta.is_some()),
            ] {
                if given {
                    return Err(ParamError::at(
                        key,
                        format!("`{key}` does not apply to {choice}, which is calibrated by `rho` (ρ-zCDP)"),
                    ));
                }
            }
            if self.rho.is_none() {
                return Err(ParamError::at(
                    "rho",
                    format!("{choice} needs `rho`, the ρ of ρ-zCDP (> 0)"),
                ));
            }
            return Ok(());
        }
        if self.rho.is_some() {
            return Err(ParamError::at(
                "rho",
                format!("`rho` applies to `noise: discrete_gaussian` and to `noise: gaussian` with `calibration: zcdp`, not to {choice}"),
            ));
        }
        if self.epsilon.is_none() {
            return Err(ParamError::at(
                "epsilon",
                format!("{choice} needs `epsilon` (> 0)"),
            ));
        }
        match (self.noise, self.delta) {
            (NoiseKind::Gaussian, None) => Err(ParamError::at(
                "delta",
                "the Gaussian mechanism needs `delta` in (0, 1)",
            )),
            (NoiseKind::Gaussian, Some(_)) => Ok(()),
            (_, Some(_)) => Err(ParamError::at(
                "delta",
                "`delta` applies to Gaussian noise only",
            )),
            (_, None) => Ok(()),
        }
    }

    /// The mechanism (whose own checks, such as ε < 1 for the classic Gaussian calibration,
    /// may still refuse). Call after [`AddNoise::check_parameters`].
    fn sampler(&self) -> Result<Sampler, ParamRangeError> {
        let sensitivity = *self.sensitivity;
        let epsilon = || {
            *self
                .epsilon
                .expect("checked: ε-calibrated noise has `epsilon`")
        };
        let delta = || {
            *self
                .delta
                .expect("checked: (ε, δ) Gaussian noise has `delta`")
        };
        let rho = || *self.rho.expect("checked: ρ-calibrated noise has `rho`");
        Ok(match (self.noise, self.calibration()) {
            (NoiseKind::Laplace, _) => {
                Sampler::Laplace(Laplace::for_privacy(epsilon(), sensitivity)?)
            }
            (NoiseKind::Geometric, _) => {
                Sampler::Geometric(Geometric::for_privacy(epsilon(), sensitivity)?)
            }
            (NoiseKind::Staircase, _) => {
                Sampler::Staircase(Staircase::optimal(epsilon(), sensitivity)?)
            }
            (NoiseKind::DiscreteGaussian, _) => {
                Sampler::DiscreteGaussian(DiscreteGaussian::for_zcdp(rho(), sensitivity)?)
            }
            (NoiseKind::Gaussian, Calibration::Classic) => {
                Sampler::Gaussian(Gaussian::classic(epsilon(), delta(), sensitivity)?)
            }
            (NoiseKind::Gaussian, Calibration::Analytic) => {
                Sampler::Gaussian(Gaussian::analytic(epsilon(), delta(), sensitivity)?)
            }
            (NoiseKind::Gaussian, Calibration::Zcdp) => {
                Sampler::Gaussian(Gaussian::zcdp(rho(), sensitivity)?)
            }
        })
    }

    /// The perturbed column: integers (as `i64`) when the noise is integer and the column an
    /// integer column; otherwise numbers, which integer noise requires to be whole.
    fn values(&self, input: &DataFrame) -> Result<Values> {
        let name = &self.column;
        let col = column(input, name)?;
        if self.noise.integer() && col.dtype().is_integer() {
            let cast = col.cast(&DataType::Int64)?;
            return cast
                .i64()?
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.ok_or_else(|| {
                        anyhow::anyhow!("column `{name}` has a missing value, or one beyond 64-bit integers, at row {i}")
                    })
                })
                .collect::<Result<_>>()
                .map(Values::Integer);
        }
        let values = f64_col(input, name)?;
        if self.noise.integer() {
            if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| v.fract() != 0.0) {
                return Err(ParamError::at(
                    "column",
                    format!(
                        "column `{name}` holds {v} at row {i}: {} noise is for integer-valued queries (integer noise leaves a fractional part in the clear)",
                        self.noise.name()
                    ),
                )
                .into());
            }
        }
        Ok(Values::Float(values))
    }
}

impl Stage for AddNoise {
    /// ε-DP (Laplace, geometric, staircase), (ε, δ)-DP (Gaussian, classic or analytic), or
    /// ρ-zCDP (Gaussian with the zCDP calibration, discrete Gaussian), at its parameters, for
    /// inputs that differ by at most `sensitivity`.
    fn privacy(&self) -> Option<crate::mech::Privacy> {
        use crate::mech::Privacy;
        if self.by_rho() {
            return self.rho.map(|rho| Privacy::Zcdp { rho: *rho });
        }
        Some(Privacy::Approx {
            epsilon: *self.epsilon?,
            delta: self.delta.map_or(0.0, |d| *d),
        })
    }

    fn validate(&self) -> Result<(), ParamError> {
        let samples = self.samples.get();
        check_size_at("samples", Limit::Draws, "samples", Some(samples))?;
        // At least the perturbed column besides the added ones.
        let least = ADDED_COLUMNS + 1;
        check_size_at(
            "samples",
            Limit::Cells,
            &format!("samples × {least} output columns ({samples} × {least})"),
            product(&[samples, least]),
        )?;
        check_output_name(&self.output, &self.column)?;
        self.check_parameters()?;
        self.sampler().map(|_| ()).map_err(|e| {
            let classic = self.noise == NoiseKind::Gaussian
                && self.calibration() == Calibration::Classic
                && e.name == "epsilon";
            let hint = if classic {
                " — here: `calibration: analytic`, or `calibration: zcdp` with `rho`"
            } else {
                ""
            };
            ParamError::at(e.name, format!("{e}{hint}"))
        })
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        vec![("column".into(), self.column.clone())]
    }

    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        release_columns(inputs, &self.output)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let sampler = self.sampler()?;
        let input = ctx.input()?;
        let values = self.values(input)?;
        check_added_names(input, &self.output)?;
        let (rows, samples) = (input.height() as u64, self.samples.get());
        let width = input.width() as u64 + ADDED_COLUMNS;
        check_size_run(
            Limit::Draws,
            &format!("input rows × samples ({rows} × {samples})"),
            product(&[rows, samples]),
        )?;
        check_size_run(
            Limit::Cells,
            &format!(
                "input rows × samples × {width} output columns ({rows} × {samples} × {width})"
            ),
            product(&[rows, samples, width]),
        )?;
        let per_row = samples as usize;
        let n = input.height() * per_row;
        let noisy = match (&sampler, values) {
            (
                Sampler::Laplace(_) | Sampler::Gaussian(_) | Sampler::Staircase(_),
                Values::Float(v),
            ) => {
                let noise = draws(ctx, n, 0.0, |rng, chunk| match &sampler {
                    Sampler::Laplace(l) => l.fill(rng, chunk),
                    Sampler::Gaussian(g) => g.fill(rng, chunk),
                    Sampler::Staircase(s) => chunk.iter_mut().for_each(|x| *x = s.sample(rng)),
                    _ => unreachable!("continuous noise"),
                });
                Column::new(
                    self.output.as_str().into(),
                    (0..n)
                        .map(|i| v[i / per_row] + noise[i])
                        .collect::<Vec<f64>>(),
                )
            }
            (_, values) => {
                let noise = draws(ctx, n, 0i64, |rng, chunk| {
                    for z in chunk {
                        *z = match &sampler {
                            Sampler::Geometric(g) => g.sample(rng),
                            Sampler::DiscreteGaussian(d) => d.sample(rng),
                            _ => unreachable!("integer noise"),
                        }
                    }
                });
                match values {
                    Values::Float(v) => Column::new(
                        self.output.as_str().into(),
                        (0..n)
                            .map(|i| v[i / per_row] + noise[i] as f64)
                            .collect::<Vec<f64>>(),
                    ),
                    Values::Integer(v) => {
                        let out = (0..n)
                            .map(|i| {
                                v[i / per_row].checked_add(noise[i]).ok_or_else(|| {
                                    anyhow::anyhow!(
                                        "row {}: {} + {} overflows 64-bit integers",
                                        i / per_row,
                                        v[i / per_row],
                                        noise[i]
                                    )
                                })
                            })
                            .collect::<Result<Vec<i64>>>()?;
                        Column::new(self.output.as_str().into(), out)
                    }
                }
            }
        };
        Ok(releases(input, per_row, noisy)?.into())
    }
}

/// `output:` must not name a column the additive-noise output already has.
pub(crate) fn check_output_name(output: &str, column: &str) -> Result<(), ParamError> {
    if ["row", "sample", column].contains(&output) {
        return Err(ParamError::at(
            "output",
            format!(
                "`output: {output}` would replace a column of the output (`row`, `sample` and the input's columns, among them `{column}`)"
            ),
        ));
    }
    Ok(())
}

/// The columns of an additive-noise output ([`releases`]), from the input's.
pub(crate) fn release_columns(inputs: &[Option<Vec<String>>], output: &str) -> Option<Vec<String>> {
    let mut out = vec!["row".to_string(), "sample".to_string()];
    out.extend(inputs.first()?.clone()?);
    out.push(output.to_string());
    Some(out)
}

/// The added columns must not replace input columns: the noisy column's name is the
/// user's (`output:`), `row` and `sample` are the stage's.
pub(crate) fn check_added_names(input: &DataFrame, output: &str) -> Result<(), ParamError> {
    let has = |c: &str| input.column(c).is_ok();
    if has(output) {
        return Err(ParamError::at(
            "output",
            format!(
                "the input already has a column `{}`: give the noisy column another name",
                output
            ),
        ));
    }
    if let Some(c) = ["row", "sample"].into_iter().find(|c| has(c)) {
        return Err(ParamError {
            path: Vec::new(),
            message: format!(
                "the input already has a column `{c}`, which this stage adds (the input row and the release of each noisy value): rename it upstream"
            ),
        });
    }
    Ok(())
}

/// The output of an additive-noise kind: `row` and `sample`, the input's columns, then the
/// noisy column, whose value `i` is release `i % per_row` of input row `i / per_row`.
pub(crate) fn releases(input: &DataFrame, per_row: usize, noisy: Column) -> Result<DataFrame> {
    let n = input.height() * per_row;
    let idx: Vec<IdxSize> = (0..n).map(|i| (i / per_row) as IdxSize).collect();
    let repeated = input.take(&IdxCa::from_vec("idx".into(), idx))?;
    let mut cols = vec![
        Column::new(
            "row".into(),
            (0..n).map(|i| (i / per_row) as i64).collect::<Vec<_>>(),
        ),
        Column::new(
            "sample".into(),
            (0..n).map(|i| (i % per_row) as i64).collect::<Vec<_>>(),
        ),
    ];
    cols.extend(repeated.columns().iter().cloned());
    cols.push(noisy);
    Ok(DataFrame::new_infer_height(cols)?)
}

/// `n` draws in fixed chunks with one sub-stream each: identical output for any number of
/// threads.
pub(crate) fn draws<T: Copy + Send + Sync>(
    ctx: &Ctx,
    n: usize,
    zero: T,
    fill: impl Fn(&mut rand_pcg::Pcg64Mcg, &mut [T]) + Sync,
) -> Vec<T> {
    let mut noise = vec![zero; n];
    noise
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| fill(&mut ctx.substream(i as u64), chunk));
    noise
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, refused, run, strings};
    use crate::mech::gaussian::Gaussian;
    use polars::prelude::DataType;

    /// Staircase noise through the stage: its mean |noise| is the optimal staircase's
    /// E|X| = Δe^(ε/2)/(e^ε − 1) (0.876 at ε = 1, Δ = 2; 4·10⁴ draws, standard error ~0.005),
    /// below the Laplace mechanism's Δ/ε = 2; the noise has no point mass at 0.
    #[test]
    fn staircase_noise_has_the_optimal_mean_error() {
        let input = polars::df!("u" => [5.0]).unwrap();
        let with = "{column: u, noise: staircase, epsilon: 1, sensitivity: 2, samples: 40000}";
        let out = run(&KIND, with, &[&input], 3).unwrap().frame;
        let noisy = floats(&out, "noisy");
        let mean_abs = noisy.iter().map(|v| (v - 5.0).abs()).sum::<f64>() / 40000.0;
        let want = 2.0 * 0.5f64.exp() / (1f64.exp() - 1.0);
        assert!((mean_abs - want).abs() < 0.03, "{mean_abs} vs {want}");
        assert!(refused(
            &KIND,
            "{column: u, noise: staircase, epsilon: 1, delta: 0.1}"
        )
        .starts_with("delta: "));
    }

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

    /// A histogram's keys and labels come through, repeated for each release, with their
    /// types: `row`, `sample`, the input's columns in order, then the noisy column.
    #[test]
    fn every_input_column_is_kept() {
        let input = polars::df!(
            "bin" => [1i64, 2],
            "lo" => [0.0, 10.0],
            "label" => ["young", "old"],
            "count" => [5i64, 7],
        )
        .unwrap();
        let with = "{column: count, noise: laplace, epsilon: 1, samples: 2}";
        let out = run(&KIND, with, &[&input], 1).unwrap().frame;
        assert_eq!(
            names(&out),
            ["row", "sample", "bin", "lo", "label", "count", "noisy"]
        );
        assert_eq!(floats(&out, "bin"), [1.0, 1.0, 2.0, 2.0]);
        assert_eq!(floats(&out, "lo"), [0.0, 0.0, 10.0, 10.0]);
        assert_eq!(strings(&out, "label"), ["young", "young", "old", "old"]);
        assert_eq!(floats(&out, "sample"), [0.0, 1.0, 0.0, 1.0]);
        assert_eq!(out.column("bin").unwrap().dtype(), &DataType::Int64);
        assert_eq!(out.column("noisy").unwrap().dtype(), &DataType::Float64);
    }

    /// The added columns never replace input columns: a clash is refused, naming the column.
    #[test]
    fn added_columns_do_not_replace_input_columns() {
        let input = polars::df!("u" => [1.0], "noisy" => [2.0], "sample" => [0i64]).unwrap();
        let e = fails(
            &KIND,
            "{column: u, noise: laplace, epsilon: 1}",
            &[&input],
            0,
        );
        assert!(e.contains("already has a column `noisy`"), "{e}");
        let e = fails(
            &KIND,
            "{column: u, noise: laplace, epsilon: 1, output: z}",
            &[&input],
            0,
        );
        assert!(e.contains("already has a column `sample`"), "{e}");
        assert_eq!(
            refused(&KIND, "{column: u, noise: laplace, epsilon: 1, output: u}"),
            "output: `output: u` would replace a column of the output (`row`, `sample` and the input's columns, among them `u`)"
        );
    }

    /// Geometric and discrete Gaussian noise on an integer column give an integer column
    /// (Int64); on a float column, floats; a value with a fractional part is refused (integer
    /// noise would leave the fraction in the clear); `delta` goes with Gaussian noise only.
    #[test]
    fn integer_noise_keeps_integers_and_refuses_fractions() {
        let counts = polars::df!("c" => [3i32, 1000]).unwrap();
        for noise in [
            "noise: geometric, epsilon: 0.5",
            "noise: discrete_gaussian, rho: 0.1",
        ] {
            let with = format!("{{column: c, {noise}, samples: 100}}");
            let out = run(&KIND, &with, &[&counts], 1).unwrap().frame;
            assert_eq!(
                out.column("noisy").unwrap().dtype(),
                &DataType::Int64,
                "{noise}"
            );
            assert_eq!(
                out.column("c").unwrap().dtype(),
                &DataType::Int32,
                "{noise}"
            );
            assert!(floats(&out, "noisy")[..100].iter().any(|&z| z != 3.0));
        }
        let input = polars::df!("u" => [3.0]).unwrap();
        let with = "{column: u, noise: geometric, epsilon: 0.5, samples: 100, output: z}";
        let out = run(&KIND, with, &[&input], 1).unwrap().frame;
        assert_eq!(out.column("z").unwrap().dtype(), &DataType::Float64);
        assert!(floats(&out, "z").iter().all(|z| z.fract() == 0.0));
        let halves = polars::df!("u" => [3.0, 2.5]).unwrap();
        for noise in [
            "noise: geometric, epsilon: 0.5",
            "noise: discrete_gaussian, rho: 1",
        ] {
            let e = fails(&KIND, &format!("{{column: u, {noise}}}"), &[&halves], 1);
            assert!(e.contains("column `u` holds 2.5 at row 1"), "{e}");
        }
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

    /// The sample standard deviation of 40 000 releases of 0 (relative standard error
    /// 1/√80 000 ≈ 0.35%).
    fn spread(with: &str) -> f64 {
        let input = polars::df!("u" => [0i64]).unwrap();
        let with = format!("{{column: u, samples: 40000, {with}}}");
        let z = floats(&run(&KIND, &with, &[&input], 3).unwrap().frame, "noisy");
        (z.iter().map(|z| z * z).sum::<f64>() / z.len() as f64).sqrt()
    }

    /// Each calibration reaches its mechanism: the spread of the releases is the σ of the
    /// calibration named (within 2%, ~6 standard errors), and the default is the classic one.
    #[test]
    fn each_calibration_gives_its_sigma() {
        for (with, sigma) in [
            (
                "noise: gaussian, epsilon: 0.5, delta: 1e-5",
                Gaussian::classic(0.5, 1e-5, 1.0).unwrap().sigma(),
            ),
            (
                "noise: gaussian, calibration: analytic, epsilon: 2, delta: 1e-5",
                Gaussian::analytic(2.0, 1e-5, 1.0).unwrap().sigma(),
            ),
            (
                "noise: gaussian, calibration: zcdp, rho: 0.5, sensitivity: 3",
                3.0,
            ),
            ("noise: discrete_gaussian, rho: 0.125", 2.0),
        ] {
            let s = spread(with);
            assert!(
                (s / sigma - 1.0).abs() < 0.02,
                "{with}: spread {s}, σ {sigma}"
            );
        }
    }

    /// A parameter that does not go with the noise and calibration chosen is refused at its
    /// key, naming the value and what it goes with; so is a missing one.
    #[test]
    fn wrong_combinations_are_located() {
        for (with, expect) in [
            (
                "noise: laplace, epsilon: 1, calibration: analytic",
                "calibration: `calibration: analytic` applies to `noise: gaussian` only, not to `noise: laplace`",
            ),
            (
                "noise: gaussian, calibration: zcdp, rho: 0.1, epsilon: 1",
                "epsilon: `epsilon` does not apply to `noise: gaussian` with `calibration: zcdp`, which is calibrated by `rho` (ρ-zCDP)",
            ),
            (
                "noise: discrete_gaussian, rho: 0.1, delta: 0.1",
                "delta: `delta` does not apply to `noise: discrete_gaussian`, which is calibrated by `rho` (ρ-zCDP)",
            ),
            (
                "noise: gaussian, calibration: zcdp",
                "rho: `noise: gaussian` with `calibration: zcdp` needs `rho`, the ρ of ρ-zCDP (> 0)",
            ),
            (
                "noise: gaussian, calibration: analytic, epsilon: 2, delta: 1e-5, rho: 0.1",
                "rho: `rho` applies to `noise: discrete_gaussian` and to `noise: gaussian` with `calibration: zcdp`, not to `noise: gaussian` with `calibration: analytic`",
            ),
            ("noise: geometric", "epsilon: `noise: geometric` needs `epsilon` (> 0)"),
            ("noise: discrete_gaussian, rho: -1", "rho: rho = -1 is invalid: must be > 0"),
        ] {
            assert_eq!(refused(&KIND, &format!("{{column: u, {with}}}")), expect);
        }
        // The classic calibration's refusal at ε ≥ 1 says what to write instead.
        let e = refused(
            &KIND,
            "{column: u, noise: gaussian, epsilon: 2, delta: 1e-5}",
        );
        assert!(
            e.starts_with("epsilon: epsilon = 2 is invalid: must be in (0, 1)"),
            "{e}"
        );
        assert!(
            e.ends_with("here: `calibration: analytic`, or `calibration: zcdp` with `rho`"),
            "{e}"
        );
        let e = refused(&KIND, "{column: u, noise: gaussian, calibration: optimal}");
        assert!(
            e.contains("classic") && e.contains("analytic") && e.contains("zcdp"),
            "{e}"
        );
    }
}
