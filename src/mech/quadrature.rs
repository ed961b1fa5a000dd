//! Gauss–Legendre quadrature, used to compute exact output distributions of noisy-max
//! mechanisms: an n-point rule integrates polynomials of degree ≤ 2n − 1 exactly.

/// Nodes and weights of the n-point Gauss–Legendre rule on [−1, 1] (Newton's method on
/// the Legendre recurrence, from the usual asymptotic first guess).
pub(crate) fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut x = vec![0.0; n];
    let mut w = vec![0.0; n];
    let m = n.div_ceil(2);
    for i in 0..m {
        let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
        let mut dp = 1.0;
        for _ in 0..100 {
            let (mut p1, mut p2) = (1.0, 0.0);
            for j in 0..n {
                let p3 = p2;
                p2 = p1;
                p1 = ((2 * j + 1) as f64 * z * p2 - j as f64 * p3) / (j + 1) as f64;
            }
            dp = n as f64 * (z * p1 - p2) / (z * z - 1.0);
            let dz = p1 / dp;
            z -= dz;
            if dz.abs() < 1e-15 {
                break;
            }
        }
        x[i] = -z;
        x[n - 1 - i] = z;
        w[i] = 2.0 / ((1.0 - z * z) * dp * dp);
        w[n - 1 - i] = w[i];
    }
    (x, w)
}

/// Maps a rule on [−1, 1] to [a, b].
pub(crate) fn on_interval<'a>(
    nodes: &'a [f64],
    weights: &'a [f64],
    a: f64,
    b: f64,
) -> impl Iterator<Item = (f64, f64)> + 'a {
    let half = 0.5 * (b - a);
    let mid = 0.5 * (a + b);
    nodes
        .iter()
        .zip(weights)
        .map(move |(x, w)| (mid + half * x, half * w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrates_polynomials_exactly() {
        for n in [1, 2, 5, 16, 64] {
            let (x, w) = gauss_legendre(n);
            let deg = 2 * n - 1;
            let integral: f64 = on_interval(&x, &w, 0.0, 1.0)
                .map(|(t, w)| w * t.powi(deg as i32))
                .sum();
            assert!(
                (integral - 1.0 / (deg as f64 + 1.0)).abs() < 1e-13,
                "n={n}: {integral}"
            );
        }
    }
}
