//! The trigonometric mechanism's tests: settings, privacy, determinism, kept databases.

use super::*;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

fn settings(privacy: Privacy) -> Settings {
    Settings {
        privacy,
        smoothness: 2.0,
        calibration: Calibration::ReplaceOne,
        lattice: true,
        synthetic: Synthetic::Expectation,
        lp: LpOptions::default(),
        exact: Exact::default(),
    }
}

fn data(n: usize, dim: usize, seed: u64) -> Data {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let points = (0..n * dim)
        .map(|_| {
            // A smooth, skewed density: 2·max(U1, U2) − 1.
            let (a, b): (f64, f64) = (rng.random(), rng.random());
            2.0 * a.max(b) - 1.0
        })
        .collect();
    Data::new(points, dim).unwrap()
}

#[test]
fn grid_enumerates_a_to_the_d() {
    let g = grid_points(3, 2);
    assert_eq!(g.len(), 18);
    assert_eq!(&g[..4], &[-2.0 / 3.0, -2.0 / 3.0, -2.0 / 3.0, 0.0]);
}

#[test]
fn synthetic_weights_are_a_distribution_on_the_grid() {
    let pts = data(2000, 1, 1);
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let s = settings(Privacy::Pure { epsilon: 1.0 });
    let db = trigonometric(&pts, &s, &mut rng).unwrap();
    let total: f64 = db.weights.iter().sum();
    assert!((total - 1.0).abs() < 1e-9);
    let sched = db.report.schedule;
    for &x in &db.points {
        assert_eq!(basis::snap(x, sched.grid), x, "{x} is not a grid point");
    }
    // ReplaceOne: 2·t^d/(nε).
    let want = 2.0 * sched.t as f64 / 2000.0;
    assert!((db.report.basis_noise - want).abs() < 1e-15);
}

#[test]
fn noise_scales_follow_the_algorithms() {
    let pts = data(1000, 3, 3);
    let im = Improvement {
        bases: 7,
        candidates: 300,
        pca_dim: 2,
        pca_iterations: 5,
        kappa: 2.0,
        sampler: EllipsoidSampler::Uniform,
        pca_noise: LaplaceScale::Algorithm,
    };
    let mut s = settings(Privacy::Pure { epsilon: 0.9 });
    s.calibration = Calibration::AsPrinted;
    let mut rng = Pcg64Mcg::seed_from_u64(4);
    let db = improved_trigonometric(&pts, &s, &im, &mut rng).unwrap();
    // Algorithm 9 line 7: 3R/(nε); line 10: 6d/(nε).
    assert!((db.report.basis_noise - 3.0 * 7.0 / (1000.0 * 0.9)).abs() < 1e-15);
    assert!((db.report.mean_noise.unwrap() - 6.0 * 3.0 / (1000.0 * 0.9)).abs() < 1e-15);
    let s2 = Settings {
        privacy: Privacy::Approx {
            epsilon: 0.9,
            delta: 1e-3,
        },
        ..s
    };
    let db = improved_trigonometric(&pts, &s2, &im, &mut rng).unwrap();
    // Algorithm 10 line 7: 3·sqrt(2R ln(1/δ))/(nε).
    let want = 3.0 * (2.0 * 7.0 * 1000f64.ln()).sqrt() / (1000.0 * 0.9);
    assert!((db.report.basis_noise - want).abs() < 1e-12);
}

#[test]
fn sampled_database_has_counts_over_m() {
    let pts = data(500, 2, 5);
    let im = Improvement {
        bases: 6,
        candidates: 200,
        pca_dim: 2,
        pca_iterations: 4,
        kappa: 1.5,
        sampler: EllipsoidSampler::Uniform,
        pca_noise: LaplaceScale::Algorithm,
    };
    let mut s = settings(Privacy::Pure { epsilon: 1.0 });
    s.synthetic = Synthetic::Sample { size: Some(1000) };
    let mut rng = Pcg64Mcg::seed_from_u64(6);
    let db = improved_trigonometric(&pts, &s, &im, &mut rng).unwrap();
    let total: f64 = db.weights.iter().sum();
    assert!((total - 1.0).abs() < 1e-12);
    for w in &db.weights {
        let c = w * 1000.0;
        assert!((c - c.round()).abs() < 1e-9 && c >= 1.0);
    }
}

