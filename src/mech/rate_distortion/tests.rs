use super::*;

/// Draws of each row follow its probabilities (4·10⁵ draws, within 5 standard errors)
/// and never give a letter of probability 0.
#[test]
fn the_sampler_draws_each_row() {
    use rand::SeedableRng;
    let c = Channel::new(2, 4, vec![0.5, 0.0, 0.3, 0.2, 0.0, 0.0, 0.0, 1.0]).unwrap();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
    let n = 400_000;
    for x in 0..2 {
        let s = c.sampler(x);
        let mut counts = [0u64; 4];
        for _ in 0..n {
            counts[s.sample(&mut rng)] += 1;
        }
        for (y, &k) in counts.iter().enumerate() {
            let q = c.row(x)[y];
            if q == 0.0 {
                assert_eq!(k, 0, "row {x}: letter {y} has probability 0");
                continue;
            }
            let se = (q * (1.0 - q) / n as f64).sqrt().max(1e-12);
            let f = k as f64 / n as f64;
            assert!(
                (f - q).abs() <= 5.0 * se + 1e-12,
                "row {x}, letter {y}: {f} vs {q}"
            );
        }
    }
}

#[test]
fn mi_distortion_and_epsilon_by_hand() {
    // Binary symmetric channel, crossover 0.1, uniform input: I = 1 − h(0.1) = 0.531 bits.
    let c = Channel::new(2, 2, vec![0.9, 0.1, 0.1, 0.9]).unwrap();
    let p = [0.5, 0.5];
    assert!((c.mutual_information(&p) - (1.0 - h2(0.1))).abs() < 1e-12);
    assert!((c.expected_distortion(&p, &Distortion::Hamming.matrix(2)) - 0.1).abs() < 1e-12);
    assert!((c.epsilon() - 9f64.ln()).abs() < 1e-12);
    // Identity channel: I = H(p), ε = ∞ (a zero beside a one).
    let id = Channel::new(3, 3, vec![1., 0., 0., 0., 1., 0., 0., 0., 1.]).unwrap();
    let p = [0.2, 0.3, 0.5];
    assert!((id.mutual_information(&p) - entropy_bits(&p)).abs() < 1e-12);
    assert_eq!(id.epsilon(), f64::INFINITY);
    // Constant channel: no leakage, ε = 0.
    let k = Channel::new(2, 2, vec![0.3, 0.7, 0.3, 0.7]).unwrap();
    assert_eq!(k.mutual_information(&[0.4, 0.6]), 0.0);
    assert_eq!(k.epsilon(), 0.0);
    assert!(Channel::new(2, 2, vec![0.5, 0.6, 0.5, 0.5]).is_err());
}

#[test]
fn ba_matches_the_uniform_hamming_rate_distortion_function() {
    for m in [2usize, 5, 7] {
        let p = vec![1.0 / m as f64; m];
        for lambda in [0.5, 1.0, 2.0, 4.0, 8.0] {
            let r = blahut_arimoto(&p, &Distortion::Hamming, lambda, 1e-12, 1).unwrap();
            assert!(r.converged);
            let want = uniform_hamming_rd(m, r.distortion);
            assert!(
                (r.mi - want).abs() < 1e-7,
                "m={m} λ={lambda}: {} vs {want}",
                r.mi
            );
            // The channel's true MI agrees at convergence.
            assert!((r.channel().mutual_information(&p) - want).abs() < 1e-7);
        }
    }
}

#[test]
fn dense_and_hamming_kernels_agree_and_z_carries_nothing() {
    let p = [0.0513, 0.1538, 0.4872, 0.2051, 0.1026];
    let a = blahut_arimoto(&p, &Distortion::Hamming, 2.0, 1e-10, 1).unwrap();
    let b = blahut_arimoto(
        &p,
        &Distortion::Matrix(Distortion::Hamming.matrix(5)),
        2.0,
        1e-10,
        1,
    )
    .unwrap();
    assert_eq!(a.iterations, b.iterations);
    assert!(
        (a.epsilon - b.epsilon).abs() < 1e-9,
        "{} vs {}",
        a.epsilon,
        b.epsilon
    );
    assert!((a.mi - b.mi).abs() < 1e-12 && (a.distortion - b.distortion).abs() < 1e-12);
    // Where entries are representable, the log-domain ε equals the channel's.
    assert!((a.epsilon - a.channel().epsilon()).abs() < 1e-9);
    let z = blahut_arimoto(&p, &Distortion::Hamming, 2.0, 1e-10, 14).unwrap();
    assert_eq!(z.iterations, a.iterations);
    assert!((z.mi - a.mi).abs() < 1e-12);
    assert!(
        (z.joint_channel().mutual_information(&p) - a.channel().mutual_information(&p)).abs()
            < 1e-12
    );
    let marg = z.channel();
    for (u, v) in marg.q.iter().zip(&a.channel().q) {
        assert!((u - v).abs() < 1e-12);
    }
}

