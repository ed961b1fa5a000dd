//! `query.smooth`: smooth queries (Huang 2014, eq. 2.1), Gaussian-kernel mixtures answered on
//! a point set; and their family ([`QuerySpec`]), which `evaluate.smooth_queries` shares.
//!
//! The queries are regenerated from their own `seed` wherever they are needed, so the stage
//! answering them on the original data (once, for every σ of the sweep) and the stage scoring
//! each synthetic database see the same queries without passing 10^5 centres through frames.
//!
//! Regenerated once per process, not once per instance: [`QuerySpec::generate`] keeps the
//! families it made (the most recently used first, up to [`FAMILY_CACHE_BYTES`]), since a sweep
//! scores thousands of synthetic databases against one family (h14-table3.2: 2 525 instances on
//! five families) and drawing a family costs more than scoring a small database on it (10^7
//! uniform draws at d = 101, against ~10^6 kernel values for a support of ten points). The
//! family is a function of (count, J, seed, dimension) alone, so a kept one has the bits a new
//! draw would have.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::trig::kernel::{mean_answers, KernelMixtures};
use crate::stages::columns::FrameBuilder;
use crate::stages::kept::{self, Footprint, Kept};
use crate::stages::param::{Between, Count, Positive};
use crate::stages::point_set::PointSet;
use crate::stages::{
    build, check_size_at, check_size_run, distinct, params, product, Ctx, Gather, KindInfo, Limit,
    Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "query.smooth",
    version: 4, // 2: a bandwidth whose 1/σ² is an integer multiple (≤ 16) of a wider one's takes powers of its kernel values (last bits)
    // 3: fused multiply-adds in the distances and the exponential (answers move in their last bits)
    // 4: wide bandwidths in low dimensions by the kernel's Taylor series, points with few distinct values by a trie (last bits)
    random: false,
    runs_programs: false,
    summary: "Answers of random Gaussian-kernel-mixture queries (Huang 2014 eq. 2.1) on a point set (weighted by `weight` when present), for every σ at once. Output: sigma, query, answer.",
    params: params::<Answers>,
    gather: Gather::Nothing,
    build: build::<Answers>,
    verdict: None,
};

/// Largest query seed: it is stored in a frame and compared as a float.
const MAX_EXACT_SEED: u64 = 1 << 53;

/// The query family: `count` mixtures of `per_query` kernels, fixed by `seed`.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuerySpec {
    /// how many queries
    pub count: Count,
    /// J, kernels per query (thesis: 10)
    #[serde(default = "crate::stages::param::count::<10>")]
    pub per_query: Count,
    /// the seed that fixes them (at most 2^53: it is written into the answers' frame, for the
    /// scoring stage to check)
    pub seed: Between<0, MAX_EXACT_SEED>,
}

impl QuerySpec {
    /// Checks the family's size (`key` is where it is given in `with:`).
    pub fn validate(&self, key: &str) -> Result<(), ParamError> {
        check_size_at(
            key,
            Limit::Cells,
            &format!("queries × kernels ({} × {})", self.count, self.per_query),
            product(&[self.count.get(), self.per_query.get()]),
        )
    }

    /// The number of queries.
    pub fn count(&self) -> usize {
        self.count.get() as usize
    }

    /// The family in `dim` dimensions (its size, known only now, checked first); a family this
    /// process made before is handed out again (see the module doc).
    pub fn generate(&self, dim: usize) -> Result<Arc<KernelMixtures>> {
        check_size_run(
            Limit::Cells,
            &format!(
                "queries × kernels × dimensions ({} × {} × {dim}) kernel coordinates",
                self.count, self.per_query
            ),
            product(&[self.count.get(), self.per_query.get(), dim as u64]),
        )?;
        let key = (self.count(), self.per_query.get(), self.seed.get(), dim);
        if let Some(kept) = kept::lock(&FAMILIES).take(&key) {
            return Ok(kept);
        }
        // Drawn without the lock, so other instances go on meanwhile; two instances that miss
        // the same family at once both draw it (the same bits) and one copy is kept.
        let mut rng = Pcg64Mcg::seed_from_u64(self.seed.get());
        let family = Arc::new(KernelMixtures::random(
            self.count(),
            self.per_query.get() as usize,
            dim,
            &mut rng,
        ));
        kept::lock(&FAMILIES).keep(key, Arc::clone(&family), FAMILY_CACHE_BYTES);
        Ok(family)
    }
}

/// The most memory the kept query families may hold: the five of h14-table3.2 take 157 MB
/// (10^5 centres of d = 8 … 101 coordinates); a family larger than this is not kept.
pub(crate) const FAMILY_CACHE_BYTES: usize = 256 << 20;

/// (count, J, seed, dimension): what fixes a family.
type FamilyKey = (usize, u64, u64, usize);

/// Families made by this process.
static FAMILIES: Mutex<Kept<FamilyKey, KernelMixtures>> = Mutex::new(Kept::new());

impl Footprint for KernelMixtures {
    fn bytes(&self) -> usize {
        KernelMixtures::bytes(self)
    }
}

