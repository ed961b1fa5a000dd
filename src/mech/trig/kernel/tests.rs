use super::choice::cheaper_trie;
use super::*;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

fn uniform_points(n: usize, dim: usize, rng: &mut impl Rng) -> Vec<f64> {
    (0..n * dim).map(|_| rng.random_range(-1.0..=1.0)).collect()
}

/// q_f by the definition: explicit differences, f64::exp, one query and point at a time.
fn naive(mix: &KernelMixtures, points: &[f64], weights: Option<&[f64]>, sigma: f64) -> Vec<f64> {
    let (dim, per_query) = (mix.dim(), mix.per_query());
    let n = points.len() / dim;
    let centres = mix.centres();
    (0..mix.queries())
        .map(|q| {
            let mut total = 0.0;
            for (i, x) in points.chunks_exact(dim).enumerate() {
                let mut f = 0.0;
                for j in 0..per_query {
                    let c = &centres[(q * per_query + j) * dim..][..dim];
                    let d2: f64 = x.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
                    f += mix.weights()[q * per_query + j] * (-d2 / (2.0 * sigma * sigma)).exp();
                }
                total += weights.map_or(1.0 / n as f64, |u| u[i]) * f;
            }
            total
        })
        .collect()
}

#[test]
fn matches_naive_double_loop() {
    let mut rng = Pcg64Mcg::seed_from_u64(11);
    let sigmas = [0.3, 2.0, 4.0, 6.0, 8.0, 10.0];
    // Shapes cover d = 1, point counts that are not multiples of the strip or point block,
    // J that does not divide the centre block, and several centre blocks.
    for &(queries, per_query, dim, n) in &[
        (7, 10, 1, 1),
        (3, 10, 1, 259),
        (40, 10, 8, 37),
        (5, 3, 19, 515),
        (30, 10, 101, 9),
        (90, 7, 2, 1030),
    ] {
        let mix = KernelMixtures::random(queries, per_query, dim, &mut rng);
        let points = uniform_points(n, dim, &mut rng);
        let raw: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
        let total: f64 = raw.iter().sum();
        let probs: Vec<f64> = raw.iter().map(|u| u / total).collect();
        for weights in [None, Some(probs.as_slice())] {
            let fast = mean_answers(&mix, &points, weights, &sigmas).unwrap();
            assert_eq!(fast.len(), sigmas.len());
            for (s, &sigma) in sigmas.iter().enumerate() {
                let slow = naive(&mix, &points, weights, sigma);
                assert_eq!(fast[s].len(), queries);
                for (q, (a, b)) in fast[s].iter().zip(&slow).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-12 * b.abs(),
                        "d={dim} n={n} σ={sigma} q={q}: {a} vs {b}"
                    );
                }
            }
        }
    }
}

#[test]
fn plans_powers_from_exact_integer_ratios() {
    let scales = |sigmas: &[f64]| -> Vec<f64> { sigmas.iter().map(|s| -0.5 / (s * s)).collect() };
    let describe = |sigmas: &[f64]| -> Vec<(usize, Source, u32)> {
        plan_steps(&scales(sigmas))
            .iter()
            .map(|s| (s.target, s.source, s.total))
            .collect()
    };
    // The thesis's bandwidths: σ = 4 from σ = 8 (k = 4), σ = 2 from σ = 4 (k = 4, 16 in
    // all); 6 and 10 have no integer ratio to anything wider.
    let s = scales(&[2.0, 4.0, 6.0, 8.0, 10.0]);
    assert_eq!(
        describe(&[2.0, 4.0, 6.0, 8.0, 10.0]),
        vec![
            (4, Source::Exp(s[4]), 1),
            (3, Source::Exp(s[3]), 1),
            (2, Source::Exp(s[2]), 1),
            (1, Source::Power { from: 1, k: 4 }, 4),
            (0, Source::Power { from: 3, k: 4 }, 16),
        ]
    );
    // σ = 1 would be the 64th power of σ = 8: over MAX_POWER, so an exponential. A
    // repeated σ is the first power (a copy) of its twin.
    let s = scales(&[8.0, 1.0, 2.0, 2.0]);
    assert_eq!(
        describe(&[8.0, 1.0, 2.0, 2.0]),
        vec![
            (0, Source::Exp(s[0]), 1),
            (2, Source::Power { from: 0, k: 16 }, 16),
            (3, Source::Power { from: 1, k: 1 }, 16),
            (1, Source::Exp(s[1]), 1),
        ]
    );
    // Ratios that are not exact integers, or not integers at all, take exponentials.
    let plan = plan_steps(&scales(&[1.0, 1.5, 1.3, 0.7]));
    assert!(plan.iter().all(|s| matches!(s.source, Source::Exp(_))));
    assert_eq!(power_cost(1), 0);
    assert_eq!(power_cost(4), 2);
    assert_eq!(power_cost(9), 4);
    assert_eq!(power_cost(16), 4);
    assert_eq!(power_cost(15), 6);
}

