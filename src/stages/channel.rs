//! Privacy channels on a discrete source (Wu et al. 2020): `mechanism.rate_distortion` (the
//! Blahut–Arimoto optimal channel) and `mechanism.symmetric_channel` (k-ary randomized
//! response). Both read the source p(x) from a `load.distribution` frame.

use anyhow::{anyhow, bail, Result};
use polars::prelude::*;
use serde::Deserialize;

use super::frame::{column, f64_col, str_col, FrameBuilder};
use super::{
    build, check_size_at, check_size_run, product, Ctx, Gather, KindInfo, Limit, Output, ParamDoc,
    ParamError, Params, Stage,
};
use crate::mech::rate_distortion::{self as rd, Channel, Distortion};

pub fn kinds() -> Vec<KindInfo> {
    vec![
        KindInfo {
            name: "mechanism.rate_distortion",
            version: 1,
            random: false,
            summary: "The channel minimising I(X; X̂) + λ·E[d] by Blahut–Arimoto exactly as Wu et al. 2020 Algorithm 1 (uniform start, stop when the MI changes by less than T). One row: mi (bits), distortion, epsilon (nats, Algorithm 3), iterations.",
            params: Params::Doc(&[
                ParamDoc { name: "lambda", ty: "number > 0", default: None, meaning: "the Lagrange multiplier λ" },
                ParamDoc { name: "threshold", ty: "number > 0", default: Some("1e-8"), meaning: "convergence threshold T on the change of MI (bits)" },
                ParamDoc { name: "distortion", ty: "hamming | matrix", default: Some("hamming"), meaning: "d(x, x̂): Hamming, or an m × m list of rows" },
                ParamDoc { name: "z_size", ty: "integer ≥ 1", default: Some("1, or the number of joint labels of a second input"), meaning: "size of the auxiliary alphabet Z of Problem 2; the channel's output is (x̂, z)" },
            ]),
            gather: Gather::Nothing,
            build: build::<RateDistortion>,
        },
        KindInfo {
            name: "mechanism.symmetric_channel",
            version: 1,
            random: false,
            summary: "The symmetric channel (k-ary randomized response: q(x|x) = 1 − D, D/(m−1) elsewhere) at a given distortion, ε or MI; with a second input, at each row's value of `column`. Adds sym_distortion, sym_mi (bits), sym_epsilon (nats).",
            params: Params::Doc(&[
                ParamDoc { name: "at", ty: "distortion | epsilon | mi", default: None, meaning: "which quantity fixes the channel" },
                ParamDoc { name: "value", ty: "number", default: Some("—"), meaning: "its value (one row)" },
                ParamDoc { name: "column", ty: "string", default: Some("—"), meaning: "or: a column of the second input, one channel per row (the row's other columns are kept)" },
            ]),
            gather: Gather::Nothing,
            build: build::<Symmetric>,
        },
    ]
}

/// p(x) from a distribution frame, in its row order.
fn source(df: &DataFrame) -> Result<Vec<f64>> {
    let p = f64_col(df, "probability")?;
    rd::check_distribution(&p).map_err(|e| anyhow!("the source distribution: {e}"))?;
    let s: f64 = p.iter().sum();
    Ok(p.into_iter().map(|v| v / s).collect())
}

#[derive(Deserialize)]
#[serde(untagged)]
enum DistortionSpec {
    Named(String),
    Matrix(Vec<Vec<f64>>),
}

