use super::*;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64;

fn uniform_w(rng: &mut Pcg64, rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|_| rng.random_range(-1.0..=1.0))
        .collect()
}

/// First `rows` multi-indices of ℕ^d by total degree, ties in reverse lexicographic
/// order, as in the peer script.
fn multi_indices(d: usize, rows: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut degree = 0;
    while out.len() < rows {
        let mut level: Vec<Vec<usize>> = Vec::new();
        let mut idx = vec![0; d];
        loop {
            if idx.iter().sum::<usize>() == degree {
                level.push(idx.clone());
            }
            let Some(k) = (0..d).rev().find(|&k| idx[k] < degree) else {
                break;
            };
            idx[k] += 1;
            idx[k + 1..].fill(0);
        }
        level.sort_by(|a, b| b.cmp(a));
        out.extend(level);
        degree += 1;
    }
    out.truncate(rows);
    out
}

/// `W[r, k] = Π_j cos(r_j · arccos(a_kj))` with `a_k ~ U[−1, 1]^d`.
fn chebyshev_w(rng: &mut Pcg64, d: usize, rows: usize, cols: usize) -> Vec<f64> {
    let index = multi_indices(d, rows);
    let mut w = Vec::with_capacity(rows * cols);
    for _ in 0..cols {
        let theta: Vec<f64> = (0..d)
            .map(|_| rng.random_range(-1.0f64..=1.0).acos())
            .collect();
        w.extend(index.iter().map(|r| {
            r.iter()
                .zip(&theta)
                .map(|(&k, t)| (k as f64 * t).cos())
                .product::<f64>()
        }));
    }
    w
}

fn dirichlet(rng: &mut Pcg64, n: usize) -> Vec<f64> {
    let g: Vec<f64> = (0..n).map(|_| Exp1.sample(rng)).collect();
    let total: f64 = g.iter().sum();
    g.into_iter().map(|x| x / total).collect()
}

fn matvec(w: &[f64], rows: usize, u: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; rows];
    for (col, &uj) in w.chunks_exact(rows).zip(u) {
        for (o, x) in out.iter_mut().zip(col) {
            *o += uj * x;
        }
    }
    out
}

/// `b = W u0 + Laplace(scale)` with `u0 ~ Dirichlet(1)`, the peer's right-hand side.
fn noisy_rhs(rng: &mut Pcg64, w: &[f64], rows: usize, scale: f64) -> Vec<f64> {
    let u0 = dirichlet(rng, w.len() / rows);
    let mut b = matvec(w, rows, &u0);
    for x in &mut b {
        let e: f64 = Exp1.sample(rng);
        *x += if rng.random::<bool>() { e } else { -e } * scale;
    }
    b
}

fn fit(w: &[f64], rows: usize, b: &[f64], method: LpMethod) -> L1Fit {
    let opts = LpOptions {
        method,
        ..LpOptions::default()
    };
    l1_simplex_fit(w, rows, b, &opts).unwrap()
}

/// The invariants every fit must satisfy, including an independent recomputation of
/// the objective and a certified gap.
fn check_fit(w: &[f64], rows: usize, b: &[f64], f: &L1Fit) {
    let cols = w.len() / rows;
    assert!(!f.support.is_empty());
    assert!(f.support.windows(2).all(|p| p[0].0 < p[1].0));
    assert!(f.support.iter().all(|&(j, u)| j < cols && u > 0.0));
    let total: f64 = f.support.iter().map(|&(_, u)| u).sum();
    assert!((total - 1.0).abs() < 1e-12, "weights sum to {total}");
    let mut u = vec![0.0; cols];
    for &(j, x) in &f.support {
        u[j] = x;
    }
    let objective: f64 = matvec(w, rows, &u)
        .iter()
        .zip(b)
        .map(|(p, q)| (p - q).abs())
        .sum();
    assert!((objective - f.objective).abs() <= 1e-12 * objective.max(1.0));
    assert!(f.objective - f.dual_bound <= 1e-7 * f.objective.max(1.0));
    assert!(f.dual_bound <= f.objective + 1e-9);
}

fn assert_agree(w: &[f64], rows: usize, b: &[f64]) -> L1Fit {
    let cg = fit(w, rows, b, LpMethod::ColumnGeneration);
    let full = fit(w, rows, b, LpMethod::Full);
    check_fit(w, rows, b, &cg);
    check_fit(w, rows, b, &full);
    let scale = full.objective.abs().max(1.0);
    assert!(
        (cg.objective - full.objective).abs() <= 1e-7 * scale,
        "R = {rows}, C = {}: column generation {} vs full {}",
        w.len() / rows,
        cg.objective,
        full.objective
    );
    assert!(cg.support.len() <= rows + 1, "support {}", cg.support.len());
    cg
}