/// The columns of `query.smooth`'s frame that say which family its answers are of.
pub(crate) const IDENTITY: [&str; 3] = ["query_dim", "query_per_query", "query_seed"];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Answers {
    /// how many queries, J kernels per query (thesis: 10), and the seed that fixes them
    queries: QuerySpec,
    /// kernel widths σ; one pass over the data serves them all
    #[schemars(title = "list of numbers > 0")]
    sigmas: Vec<Positive>,
}

impl Stage for Answers {
    fn validate(&self) -> Result<(), ParamError> {
        distinct("sigmas", &self.sigmas)?;
        self.queries.validate("queries")?;
        if self.sigmas.is_empty() {
            return Err(ParamError::at("sigmas", "list at least one σ"));
        }
        Ok(())
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out: Vec<String> = ["sigma", "query", "answer"].map(String::from).into();
        out.extend(IDENTITY.map(String::from));
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let set = PointSet::read(ctx.input()?, ctx.axis_names, &ctx.input_names[0])?;
        let mix = self.queries.generate(set.dim())?;
        let sigmas: Vec<f64> = self.sigmas.iter().map(|s| s.get()).collect();
        let answers = mean_answers(&mix, &set.points, set.weights.as_deref(), &sigmas)?;
        let q = self.queries.count();
        let mut sigma = Vec::with_capacity(q * sigmas.len());
        let mut query = Vec::with_capacity(sigma.capacity());
        let mut answer = Vec::with_capacity(sigma.capacity());
        for (s, a) in sigmas.iter().zip(answers) {
            sigma.extend(std::iter::repeat_n(*s, q));
            query.extend(0..q as i64);
            answer.extend(a);
        }
        // The query family's identity, so the scoring stage can check it uses the same one.
        let rows = sigma.len();
        let [dim, per_query, seed] = IDENTITY;
        Ok(FrameBuilder::new()
            .f64("sigma", sigma)
            .i64("query", query)
            .f64("answer", answer)
            .i64(dim, vec![set.dim() as i64; rows])
            .i64(per_query, vec![self.queries.per_query.get() as i64; rows])
            .i64(seed, vec![self.queries.seed.get() as i64; rows])
            .build()?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::{KernelMixtures, QuerySpec, KIND};
    use crate::kind::testing::{floats, refused, run, Instance};
    use rand::SeedableRng;
    use std::sync::Arc;

    /// A kept family is the one a fresh draw gives, bit for bit, and is handed out again;
    /// another dimension or seed is another family.
    #[test]
    fn kept_families_are_fresh_draws() {
        let spec: QuerySpec =
            serde_yaml_ng::from_str("{count: 7, per_query: 3, seed: 4242}").unwrap();
        let a = spec.generate(5).unwrap();
        let b = spec.generate(5).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(4242);
        let fresh = KernelMixtures::random(7, 3, 5, &mut rng);
        assert_eq!(a.centres(), fresh.centres());
        assert_eq!(a.weights(), fresh.weights());
        let other = spec.generate(6).unwrap();
        assert_eq!(other.dim(), 6);
        assert!(
            !Arc::ptr_eq(&a, &spec.generate(6).unwrap())
                && Arc::ptr_eq(&other, &spec.generate(6).unwrap())
        );
        let reseeded: QuerySpec =
            serde_yaml_ng::from_str("{count: 7, per_query: 3, seed: 4243}").unwrap();
        let c = reseeded.generate(5).unwrap();
        assert!(!Arc::ptr_eq(&a, &c) && a.weights() != c.weights());
    }

    /// The answers are means over the point set, whose `weight`s are a distribution: a point
    /// of weight 3/4 counts as three of four copies, an axis column is not a coordinate, and one
    /// row per (σ, query) carries the family's identity; a σ listed twice is refused.
    #[test]
    fn answers_are_weighted_means_over_the_points() {
        let with = "{queries: {count: 4, per_query: 3, seed: 9}, sigmas: [0.5, 2]}";
        let copies =
            polars::df!("x" => [0.1, -0.4, -0.4, -0.4], "y" => [0.3, 0.2, 0.2, 0.2]).unwrap();
        let weighted =
            polars::df!("x" => [0.1, -0.4], "y" => [0.3, 0.2], "weight" => [0.25, 0.75], "rep" => [0, 0]).unwrap();
        let a = run(&KIND, with, &[&copies], 0).unwrap().frame;
        let b = Instance::new(&KIND, with)
            .inputs(&[&weighted])
            .axes(&["rep"])
            .run()
            .unwrap()
            .frame;
        assert_eq!(a.height(), 8);
        assert_eq!(
            floats(&a, "sigma"),
            [0.5, 0.5, 0.5, 0.5, 2.0, 2.0, 2.0, 2.0]
        );
        assert_eq!(floats(&a, "query_dim"), [2.0; 8]);
        for (x, y) in floats(&a, "answer").iter().zip(floats(&b, "answer")) {
            assert!((x - y).abs() < 1e-12, "{x} vs {y}");
        }
        assert_eq!(
            refused(&KIND, "{queries: {count: 1, seed: 1}, sigmas: [1, 1]}"),
            "sigmas.1: `sigmas` holds 1 twice"
        );
    }
}
