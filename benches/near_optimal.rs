//! Construction cost of Algorithm 1 (Wu–He–Xia 2017), single-threaded per δ:
//!
//! - one (V, δ): the sets I_i and R_i up to convergence (Definition 2) and the per-level
//!   measures, for V1 = [0, 1] ∪ [1000, 1001] and V7 = [0, 1] ∪ [2000, 2001] at δ = 1
//!   (about 1000 and 2000 steps, the longest sequences of the paper's examples);
//! - the same with the intervals kept (what samplers and densities need);
//! - one ε on the finished levels (α, E|X| and rate: O(n)).
//!
//! The figures' full grids are timed by the `w17-fig1` / `w17-fig2` runs (manifest.json).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dplab::mech::near_optimal::{construct, NeighbourSet, Options};
use std::hint::black_box;

fn construction(c: &mut Criterion) {
    let mut g = c.benchmark_group("near_optimal_construction");
    g.sample_size(10);
    for (name, b) in [("V1", 1000.0), ("V7", 2000.0)] {
        let v = NeighbourSet::two_intervals(1.0, b, b + 1.0).unwrap();
        g.bench_with_input(BenchmarkId::new("measures", name), &v, |bch, v| {
            bch.iter(|| construct(black_box(v), 1.0, Options::default()).unwrap())
        });
        let keep = Options {
            keep_sets: true,
            ..Options::default()
        };
        g.bench_with_input(BenchmarkId::new("keep_sets", name), &v, |bch, v| {
            bch.iter(|| construct(black_box(v), 1.0, keep).unwrap())
        });
        let levels = construct(&v, 1.0, Options::default()).unwrap();
        g.bench_with_input(BenchmarkId::new("one_epsilon", name), &levels, |bch, l| {
            bch.iter(|| l.summary(black_box(0.7)).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, construction);
criterion_main!(benches);