fn threshold_default() -> f64 {
    1e-8
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateDistortion {
    lambda: f64,
    #[serde(default = "threshold_default")]
    threshold: f64,
    #[serde(default)]
    distortion: Option<DistortionSpec>,
    #[serde(default)]
    z_size: Option<usize>,
}

impl RateDistortion {
    fn distortion(&self) -> Result<Distortion, String> {
        match &self.distortion {
            None => Ok(Distortion::Hamming),
            Some(DistortionSpec::Named(n)) if n == "hamming" => Ok(Distortion::Hamming),
            Some(DistortionSpec::Named(n)) => Err(format!(
                "unknown distortion `{n}`: use `hamming` or a matrix (list of rows)"
            )),
            Some(DistortionSpec::Matrix(rows)) => {
                let m = rows.len();
                if m == 0 || rows.iter().any(|r| r.len() != m) {
                    return Err(format!(
                        "the distortion matrix must be square; got {m} rows of lengths {:?}",
                        rows.iter().map(Vec::len).collect::<Vec<_>>()
                    ));
                }
                if let Some(v) = rows
                    .iter()
                    .flatten()
                    .find(|v| !(v.is_finite() && **v >= 0.0))
                {
                    return Err(format!(
                        "distortion {v} is invalid: entries must be finite and ≥ 0"
                    ));
                }
                Ok(Distortion::Matrix(rows.concat()))
            }
        }
    }
}

impl Stage for RateDistortion {
    fn validate(&self) -> Result<(), ParamError> {
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(ParamError::at(
                "lambda",
                format!("λ = {} is invalid: must be > 0", self.lambda),
            ));
        }
        if !(self.threshold.is_finite() && self.threshold > 0.0) {
            return Err(ParamError::at(
                "threshold",
                format!("T = {} is invalid: must be > 0", self.threshold),
            ));
        }
        if let Some(z) = self.z_size {
            if z == 0 {
                return Err(ParamError::at(
                    "z_size",
                    "z_size = 0 is invalid: must be ≥ 1",
                ));
            }
            // The channel has m × m·|Z| entries, m ≥ 1.
            check_size_at("z_size", Limit::Cells, "z_size", Some(z as u64))?;
        }
        if let Some(DistortionSpec::Matrix(rows)) = &self.distortion {
            let m = rows.len() as u64;
            check_size_at(
                "distortion",
                Limit::Cells,
                &format!("the distortion matrix's m × m ({m} × {m})"),
                product(&[m, m]),
            )?;
        }
        self.distortion()
            .map_err(|m| ParamError::at("distortion", m))?;
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let (src, joint) = match ctx.inputs {
            [s] => (s, None),
            [s, j] => (s, Some(j)),
            _ => bail!("mechanism.rate_distortion takes the source distribution and, optionally, a joint p(x, z)"),
        };
        let p = source(src)?;
        let labels = str_col(src, "label")?;
        let joint = match joint {
            Some(j) => Some(JointSource::read(j, &labels)?),
            None => None,
        };
        let nz = self
            .z_size
            .or(joint.as_ref().map(|j| j.z_labels.len()))
            .unwrap_or(1);
        let m = p.len() as u64;
        check_size_run(
            Limit::Cells,
            &format!("the channel's m × m·|Z| ({m} × {m}·{nz})"),
            product(&[m, m, nz as u64]),
        )?;
        let d = self.distortion().map_err(|m| anyhow!(m))?;
        let r = rd::blahut_arimoto(&p, &d, self.lambda, self.threshold, nz)?;
        if !r.converged {
            tracing::warn!(
                "{} λ = {}: no convergence within {} iterations (T = {})",
                ctx.stage,
                self.lambda,
                r.iterations,
                self.threshold
            );
        }
        let channel = r.channel();
        let mut fb = FrameBuilder::new()
            .f64("mi", vec![r.mi])
            .f64("distortion", vec![r.distortion])
            .f64("epsilon", vec![r.epsilon])
            .f64("mi_channel", vec![channel.mutual_information(&p)])
            .i64("iterations", vec![r.iterations as i64])
            .i64("z_size", vec![nz as i64]);
        if let Some(j) = &joint {
            let (ixz, with_z) = j.leakage_with(&channel);
            fb = fb.f64("mi_x_z", vec![ixz]).f64("mi_real_z", vec![with_z]);
        }
        Ok(fb.build()?.into())
    }
}

/// The real joint p(x, z) of the source with an auxiliary attribute.
struct JointSource {
    z_labels: Vec<String>,
    /// p(x, z), x in the source's label order, row-major.
    pxz: Vec<f64>,
}

impl JointSource {
    fn read(df: &DataFrame, x_labels: &[String]) -> Result<JointSource> {
        let xs = str_col(df, "label")?;
        let zs = str_col(df, "joint_label")?;
        let pr = f64_col(df, "probability")?;
        let mut z_labels: Vec<String> = Vec::new();
        for z in &zs {
            if !z_labels.contains(z) {
                z_labels.push(z.clone());
            }
        }
        let nz = z_labels.len();
        let m = x_labels.len() as u64;
        check_size_run(
            Limit::Cells,
            &format!("the joint table's |X| × |Z| ({m} × {nz})"),
            product(&[m, nz as u64]),
        )?;
        let mut pxz = vec![0.0; x_labels.len() * nz];
        for ((x, z), v) in xs.iter().zip(&zs).zip(&pr) {
            let xi = x_labels.iter().position(|l| l == x).ok_or_else(|| {
                anyhow!("the joint table has x = `{x}`, which the source does not")
            })?;
            let zi = z_labels
                .iter()
                .position(|l| l == z)
                .expect("collected above");
            pxz[xi * nz + zi] += v;
        }
        Ok(JointSource { z_labels, pxz })
    }