#[test]
fn column_generation_matches_full_on_uniform_w() {
    let mut rng = Pcg64::seed_from_u64(1);
    let shapes = [
        (1, 1),
        (1, 7),
        (4, 1),
        (2, 30),
        (5, 200),
        (12, 12),
        (20, 1000),
        (40, 25),
        (8, 3000),
        (60, 800),
    ];
    for (rows, cols) in shapes {
        let w = uniform_w(&mut rng, rows, cols);
        let b = noisy_rhs(&mut rng, &w, rows, 0.05);
        assert_agree(&w, rows, &b);
        let far: Vec<f64> = (0..rows).map(|_| rng.random_range(-3.0..=3.0)).collect();
        assert_agree(&w, rows, &far);
    }
}

#[test]
fn column_generation_matches_full_on_chebyshev_w() {
    let mut rng = Pcg64::seed_from_u64(2);
    for (d, rows, cols) in [(1, 6, 300), (2, 15, 800), (4, 35, 1000), (4, 60, 1200)] {
        let w = chebyshev_w(&mut rng, d, rows, cols);
        for scale in [0.01, 0.3] {
            let b = noisy_rhs(&mut rng, &w, rows, scale);
            let cg = assert_agree(&w, rows, &b);
            assert!(cg.columns_used < cols || cols <= 2 * (rows + 1));
        }
    }
}

/// Integer-valued W with repeated columns makes many ties and degenerate pivots, the
/// situation where the anti-cycling rule matters.
#[test]
fn degenerate_instances_match_full() {
    let mut rng = Pcg64::seed_from_u64(3);
    for (rows, cols) in [(3, 40), (10, 300), (25, 600)] {
        let distinct: Vec<f64> = (0..rows * cols / 4)
            .map(|_| f64::from(rng.random_range(-1i32..=1)))
            .collect();
        let w: Vec<f64> = distinct.iter().cycle().take(rows * cols).copied().collect();
        let b: Vec<f64> = (0..rows)
            .map(|_| f64::from(rng.random_range(-2i32..=2)) / 2.0)
            .collect();
        assert_agree(&w, rows, &b);
    }
}

#[test]
fn exact_mixture_is_fitted_exactly() {
    let mut rng = Pcg64::seed_from_u64(4);
    for (rows, cols) in [(3, 10), (30, 500), (60, 3000)] {
        let w = chebyshev_w(&mut rng, 3, rows, cols);
        let b = matvec(&w, rows, &dirichlet(&mut rng, cols));
        let f = fit(&w, rows, &b, LpMethod::ColumnGeneration);
        check_fit(&w, rows, &b, &f);
        assert!(f.objective < 1e-9, "objective {}", f.objective);
        assert!(f.support.len() <= rows + 1);
    }
}

/// R = 1 with b above every entry: the optimum puts all mass on the largest entry.
#[test]
fn one_row_far_outside_picks_the_nearest_column() {
    let mut rng = Pcg64::seed_from_u64(5);
    let w = uniform_w(&mut rng, 1, 50);
    let (arg_max, max) = w
        .iter()
        .enumerate()
        .fold((0, f64::MIN), |a, (j, &x)| if x > a.1 { (j, x) } else { a });
    let (arg_min, min) = w
        .iter()
        .enumerate()
        .fold((0, f64::MAX), |a, (j, &x)| if x < a.1 { (j, x) } else { a });
    for method in [LpMethod::ColumnGeneration, LpMethod::Full] {
        let up = fit(&w, 1, &[5.0], method);
        assert!((up.objective - (5.0 - max)).abs() < 1e-8);
        let down = fit(&w, 1, &[-5.0], method);
        assert!((down.objective - (min + 5.0)).abs() < 1e-8);
        if method == LpMethod::ColumnGeneration {
            assert_eq!(up.support, vec![(arg_max, 1.0)]);
            assert_eq!(down.support, vec![(arg_min, 1.0)]);
        }
    }
    let inside = fit(&w, 1, &[0.5 * (max + min)], LpMethod::ColumnGeneration);
    check_fit(&w, 1, &[0.5 * (max + min)], &inside);
    assert!(inside.objective < 1e-12);
    assert!(inside.support.len() <= 2);
}

#[test]
fn two_rows_closed_form() {
    // Columns (1, 0) and (0, 1); b = (1, 1): any convex combination leaves |1-t|+|t| = 1.
    let w = [1.0, 0.0, 0.0, 1.0];
    let f = fit(&w, 2, &[1.0, 1.0], LpMethod::ColumnGeneration);
    assert!((f.objective - 1.0).abs() < 1e-12);
    // b = (0.25, 0.75) is the mixture 1/4, 3/4.
    let f = fit(&w, 2, &[0.25, 0.75], LpMethod::ColumnGeneration);
    assert_eq!(f.support.len(), 2);
    assert!((f.support[0].1 - 0.25).abs() < 1e-12);
    assert!(f.objective < 1e-12);
}

#[test]
fn deterministic_bits() {
    let mut rng = Pcg64::seed_from_u64(6);
    let w = chebyshev_w(&mut rng, 4, 40, 2000);
    let b = noisy_rhs(&mut rng, &w, 40, 0.01);
    let a = fit(&w, 40, &b, LpMethod::ColumnGeneration);
    let c = fit(&w, 40, &b, LpMethod::ColumnGeneration);
    assert_eq!(a.objective.to_bits(), c.objective.to_bits());
    assert_eq!(a.support, c.support);
    assert_eq!((a.rounds, a.pivots), (c.rounds, c.pivots));
}