/// The two-loop Hamming step gives the bits of the single loop it replaced (per element: Z,
/// 1/Z, w, d, −λd − ln Z with `ln_normal`), through the dispatched path (AVX-512, AVX2 or
/// the baseline, whichever this CPU has) and the baseline compiled here; the distortion
/// computed after the fact is the single loop's. Lengths around the vector widths, λ up to
/// 40 (Z down to e⁻⁴⁰), r with entries down to 1e-300.
#[test]
fn hamming_terms_equal_the_single_loop_bitwise() {
    use crate::mech::fastmath::ln_normal;
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(28);
    let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
    let mut distribution = |m: usize, spread: f64| -> Vec<f64> {
        let v: Vec<f64> = (0..m)
            .map(|_| 10f64.powf(-rng.random_range(0.0..spread)))
            .collect();
        let t: f64 = v.iter().sum();
        v.into_iter().map(|x| x / t).collect()
    };
    for m in [1usize, 2, 3, 5, 8, 9, 17, 33, 1000] {
        for (lambda, spread) in [(0.5f64, 1.0), (3.0, 5.0), (10.0, 30.0), (40.0, 300.0)] {
            let (p, r) = (distribution(m, 1.0), distribution(m, spread));
            let c = (-lambda).exp();
            let total = sum4(&r);
            let (mut z0, mut w0, mut ti0, mut td0) =
                (vec![0.0; m], vec![0.0; m], vec![0.0; m], vec![0.0; m]);
            for x in 0..m {
                let zv = c * total + (1.0 - c) * r[x];
                let inv = 1.0 / zv;
                z0[x] = zv;
                w0[x] = p[x] * inv;
                let dx = 1.0 - r[x] * inv;
                td0[x] = p[x] * dx;
                ti0[x] = p[x] * (-lambda * dx - ln_normal(zv));
            }
            let mut out = [vec![0.0; m], vec![0.0; m], vec![0.0; m]];
            let (mut f, mut sq) = (vec![0.0; m], vec![0.0; m]);
            for dispatched in [true, false] {
                let [z, w, ti] = &mut out;
                if dispatched {
                    hamming_terms_dispatch(c, total, lambda, &p, &r, z, w, ti, &mut f, &mut sq);
                } else {
                    hamming_terms(c, total, lambda, &p, &r, z, w, ti, &mut f, &mut sq);
                }
                let what = format!("m = {m}, λ = {lambda}, dispatched: {dispatched}");
                assert_eq!(bits(z), bits(&z0), "Z, {what}");
                assert_eq!(bits(w), bits(&w0), "w, {what}");
                assert_eq!(bits(ti), bits(&ti0), "MI terms, {what}");
            }
            assert_eq!(
                hamming_distortion(&p, &r, &z0).to_bits(),
                sum4(&td0).to_bits()
            );
        }
    }
}

/// Random distributions on m values, entries spread over `spread` decades.
fn random_distribution(rng: &mut impl rand::Rng, m: usize, spread: f64) -> Vec<f64> {
    let v: Vec<f64> = (0..m)
        .map(|_| 10f64.powf(-rng.random_range(0.0..spread)))
        .collect();
    let t: f64 = v.iter().sum();
    v.into_iter().map(|x| x / t).collect()
}