#[test]
fn distinct_rows_keeps_each_row_once_where_it_first_occurs() {
    let rows = [
        [0.5, -1.0],
        [0.0, 0.0],
        [0.5, -1.0],
        [-0.5, 1.0],
        [0.0, 0.0],
        [0.0, -0.0],
    ];
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    // −0 and 0 are different bits, so different rows (a snap never gives −0 and 0 both).
    assert_eq!(
        distinct_rows(&flat, 2),
        [0.5, -1.0, 0.0, 0.0, -0.5, 1.0, 0.0, -0.0]
    );
    assert_eq!(distinct_rows(&flat, 12), flat);
    assert!(distinct_rows(&[], 3).is_empty());
    // Against the plain quadratic rule, on rows of a coarse grid (many copies).
    let mut rng = Pcg64Mcg::seed_from_u64(8);
    for dim in [1, 3, 7] {
        let points: Vec<f64> = (0..2000 * dim)
            .map(|_| basis::snap(rng.random_range(-1.0..=1.0), 3))
            .collect();
        let mut plain: Vec<&[f64]> = Vec::new();
        for r in points.chunks_exact(dim) {
            if !plain.contains(&r) {
                plain.push(r);
            }
        }
        assert_eq!(distinct_rows(&points, dim), plain.concat(), "d = {dim}");
    }
}

#[test]
fn repeated_candidates_leave_the_lp_optimum_where_it_was() {
    // The candidates of a coarse grid, most of them repeated: the LP over the distinct
    // ones reaches the optimum of the LP over all of them.
    let pts = data(800, 3, 9);
    let bases = basis::lowest_order(3, 3, 14).unwrap();
    let b = basis::basis_means(&bases, pts.points(), 3);
    let mut rng = Pcg64Mcg::seed_from_u64(10);
    let candidates: Vec<f64> = (0..3000)
        .map(|_| basis::snap(rng.random_range(-1.0..=1.0), 2))
        .collect();
    let distinct = distinct_rows(&candidates, 3);
    assert!(distinct.len() < candidates.len() / 10, "{}", distinct.len());
    let fit = |c: &[f64]| {
        let w = basis::basis_matrix(&bases, c, 3);
        l1_simplex_fit(&w, bases.len(), &b, &LpOptions::default())
            .unwrap()
            .objective
    };
    let (all, once) = (fit(&candidates), fit(&distinct));
    assert!(all > 1e-3, "a fit that is not exact: {all}");
    assert!((all - once).abs() < 1e-9, "{all} vs {once}");
}

#[test]
fn per_answer_budget_composes_back_to_epsilon() {
    for (eps, r, delta) in [
        (1.0 / 3.0, 102.0, 5e-4),
        (1.0, 49.0, 1e-3),
        (5.0, 10.0, 0.5),
    ] {
        let e0 = per_answer_epsilon(eps, r, delta);
        let advanced = e0 * (2.0 * r * (1.0f64 / delta).ln()).sqrt() + r * e0 * e0.exp_m1();
        let basic = r * e0;
        // One of the two compositions reaches ε (to bisection precision), neither exceeds it.
        assert!(
            advanced.min(basic) <= eps * (1.0 + 1e-12),
            "{eps} {r} {delta}"
        );
        assert!(
            (advanced.min(basic) - eps).abs() < 1e-9 * eps,
            "{advanced} {basic}"
        );
    }
    // Many answers at small δ: advanced composition gives each more than ε/R.
    assert!(per_answer_epsilon(1.0, 10_000.0, 1e-6) > 1.0 / 10_000.0);
}

