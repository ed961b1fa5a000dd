//! `load.sample`: points from a smooth density on [−1, 1]^d, for the convergence-rate
//! experiment.

use anyhow::Result;
use rand_distr::{Beta, Distribution};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::columns::FrameBuilder;
use crate::stages::param::{Count, Positive};
use crate::stages::{
    build, check_size_at, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "load.sample",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "n points in [−1, 1]^d, each coordinate 2·B − 1 with B ~ Beta(a, b) independently: a smooth density for rate experiments. Columns x1 … xd.",
    params: params::<Sample>,
    gather: Gather::Nothing,
    build: build::<Sample>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Sample {
    /// number of points
    n: Count,
    /// dimension d
    dim: Count,
    /// shape of each coordinate's Beta distribution
    #[serde(default = "beta")]
    #[schemars(title = "[a, b], both > 0")]
    beta: [Positive; 2],
}

fn beta() -> [Positive; 2] {
    [Positive::of(2.0), Positive::of(3.0)]
}

impl Stage for Sample {
    fn validate(&self) -> Result<(), ParamError> {
        check_size_at(
            "n",
            Limit::Cells,
            &format!("n × dim ({} × {}) coordinates", self.n, self.dim),
            product(&[self.n.get(), self.dim.get()]),
        )
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some((1..=self.dim.get()).map(|j| format!("x{j}")).collect())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let (n, dim) = (self.n.get() as usize, self.dim.get() as usize);
        let dist = Beta::new(*self.beta[0], *self.beta[1])?;
        let mut cols = vec![Vec::with_capacity(n); dim];
        for _ in 0..n {
            for c in &mut cols {
                c.push(2.0 * dist.sample(&mut ctx.rng) - 1.0);
            }
        }
        let mut fb = FrameBuilder::new();
        for (j, c) in cols.into_iter().enumerate() {
            fb = fb.f64(&format!("x{}", j + 1), c);
        }
        Ok(fb.build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, names, run};

    /// n points in [−1, 1]^d with columns x1 … xd, each coordinate 2·Beta(a, b) − 1: with
    /// Beta(2, 3) (mean 0.4) the mean of 5000 coordinates is near −0.2; the seed decides the
    /// points.
    #[test]
    fn points_lie_in_the_cube_with_the_beta_mean() {
        let out = run(&KIND, "{n: 5000, dim: 2}", &[], 3).unwrap().frame;
        assert_eq!(names(&out), ["x1", "x2"]);
        for c in ["x1", "x2"] {
            let x = floats(&out, c);
            assert!(x.iter().all(|v| (-1.0..=1.0).contains(v)));
            let mean = x.iter().sum::<f64>() / x.len() as f64;
            assert!((mean + 0.2).abs() < 0.02, "{c}: mean {mean}");
        }
        assert!(out.equals(&run(&KIND, "{n: 5000, dim: 2}", &[], 3).unwrap().frame));
        assert!(!out.equals(&run(&KIND, "{n: 5000, dim: 2}", &[], 4).unwrap().frame));
    }
}