/// The cheap Hamming step against the full one on the same r, with a reference Z′ = Z·(1 + δ)
/// for |δ| up to just inside the bound: Z equal bit for bit, 1/Z (through w) within 1.2u
/// relative, the MI terms within their bound (1.5 ulp of ln Z + 1.3u, times p, plus the
/// full step's own ulp); the dispatched copy (AVX-512, AVX2 or the baseline) and the
/// baseline compiled here agree bitwise; a reference beyond the bound is refused.
#[test]
fn cheap_hamming_terms_within_their_bound() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(39);
    let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
    let u = f64::EPSILON / 2.0;
    for m in [1usize, 2, 3, 7, 9, 17, 101, 1000] {
        for (lambda, spread) in [(0.5f64, 1.0), (3.0, 5.0), (10.0, 30.0), (40.0, 300.0)] {
            let (p, r) = (
                random_distribution(&mut rng, m, 1.0),
                random_distribution(&mut rng, m, spread),
            );
            let c = (-lambda).exp();
            let total = sum4(&r);
            let (mut z0, mut w0, mut ti0) = (vec![0.0; m], vec![0.0; m], vec![0.0; m]);
            let (mut f, mut sq) = (vec![0.0; m], vec![0.0; m]);
            hamming_terms(
                c, total, lambda, &p, &r, &mut z0, &mut w0, &mut ti0, &mut f, &mut sq,
            );
            for reach in [0.0, 1e-12, 1e-5, 0.99 * CHEAP_BOUND] {
                let zref: Vec<f64> = z0
                    .iter()
                    .map(|z| z * (1.0 + reach * rng.random_range(-1.0..=1.0)))
                    .collect();
                let y: Vec<f64> = zref.iter().map(|z| 1.0 / z).collect();
                let l: Vec<f64> = zref.iter().map(|&z| ln_normal(z)).collect();
                let mut outs = Vec::new();
                let mut sums = Vec::new();
                for dispatched in [true, false] {
                    let (mut z, mut w, mut ti) = (vec![0.0; m], vec![0.0; m], vec![0.0; m]);
                    let over = if dispatched {
                        hamming_terms_cheap_dispatch(
                            c, total, lambda, &p, &r, &mut z, &mut w, &mut ti, &y, &l,
                        )
                    } else {
                        hamming_terms_cheap(
                            c, total, lambda, &p, &r, &mut z, &mut w, &mut ti, &y, &l,
                        )
                    };
                    assert_eq!(over.over, 0);
                    assert_eq!(bits(&z), bits(&z0));
                    // The pass's sums are sum_lanes of what it wrote.
                    assert_eq!(over.w.to_bits(), sum_lanes(&w).to_bits());
                    assert_eq!(over.mi_terms.to_bits(), sum_lanes(&ti).to_bits());
                    sums.push((over.w.to_bits(), over.mi_terms.to_bits()));
                    outs.push((w, ti));
                }
                assert_eq!(sums[0], sums[1], "sums, m = {m}");
                assert_eq!(bits(&outs[0].0), bits(&outs[1].0), "w, m = {m}");
                assert_eq!(bits(&outs[0].1), bits(&outs[1].1), "MI terms, m = {m}");
                let (w, ti) = &outs[0];
                for x in 0..m {
                    let what = format!("m = {m}, λ = {lambda}, reach {reach}, x = {x}");
                    // 1/Z within 1.2u (2.2u allowed), the full step's within u, a rounding of p·(1/Z) each.
                    assert!((w[x] - w0[x]).abs() <= 5.2 * u * w0[x], "w, {what}");
                    let ln_z = z0[x].ln();
                    // ln Z's bound, λ times d's (1/Z within 1.2u), one ulp of the
                    // full step's logarithm and of the products.
                    let bound =
                        p[x] * (4.0 * ln_z.abs() + 4.0 * lambda + 8.0) * u + 2.0 * u * ti0[x].abs();
                    // The cheap term leaves out −λp (added once per step).
                    let term = (-lambda).mul_add(p[x], ti[x]);
                    assert!((term - ti0[x]).abs() <= bound, "MI term, {what}");
                }
            }
            // One Z beyond the bound: counted, so that the caller takes the full step.
            let mut y: Vec<f64> = z0.iter().map(|z| 1.0 / z).collect();
            y[m / 2] *= 1.0 + 1.01 * CHEAP_BOUND;
            let l = vec![0.0; m];
            let (mut z, mut w, mut ti) = (vec![0.0; m], vec![0.0; m], vec![0.0; m]);
            let over = hamming_terms_cheap_dispatch(
                c, total, lambda, &p, &r, &mut z, &mut w, &mut ti, &y, &l,
            );
            assert_eq!(over.over, 1);
        }
    }
}

