//! Gaussian-kernel-mixture queries (Huang 2014, eq. 2.1) averaged over a dataset, on one
//! thread, for comparison with ../shared/peers/bench_kernel.py run in the same session.
//!
//! 10³ queries of J = 10 centres (a tenth of the experiments' 10⁴) on uniform points of the
//! three experiment shapes (n, d) = (10⁵, 8), (1993, 101), (5875, 19), at one bandwidth and at
//! the thesis's five (σ = 2, 4, 6, 8, 10, sharing the distances). Throughput counts kernel
//! values (points × centres × bandwidths); the peer's per-σ time for 10⁴ queries is ten times
//! its time for 10³.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dplab::mech::trig::kernel::{mean_answers, KernelMixtures};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;

fn kernel_queries(c: &mut Criterion) {
    let queries = 1_000;
    let per_query = 10;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let mut g = c.benchmark_group("kernel_queries_1e3");
    g.sample_size(10);
    for (n, dim) in [(100_000usize, 8usize), (1993, 101), (5875, 19)] {
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        let mix = KernelMixtures::random(queries, per_query, dim, &mut rng);
        let points: Vec<f64> = (0..n * dim).map(|_| rng.random_range(-1.0..=1.0)).collect();
        for sigmas in [&[2.0][..], &[2.0, 4.0, 6.0, 8.0, 10.0][..]] {
            let evaluations = n * queries * per_query * sigmas.len();
            g.throughput(Throughput::Elements(evaluations as u64));
            let id = BenchmarkId::new(format!("{}_sigmas", sigmas.len()), format!("n{n}_d{dim}"));
            g.bench_with_input(id, &points, |b, points| {
                b.iter(|| {
                    pool.install(|| mean_answers(&mix, black_box(points), None, sigmas))
                        .expect("valid input")
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, kernel_queries);
criterion_main!(benches);
