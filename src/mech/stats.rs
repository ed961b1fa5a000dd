//! Statistics for checking mechanisms: confidence intervals for Monte-Carlo estimates and
//! goodness-of-fit statistics for sampler tests.

/// Standard normal CDF, by West's double-precision algorithm (Hart 1968, absolute error
/// below 1e−15).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs();
    let c = if x > 37.0 {
        0.0
    } else {
        let e = (-x * x / 2.0).exp();
        if x < 7.071_067_811_865_475 {
            let n = (((((3.526_249_659_989_11e-2 * x + 0.700_383_064_443_688) * x
                + 6.373_962_203_531_65)
                * x
                + 33.912_866_078_383)
                * x
                + 112.079_291_497_871)
                * x
                + 221.213_596_169_931)
                * x
                + 220.206_867_912_376;
            let d = ((((((8.838_834_764_831_84e-2 * x + 1.755_667_163_182_64) * x
                + 16.064_177_579_207)
                * x
                + 86.780_732_202_946_1)
                * x
                + 296.564_248_779_674)
                * x
                + 637.333_633_378_831)
                * x
                + 793.826_512_519_948)
                * x
                + 440.413_735_824_752;
            e * n / d
        } else {
            let b = x + 1.0 / (x + 2.0 / (x + 3.0 / (x + 4.0 / (x + 0.65))));
            e / b / 2.506_628_274_631
        }
    };
    if z > 0.0 {
        1.0 - c
    } else {
        c
    }
}

/// Standard normal quantile: Acklam's rational approximation refined by one Halley step
/// (relative error ~1e−15).
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    let e = normal_cdf(x) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// Two-sided Student-t critical value `t_{(1+level)/2, df}`. Exact table values for the
/// 95% level with df ≤ 30; otherwise the Cornish–Fisher expansion (Abramowitz & Stegun
/// 26.7.5), accurate to ~1e−3 for df ≥ 5.
pub fn t_critical(level: f64, df: usize) -> f64 {
    const T975: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if (level - 0.95).abs() < 1e-12 && (1..=30).contains(&df) {
        return T975[df - 1];
    }
    let z = normal_quantile(0.5 + level / 2.0);
    let n = df.max(1) as f64;
    let z3 = z.powi(3);
    let z5 = z.powi(5);
    let z7 = z.powi(7);
    z + (z3 + z) / (4.0 * n)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * n * n)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * n * n * n)
}

/// Mean, spread and a t-based confidence interval of a sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1 denominator); NaN for n < 2.
    pub std: f64,
    /// Standard error of the mean.
    pub se: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
    pub min: f64,
    pub max: f64,
}

/// Summarises `xs` with a `level` confidence interval for the mean.
pub fn summarise(xs: &[f64], level: f64) -> Summary {
    let n = xs.len();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        f64::NAN
    };
    let std = var.sqrt();
    let se = std / (n as f64).sqrt();
    let half = if n > 1 {
        t_critical(level, n - 1) * se
    } else {
        f64::NAN
    };
    Summary {
        n,
        mean,
        std,
        se,
        ci_lo: mean - half,
        ci_hi: mean + half,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// The q-quantile (0 ≤ q ≤ 1) with linear interpolation between order statistics
/// (Hyndman & Fan type 7, numpy's default). `sorted` must be ascending and non-empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Wilson score interval for a binomial proportion `k/n`.
pub fn wilson(k: u64, n: u64, level: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = normal_quantile(0.5 + level / 2.0);
    let n = n as f64;
    let p = k as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Kolmogorov–Smirnov statistic of a sample against a continuous CDF (sorts `xs`).
pub fn ks_statistic(xs: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

/// Pearson's chi-square statistic of observed counts against probabilities.
pub fn chi_square_statistic(counts: &[u64], probs: &[f64]) -> f64 {
    let n: u64 = counts.iter().sum();
    counts
        .iter()
        .zip(probs)
        .filter(|(_, &p)| p > 0.0)
        .map(|(&c, &p)| {
            let e = p * n as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

/// Total-variation distance `½ Σ |p − q|`.
pub fn total_variation(p: &[f64], q: &[f64]) -> f64 {
    0.5 * p.iter().zip(q).map(|(a, b)| (a - b).abs()).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_functions_agree_with_known_values() {
        assert!((normal_cdf(1.959_963_984_540_054) - 0.975).abs() < 1e-14);
        assert!((normal_cdf(-3.0) - 0.001_349_898_031_630_094_6).abs() < 1e-16);
        for p in [1e-10, 0.001, 0.3, 0.5, 0.975, 0.999_999] {
            assert!((normal_cdf(normal_quantile(p)) - p).abs() < 1e-14 * p.max(1e-2));
        }
    }

    #[test]
    fn t_critical_values() {
        assert_eq!(t_critical(0.95, 29), 2.045);
        assert!((t_critical(0.95, 100) - 1.984).abs() < 1e-3);
        assert!((t_critical(0.95, 1_000_000) - 1.96).abs() < 1e-3);
    }

    #[test]
    fn summary_and_intervals() {
        let s = summarise(&[1.0, 2.0, 3.0, 4.0], 0.95);
        assert_eq!(s.mean, 2.5);
        assert!((s.std - 1.290_994_448_735_805_6).abs() < 1e-15);
        assert!((s.ci_hi - (2.5 + 3.182 * s.se)).abs() < 1e-12);
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        let (lo, hi) = wilson(0, 100, 0.95);
        assert!(lo == 0.0 && (hi - 0.036_994).abs() < 1e-5);
    }
}

/// Least-squares line y = a + b·x with a `level` t-interval for the slope b.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LineFit {
    pub intercept: f64,
    pub slope: f64,
    pub slope_lo: f64,
    pub slope_hi: f64,
}

/// Fits y on x by least squares. The slope interval needs ≥ 3 points (NaN otherwise).
pub fn fit_line(x: &[f64], y: &[f64], level: f64) -> LineFit {
    let n = x.len().min(y.len());
    let nf = n as f64;
    let mx = x[..n].iter().sum::<f64>() / nf;
    let my = y[..n].iter().sum::<f64>() / nf;
    let sxx: f64 = x[..n].iter().map(|v| (v - mx).powi(2)).sum();
    let sxy: f64 = x[..n]
        .iter()
        .zip(&y[..n])
        .map(|(a, b)| (a - mx) * (b - my))
        .sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let half = if n >= 3 {
        let rss: f64 = x[..n]
            .iter()
            .zip(&y[..n])
            .map(|(a, b)| (b - intercept - slope * a).powi(2))
            .sum();
        t_critical(level, n - 2) * (rss / (nf - 2.0) / sxx).sqrt()
    } else {
        f64::NAN
    };
    LineFit {
        intercept,
        slope,
        slope_lo: slope - half,
        slope_hi: slope + half,
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    #[test]
    fn exact_line_and_interval_cover() {
        let x = [0.0, 1.0, 2.0, 3.0];
        let f = fit_line(&x, &[1.0, 3.0, 5.0, 7.0], 0.95);
        assert!((f.slope - 2.0).abs() < 1e-12 && (f.intercept - 1.0).abs() < 1e-12);
        assert!((f.slope_hi - f.slope).abs() < 1e-9);
        let f = fit_line(&x, &[1.0, 3.5, 4.5, 7.0], 0.95);
        assert!(f.slope_lo < 2.0 && 2.0 < f.slope_hi && f.slope_hi - f.slope_lo > 0.5);
    }
}