/// Every step's kernel values against f64::exp of the argument computed directly: the
/// relative difference stays within k·1.4·10⁻¹⁴ + (k + 1 + |x|)·2⁻⁵² for a k-th power of
/// an exponential (the exponential's own error, 1.4·10⁻¹⁴, raised to the k-th power, k − 1
/// roundings, one ulp for libm, |x|·2⁻⁵² for the arguments' roundings), on every power
/// 1 ..= MAX_POWER and the thesis's bandwidths; and (values ≤ 1) within 2.3·10⁻¹³ absolute.
#[test]
fn powers_stay_within_their_error_bound() {
    let mut rng = Pcg64Mcg::seed_from_u64(21);
    let mut sigmas: Vec<f64> = vec![2.0, 4.0, 6.0, 8.0, 10.0];
    // Every k from 1 to 16 relative to σ = 12: σ² = 144/k.
    sigmas.extend((1..=MAX_POWER).map(|k| 12.0 / f64::from(k).sqrt()));
    sigmas.push(12.0);
    let scales: Vec<f64> = sigmas.iter().map(|s| -0.5 / (s * s)).collect();
    let plan = plan_steps(&scales);
    assert!(plan.iter().all(|s| s.total <= MAX_POWER));
    assert!(plan.iter().filter(|s| s.total > 1).count() >= 8);
    let width = 4 * EXP_LANES;
    // Distances of points of [−1, 1]^d for d up to 101, and a few beyond.
    let d: Vec<f64> = (0..width)
        .map(|_| rng.random_range(0.0..=404.0_f64))
        .collect();
    let mut partial = vec![0.0; plan.len() * width];
    let mut values = vec![0.0; plan.len() * width];
    add_kernels::<false>(&mut partial, &d, &plan, &mut values, 1.0);
    let mut worst = 0.0f64;
    for step in &plan {
        let got = &partial[step.target * width..][..width];
        for (&g, &d) in got.iter().zip(&d) {
            let x = scales[step.target] * d;
            let want = x.exp();
            if want < 1e-300 {
                continue;
            }
            assert!(
                (g - want).abs() <= 2.3e-13,
                "σ = {}, d = {d}",
                sigmas[step.target]
            );
            let rel = ((g - want) / want).abs() / f64::EPSILON;
            let k = f64::from(step.total);
            let bound = k * 1.4e-14 / f64::EPSILON + k + 1.0 + x.abs();
            assert!(
                rel <= bound,
                "σ = {}, k = {}, d = {d}: {rel} ulp > {bound}",
                sigmas[step.target],
                step.total
            );
            if step.total > 1 {
                worst = worst.max(rel / bound);
            }
        }
    }
    assert!(worst > 0.0);
}

/// A multi-bandwidth call against single-bandwidth calls (each an exponential) and the
/// naive double loop, over random shapes (d = 1, 8, 19, 101; n not a multiple of the
/// strip or the point block): powers change the answers by no more than their bound.
#[test]
fn several_bandwidths_at_once_match_one_at_a_time() {
    let mut rng = Pcg64Mcg::seed_from_u64(31);
    let sigmas = [2.0, 4.0, 6.0, 8.0, 10.0, 1.0, 0.5];
    for &(queries, per_query, dim, n) in &[
        (5, 10, 1, 3),
        (9, 10, 8, 261),
        (4, 7, 19, 98),
        (6, 10, 101, 517),
    ] {
        let mix = KernelMixtures::random(queries, per_query, dim, &mut rng);
        let points = uniform_points(n, dim, &mut rng);
        let all = mean_answers(&mix, &points, None, &sigmas).unwrap();
        for (s, &sigma) in sigmas.iter().enumerate() {
            let one = mean_answers(&mix, &points, None, &[sigma]).unwrap();
            let slow = naive(&mix, &points, None, sigma);
            for q in 0..queries {
                let (a, b, c) = (all[s][q], one[0][q], slow[q]);
                // k ≤ 16: 16·1.4·10⁻¹⁴ + 17·2⁻⁵² relative plus summation roundings.
                assert!(
                    (a - b).abs() <= 2.5e-13 * b,
                    "d={dim} σ={sigma}: {a} vs {b}"
                );
                assert!((a - c).abs() <= 1e-12 * c, "d={dim} σ={sigma}: {a} vs {c}");
                assert!((a - c).abs() <= 1e-12, "d={dim} σ={sigma}: {a} vs {c}");
            }
        }
    }
}

#[test]
fn identical_on_one_and_two_threads() {
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    // 2000 points make 8 point blocks; 120 queries make 5 or more query blocks, 30
    // queries make blocks of 8 queries on one thread and of 4 on two.
    let points = uniform_points(2000, 6, &mut rng);
    let weights: Vec<f64> = (0..2000).map(|_| rng.random::<f64>()).collect();
    let sigmas = [2.0, 4.0, 10.0];
    for (queries, w) in [(120, None), (120, Some(weights.as_slice())), (30, None)] {
        let mix = KernelMixtures::random(queries, 10, 6, &mut rng);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| mean_answers(&mix, &points, w, &sigmas).unwrap())
        };
        let (one, two) = (run(1), run(2));
        let bits =
            |a: &Vec<Vec<f64>>| -> Vec<u64> { a.concat().iter().map(|v| v.to_bits()).collect() };
        assert_eq!(bits(&one), bits(&two));
    }
}

