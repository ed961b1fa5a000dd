//! Gaussian-kernel-mixture queries (Huang 2014, eq. 2.1) averaged over a dataset, on one
//! thread, for comparison with ../shared/peers/bench_kernel.py run in the same session.
//!
//! 10³ queries of J = 10 centres (a tenth of the experiments' 10⁴) on uniform points of the
//! three experiment shapes (n, d) = (10⁵, 8), (1993, 101), (5875, 19), at one bandwidth and at
//! the thesis's five (σ = 2, 4, 6, 8, 10, sharing the distances). Throughput counts kernel
//! values (points × centres × bandwidths); the peer's per-σ time for 10⁴ queries is ten times
//! its time for 10³.
//!
//! The floor (group `kernel_floor`, same sitting): the machine's peak rate of vector multiplies
//! and adds without fused multiply-adds (12 independent 4-lane chains of x·m + k, in flop/s)
//! and the rate of the exponential the kernel takes ([`exp_kernel_slice`] on an array that stays
//! in L1, in values/s, one multiply per value included as in the kernel). The work of a shape
//! cannot take less than 2·n·m·d / peak (the squared distances are a matrix product of 2d flops
//! per pair) plus n·m·#exp / exp rate plus n·m·#mul / (peak / 2), m = 10⁴ centres here, where
//! #exp is the number of bandwidths that take an exponential and #mul the multiplies of the
//! others' powers (src/mech/trig/kernel.rs, "Several bandwidths at once"): for σ = 2, 4, 6, 8,
//! 10, #exp = 3 (σ = 6, 8, 10) and #mul = 4 (σ = 4 is the 4th power of σ = 8's values, σ = 2 of
//! σ = 4's); for one σ, #exp = 1 and #mul = 0. Since issue #39 the kernel itself fuses its
//! multiplies and adds where the CPU can (chosen at run time, the same bits either way): there
//! a fused multiply-add does a multiply and an add in one instruction, so the distance term of
//! this floor is twice what such a CPU needs; and where the CPU has AVX-512 it takes 8 lanes
//! per instruction instead of these chains' 4 (the same bits again).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dplab::mech::fastmath::exp_kernel_slice;
use dplab::mech::trig::kernel::{mean_answers, KernelMixtures};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;

/// The benches measure one core, as the peer scripts do (OPENBLAS_NUM_THREADS=1).
fn one_thread_pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool")
}

fn kernel_queries(c: &mut Criterion) {
    let queries = 1_000;
    let per_query = 10;
    let pool = one_thread_pool();
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

/// CHAINS independent 4-lane chains of x ← x·m + k, ITERS steps: 2 flops per lane and step.
/// AVX2 intrinsics, so that the loop is what it says (vector multiplies and adds, no fused
/// multiply-add, enough chains to cover their latency) whatever the compiler would make of
/// scalar code.
const CHAINS: usize = 12;
const ITERS: usize = 1_000_000;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn multiply_add_chains_avx2(m: f64, k: f64) -> f64 {
    use std::arch::x86_64::*;
    let (m, k) = (_mm256_set1_pd(m), _mm256_set1_pd(k));
    let mut x = [_mm256_set1_pd(1.0); CHAINS];
    for _ in 0..ITERS {
        for v in x.iter_mut() {
            *v = _mm256_add_pd(_mm256_mul_pd(*v, m), k);
        }
    }
    let mut lanes = [0.0; 4];
    let mut total = 0.0;
    for v in x {
        // SAFETY: lanes holds the 4 values a 256-bit store writes.
        unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), v) };
        total += lanes.iter().sum::<f64>();
    }
    total
}

/// What `evaluate.smooth_queries` does per synthetic database: the experiments' 10⁴ queries
/// (J = 10) at one σ on a small weighted point set (the trigonometric mechanism's support is
/// 5–12 points in h14-table3.2), d = 8 (CSN) and d = 101 (CRM). Here the cost is per centre
/// (laying the centres out for the product, their norms), not per kernel value.
fn kernel_small_sets(c: &mut Criterion) {
    let (queries, per_query, n) = (10_000, 10, 10);
    let pool = one_thread_pool();
    let mut g = c.benchmark_group("kernel_small_sets_1e4");
    g.sample_size(10);
    for dim in [8usize, 101] {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let mix = KernelMixtures::random(queries, per_query, dim, &mut rng);
        let points: Vec<f64> = (0..n * dim).map(|_| rng.random_range(-1.0..=1.0)).collect();
        let weights = vec![1.0 / n as f64; n];
        g.throughput(Throughput::Elements((queries * per_query) as u64));
        let id = BenchmarkId::new("1_sigma", format!("n{n}_d{dim}"));
        g.bench_with_input(id, &points, |b, points| {
            b.iter(|| {
                pool.install(|| mean_answers(&mix, black_box(points), Some(&weights), &[4.0]))
                    .expect("valid input")
            })
        });
    }
    g.finish();
}

fn kernel_floor(c: &mut Criterion) {
    let mut g = c.benchmark_group("kernel_floor");
    g.sample_size(10);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        g.throughput(Throughput::Elements((CHAINS * 4 * 2 * ITERS) as u64));
        g.bench_function("peak_mul_add_flops", |b| {
            // SAFETY: the CPU supports AVX2 (checked just above).
            b.iter(|| unsafe { multiply_add_chains_avx2(black_box(0.999_999), black_box(1e-7)) })
        });
    }
    // The kernel's arguments, −‖x − c‖²/(2σ²), spread over [−20, 0]; each round maps its
    // results (in (0, 1]) back to [−20, 0) by one multiply per value, as the kernel scales its
    // distances by −1/(2σ²) (no copy: a refill's memory traffic is not the kernel's).
    let mut buf: Vec<f64> = (0..2048).map(|i| -(i as f64) / 102.4).collect();
    let rounds = 500;
    g.throughput(Throughput::Elements((buf.len() * rounds) as u64));
    g.bench_function("exp_kernel_values", |b| {
        b.iter(|| {
            for _ in 0..rounds {
                exp_kernel_slice(black_box(&mut buf));
                buf.iter_mut().for_each(|v| *v *= -20.0);
            }
            black_box(buf[0])
        })
    });
    g.finish();
}

criterion_group!(benches, kernel_floor, kernel_queries, kernel_small_sets);
criterion_main!(benches);