    /// (I(X; Z), I(X; X̂, Z)) in bits when the adversary holds the real Z and the channel q(x̂|x)
    /// is applied to X alone: p(x, x̂, z) = p(x, z) q(x̂|x).
    #[allow(clippy::needless_range_loop)] // index loops mirror the sums over x, x̂, z
    fn leakage_with(&self, q: &Channel) -> (f64, f64) {
        let nz = self.z_labels.len();
        let m = q.rows;
        let px: Vec<f64> = (0..m)
            .map(|x| self.pxz[x * nz..(x + 1) * nz].iter().sum())
            .collect();
        let pz: Vec<f64> = (0..nz)
            .map(|z| (0..m).map(|x| self.pxz[x * nz + z]).sum())
            .collect();
        let mut ixz = 0.0;
        for x in 0..m {
            for z in 0..nz {
                let v = self.pxz[x * nz + z];
                if v > 0.0 {
                    ixz += v * (v / (px[x] * pz[z])).log2();
                }
            }
        }
        // I(X; X̂, Z) = Σ p(x, x̂, z) log p(x, x̂, z) / (p(x) p(x̂, z)).
        let k = q.cols;
        let mut pyz = vec![0.0; k * nz];
        for x in 0..m {
            for y in 0..k {
                for z in 0..nz {
                    pyz[y * nz + z] += self.pxz[x * nz + z] * q.q[x * k + y];
                }
            }
        }
        let mut i = 0.0;
        for x in 0..m {
            for y in 0..k {
                for z in 0..nz {
                    let v = self.pxz[x * nz + z] * q.q[x * k + y];
                    if v > 0.0 {
                        i += v * (v / (px[x] * pyz[y * nz + z])).log2();
                    }
                }
            }
        }
        (ixz, i)
    }
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum At {
    Distortion,
    Epsilon,
    Mi,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Symmetric {
    at: At,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    column: Option<String>,
}

impl Symmetric {
    fn channel_at(&self, p: &[f64], v: f64) -> Result<(f64, f64, f64)> {
        let m = p.len();
        let d = match self.at {
            At::Distortion => v,
            At::Epsilon => rd::symmetric_distortion_for_epsilon(m, v)?,
            At::Mi => rd::symmetric_distortion_for_mi(p, v)?,
        };
        let c = rd::symmetric_channel(m, d)?;
        Ok((d, c.mutual_information(p), rd::symmetric_epsilon(m, d)))
    }
}

impl Stage for Symmetric {
    fn validate(&self) -> Result<(), ParamError> {
        match (&self.value, &self.column) {
            (Some(_), Some(_)) | (None, None) => Err(ParamError::at(
                "value",
                "give `value` (one channel) or `column` (one per row of the second input)",
            )),
            (Some(v), None) if !v.is_finite() || *v < 0.0 => Err(ParamError::at(
                "value",
                format!("value = {v} is invalid: must be finite and ≥ 0"),
            )),
            _ => Ok(()),
        }
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let Some(first) = ctx.inputs.first() else {
            bail!("mechanism.symmetric_channel needs the source distribution as its input");
        };
        let p = source(first)?;
        let m = p.len() as u64;
        check_size_run(
            Limit::Cells,
            &format!("the channel's m × m ({m} × {m})"),
            product(&[m, m]),
        )?;
        let (base, values) = match (&self.column, ctx.inputs) {
            (Some(c), [_, rows]) => {
                column(rows, c)?;
                (rows.clone(), f64_col(rows, c)?)
            }
            (Some(_), _) => bail!("with `column`, give a second input holding that column"),
            (None, _) => (DataFrame::empty(), vec![self.value.expect("validated")]),
        };
        let (mut ds, mut mis, mut eps) = (Vec::new(), Vec::new(), Vec::new());
        for v in values {
            let (d, mi, e) = self.channel_at(&p, v)?;
            ds.push(d);
            mis.push(mi);
            eps.push(e);
        }
        let mut out = base;
        let h = out.height().max(ds.len());
        out = if out.width() == 0 {
            DataFrame::empty_with_height(h)
        } else {
            out
        };
        out.with_column(Column::new("sym_distortion".into(), ds))?;
        out.with_column(Column::new("sym_mi".into(), mis))?;
        out.with_column(Column::new("sym_epsilon".into(), eps))?;
        Ok(out.into())
    }
}