#[test]
fn multinomial_counts_sum_to_m_and_follow_p() {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let support = [(0, 0.5), (3, 0.3), (9, 0.2)];
    let c = multinomial(1e9, &support, &mut rng);
    assert_eq!(c.iter().map(|x| x.1).sum::<u64>(), 1_000_000_000);
    // sd of a count ≈ sqrt(m p (1−p)) ≈ 1.6e4: 10 sd = 1.6e5.
    for ((_, n), (_, p)) in c.iter().zip(&support) {
        assert!((*n as f64 - p * 1e9).abs() < 1.6e5);
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let mut rng = Pcg64Mcg::seed_from_u64(8);
    let e = Data::new(vec![0.5, 1.5], 1).unwrap_err();
    assert!(e.to_string().contains("1.5 (row 1, column 0)"), "{e}");
    assert!(Data::new(vec![], 1).is_err());
    assert!(Data::new(vec![0.5, 0.5, 0.5], 2).is_err());
    assert!(Data::new(vec![0.5], 0).is_err());
    let s = settings(Privacy::Pure { epsilon: 1.0 });
    let bad = settings(Privacy::Approx {
        epsilon: 1.0,
        delta: 1.0,
    });
    let one = Data::new(vec![0.5], 1).unwrap();
    assert!(trigonometric(&one, &bad, &mut rng).is_err());
    let im = Improvement {
        bases: 3,
        candidates: 10,
        pca_dim: 3,
        pca_iterations: 2,
        kappa: 1.0,
        sampler: EllipsoidSampler::Uniform,
        pca_noise: LaplaceScale::Algorithm,
    };
    let two = Data::new(vec![0.1, 0.2], 2).unwrap();
    let e = improved_trigonometric(&two, &s, &im, &mut rng).unwrap_err();
    assert!(e.to_string().contains("pca_dim"), "{e}");
    // d = 6 with a huge grid: refused before allocating.
    let mut big = settings(Privacy::Pure { epsilon: 1.0 });
    big.smoothness = 200.0;
    let e = trigonometric(&data(5000, 6, 9), &big, &mut rng).unwrap_err();
    assert!(e.to_string().contains("N^d"), "{e}");
}

/// What a `Data` keeps changes nothing: runs on one kept `Data` (its covariance and basis
/// answers computed by the first run, several grids) give the bits of runs on fresh ones,
/// and the kept answers are those of the grid asked for.
#[test]
fn a_kept_database_gives_the_bits_of_a_fresh_one() {
    let im = Improvement {
        bases: 6,
        candidates: 400,
        pca_dim: 2,
        pca_iterations: 4,
        kappa: 2.0,
        sampler: EllipsoidSampler::Uniform,
        pca_noise: LaplaceScale::Text,
    };
    let kept = data(700, 3, 12);
    let mut grids = vec![];
    for (seed, smoothness) in [(1, 2.0), (2, 9.0), (3, 2.0), (4, 9.0)] {
        let mut s = settings(Privacy::Pure { epsilon: 1.0 });
        s.smoothness = smoothness;
        let run = |d: &Data| {
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            improved_trigonometric(d, &s, &im, &mut rng).unwrap()
        };
        let (a, b) = (run(&kept), run(&data(700, 3, 12)));
        assert_eq!(a.points, b.points);
        assert_eq!(a.weights, b.weights);
        assert_eq!(a.report.basis_noise, b.report.basis_noise);
        grids.push(a.report.schedule.grid);
    }
    assert_ne!(grids[0], grids[1], "two smoothness orders, two grids kept");
    let bases = basis::lowest_order(3, 4, 6).unwrap();
    let (coarse, fine) = (kept.basis_answers(&bases, 2), kept.basis_answers(&bases, 7));
    assert_ne!(coarse, fine);
    let snapped: Vec<f64> = kept.points().iter().map(|&x| basis::snap(x, 7)).collect();
    assert_eq!(*fine, basis::basis_means(&bases, &snapped, 3));
    assert!(kept.holds(data(700, 3, 12).points(), 3));
    assert!(!kept.holds(data(700, 3, 13).points(), 3));
    assert!(!kept.holds(data(700, 3, 12).points(), 1));
}
