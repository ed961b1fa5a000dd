//! `mechanism.rate_distortion`: the privacy channel minimising I(X; X̂) + λ·E[d] on a discrete
//! source, by Blahut–Arimoto as in Wu et al. 2020 Algorithm 1; with a joint p(x, z), the
//! leakage when the adversary also holds an auxiliary attribute Z.

use anyhow::{anyhow, bail, Result};
use polars::prelude::DataFrame;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::mech::rate_distortion::{self as rd, Channel, Distortion};
use crate::stages::columns::{f64_col, str_col, FrameBuilder};
use crate::stages::load::distribution::source;
use crate::stages::param::{Count, NonNegative, Positive};
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "mechanism.rate_distortion",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "The channel minimising I(X; X̂) + λ·E[d] by Blahut–Arimoto exactly as Wu et al. 2020 Algorithm 1 (uniform start, stop when the MI changes by less than T). One row: mi (bits), distortion, epsilon (nats, Algorithm 3), iterations.",
    params: params::<RateDistortion>,
    gather: Gather::Nothing,
    build: build::<RateDistortion>,
    verdict: None,
};

/// The output columns, in order; with a joint p(x, z) as second input, [`JOINT_COLUMNS`]
/// follow.
const COLUMNS: [&str; 6] = [
    "mi",
    "distortion",
    "epsilon",
    "mi_channel",
    "iterations",
    "z_size",
];
const JOINT_COLUMNS: [&str; 2] = ["mi_x_z", "mi_real_z"];

/// The name `hamming`, as the schema gives it (any other text is refused by `validate`,
/// which names the choices).
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // a schema only
enum Named {
    Hamming,
}

/// d(x, x̂).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a distortion's name or a matrix (a list of rows of numbers ≥ 0)"
)]
pub(crate) enum DistortionSpec {
    #[schemars(with = "Named")]
    Named(String),
    #[schemars(title = "matrix", with = "Vec<Vec<NonNegative>>")]
    Matrix(Vec<Vec<f64>>),
}

impl Default for DistortionSpec {
    fn default() -> Self {
        DistortionSpec::Named("hamming".into())
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateDistortion {
    /// the Lagrange multiplier λ
    pub lambda: Positive,
    /// convergence threshold T on the change of MI (bits)
    #[serde(default = "threshold_default")]
    pub threshold: Positive,
    /// d(x, x̂): Hamming, or an m × m list of rows (entries ≥ 0)
    #[serde(default)]
    pub distortion: DistortionSpec,
    /// size of the auxiliary alphabet Z of Problem 2; the channel's output is (x̂, z)
    /// (default: 1, or the number of joint labels of a second input)
    pub z_size: Option<Count>,
}

fn threshold_default() -> Positive {
    Positive::of(1e-8)
}

impl RateDistortion {
    /// Checks what the type of `distortion` does not: the name, a square matrix, its entries.
    pub(crate) fn check_distortion(&self) -> Result<(), String> {
        match &self.distortion {
            DistortionSpec::Named(n) if n == "hamming" => Ok(()),
            DistortionSpec::Named(n) => Err(format!(
                "unknown distortion `{n}`: use `hamming` or a matrix (list of rows)"
            )),
            DistortionSpec::Matrix(rows) => {
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
                Ok(())
            }
        }
    }

    /// The distortion, as checked by [`Self::check_distortion`].
    pub(crate) fn distortion(&self) -> Distortion {
        match &self.distortion {
            DistortionSpec::Named(_) => Distortion::Hamming,
            DistortionSpec::Matrix(rows) => Distortion::Matrix(rows.concat()),
        }
    }
}

impl Stage for RateDistortion {
    fn validate(&self) -> Result<(), ParamError> {
        if let Some(z) = self.z_size {
            // The channel has m × m·|Z| entries, m ≥ 1.
            check_size_at("z_size", Limit::Cells, "z_size", Some(z.get()))?;
        }
        if let DistortionSpec::Matrix(rows) = &self.distortion {
            let m = rows.len() as u64;
            check_size_at(
                "distortion",
                Limit::Cells,
                &format!("the distortion matrix's m × m ({m} × {m})"),
                product(&[m, m]),
            )?;
        }
        self.check_distortion()
            .map_err(|m| ParamError::at("distortion", m))
    }

    /// The source's `probability` and `label` (and the joint's `label`, `joint_label`) are a
    /// `load.distribution` frame's fixed columns: no parameter names them.
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let joint = if inputs.len() == 2 {
            &JOINT_COLUMNS[..]
        } else {
            &[]
        };
        Some(COLUMNS.iter().chain(joint).map(|c| c.to_string()).collect())
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
            .map(|z| z.get() as usize)
            .or(joint.as_ref().map(|j| j.z_labels.len()))
            .unwrap_or(1);
        let m = p.len() as u64;
        check_size_run(
            Limit::Cells,
            &format!("the channel's m × m·|Z| ({m} × {m}·{nz})"),
            product(&[m, m, nz as u64]),
        )?;
        let d = self.distortion();
        let r = rd::blahut_arimoto(&p, &d, *self.lambda, *self.threshold, nz)?;
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

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, refused, run};

    /// On a uniform bit with Hamming distortion the optimal channel is the binary symmetric
    /// one: Blahut–Arimoto lands on the rate–distortion curve R(D) = 1 − h(D) bits, with
    /// ε = ln((1 − D)/D); a larger λ buys less distortion with more information.
    #[test]
    fn a_uniform_bit_lands_on_its_rate_distortion_curve() {
        let source = polars::df!("label" => ["0", "1"], "probability" => [0.5, 0.5]).unwrap();
        let at = |lambda: f64| {
            let out = run(
                &KIND,
                &format!("{{lambda: {lambda}, threshold: 1e-12}}"),
                &[&source],
                0,
            )
            .unwrap()
            .frame;
            (
                floats(&out, "mi")[0],
                floats(&out, "distortion")[0],
                floats(&out, "epsilon")[0],
            )
        };
        let h = |d: f64| -d * d.log2() - (1.0 - d) * (1.0 - d).log2();
        let (mi, d, eps) = at(3.0);
        assert!(d > 0.0 && d < 0.5, "D = {d}");
        assert!(
            (mi - (1.0 - h(d))).abs() < 1e-6,
            "I = {mi}, 1 − h(D) = {}",
            1.0 - h(d)
        );
        assert!(
            (eps - ((1.0 - d) / d).ln()).abs() < 1e-6,
            "ε = {eps}, D = {d}"
        );
        let (mi2, d2, _) = at(6.0);
        assert!(d2 < d && mi2 > mi, "λ 3 → 6: D {d} → {d2}, I {mi} → {mi2}");
        assert_eq!(
            refused(&KIND, "{lambda: 1, distortion: [[0, 1], [1]]}"),
            "distortion: the distortion matrix must be square; got 2 rows of lengths [2, 1]"
        );
    }
}
