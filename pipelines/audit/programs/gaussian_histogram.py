"""A researcher's own Gaussian mechanism on a histogram, in numpy: the walk of the audit issue.

Each release adds N(0, σ²) to every bin of the histogram the audit hands over (its column
`count`): `count + sigma * rng.standard_normal((samples, bins))`, one draw of all bins per
sample. It is μ-GDP with μ = Δ₂/σ, where Δ₂ is the ℓ2 distance the neighbouring histograms
can move; a researcher who calibrates σ for Δ₂ = 1 claims μ = 1/σ (equivalently ρ = 1/(2σ²)
zCDP, or Rényi ε(α) = α/(2σ²)), which holds when one record moves one count and fails when it
moves four (Δ₂ = 2): the audit's known-broken variant.

σ is given (`sigma`), or calibrated for (ε, δ) at sensitivity Δ = 1 as Balle & Wang (2018,
Theorem 8) give it: the smallest σ with Φ(1/(2σ) − εσ) − e^ε·Φ(−1/(2σ) − εσ) ≤ δ, found by
bisection (the researcher's own calibration, in the standard library's erfc).

Input: one frame with a column `count` (the audit's neighbouring input).
Parameters: sigma (σ > 0), or epsilon and delta; samples (releases, set by the audit).
Output: `samples × bins` rows (sample, bin, noisy), handed to dplab as numpy arrays: the
helper writes them as binary columns, with no Python loop per row.
"""

import math

import numpy as np
from dplab_external import serve


def phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def analytic_sigma(epsilon: float, delta: float) -> float:
    """The smallest σ whose Gaussian is (ε, δ)-DP at Δ = 1 (Balle & Wang 2018, Theorem 8)."""

    def delta_of(sigma: float) -> float:
        a, b = 1.0 / (2.0 * sigma), epsilon * sigma
        return phi(a - b) - math.exp(epsilon) * phi(-a - b)

    lo, hi = 1e-3, 1.0
    while delta_of(hi) > delta:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if delta_of(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def release(job):
    if "sigma" in job.params:
        sigma = float(job.params["sigma"])
    else:
        sigma = analytic_sigma(float(job.params["epsilon"]), float(job.params["delta"]))
    samples = int(job.params["samples"])
    counts = np.asarray(job.columns()["count"], dtype=float)
    bins = counts.size
    noisy = counts + sigma * job.rng.standard_normal((samples, bins))
    job.write(
        {
            "sample": np.repeat(np.arange(samples), bins),
            "bin": np.tile(np.arange(bins), samples),
            "noisy": noisy.ravel(),
        }
    )


serve(release)
