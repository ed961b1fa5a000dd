//! `load.distribution`: a discrete distribution p(x), printed in the pipeline or counted from
//! a column of its input (and jointly with a second column).

use anyhow::Result;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::columns::{f64_col, opt_str_col, FrameBuilder};
use crate::stages::param::{Fraction, NonNegative};
use crate::stages::{
    build, check_size_run, distinct, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "load.distribution",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "A discrete distribution p(x): printed (checked to be non-negative and to sum to 1), or counted from a column of its input (and jointly with a second column).",
    params: params::<LoadDistribution>,
    gather: Gather::Nothing,
    build: build::<LoadDistribution>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadDistribution {
    /// p(x) in the order of `labels` (a printed distribution); or give `column`
    probabilities: Option<Vec<NonNegative>>,
    /// the values x (default: 0, 1, …)
    labels: Option<Vec<String>>,
    /// how far the sum may be from 1 (printed tables are rounded); the frame holds the
    /// normalised p(x) and the given numbers as `printed`
    #[serde(default = "default_tolerance")]
    tolerance: Fraction,
    /// count p(x) from this column of the input frame (missing values left out); output label,
    /// count, probability
    column: Option<String>,
    /// the order of x (default: the sorted values); a value outside it is an error, a category
    /// never seen gets p = 0
    categories: Option<Vec<String>>,
    /// a second column z: the output is the joint p(x, z) in long form (label, joint_label,
    /// count, probability)
    joint: Option<String>,
    /// the order of z (default: the sorted values)
    joint_categories: Option<Vec<String>>,
}

fn default_tolerance() -> Fraction {
    Fraction::of(1e-3)
}

impl Stage for LoadDistribution {
    fn validate(&self) -> Result<(), ParamError> {
        if let Some(c) = &self.labels {
            distinct("labels", c)?;
        }
        if self.column.is_some() {
            if self.probabilities.is_some() || self.labels.is_some() {
                return Err(ParamError::at(
                    "column",
                    "give either `probabilities` (a printed distribution) or `column` (counted from the input frame), not both",
                ));
            }
            for (key, cats) in [
                ("categories", &self.categories),
                ("joint_categories", &self.joint_categories),
            ] {
                if let Some(c) = cats {
                    if c.is_empty() {
                        return Err(ParamError::at(key, "the category list is empty"));
                    }
                    let mut seen = std::collections::HashSet::new();
                    if let Some(d) = c.iter().find(|x| !seen.insert(x.as_str())) {
                        return Err(ParamError::at(
                            key,
                            format!("category `{d}` is listed twice"),
                        ));
                    }
                }
            }
            if self.joint.is_none() && self.joint_categories.is_some() {
                return Err(ParamError::at(
                    "joint_categories",
                    "`joint_categories` needs `joint`",
                ));
            }
            return Ok(());
        }
        if self.joint.is_some() || self.categories.is_some() || self.joint_categories.is_some() {
            return Err(ParamError::at(
                "column",
                "`categories` and `joint` count values of an input column: give `column`",
            ));
        }
        let Some(probabilities) = &self.probabilities else {
            return Err(ParamError {
                path: vec![],
                message: "load.distribution needs `probabilities` (printed) or `column` (counted from its input)".into(),
            });
        };
        if probabilities.is_empty() {
            return Err(ParamError::at("probabilities", "the distribution is empty"));
        }
        let sum: f64 = probabilities.iter().map(|p| **p).sum();
        if (sum - 1.0).abs() > *self.tolerance {
            return Err(ParamError::at(
                "probabilities",
                format!(
                    "the probabilities sum to {sum}, not 1 (tolerance {})",
                    self.tolerance
                ),
            ));
        }
        if let Some(l) = &self.labels {
            if l.len() != probabilities.len() {
                return Err(ParamError::at(
                    "labels",
                    format!(
                        "{} labels for {} probabilities",
                        l.len(),
                        probabilities.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        [("column", &self.column), ("joint", &self.joint)]
            .into_iter()
            .filter_map(|(key, c)| Some((key.to_string(), c.clone()?)))
            .collect()
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let cols: &[&str] = match (&self.column, &self.joint) {
            (None, _) => &[column::LABEL, column::PROBABILITY, column::PRINTED],
            (Some(_), None) => &[column::LABEL, column::COUNT, column::PROBABILITY],
            (Some(_), Some(_)) => &[
                column::LABEL,
                column::JOINT_LABEL,
                column::COUNT,
                column::PROBABILITY,
            ],
        };
        Some(cols.iter().map(|c| c.to_string()).collect())
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        if let Some(col) = &self.column {
            return self.empirical(ctx, col);
        }
        let probabilities: Vec<f64> = self.probabilities.iter().flatten().map(|p| **p).collect();
        let sum: f64 = probabilities.iter().sum();
        let labels = self
            .labels
            .clone()
            .unwrap_or_else(|| (0..probabilities.len()).map(|i| i.to_string()).collect());
        Ok(FrameBuilder::new()
            .str(column::LABEL, labels)
            .f64(
                column::PROBABILITY,
                probabilities.iter().map(|p| p / sum).collect(),
            )
            .f64(column::PRINTED, probabilities)
            .build()?
            .into())
    }
}

impl LoadDistribution {
    /// p(x) (or p(x, z)) as relative frequencies of the input's rows. Rows where a counted
    /// column is missing are left out (and the number is logged); a value outside the stated
    /// categories is an error, so a typo in the order cannot silently drop mass.
    fn empirical(&self, ctx: &Ctx, col: &str) -> Result<Output> {
        let df = ctx.input()?;
        let xs = opt_str_col(df, col)?;
        let zs = match &self.joint {
            Some(j) => Some(opt_str_col(df, j)?),
            None => None,
        };
        let mut skipped = 0usize;
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(xs.len());
        for (i, x) in xs.iter().enumerate() {
            let z = zs.as_ref().map(|z| z[i].clone());
            match (x, z) {
                (Some(x), None) => pairs.push((x.clone(), String::new())),
                (Some(x), Some(Some(z))) => pairs.push((x.clone(), z)),
                _ => skipped += 1,
            }
        }
        if pairs.is_empty() {
            anyhow::bail!("column `{col}` has no values to count");
        }
        if skipped > 0 {
            tracing::info!(
                "load.distribution {}: {skipped} row(s) with a missing value left out",
                ctx.label
            );
        }
        let order = |given: &Option<Vec<String>>,
                     values: Vec<&String>,
                     what: &str|
         -> Result<Vec<String>> {
            let mut seen: Vec<String> = values.into_iter().cloned().collect();
            seen.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => x.total_cmp(&y),
                _ => a.cmp(b),
            });
            seen.dedup();
            match given {
                None => Ok(seen),
                Some(cats) => {
                    let extra: Vec<&String> = seen.iter().filter(|v| !cats.contains(v)).collect();
                    if !extra.is_empty() {
                        anyhow::bail!(
                            "column `{what}` has values not in the stated categories: {}",
                            extra
                                .iter()
                                .map(|s| format!("`{s}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                    }
                    Ok(cats.clone())
                }
            }
        };
        let xcats = order(&self.categories, pairs.iter().map(|p| &p.0).collect(), col)?;
        let zcats = match &self.joint {
            Some(j) => order(
                &self.joint_categories,
                pairs.iter().map(|p| &p.1).collect(),
                j,
            )?,
            None => vec![String::new()],
        };
        let xi: IndexMap<&str, usize> = xcats
            .iter()
            .enumerate()
            .map(|(i, c)| (c.as_str(), i))
            .collect();
        let zi: IndexMap<&str, usize> = zcats
            .iter()
            .enumerate()
            .map(|(i, c)| (c.as_str(), i))
            .collect();
        let (nx, nz) = (xcats.len() as u64, zcats.len() as u64);
        check_size_run(
            Limit::Cells,
            &format!("categories × joint categories ({nx} × {nz})"),
            product(&[nx, nz]),
        )?;
        let mut counts = vec![0u64; xcats.len() * zcats.len()];
        for (x, z) in &pairs {
            counts[xi[x.as_str()] * zcats.len() + zi[z.as_str()]] += 1;
        }
        let total = pairs.len() as f64;
        let mut labels = Vec::new();
        let mut joint = Vec::new();
        for x in &xcats {
            for z in &zcats {
                labels.push(x.clone());
                joint.push(z.clone());
            }
        }
        let mut fb = FrameBuilder::new().str(column::LABEL, labels);
        if self.joint.is_some() {
            fb = fb.str(column::JOINT_LABEL, joint);
        }
        Ok(fb
            .i64(column::COUNT, counts.iter().map(|&c| c as i64).collect())
            .f64(
                column::PROBABILITY,
                counts.iter().map(|&c| c as f64 / total).collect(),
            )
            .build()?
            .into())
    }
}

/// The frame a distribution writes, and what the privacy channels of Wu et al. 2020
/// (`mechanism.rate_distortion`, `mechanism.symmetric_channel`, `mechanism.channel`) read of
/// it ([`source`]): its column names, written once for both sides.
pub(crate) mod column {
    pub(crate) const LABEL: &str = "label";
    /// The second category of a joint distribution.
    pub(crate) const JOINT_LABEL: &str = "joint_label";
    pub(crate) const COUNT: &str = "count";
    /// Normalised to sum to 1.
    pub(crate) const PROBABILITY: &str = "probability";
    /// The probabilities as the pipeline gave them, before normalising.
    pub(crate) const PRINTED: &str = "printed";
}

/// p(x) from a distribution frame's probability column, in its row order, normalised.
pub(crate) fn source(df: &polars::prelude::DataFrame) -> Result<Vec<f64>> {
    let p = f64_col(df, column::PROBABILITY)?;
    crate::mech::rate_distortion::check_distribution(&p)
        .map_err(|e| anyhow::anyhow!("the source distribution: {e}"))?;
    let s: f64 = p.iter().sum();
    Ok(p.into_iter().map(|v| v / s).collect())
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, refused, run, strings};

    /// A printed distribution is normalised (the printed numbers kept beside it); one counted
    /// from a column follows the stated category order, gives an unseen category p = 0, and
    /// refuses a value outside the categories instead of dropping its mass.
    #[test]
    fn printed_and_counted_distributions() {
        let out = run(
            &KIND,
            "{probabilities: [0.2, 0.7999], labels: [no, yes]}",
            &[],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(strings(&out, "label"), ["no", "yes"]);
        assert!((floats(&out, "probability").iter().sum::<f64>() - 1.0).abs() < 1e-15);
        assert_eq!(floats(&out, "printed"), [0.2, 0.7999]);
        let input = polars::df!("x" => ["b", "a", "b", "b"]).unwrap();
        let out = run(&KIND, "{column: x, categories: [b, a, c]}", &[&input], 0)
            .unwrap()
            .frame;
        assert_eq!(names(&out), ["label", "count", "probability"]);
        assert_eq!(strings(&out, "label"), ["b", "a", "c"]);
        assert_eq!(floats(&out, "probability"), [0.75, 0.25, 0.0]);
        assert_eq!(
            fails(&KIND, "{column: x, categories: [a]}", &[&input], 0),
            "column `x` has values not in the stated categories: `b`"
        );
        assert_eq!(
            refused(&KIND, "{probabilities: [0.5, 0.6]}"),
            "probabilities: the probabilities sum to 1.1, not 1 (tolerance 0.001)"
        );
    }
}
