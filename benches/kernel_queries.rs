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
use dplab::mech::trig::kernel::{mean_answers, mean_answers_by, Evaluation, KernelMixtures};
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

/// Per-axis cell counts of CSN snapped at σ = 10 (`grid_floor` of h14-table3.2, d = 8) and,
/// per axis, the probability of its first cell: 10⁵ draws (first cell with that probability,
/// else a uniform one; a census column crowds at 0) give ~9.0·10⁴ distinct cells, 8 308 values
/// and a trie of ~1.6·10⁵ nodes, as the real floor's 92 109 cells, 8 357 values and 164 215
/// nodes.
const CSN_LEVELS: [usize; 8] = [7, 53, 91, 111, 122, 704, 894, 6375];
const CSN_CROWD: [f64; 8] = [0.6, 0.8, 0.3, 0.97, 0.97, 0.98, 0.93, 0.0];

/// The distinct cells of `draws` points drawn as [`CSN_CROWD`] says, at their cell centres,
/// each weighted by its share of the draws (what `grid_floor` outputs).
fn census_like_grid(draws: usize, rng: &mut impl Rng) -> (Vec<f64>, Vec<f64>) {
    let mut cells: std::collections::BTreeMap<Vec<usize>, usize> = Default::default();
    for _ in 0..draws {
        let key = CSN_LEVELS
            .iter()
            .zip(CSN_CROWD)
            .map(|(&l, c)| {
                if rng.random::<f64>() < c {
                    0
                } else {
                    rng.random_range(0..l)
                }
            })
            .collect();
        *cells.entry(key).or_default() += 1;
    }
    let mut points = Vec::with_capacity(cells.len() * CSN_LEVELS.len());
    let mut weights = Vec::with_capacity(cells.len());
    for (key, count) in cells {
        for (&k, &l) in key.iter().zip(&CSN_LEVELS) {
            points.push((2.0 * k as f64 + 1.0 - l as f64) / l as f64);
        }
        weights.push(count as f64 / draws as f64);
    }
    (points, weights)
}

/// The two evaluations of src/mech/trig/kernel.rs ("Two evaluations") on the same inputs, 10³
/// queries (J = 10) on one core, and the cells its cost rule's constants come from:
/// - `grid_census`: the census-like grid above (~9·10⁴ weighted cells), σ = 10 alone (what
///   `evaluate.smooth_queries` asks of the grid floor) and the thesis's five σ, direct and
///   factored;
/// - `continuous_n5000_d8`: uniform points, where the factored evaluation's tables and walk
///   have as many entries as operations (40 000 each), factored and direct;
/// - `direct_n20000_d8` / `direct_n2000_d101` at σ = [2], [2, 3] (two exponentials) and [2, 4]
///   (one exponential and its square): the direct evaluation's cost per coordinate, per
///   exponential and per multiply.
fn kernel_factored(c: &mut Criterion) {
    let (queries, per_query) = (1_000, 10);
    let pool = one_thread_pool();
    let mut g = c.benchmark_group("kernel_factored_1e3");
    g.sample_size(10);
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let mix8 = KernelMixtures::random(queries, per_query, 8, &mut rng);
    let mut cell = |name: String,
                    mix: &KernelMixtures,
                    points: &[f64],
                    weights: Option<&[f64]>,
                    sigmas: &[f64],
                    evaluation: Evaluation| {
        let n = points.len() / mix.dim();
        let evaluations = n * queries * per_query * sigmas.len();
        g.throughput(Throughput::Elements(evaluations as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                pool.install(|| {
                    mean_answers_by(mix, black_box(points), weights, sigmas, evaluation)
                })
                .expect("valid input")
            })
        });
    };
    let (grid, weights) = census_like_grid(100_000, &mut rng);
    let n = weights.len();
    for sigmas in [&[10.0][..], &[2.0, 4.0, 6.0, 8.0, 10.0][..]] {
        for (name, evaluation) in [
            ("direct", Evaluation::Direct),
            ("factored", Evaluation::Factored),
        ] {
            let id = format!("grid_census_n{n}_d8/{}_sigmas/{name}", sigmas.len());
            cell(id, &mix8, &grid, Some(&weights), sigmas, evaluation);
        }
    }
    let uniform = |n: usize, dim: usize, rng: &mut Pcg64Mcg| -> Vec<f64> {
        (0..n * dim).map(|_| rng.random_range(-1.0..=1.0)).collect()
    };
    let continuous = uniform(5000, 8, &mut rng);
    for (name, evaluation) in [
        ("direct", Evaluation::Direct),
        ("factored", Evaluation::Factored),
    ] {
        let id = format!("continuous_n5000_d8/1_sigmas/{name}");
        cell(id, &mix8, &continuous, None, &[2.0], evaluation);
    }
    let mix101 = KernelMixtures::random(queries, per_query, 101, &mut rng);
    for (mix, n) in [(&mix8, 20_000), (&mix101, 2000)] {
        let points = uniform(n, mix.dim(), &mut rng);
        for sigmas in [&[2.0][..], &[2.0, 3.0][..], &[2.0, 4.0][..]] {
            let id = format!("direct_n{n}_d{}/sigmas_{sigmas:?}", mix.dim());
            cell(id, mix, &points, None, sigmas, Evaluation::Direct);
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    kernel_floor,
    kernel_queries,
    kernel_small_sets,
    kernel_factored
);
criterion_main!(benches);