/// The baseline copy (SSE2, its fused multiply-adds by the software `fma`), the copy the
/// CPU is given, and each of the AVX2 + FMA and AVX-512 copies this CPU can run give the
/// same bits, as does the baseline with the AVX-512 copy's 8-point tiles, on d = 1, 19 and
/// 101, point counts that are no multiple of the strip, weighted or not.
#[test]
fn baseline_and_dispatched_code_agree_bitwise() {
    let mut rng = Pcg64Mcg::seed_from_u64(8);
    for &(dim, n) in &[(1, 1003), (19, 700), (101, 301)] {
        let mix = KernelMixtures::random(40, 10, dim, &mut rng);
        let points = uniform_points(n, dim, &mut rng);
        let raw: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
        let point_norms = check_rows("point", &points, dim).unwrap();
        for weights in [None, Some(raw.as_slice())] {
            let ctx = Context {
                mix: &mix,
                strips: point_strips(&points, dim),
                point_norms: &point_norms,
                weights,
                // An exponential, a power of it (k = 4) and an unrelated exponential.
                plan: plan_steps(&[-0.125, -0.005, -0.03125]),
                final_factor: 1.0,
            };
            // Inlined here, the portable body is compiled for the baseline (SSE2 on
            // x86-64); block_answers picks the AVX2 + FMA copy where the CPU has it.
            // (A block starts on a panel of LANES centres: 4 queries of 10.)
            let baseline = block_answers_portable::<4>(&ctx, 4, 39);
            let dispatched = block_answers(&ctx, 4, 39);
            let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
            assert_eq!(bits(&baseline), bits(&dispatched), "d = {dim}, n = {n}");
            // The AVX-512 copy's tile of 8 points, compiled for the baseline.
            let tiles8 = block_answers_portable::<8>(&ctx, 4, 39);
            assert_eq!(bits(&baseline), bits(&tiles8), "d = {dim}, n = {n}");
            // Each wider copy the CPU has, called directly.
            #[cfg(target_arch = "x86_64")]
            {
                use crate::mech::fastmath::{has, Isa};
                if has(Isa::Avx2) {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    let avx2 = unsafe { block_answers::avx2(&ctx, 4, 39) };
                    assert_eq!(bits(&baseline), bits(&avx2), "AVX2, d = {dim}, n = {n}");
                }
                if has(Isa::Avx512) {
                    // SAFETY: the CPU supports AVX-512 F and DQ (checked just above).
                    let avx512 = unsafe { block_answers::avx512(&ctx, 4, 39) };
                    assert_eq!(
                        bits(&baseline),
                        bits(&avx512),
                        "AVX-512, d = {dim}, n = {n}"
                    );
                }
            }
        }
    }
}

/// The family keeps its centres only in the kernel's layout: reading them back gives what
/// was given, bit for bit (a count that is no multiple of a panel, tiny and subnormal
/// values, large ones).
#[test]
fn centres_read_back_as_given() {
    let given: Vec<f64> = (0..7 * 3)
        .map(|i| match i % 5 {
            0 => 5e-324 * i as f64,
            1 => -1e150 / i as f64,
            2 => 0.1 * i as f64,
            3 => -0.0,
            _ => 1.0 / 3.0,
        })
        .collect();
    let mix = KernelMixtures::new(3, 7, given.clone(), vec![1.0 / 7.0; 7]).unwrap();
    let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
    assert_eq!(bits(&mix.centres()), bits(&given));
}

#[test]
fn random_queries_are_on_the_simplex_and_the_cube() {
    let mix = KernelMixtures::random(500, 10, 3, &mut Pcg64Mcg::seed_from_u64(1));
    assert_eq!((mix.queries(), mix.per_query(), mix.dim()), (500, 10, 3));
    assert_eq!(mix.centres().len(), 500 * 10 * 3);
    assert!(mix.centres().iter().all(|c| (-1.0..=1.0).contains(c)));
    for row in mix.weights().chunks_exact(10) {
        assert!(row.iter().all(|&a| a >= 0.0));
        assert!((row.iter().sum::<f64>() - 1.0).abs() <= 1e-12);
    }
    // Centres spread over the cube rather than sitting at one spot.
    let mean = mix.centres().iter().sum::<f64>() / mix.centres().len() as f64;
    assert!(mean.abs() < 0.05, "mean centre coordinate {mean}");
    let again = KernelMixtures::random(500, 10, 3, &mut Pcg64Mcg::seed_from_u64(1));
    assert_eq!(mix, again);
    let other = KernelMixtures::random(500, 10, 3, &mut Pcg64Mcg::seed_from_u64(2));
    assert_ne!(mix, other);
    // Asking for more queries keeps the first ones.
    let more = KernelMixtures::random(600, 10, 3, &mut Pcg64Mcg::seed_from_u64(1));
    assert_eq!(&more.weights()[..5000], mix.weights());
    assert_eq!(&more.centres()[..15000], mix.centres());
}

