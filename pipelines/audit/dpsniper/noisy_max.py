"""Report Noisy Max and its incorrect variants from StatDP's benchmark (Ding, Wang, Wang, Zhang &
Kifer, "Detecting Violations of Differential Privacy", CCS'18, Algs. 5–8), DP-Sniper's
ReportNoisyMax1–4.

Mechanism. Query answers x of length `answers` (DP-Sniper: 5), each of sensitivity 1, neighbours
moving each answer by at most 1 (its component-wise neighbourhood, `relation: linf` here). Noise
of scale 2/ε is added to every answer, and:
  report_noisy_max1: the index of the largest noisy answer, Laplace noise   (Alg. 5);
  report_noisy_max2: the index of the largest noisy answer, exponential noise (Alg. 6);
  report_noisy_max3: the largest noisy answer itself, Laplace noise           (Alg. 7);
  report_noisy_max4: the largest noisy answer itself, exponential noise       (Alg. 8).

Claimed guarantee and status. All four are claimed ε-DP. Releasing the arg-max (1, 2) is ε-DP
(Dwork & Roth 2014, Claim 3.9, for Laplace noise; Ding et al. for the exponential one).
Releasing the noisy maximum's value (3, 4) is known to be broken (Ding et al. list both as
incorrect variants): when every answer moves up by 1 the maximum of all the noisy answers moves
with them, so the privacy losses of the answers add up.

Output column: `index` (report_noisy_max1/2: the arg-max, 0-based, as a float) or `max`
(report_noisy_max3/4: the noisy maximum).
"""


def _noisy(x, n, rng, p, kind):
    scale = 2.0 / float(p["epsilon"])
    size = (n, len(x))
    noise = rng.laplace(0.0, scale, size) if kind == "laplace" else rng.exponential(scale, size)
    return x[None, :] + noise


def report_noisy_max1(x, n, rng, p):
    return [("index", _noisy(x, n, rng, p, "laplace").argmax(axis=1).astype(float))]


def report_noisy_max2(x, n, rng, p):
    return [("index", _noisy(x, n, rng, p, "exponential").argmax(axis=1).astype(float))]


def report_noisy_max3(x, n, rng, p):
    return [("max", _noisy(x, n, rng, p, "laplace").max(axis=1))]


def report_noisy_max4(x, n, rng, p):
    return [("max", _noisy(x, n, rng, p, "exponential").max(axis=1))]


MECHANISMS = {
    "report_noisy_max1": report_noisy_max1,
    "report_noisy_max2": report_noisy_max2,
    "report_noisy_max3": report_noisy_max3,
    "report_noisy_max4": report_noisy_max4,
}
