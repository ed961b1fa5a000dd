//! `aggregate.improvement`: how much smaller one column is than another over the rows.

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::columns::{f64_col, FrameBuilder};
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "aggregate.improvement",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "How much smaller `ours` is than `baseline` over the rows (e.g. leakage or distortion of two mechanisms): mean of (b − o)/b per row, and (Σb − Σo)/Σb. One row, with n.",
    params: params::<Improvement>,
    gather: Gather::All,
    build: build::<Improvement>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Improvement {
    /// column of the improved mechanism
    ours: String,
    /// column of the baseline
    baseline: String,
    /// text for a `claim` column (to join with a paper's table); without it, no `claim` column
    label: Option<String>,
}

impl Stage for Improvement {
    fn columns_read(&self) -> Vec<(String, String)> {
        vec![
            ("ours".into(), self.ours.clone()),
            ("baseline".into(), self.baseline.clone()),
        ]
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out: Vec<String> = self.label.iter().map(|_| "claim".to_string()).collect();
        out.extend(["n", "mean_relative", "ratio_of_sums"].map(str::to_string));
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let frames: Vec<&polars::prelude::DataFrame> = ctx.inputs.iter().collect();
        let df = crate::frames::concat(&frames)?;
        let o = f64_col(&df, &self.ours)?;
        let b = f64_col(&df, &self.baseline)?;
        if o.is_empty() {
            anyhow::bail!("aggregate.improvement: no rows");
        }
        if let Some(v) = b.iter().find(|v| **v == 0.0) {
            anyhow::bail!("aggregate.improvement: baseline `{}` has the value {v}; relative changes need a non-zero baseline", self.baseline);
        }
        let n = o.len() as f64;
        let mean_rel = o.iter().zip(&b).map(|(o, b)| (b - o) / b).sum::<f64>() / n;
        let (so, sb) = (o.iter().sum::<f64>(), b.iter().sum::<f64>());
        let mut fb = FrameBuilder::new();
        if let Some(l) = &self.label {
            fb = fb.str("claim", vec![l.clone()]);
        }
        Ok(fb
            .i64("n", vec![o.len() as i64])
            .f64("mean_relative", vec![mean_rel])
            .f64("ratio_of_sums", vec![(sb - so) / sb])
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, run};

    /// Both measures of how much smaller `ours` is, over the rows of every input: per row
    /// (b − o)/b averaged (0.5 and 0 → 0.25), and of the sums ((4 + 2 − 2 − 2)/6 = 1/3); a zero
    /// baseline is refused, not divided by.
    #[test]
    fn relative_improvement_per_row_and_of_the_sums() {
        let a = polars::df!("o" => [2.0], "b" => [4.0]).unwrap();
        let b = polars::df!("o" => [2.0], "b" => [2.0]).unwrap();
        let out = run(&KIND, "{ours: o, baseline: b, label: fewer}", &[&a, &b], 0)
            .unwrap()
            .frame;
        assert_eq!(
            names(&out),
            ["claim", "n", "mean_relative", "ratio_of_sums"]
        );
        assert_eq!(floats(&out, "n"), [2.0]);
        assert_eq!(floats(&out, "mean_relative"), [0.25]);
        assert!((floats(&out, "ratio_of_sums")[0] - 1.0 / 3.0).abs() < 1e-15);
        let zero = polars::df!("o" => [1.0], "b" => [0.0]).unwrap();
        assert_eq!(
            fails(&KIND, "{ours: o, baseline: b}", &[&b, &zero], 0),
            "aggregate.improvement: baseline `b` has the value 0; relative changes need a non-zero baseline"
        );
    }
}