#[test]
fn queries_are_positive_and_at_most_one() {
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    for dim in [1, 8, 101] {
        let mix = KernelMixtures::random(50, 10, dim, &mut rng);
        // Corners of the cube are farthest from the centres; a point at a centre is nearest.
        let mut points = vec![1.0; dim];
        points.extend(vec![-1.0; dim]);
        points.extend_from_slice(&mix.centres()[..dim]);
        points.extend(uniform_points(20, dim, &mut rng));
        let n = points.len() / dim;
        for i in 0..n {
            let one = &points[i * dim..][..dim];
            let answers = mean_answers(&mix, one, None, &[2.0, 10.0]).unwrap();
            for f in answers.concat() {
                assert!(f > 0.0 && f <= 1.0 + 1e-12, "d={dim}: f = {f}");
            }
        }
    }
}

/// exp_normal within its proven bound, 2⁻⁵¹ relative, of libm (itself within one ulp,
/// 2⁻⁵² relative); the worst case measured is one ulp.
#[test]
fn exp_normal_within_its_bound() {
    let ulps = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
    let mut rng = Pcg64Mcg::seed_from_u64(9);
    let mut xs: Vec<f64> = (0..400_000)
        .map(|_| rng.random_range(-60.0..=0.0))
        .collect();
    xs.extend((0..200_000).map(|_| rng.random_range(-708.0..=709.0)));
    xs.extend([
        0.0,
        -0.0,
        -1e-300,
        1e-300,
        -708.0,
        709.0,
        1.0,
        -1.0,
        0.5 * std::f64::consts::LN_2,
    ]);
    let mut worst = 0;
    for x in xs {
        let (a, b) = (exp_normal(x), x.exp());
        worst = worst.max(ulps(a, b));
        assert!(
            (a - b).abs() <= (2f64.powi(-51) + f64::EPSILON) * b,
            "exp({x}) = {a}, libm {b}"
        );
    }
    assert!(worst <= 1, "{worst} ulp");
    assert_eq!(exp_normal(-708.5), 0.0);
    assert_eq!(exp_normal(f64::NEG_INFINITY), 0.0);
}

/// exp_kernel within its proven bound of libm (itself within one ulp) on the normal range:
/// 1.4·10⁻¹⁴ plus |n|·2.4·10⁻¹⁷ relative, and 1.4·10⁻¹⁴·e^x plus 1.2·10⁻¹⁷ absolute; below
/// −707 the value of −707 (an absolute error under 10⁻³⁰⁷).
#[test]
fn exp_kernel_within_its_bound() {
    let mut rng = Pcg64Mcg::seed_from_u64(39);
    let mut xs: Vec<f64> = (0..400_000)
        .map(|_| rng.random_range(-60.0..=0.0))
        .collect();
    xs.extend((0..200_000).map(|_| rng.random_range(-707.0..=709.0)));
    xs.extend([
        0.0,
        -0.0,
        -1e-300,
        -707.0,
        709.0,
        -1.0,
        -0.5 * std::f64::consts::LN_2,
    ]);
    let mut worst = 0.0f64;
    for x in xs {
        let (a, b) = (exp_kernel(x), x.exp());
        let rel = ((a - b) / b).abs();
        worst = worst.max(rel);
        // 1.4e-14 plus the single ln 2 constant's |n|·2.4e-17 (n = x/ln 2, rounded).
        let n = (x / std::f64::consts::LN_2).abs() + 0.5;
        let bound = 1.4e-14 + f64::EPSILON + n * 2.4e-17;
        assert!(rel <= bound, "exp({x}) = {a}, libm {b}");
        if b <= 1.0 {
            assert!((a - b).abs() <= 1.4e-14 * b + 1.2e-17, "exp({x}): absolute");
        }
    }
    assert!(worst > 1e-16, "{worst}");
    for x in [-707.5, -1e4, f64::NEG_INFINITY] {
        assert!(exp_kernel(x) <= 1e-307 && exp_kernel(x) > 0.0);
    }
    // Lanes give the single value's bits.
    let x: [f64; 5] = [-0.3, -3.0, -30.0, -300.0, -800.0];
    let lanes = exp_kernel_lanes(&x);
    for (l, x) in lanes.iter().zip(x) {
        assert_eq!(l.to_bits(), exp_kernel(x).to_bits());
    }
}

/// Issue #39's rule against the plain reference: every answer within 10⁻¹² absolute of the
/// naive double loop (f64::exp, explicit differences), for the thesis's five bandwidths at
/// once and alone, random shapes (d = 1, 2, 8, 19, 101; n and the query count no multiple
/// of a strip, tile, panel or point block), weighted and not.
#[test]
fn answers_within_1e_12_of_the_plain_reference() {
    let mut rng = Pcg64Mcg::seed_from_u64(390);
    let sigmas = [2.0, 4.0, 6.0, 8.0, 10.0];
    let mut worst = 0.0f64;
    for &(queries, per_query, dim, n) in &[
        (13, 10, 1, 1001),
        (7, 3, 2, 77),
        (11, 10, 8, 523),
        (5, 7, 19, 259),
        (9, 10, 101, 131),
        (3, 1, 101, 9),
    ] {
        let mix = KernelMixtures::random(queries, per_query, dim, &mut rng);
        let points = uniform_points(n, dim, &mut rng);
        let raw: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
        let total: f64 = raw.iter().sum();
        let probs: Vec<f64> = raw.iter().map(|u| u / total).collect();
        for weights in [None, Some(probs.as_slice())] {
            let all = mean_answers(&mix, &points, weights, &sigmas).unwrap();
            for (s, &sigma) in sigmas.iter().enumerate() {
                let one = mean_answers(&mix, &points, weights, &[sigma]).unwrap();
                let slow = naive(&mix, &points, weights, sigma);
                for q in 0..queries {
                    for got in [all[s][q], one[0][q]] {
                        let diff = (got - slow[q]).abs();
                        worst = worst.max(diff);
                        assert!(diff <= 1e-12, "d={dim} n={n} σ={sigma} q={q}: {diff}");
                    }
                }
            }
        }
    }
    assert!(worst > 0.0);
}