/// sum_lanes against a compensated sum (within its rounding bound, lengths around the lane
/// count), and the fused update: the operations of the unfused one (bitwise), its sum
/// sum_lanes', the dispatched copy equal to the baseline one.
#[test]
fn lane_sums_and_the_fused_update() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(41);
    for n in [0usize, 1, 7, 31, 32, 33, 101, 1000, 4099] {
        let v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        // Kahan–Babuška–Neumaier as the reference.
        let (mut sum, mut comp) = (0.0f64, 0.0f64);
        for &x in &v {
            let t = sum + x;
            comp += if sum.abs() >= x.abs() {
                (sum - t) + x
            } else {
                (x - t) + sum
            };
            sum = t;
        }
        let abs: f64 = v.iter().map(|x| x.abs()).sum();
        let bound = (n as f64 / SUM_LANES as f64 + 6.0 + SUM_LANES as f64) * abs * f64::EPSILON;
        assert!((sum_lanes(&v) - (sum + comp)).abs() <= bound, "n = {n}");
        let w: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
        let (c, sw) = (0.3, 1.7);
        let mut plain = v.clone();
        for (rj, wj) in plain.iter_mut().zip(&w) {
            *rj *= c * sw + (1.0 - c) * wj;
        }
        let (mut a, mut b) = (v.clone(), v.clone());
        let (sa, sb) = (
            hamming_update_sum_dispatch(c, sw, &w, &mut a),
            hamming_update_sum(c, sw, &w, &mut b),
        );
        let bits = |v: &[f64]| -> Vec<u64> { v.iter().map(|x| x.to_bits()).collect() };
        assert_eq!(bits(&a), bits(&plain));
        assert_eq!(bits(&b), bits(&plain));
        assert_eq!(sa.to_bits(), sum_lanes(&plain).to_bits());
        assert_eq!(sb.to_bits(), sa.to_bits());
    }
}

/// Whole λ sweeps with the cheap steps against every step in full (the iteration before
/// issue #39): R(D) and D within 1e-9 (measured: ~1e-14), the same iteration count or one
/// more or less, ε within 1e-9; alphabets of 1 to 1000 values, with and without Z.
#[test]
fn cheap_steps_keep_rd_within_1e_9() {
    use rand::SeedableRng;
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(40);
    let mut worst = (0.0f64, 0.0f64);
    for (m, nz) in [
        (1usize, 1usize),
        (2, 1),
        (7, 1),
        (7, 3),
        (101, 1),
        (1000, 1),
    ] {
        let p = random_distribution(&mut rng, m, 1.5);
        for lambda in [0.5, 1.25, 2.0, 3.7, 6.0, 10.0, 25.0] {
            let a = blahut_arimoto_with(&p, &Distortion::Hamming, lambda, 1e-8, nz, true).unwrap();
            let b = blahut_arimoto_with(&p, &Distortion::Hamming, lambda, 1e-8, nz, false).unwrap();
            let what = format!("m = {m}, nz = {nz}, λ = {lambda}");
            assert!(a.iterations.abs_diff(b.iterations) <= 1, "{what}");
            assert!(
                (a.mi - b.mi).abs() <= 1e-9,
                "R, {what}: {} vs {}",
                a.mi,
                b.mi
            );
            assert!((a.distortion - b.distortion).abs() <= 1e-9, "D, {what}");
            assert!(
                (a.epsilon - b.epsilon).abs() <= 1e-9 * b.epsilon.max(1.0),
                "ε, {what}"
            );
            worst.0 = worst.0.max((a.mi - b.mi).abs());
            worst.1 = worst.1.max((a.distortion - b.distortion).abs());
        }
    }
    assert!(worst.0 < 1e-12 && worst.1 < 1e-12, "{worst:?}");
}

#[test]
fn symmetric_channel_maps_invert() {
    let p = [0.1386, 0.0007, 0.4668, 0.0127, 0.3227, 0.0312, 0.0273];
    let m = p.len();
    for d in [0.01, 0.1, 0.3, 0.5, 0.8] {
        let c = symmetric_channel(m, d).unwrap();
        assert!((c.expected_distortion(&p, &Distortion::Hamming.matrix(m)) - d).abs() < 1e-12);
        let eps = symmetric_epsilon(m, d);
        assert!((c.epsilon() - eps).abs() < 1e-12);
        assert!((symmetric_distortion_for_epsilon(m, eps).unwrap() - d).abs() < 1e-12);
        let mi = c.mutual_information(&p);
        assert!((symmetric_distortion_for_mi(&p, mi).unwrap() - d).abs() < 1e-9);
    }
    assert!(symmetric_channel(m, 0.9).is_err());
    assert!(symmetric_distortion_for_mi(&p, 5.0)
        .unwrap_err()
        .0
        .contains("H(X)"));
}

#[test]
fn bad_parameters_are_errors() {
    let p = [0.5, 0.5];
    assert!(blahut_arimoto(&p, &Distortion::Hamming, 0.0, 1e-8, 1)
        .unwrap_err()
        .0
        .contains("λ"));
    assert!(blahut_arimoto(&p, &Distortion::Hamming, 1.0, -1.0, 1)
        .unwrap_err()
        .0
        .contains("T"));
    assert!(blahut_arimoto(&[0.5, 0.6], &Distortion::Hamming, 1.0, 1e-8, 1).is_err());
    assert!(blahut_arimoto(&p, &Distortion::Matrix(vec![0.0; 3]), 1.0, 1e-8, 1).is_err());
}
