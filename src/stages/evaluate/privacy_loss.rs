//! `evaluate.privacy_loss`: the largest privacy loss of a selection mechanism measured over
//! neighbouring utility vectors (Thm 3.10).

use anyhow::{anyhow, Result};
use rand::Rng;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::columns::{f64_col, str_col, FrameBuilder};
use crate::stages::mechanism::select::{candidate, one, range_error, utility, Method, Selector};
use crate::stages::param::Positive;
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "evaluate.privacy_loss",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "The largest |ln Pr[M(x) = r] − ln Pr[M(y) = r]| over neighbouring utility vectors y of the input utilities x (|u(x,r) − u(y,r)| ≤ Δu): every worst-case neighbour (one candidate up by Δu, the rest down, and the reverse) and random ones.",
    params: params::<PrivacyLoss>,
    gather: Gather::Nothing,
    build: build::<PrivacyLoss>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PrivacyLoss {
    /// the selection mechanism, as in mechanism.select
    method: Method,
    /// privacy parameter ε
    epsilon: Positive,
    /// Δu
    #[serde(default = "one")]
    sensitivity: Positive,
    /// only neighbours that move every utility in the same direction (and the matching noise
    /// scale)
    #[serde(default)]
    monotone: bool,
    /// column naming the candidates
    #[serde(default = "candidate")]
    candidate: String,
    /// column of utilities
    #[serde(default = "utility")]
    utility: String,
    /// random neighbours checked beside the worst-case ones
    #[serde(default = "crate::stages::param::integer::<1000>")]
    random_pairs: u64,
}

impl PrivacyLoss {
    fn log_probs(&self, u: &[f64]) -> Result<Vec<f64>> {
        let sel = Selector::new(
            self.method,
            u,
            *self.epsilon,
            *self.sensitivity,
            self.monotone,
        )?;
        let p = sel.probabilities().ok_or_else(|| {
            anyhow!(
                "{} has no exact output distribution for |R| = {}",
                self.method.name(),
                u.len()
            )
        })?;
        Ok(p.iter().map(|x| x.ln()).collect())
    }
}

impl Stage for PrivacyLoss {
    fn validate(&self) -> Result<(), ParamError> {
        // The types check ε and Δu; this checks their relation: the noise scale (2)Δu/ε of the
        // noisy-arg-max methods must be finite.
        Selector::new(
            self.method,
            &[0.0],
            *self.epsilon,
            *self.sensitivity,
            self.monotone,
        )
        .map_err(range_error)?;
        check_size_at(
            "random_pairs",
            Limit::Draws,
            "random_pairs",
            Some(self.random_pairs),
        )?;
        Ok(())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        vec![
            ("candidate".into(), self.candidate.clone()),
            ("utility".into(), self.utility.clone()),
        ]
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(
            [
                "method",
                "max_loss",
                "bound",
                "loss_over_epsilon",
                "neighbours_checked",
                "worst",
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let df = ctx.input()?;
        let x = f64_col(df, &self.utility)?;
        let names = str_col(df, &self.candidate)?;
        // Every neighbour (4 worst-case ones per candidate at most, and the random ones) takes
        // one draw and one probability per candidate.
        let r = x.len() as u64;
        check_size_run(
            Limit::Draws,
            &format!(
                "(4 × candidates + random_pairs) × candidates ((4 × {r} + {}) × {r})",
                self.random_pairs
            ),
            product(&[4, r])
                .and_then(|w| w.checked_add(self.random_pairs))
                .and_then(|n| n.checked_mul(r)),
        )?;
        let lx = self.log_probs(&x)?;
        let delta = *self.sensitivity;
        let mut worst = (0.0f64, String::from("none"));
        let mut checked = 0usize;
        let mut consider = |y: &[f64], what: String| -> Result<()> {
            let ly = self.log_probs(y)?;
            checked += 1;
            for (r, (a, b)) in lx.iter().zip(&ly).enumerate() {
                let loss = (a - b).abs();
                if loss > worst.0 || (loss.is_nan() && !worst.0.is_nan()) {
                    worst = (loss, format!("{what}; output {}", names[r]));
                }
            }
            Ok(())
        };
        for (r, name) in names.iter().enumerate() {
            for sign in [1.0, -1.0] {
                // Candidate r moves one way by Δu, every other candidate the other way
                // (monotone: r moves alone, as when one person joins r's count).
                let y: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(j, &u)| {
                        if j == r {
                            u + sign * delta
                        } else if self.monotone {
                            u
                        } else {
                            u - sign * delta
                        }
                    })
                    .collect();
                let dir = if sign > 0.0 { "up" } else { "down" };
                consider(&y, format!("worst-case neighbour: {name} {dir} by Δu"))?;
                if self.monotone {
                    let y: Vec<f64> = x
                        .iter()
                        .enumerate()
                        .map(|(j, &u)| if j == r { u } else { u + sign * delta })
                        .collect();
                    consider(
                        &y,
                        format!("worst-case neighbour: all but {name} {dir} by Δu"),
                    )?;
                }
            }
        }
        for i in 0..self.random_pairs {
            let y: Vec<f64> = if self.monotone {
                let sign = if ctx.rng.random::<bool>() { 1.0 } else { -1.0 };
                x.iter()
                    .map(|&u| u + sign * delta * ctx.rng.random::<f64>())
                    .collect()
            } else {
                x.iter()
                    .map(|&u| u + delta * (2.0 * ctx.rng.random::<f64>() - 1.0))
                    .collect()
            };
            consider(&y, format!("random neighbour #{i}"))?;
        }
        Ok(FrameBuilder::new()
            .str("method", vec![self.method.name().to_string()])
            .f64("max_loss", vec![worst.0])
            .f64("bound", vec![*self.epsilon])
            .f64("loss_over_epsilon", vec![worst.0 / *self.epsilon])
            .i64("neighbours_checked", vec![checked as i64])
            .str("worst", vec![worst.1])
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, run};

    /// Thm 3.10 measured: over 50 equal candidates (two worst-case neighbours each, and 20
    /// random ones) the exponential mechanism loses at most ε (and nearly all of it: one
    /// candidate up by Δu, the rest down), while the form the text warns about,
    /// Pr ∝ exp(εu/Δu), loses nearly 2ε.
    #[test]
    fn the_exponential_mechanism_loses_at_most_epsilon() {
        let input = polars::df!(
            "candidate" => (0..50).map(|i| i.to_string()).collect::<Vec<_>>(),
            "utility" => vec![0.0; 50]
        )
        .unwrap();
        let loss = |method: &str| {
            let out = run(
                &KIND,
                &format!("{{method: {method}, epsilon: 1, random_pairs: 20}}"),
                &[&input],
                3,
            )
            .unwrap()
            .frame;
            assert_eq!(floats(&out, "neighbours_checked"), [120.0]);
            floats(&out, "loss_over_epsilon")[0]
        };
        let exp = loss("exponential");
        assert!(exp <= 1.0 + 1e-12 && exp > 0.9, "exponential: {exp} ε");
        let naive = loss("naive_exponential");
        assert!(naive > 1.8, "naive exponential: {naive} ε");
    }
}