#[test]
fn rejects_bad_input() {
    let mix = KernelMixtures::random(4, 10, 2, &mut Pcg64Mcg::seed_from_u64(0));
    let points = [0.1, 0.2, 0.3, 0.4];
    let ok = |r: Result<Vec<Vec<f64>>, KernelError>| r.is_ok();
    assert!(ok(mean_answers(&mix, &points, None, &[1.0])));
    assert_eq!(
        mean_answers(&mix, &points[..3], None, &[1.0]),
        Err(KernelError::Shape {
            what: "point",
            len: 3,
            width: 2
        })
    );
    assert_eq!(
        mean_answers(&mix, &[], None, &[1.0]),
        Err(KernelError::NoPoints)
    );
    for sigma in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-300] {
        assert!(matches!(
            mean_answers(&mix, &points, None, &[2.0, sigma]),
            Err(KernelError::Bandwidth(_))
        ));
    }
    assert!(matches!(
        mean_answers(&mix, &points, Some(&[0.5]), &[1.0]),
        Err(KernelError::Length {
            what: "weights",
            len: 1,
            expected: 2
        })
    ));
    assert!(matches!(
        mean_answers(&mix, &points, Some(&[0.5, f64::NAN]), &[1.0]),
        Err(KernelError::NonFinite {
            what: "weight",
            index: 1
        })
    ));
    assert!(matches!(
        mean_answers(&mix, &[0.0, 0.0, f64::INFINITY, 0.0], None, &[1.0]),
        Err(KernelError::NonFinite {
            what: "point",
            index: 1
        })
    ));
    assert!(matches!(
        mean_answers(&mix, &[1e200, 0.0], None, &[1.0]),
        Err(KernelError::NonFinite {
            what: "point",
            index: 0
        })
    ));
    assert_eq!(mean_answers(&mix, &points, None, &[]), Ok(vec![]));

    assert_eq!(
        KernelMixtures::new(0, 1, vec![], vec![]),
        Err(KernelError::ZeroDimension)
    );
    assert!(matches!(
        KernelMixtures::new(2, 3, vec![0.0; 10], vec![0.2; 5]),
        Err(KernelError::Shape { what: "weight", .. })
    ));
    assert!(matches!(
        KernelMixtures::new(2, 2, vec![0.0; 6], vec![0.5; 4]),
        Err(KernelError::Length {
            what: "centres",
            ..
        })
    ));
    assert!(matches!(
        KernelMixtures::new(1, 1, vec![f64::NAN], vec![1.0]),
        Err(KernelError::NonFinite {
            what: "centre",
            index: 0
        })
    ));
    let built = KernelMixtures::new(2, 2, vec![0.0; 8], vec![0.5; 4]).unwrap();
    assert_eq!(built.queries(), 2);
    // A query whose centres sit at the only point answers Σα = 1 exactly.
    let at = mean_answers(&built, &[0.0, 0.0], None, &[3.0]).unwrap();
    assert_eq!(at, vec![vec![1.0, 1.0]]);
}