/// The pricing pass gives the baseline's bits on every instruction set the CPU has: rows
/// that are no multiple of the eight accumulators, and values of very different sizes (so a
/// different order of the adds would show).
#[test]
fn column_dots_are_the_baseline_s_bits_on_every_instruction_set() {
    let mut rng = Pcg64::seed_from_u64(8);
    for rows in [1, 7, 8, 9, 50, 201] {
        let w: Vec<f64> = (0..rows * 37)
            .map(|i| rng.random_range(-1.0..1.0) * 10f64.powi((i % 23) as i32 - 11))
            .collect();
        let y: Vec<f64> = (0..rows).map(|_| rng.random_range(-1.0..1.0)).collect();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut baseline = vec![0.0; 37];
        column_dots::baseline(&w, rows, &y, &mut baseline);
        let direct: Vec<f64> = w.chunks_exact(rows).map(|c| dot(c, &y)).collect();
        assert_eq!(bits(&baseline), bits(&direct), "rows = {rows}");
        assert_eq!(bits(&all_column_dots(&w, rows, &y)), bits(&baseline));
        #[cfg(target_arch = "x86_64")]
        {
            use crate::mech::fastmath::{has, Isa};
            let mut out = vec![0.0; 37];
            if has(Isa::Avx2) {
                // SAFETY: the CPU has AVX2 and FMA (checked just above).
                unsafe { column_dots::avx2(&w, rows, &y, &mut out) };
                assert_eq!(bits(&out), bits(&baseline), "AVX2, rows = {rows}");
            }
            if has(Isa::Avx512) {
                // SAFETY: the CPU has AVX-512 F and DQ (checked just above).
                unsafe { column_dots::avx512(&w, rows, &y, &mut out) };
                assert_eq!(bits(&out), bits(&baseline), "AVX-512, rows = {rows}");
            }
        }
    }
}

#[test]
fn small_columns_per_round_still_converges() {
    let mut rng = Pcg64::seed_from_u64(7);
    let w = chebyshev_w(&mut rng, 2, 20, 1000);
    let b = noisy_rhs(&mut rng, &w, 20, 0.05);
    let reference = fit(&w, 20, &b, LpMethod::Full);
    let opts = LpOptions {
        columns_per_round: Some(1),
        ..LpOptions::default()
    };
    let f = l1_simplex_fit(&w, 20, &b, &opts).unwrap();
    check_fit(&w, 20, &b, &f);
    assert!((f.objective - reference.objective).abs() < 1e-7);
    assert!(f.rounds > 1);
}

#[test]
fn pivot_limit_is_an_error() {
    let mut rng = Pcg64::seed_from_u64(8);
    let w = uniform_w(&mut rng, 10, 100);
    let b = noisy_rhs(&mut rng, &w, 10, 0.1);
    let opts = LpOptions {
        max_pivots: 1,
        ..LpOptions::default()
    };
    assert!(matches!(
        l1_simplex_fit(&w, 10, &b, &opts),
        Err(LpError::PivotLimit(1))
    ));
}

#[test]
fn bad_input_is_rejected() {
    let w = [0.5, -0.5, 0.25, 1.0];
    let b = [0.1, 0.2];
    let opts = LpOptions::default();
    for method in [LpMethod::ColumnGeneration, LpMethod::Full] {
        let opts = LpOptions {
            method,
            ..opts.clone()
        };
        let run = |w: &[f64], rows, b: &[f64]| l1_simplex_fit(w, rows, b, &opts);
        assert!(matches!(run(&w, 0, &b), Err(LpError::NoRows)));
        assert!(matches!(run(&[], 2, &b), Err(LpError::NoColumns)));
        assert!(matches!(
            run(&w[..3], 2, &b),
            Err(LpError::RaggedMatrix { len: 3, rows: 2 })
        ));
        assert!(matches!(
            run(&w, 2, &b[..1]),
            Err(LpError::RhsLength {
                expected: 2,
                found: 1
            })
        ));
        let mut bad_w = w;
        bad_w[2] = f64::NAN;
        assert!(matches!(
            run(&bad_w, 2, &b),
            Err(LpError::NonFinite {
                what: "W",
                index: 2,
                ..
            })
        ));
        assert!(matches!(
            run(&w, 2, &[0.0, f64::INFINITY]),
            Err(LpError::NonFinite {
                what: "b",
                index: 1,
                ..
            })
        ));
        assert!(run(&w, 2, &b).is_ok());
    }
    for tolerance in [0.0, -1.0, f64::NAN] {
        let opts = LpOptions {
            tolerance,
            ..LpOptions::default()
        };
        assert!(matches!(
            l1_simplex_fit(&w, 2, &b, &opts),
            Err(LpError::BadTolerance(_))
        ));
    }
    let message = LpError::SolverStatus {
        status: SolverStatus::NumericalError,
        iterations: 7,
        detail: String::new(),
    }
    .to_string();
    assert!(message.contains("NumericalError"), "{message}");
}
