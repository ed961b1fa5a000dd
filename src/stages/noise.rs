//! Additive noise mechanisms on a numeric column (Laplace, Gaussian, geometric), and the
//! queries that feed or read them.

use anyhow::Result;
use rayon::prelude::*;
use serde::Deserialize;

use super::frame::{f64_col, FrameBuilder};
use super::{
    build, check_size_at, check_size_run, product, Ctx, Gather, KindInfo, Limit, Output, ParamDoc,
    ParamError, Params, Stage,
};
use crate::mech::gaussian::Gaussian;
use crate::mech::geometric::Geometric;
use crate::mech::laplace::Laplace;

/// Draws per sub-stream: the unit of parallel work whose result is independent of threads.
const CHUNK: usize = 1 << 16;

/// Columns of the output frame (row, sample, the input column, the noisy column): each noisy
/// value is one row of them, counted against `--max-cells`.
const OUT_COLUMNS: u64 = 4;

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "mechanism.noise",
            version: 1,
            random: true,
            summary: "Adds Laplace, Gaussian or geometric noise to a numeric column, `samples` times per row.",
            params: Params::Doc(&[
                ParamDoc { name: "column", ty: "string", default: None, meaning: "the numeric column f(x) to perturb" },
                ParamDoc { name: "noise", ty: "laplace | gaussian | geometric", default: None, meaning: "Laplace: ε-DP, scale Δ/ε; Gaussian: (ε, δ)-DP, σ = Δ·sqrt(2 ln(1.25/δ))/ε, ε < 1; geometric: ε-DP on integers, α = e^(−ε/Δ)" },
                ParamDoc { name: "epsilon", ty: "number > 0", default: None, meaning: "privacy parameter ε" },
                ParamDoc { name: "delta", ty: "number in (0, 1)", default: Some("— (Gaussian only)"), meaning: "privacy parameter δ" },
                ParamDoc { name: "sensitivity", ty: "number > 0", default: Some("1"), meaning: "Δ: ℓ1 sensitivity (ℓ2 for Gaussian) of the column's query" },
                ParamDoc { name: "samples", ty: "integer ≥ 1", default: Some("1"), meaning: "independent noisy releases per input row (output has `sample` and `noisy` columns)" },
                ParamDoc { name: "output", ty: "string", default: Some("noisy"), meaning: "name of the noisy column" },
            ]),
            gather: Gather::Nothing,
            build: build::<AddNoise>,
        },
        KindInfo {
            name: "query.revenue",
            version: 1,
            random: false,
            summary: "Revenue of posting each price to a set of bidders: price × #{bids ≥ price} (Dwork & Roth Example 3.5).",
            params: Params::Doc(&[
                ParamDoc { name: "price", ty: "string", default: Some("price"), meaning: "column of prices in the first input" },
                ParamDoc { name: "bid", ty: "string", default: Some("bid"), meaning: "column of bids in the second input" },
                ParamDoc { name: "output", ty: "string", default: Some("revenue"), meaning: "name of the revenue column" },
            ]),
            gather: Gather::Nothing,
            build: build::<Revenue>,
        },
        KindInfo {
            name: "query.argmax",
            version: 1,
            random: false,
            summary: "The row with the largest value of a column (ties: the first), e.g. the optimal price.",
            params: Params::Doc(&[ParamDoc { name: "column", ty: "string", default: None, meaning: "the column to maximise" }]),
            gather: Gather::Nothing,
            build: build::<Argmax>,
        },
    ]
}

#[derive(Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum NoiseKind {
    Laplace,
    Gaussian,
    Geometric,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddNoise {
    column: String,
    noise: NoiseKind,
    epsilon: f64,
    #[serde(default)]
    delta: Option<f64>,
    #[serde(default = "one")]
    sensitivity: f64,
    #[serde(default = "one_u")]
    samples: usize,
    #[serde(default = "noisy")]
    output: String,
}

fn one() -> f64 {
    1.0
}
fn one_u() -> usize {
    1
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
    fn sampler(&self) -> Result<Sampler, ParamError> {
        let range = |e: crate::mech::ParamRangeError| ParamError::at(e.name, e.to_string());
        Ok(match self.noise {
            NoiseKind::Laplace => Sampler::Laplace(
                Laplace::for_privacy(self.epsilon, self.sensitivity).map_err(range)?,
            ),
            NoiseKind::Geometric => Sampler::Geometric(
                Geometric::for_privacy(self.epsilon, self.sensitivity).map_err(range)?,
            ),
            NoiseKind::Gaussian => {
                let delta = self.delta.ok_or_else(|| {
                    ParamError::at("delta", "the Gaussian mechanism needs `delta` in (0, 1)")
                })?;
                Sampler::Gaussian(
                    Gaussian::classic(self.epsilon, delta, self.sensitivity).map_err(range)?,
                )
            }
        })
    }
}

impl Stage for AddNoise {
    fn validate(&self) -> Result<(), ParamError> {
        if self.samples == 0 {
            return Err(ParamError::at(
                "samples",
                "samples = 0 is invalid: must be ≥ 1",
            ));
        }
        let samples = self.samples as u64;
        check_size_at("samples", Limit::Draws, "samples", Some(samples))?;
        check_size_at(
            "samples",
            Limit::Cells,
            &format!("samples × {OUT_COLUMNS} output columns ({samples} × {OUT_COLUMNS})"),
            product(&[samples, OUT_COLUMNS]),
        )?;
        if self.noise != NoiseKind::Gaussian && self.delta.is_some() {
            return Err(ParamError::at(
                "delta",
                "`delta` applies to Gaussian noise only",
            ));
        }
        self.sampler().map(|_| ())
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
        let sampler = self.sampler().map_err(|e| anyhow::anyhow!(e.message))?;
        let values = f64_col(ctx.input()?, &self.column)?;
        let (rows, samples) = (values.len() as u64, self.samples as u64);
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
        let n = values.len() * self.samples;
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
            for s in 0..self.samples {
                row.push(r as i64);
                sample.push(s as i64);
                original.push(v);
                out.push(v + noise[r * self.samples + s]);
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Revenue {
    #[serde(default = "price")]
    price: String,
    #[serde(default = "bid")]
    bid: String,
    #[serde(default = "revenue")]
    output: String,
}

fn price() -> String {
    "price".into()
}
fn bid() -> String {
    "bid".into()
}
fn revenue() -> String {
    "revenue".into()
}

impl Stage for Revenue {
    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let [prices_df, bids_df] = ctx.inputs else {
            anyhow::bail!(
                "query.revenue takes two inputs: [prices, bids] (got {})",
                ctx.inputs.len()
            );
        };
        let prices = f64_col(prices_df, &self.price)?;
        let mut bids = f64_col(bids_df, &self.bid)?;
        bids.sort_by(f64::total_cmp);
        let revenue: Vec<f64> = prices
            .par_iter()
            .map(|&p| {
                // Buyers are the bidders whose bid is at least the price.
                let buyers = bids.len() - bids.partition_point(|&b| b < p);
                if p > 0.0 {
                    p * buyers as f64
                } else {
                    0.0
                }
            })
            .collect();
        let mut df = prices_df.clone();
        df.with_column(polars::prelude::Column::new(
            self.output.as_str().into(),
            revenue,
        ))?;
        Ok(df.into())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Argmax {
    column: String,
}

impl Stage for Argmax {
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