/// The Taylor route (kernel/taylor.rs) at the degree its bound picks, against the definition:
/// d = 1 … 8, point and centre counts that are no multiple of a block, a mean and signed
/// weights, σ from 1.5 to 10. Cut lower, the series misses: the degree matters and the
/// comparison can fail.
#[test]
fn the_series_is_within_1e_12_of_the_plain_reference() {
    let mut rng = Pcg64Mcg::seed_from_u64(4711);
    let (mut worst, mut misses) = (0.0f64, 0);
    for &(queries, per_query, dim, n) in &[
        (9, 10, 1, 700),
        (7, 3, 2, 300),
        (5, 10, 5, 517),
        (4, 10, 8, 1001),
    ] {
        let mix = KernelMixtures::random(queries, per_query, dim, &mut rng);
        let points = uniform_points(n, dim, &mut rng);
        let norms = check_rows("point", &points, dim).unwrap();
        let signed: Vec<f64> = (0..n)
            .map(|_| rng.random_range(-1.0..1.0) / n as f64)
            .collect();
        for weights in [None, Some(signed.as_slice())] {
            let w: f64 = weights.map_or(1.0, |u| u.iter().map(|v| v.abs()).sum());
            let largest = |v: &[f64]| v.iter().fold(0.0f64, |a, &b| a.max(b)).sqrt();
            let factor = if weights.is_some() {
                1.0
            } else {
                1.0 / n as f64
            };
            for sigma in [1.5, 3.0, 6.0, 10.0] {
                let z = largest(&norms) * largest(&mix.centre_norms) / (sigma * sigma);
                let p = taylor::degree(z, 2.0 * w).unwrap();
                let slow = naive(&mix, &points, weights, sigma);
                let at = |p| taylor::answers(&mix, &points, &norms, weights, &[(sigma, p)], factor);
                let got = at(p);
                for (g, s) in got[0].iter().zip(&slow) {
                    worst = worst.max((g - s).abs());
                    assert!(
                        (g - s).abs() <= 1e-12,
                        "d={dim} σ={sigma} p={p}: {g} vs {s}"
                    );
                }
                if p >= 4 {
                    let short = at(p - 3);
                    let miss = short[0]
                        .iter()
                        .zip(&slow)
                        .map(|(g, s)| (g - s).abs())
                        .fold(0.0, f64::max);
                    misses += usize::from(miss > 1e-12);
                }
            }
        }
    }
    assert!(
        misses >= 8,
        "only {misses} series cut three degrees short miss"
    );
    assert!(worst > 0.0);
}

/// The rule: the series for a CSN-sized call (d = 8, 10⁵ points and centres) at σ ≥ 4, the
/// direct sum at σ = 2 and in d = 101; small calls take it only where its monomials are
/// few against n·m.
#[test]
fn the_series_is_taken_where_it_pays() {
    let mut rng = Pcg64Mcg::seed_from_u64(12);
    let csn = KernelMixtures::random(10_000, 10, 8, &mut rng);
    let norms = vec![5.5; 99_762]; // ‖x‖ ≈ 2.35
    let got = taylor::degrees(99_762, &norms, None, &csn, &[2.0, 4.0, 6.0, 8.0, 10.0]);
    assert!(got[0].is_none(), "{got:?}");
    assert!(got[1..].iter().all(|p| p.is_some()), "{got:?}");
    assert!(
        got[1] > got[2] && got[2] > got[3] && got[3] > got[4],
        "wider, lower degree: {got:?}"
    );
    let crm = KernelMixtures::random(1000, 10, 101, &mut rng);
    let got = taylor::degrees(1993, &vec![30.0; 1993], None, &crm, &[10.0]);
    assert_eq!(got, [None]);
    let small = KernelMixtures::random(2, 10, 8, &mut rng);
    let got = taylor::degrees(50, &vec![5.5; 50], None, &small, &[10.0]);
    assert_eq!(
        got,
        [None],
        "20 centres, 50 points: the direct sum is cheaper"
    );
}

/// Points snapped to a grid of `levels[k]` cells on coordinate k (cell centres, as
/// `basis::grid_point`): with probability `crowd[k]` the first cell, else a uniform one, as
/// census columns crowd at 0 (so that sorted points share long prefixes).
fn grid_points(n: usize, levels: &[usize], crowd: &[f64], rng: &mut impl Rng) -> Vec<f64> {
    let mut points = Vec::with_capacity(n * levels.len());
    for _ in 0..n {
        for (&l, &c) in levels.iter().zip(crowd.iter().cycle()) {
            let cell = if rng.random::<f64>() < c {
                0
            } else {
                rng.random_range(0..l)
            };
            points.push((2.0 * cell as f64 + 1.0 - l as f64) / l as f64);
        }
    }
    points
}

/// Per-axis cell counts of CSN snapped at σ = 10 (d = 8, 8 357 values in all) and crowds that
/// give 10⁵ draws about its trie: ~9.0·10⁴ cells, ~1.6·10⁵ nodes, ~2.1·10⁴ parents of leaves.
const CSN_LEVELS: [usize; 8] = [7, 53, 91, 111, 122, 704, 894, 6375];
const CSN_CROWD: [f64; 8] = [0.6, 0.8, 0.3, 0.97, 0.97, 0.98, 0.93, 0.0];

fn bits(a: &[Vec<f64>]) -> Vec<u64> {
    a.concat().iter().map(|v| v.to_bits()).collect()
}

/// The factored evaluation's blocks over all queries, called directly (not through the
/// dispatcher or the cost rule), laid out [σ][query].
fn factored_directly(
    mix: &KernelMixtures,
    points: &[f64],
    weights: Option<&[f64]>,
    sigmas: &[f64],
) -> Vec<Vec<f64>> {
    let dim = mix.dim();
    let trie = factored::Trie::new(
        points,
        weights,
        dim,
        &factored::distinct_values(points, dim),
    )
    .expect("indices fit");
    let f = factored::Factored {
        mix,
        trie,
        scales: sigmas.iter().map(|s| -0.5 / (s * s)).collect(),
        final_factor: weights.map_or(1.0 / (points.len() / dim) as f64, |_| 1.0),
    };
    let all = factored::block_answers(&f, 0, mix.queries());
    all.chunks_exact(mix.queries())
        .map(<[f64]>::to_vec)
        .collect()
}

