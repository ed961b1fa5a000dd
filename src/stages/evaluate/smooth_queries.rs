//! `evaluate.smooth_queries`: the worst-case error of a synthetic database on the smooth
//! queries of [`crate::stages::query::smooth`], against their answers on the original data.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::trig::kernel::mean_answers;
use crate::stages::columns::{f64_col, FrameBuilder};
use crate::stages::param::Positive;
use crate::stages::point_set::{PointSet, DIAGNOSTIC_PREFIX};
use crate::stages::query::smooth::{QuerySpec, IDENTITY};
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, ParamError, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "evaluate.smooth_queries",
    version: 3, // 2: the kernel with fused multiply-adds (answers move in their last bits)
    // 3: the kernel's Taylor series and trie routes (answers move in their last bits)
    random: false,
    runs_programs: false,
    summary: "Worst-case and mean absolute and relative error of a synthetic database (first input) on the queries, against their answers on the original data (second input: query.smooth). One row; the synthesis_* columns of the first input are carried along.",
    params: params::<Score>,
    gather: Gather::Nothing,
    build: build::<Score>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Score {
    /// the same query family as the query.smooth stage that made the second input
    queries: QuerySpec,
    /// the kernel width σ to score (a σ the second input has)
    sigma: Positive,
}

impl Stage for Score {
    fn validate(&self) -> Result<(), ParamError> {
        self.queries.validate("queries")
    }

    /// The errors, then the first input's `synthesis_*` columns.
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let synthetic = inputs.first()?.as_ref()?;
        let mut out: Vec<String> = [
            "sigma",
            "queries",
            "max_abs_error",
            "max_rel_error",
            "mean_abs_error",
        ]
        .map(String::from)
        .into();
        out.extend(
            synthetic
                .iter()
                .filter(|c| c.starts_with(DIAGNOSTIC_PREFIX))
                .cloned(),
        );
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let [synthetic, truth] = ctx.inputs else {
            bail!(
                "evaluate.smooth_queries takes two inputs, [synthetic database, query.smooth answers on the original data]; got {}",
                ctx.inputs.len()
            );
        };
        let sigma = self.sigma.get();
        let truth_sigma = f64_col(truth, "sigma")?;
        let truth_query = f64_col(truth, "query")?;
        let truth_answer = f64_col(truth, "answer")?;
        let q = self.queries.count();
        let mut reference = vec![f64::NAN; q];
        let mut found = 0;
        for ((s, i), a) in truth_sigma.iter().zip(&truth_query).zip(&truth_answer) {
            if (s - sigma).abs() <= 1e-12 * sigma && *i >= 0.0 && (*i as usize) < q {
                reference[*i as usize] = *a;
                found += 1;
            }
        }
        if found != q {
            let mut have: Vec<f64> = truth_sigma.clone();
            have.sort_by(f64::total_cmp);
            have.dedup();
            bail!(
                "the answers `{}` hold {found} of the {q} queries at σ = {sigma} (σ there: {have:?}); give both stages the same `queries` and list this σ in its `sigmas`",
                ctx.input_names[1],
            );
        }
        let set = PointSet::read(synthetic, ctx.axis_names, &ctx.input_names[0])?;
        let [dim, per_query, seed] = IDENTITY;
        let identity = [
            (dim, set.dim() as f64, "data columns"),
            (
                per_query,
                self.queries.per_query.get() as f64,
                "kernels per query",
            ),
            (seed, self.queries.seed.get() as f64, "seed"),
        ];
        for (column, ours, what) in identity {
            let theirs = f64_col(truth, column)?;
            if let Some(t) = theirs.iter().find(|t| **t != ours) {
                bail!(
                    "the answers `{}` were made with {what} = {t}, this stage has {ours}: the two stages must answer the same queries on data of the same dimension",
                    ctx.input_names[1]
                );
            }
        }
        let mix = self.queries.generate(set.dim())?;
        let ours = mean_answers(&mix, &set.points, set.weights.as_deref(), &[sigma])?
            .pop()
            .unwrap_or_default();
        let (mut max_abs, mut max_rel, mut sum_abs) = (0.0f64, 0.0f64, 0.0);
        for (o, t) in ours.iter().zip(&reference) {
            let e = (o - t).abs();
            max_abs = max_abs.max(e);
            max_rel = max_rel.max(e / t.abs());
            sum_abs += e;
        }
        let mut fb = FrameBuilder::new()
            .f64("sigma", vec![sigma])
            .i64("queries", vec![q as i64])
            .f64("max_abs_error", vec![max_abs])
            .f64("max_rel_error", vec![max_rel])
            .f64("mean_abs_error", vec![sum_abs / q as f64]);
        for c in synthetic.columns() {
            let name = c.name().as_str();
            if name.starts_with(DIAGNOSTIC_PREFIX) {
                fb = fb.f64(
                    name,
                    vec![f64_col(synthetic, name)?
                        .first()
                        .copied()
                        .unwrap_or(f64::NAN)],
                );
            }
        }
        Ok(fb.build()?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, names, run};

    /// The original data scored against its own answers has no error; other data has some;
    /// the synthesis diagnostics ride along; answers of another query family are refused.
    #[test]
    fn errors_against_the_answers_on_the_original_data() {
        let data = polars::df!("x" => [0.1, -0.4, 0.7], "y" => [0.3, 0.2, -0.5]).unwrap();
        let queries = "{count: 5, per_query: 3, seed: 11}";
        let answers = run(
            &crate::stages::query::smooth::KIND,
            &format!("{{queries: {queries}, sigmas: [1]}}"),
            &[&data],
            0,
        )
        .unwrap()
        .frame;
        let with = format!("{{queries: {queries}, sigma: 1}}");
        let same = run(&KIND, &with, &[&data, &answers], 0).unwrap().frame;
        assert_eq!(floats(&same, "max_abs_error"), [0.0]);
        let other =
            polars::df!("x" => [0.5, 0.5], "y" => [0.0, 0.0], "synthesis_n" => [7.0, 7.0]).unwrap();
        let out = run(&KIND, &with, &[&other, &answers], 0).unwrap().frame;
        assert_eq!(
            names(&out),
            [
                "sigma",
                "queries",
                "max_abs_error",
                "max_rel_error",
                "mean_abs_error",
                "synthesis_n"
            ]
        );
        let (max, mean) = (
            floats(&out, "max_abs_error")[0],
            floats(&out, "mean_abs_error")[0],
        );
        assert!(max > 0.0 && mean <= max, "{out}");
        let e = fails(
            &KIND,
            "{queries: {count: 5, per_query: 3, seed: 12}, sigma: 1}",
            &[&other, &answers],
            0,
        );
        assert!(
            e.contains("were made with seed = 11, this stage has 12"),
            "{e}"
        );
    }
}