/// Issue #39's rule for the factored evaluation: every answer within 10⁻¹² absolute of the
/// naive double loop, on grid points with duplicates (coarse grids), d = 1 … 101, n no
/// multiple of a segment or of the runs (and over several segments), weights None, probabilities
/// and signed weights (Σ|u| = 1), bandwidths of which some are powers of others. The path is
/// the factored one: `mean_answers_by(Factored)` gives the bits of the factored blocks called
/// directly, and those are not the direct evaluation's bits.
#[test]
fn factored_matches_the_plain_reference() {
    let mut rng = Pcg64Mcg::seed_from_u64(4);
    let sigmas = [0.3, 2.0, 4.0, 6.0, 8.0, 10.0];
    let mut worst = 0.0f64;
    let mut differs = false;
    for &(queries, per_query, n, ref levels) in &[
        (7, 10, 1, vec![3]),
        (9, 10, 300, vec![5]),
        (11, 10, 1031, vec![2, 7, 3, 50, 11, 4, 9, 2]),
        (5, 3, 259, vec![10; 19]),
        (6, 7, 77, vec![1, 4, 1, 30]),
        (4, 10, 131, (0..101).map(|k| 2 + k % 5).collect::<Vec<_>>()),
    ] {
        let dim = levels.len();
        let mix = KernelMixtures::random(queries, per_query, dim, &mut rng);
        let points = grid_points(n, levels, &[0.5], &mut rng);
        let raw: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
        let total: f64 = raw.iter().sum();
        let probs: Vec<f64> = raw.iter().map(|u| u / total).collect();
        let signed: Vec<f64> = (0..n)
            .map(|i| if i % 3 == 0 { -probs[i] } else { probs[i] })
            .collect();
        for weights in [None, Some(probs.as_slice()), Some(signed.as_slice())] {
            let got =
                mean_answers_by(&mix, &points, weights, &sigmas, Evaluation::Factored).unwrap();
            assert_eq!(
                bits(&got),
                bits(&factored_directly(&mix, &points, weights, &sigmas))
            );
            let direct =
                mean_answers_by(&mix, &points, weights, &sigmas, Evaluation::Direct).unwrap();
            differs |= bits(&got) != bits(&direct);
            for (s, &sigma) in sigmas.iter().enumerate() {
                let slow = naive(&mix, &points, weights, sigma);
                for q in 0..queries {
                    let diff = (got[s][q] - slow[q]).abs();
                    worst = worst.max(diff);
                    assert!(diff <= 1e-12, "d={dim} n={n} σ={sigma} q={q}: {diff}");
                    assert!(
                        (got[s][q] - direct[s][q]).abs() <= 1e-12,
                        "d={dim} n={n} σ={sigma} q={q}: factored vs direct"
                    );
                }
            }
        }
    }
    assert!(worst > 0.0 && differs);
}

/// The trie of a small example by hand: levels by increasing distinct-value count, nodes
/// counted as the points' new levels, duplicates one leaf (unweighted: their count) or a leaf
/// each (weighted), runs from the root padded to whole rows; and sums over several segments.
#[test]
fn trie_of_a_small_example() {
    // Coordinate 0 has 3 values, coordinate 1 has 2: level 0 is coordinate 1.
    let points = [0.5, 1.0, -0.5, 1.0, 0.5, 0.0, 0.5, 1.0, 0.25, 0.0];
    let columns = factored::distinct_values(&points, 2);
    assert_eq!(columns, vec![vec![-0.5, 0.25, 0.5], vec![0.0, 1.0]]);
    let trie = factored::Trie::new(&points, None, 2, &columns).unwrap();
    // Sorted by (coordinate 1, coordinate 0): (0, .25) (0, .5) (1, −.5) (1, .5) (1, .5):
    // nodes 2 + 1 + 2 + 1 (the duplicate adds none). Six operations make four runs of about
    // 6/4, one leaf each, each from the root: two rows of four.
    assert_eq!((trie.nodes(), trie.table_len(), trie.ops()), (6, 5, 8));
    // Weighted, the duplicate is a leaf of its own: runs of 2, 4, 2 and 2 operations.
    let weighted = factored::Trie::new(&points, Some(&[0.2; 5]), 2, &columns).unwrap();
    assert_eq!((weighted.nodes(), weighted.ops()), (6, 16));
    // 1000 distinct points of d = 1: four runs of 250, no padding; with weights 1 the sum
    // at a centre of 0 and σ = 10⁶ (every kernel value within 10⁻⁶ of 1) is within 10⁻³ of
    // 1000 and equal to the unweighted mean times 1000 up to rounding.
    let line: Vec<f64> = (0..1000).map(f64::from).collect();
    let trie = factored::Trie::new(&line, None, 1, &factored::distinct_values(&line, 1)).unwrap();
    assert_eq!((trie.nodes(), trie.ops()), (1000, 1000));
    let mix = KernelMixtures::new(1, 1, vec![0.0], vec![1.0]).unwrap();
    let sum = factored_directly(&mix, &line, Some(&[1.0; 1000]), &[1e6]);
    assert!((sum[0][0] - 1000.0).abs() < 1e-3, "{}", sum[0][0]);
    let mean = factored_directly(&mix, &line, None, &[1e6]);
    assert!((mean[0][0] * 1000.0 - sum[0][0]).abs() < 1e-9);
}

/// The factored blocks on any thread count: rayon pools of 1 and 3 threads give the same
/// bits (blocks of 8 queries on one thread, of 4 on three; 3 segments of points).
#[test]
fn factored_identical_on_one_and_three_threads() {
    let mut rng = Pcg64Mcg::seed_from_u64(6);
    let levels = [3, 5, 8, 13, 21, 40];
    let points = grid_points(700, &levels, &[0.3], &mut rng);
    let weights: Vec<f64> = (0..700).map(|_| rng.random::<f64>() - 0.3).collect();
    let sigmas = [2.0, 4.0, 10.0];
    for (queries, w) in [(120, None), (120, Some(weights.as_slice())), (30, None)] {
        let mix = KernelMixtures::random(queries, 10, levels.len(), &mut rng);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    mean_answers_by(&mix, &points, w, &sigmas, Evaluation::Factored).unwrap()
                })
        };
        assert_eq!(bits(&run(1)), bits(&run(3)));
    }
}

/// The factored blocks' baseline copy (8 centres side by side, the software `fma` in the
/// exponential), the same with 16 side by side, the dispatched copy, and each of the AVX2 +
/// FMA and AVX-512 copies this CPU runs: the same bits, on d = 1, 8 and 101, weighted or not.
#[test]
fn factored_baseline_and_dispatched_code_agree_bitwise() {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    for levels in [vec![40], vec![2, 7, 3, 50, 11, 4, 9, 2], vec![3; 101]] {
        let dim = levels.len();
        let mix = KernelMixtures::random(40, 10, dim, &mut rng);
        let points = grid_points(611, &levels, &[0.5], &mut rng);
        let raw: Vec<f64> = (0..611).map(|_| rng.random::<f64>() - 0.5).collect();
        for weights in [None, Some(raw.as_slice())] {
            let f = factored::Factored {
                mix: &mix,
                trie: factored::Trie::new(
                    &points,
                    weights,
                    dim,
                    &factored::distinct_values(&points, dim),
                )
                .unwrap(),
                scales: vec![-0.125, -0.005, -0.03125],
                final_factor: 1.0,
            };
            let one = |v: Vec<f64>| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
            // Queries 4..39 (a block need not start on a group of 16 centres).
            let baseline = one(factored::block_answers_portable::<8>(&f, 4, 39));
            assert_eq!(
                baseline,
                one(factored::block_answers(&f, 4, 39)),
                "d = {dim}"
            );
            assert_eq!(
                baseline,
                one(factored::block_answers_portable::<16>(&f, 4, 39)),
                "d = {dim}"
            );
            #[cfg(target_arch = "x86_64")]
            {
                use crate::mech::fastmath::{has, Isa};
                if has(Isa::Avx2) {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    let avx2 = unsafe { factored::block_answers::avx2(&f, 4, 39) };
                    assert_eq!(baseline, one(avx2), "AVX2, d = {dim}");
                }
                if has(Isa::Avx512) {
                    // SAFETY: the CPU supports AVX-512 F and DQ (checked just above).
                    let avx512 = unsafe { factored::block_answers::avx512(&f, 4, 39) };
                    assert_eq!(baseline, one(avx512), "AVX-512, d = {dim}");
                }
            }
        }
    }
}

/// The cost rule takes the factored evaluation for a census-like grid (d = 8, per-axis cell
/// counts like CSN snapped at σ = 10, crowded low cells; 2·10⁴ points and one bandwidth, 10⁵
/// points and one or five) and the direct one for continuous points (d = 8, 19, 101) and for a coarse
/// grid of d = 101 (CRM snapped at σ = 2: 2 cells per axis, but almost every point on its own
/// branch of the trie).
#[test]
fn cost_rule_takes_the_cheaper_evaluation() {
    let mut rng = Pcg64Mcg::seed_from_u64(10);
    let thesis = plan_steps(&[2.0, 4.0, 6.0, 8.0, 10.0].map(|s: f64| -0.5 / (s * s)));
    let one = plan_steps(&[-0.5 / 100.0]);
    // At 2·10⁴ draws, half the points sit on branches of their own (41 276 nodes): the direct
    // evaluation's powers win for five bandwidths, not for one.
    for (n, plans) in [(20_000, vec![&one]), (100_000, vec![&one, &thesis])] {
        let points = grid_points(n, &CSN_LEVELS, &CSN_CROWD, &mut rng);
        for plan in plans {
            assert!(cheaper_trie(&points, None, 8, plan).is_some(), "n = {n}");
        }
    }
    for (n, dim) in [(20_000, 8), (2000, 19), (1993, 101)] {
        let points = uniform_points(n, dim, &mut rng);
        for plan in [&one, &thesis] {
            assert!(
                cheaper_trie(&points, None, dim, plan).is_none(),
                "d = {dim}"
            );
        }
    }
    let crm = grid_points(1993, &[2; 101], &[0.0], &mut rng);
    assert!(cheaper_trie(&crm, None, 101, &one).is_none());
}
