"""IBM's diffprivlib, audited as a user calls it: its mechanisms, tools and models.

How the library is called: each draw is one call, as a user makes it, with
`random_state=` a RandomState seeded from the instance's seed (`common.random_state`: a
Mersenne Twister through a SeedSequence of dplab's 128-bit seed), and a fresh
`BudgetAccountant()` for the tools and models (the default accountant would keep every
draw's spend). diffprivlib's PrivacyLeakWarning is silenced: two configurations below are
audited precisely because the library warns about them.

Mechanisms (parameter `mechanism`), each with its expected verdict and its source:

  laplace            `mechanisms.Laplace(epsilon, sensitivity).randomise(x)`; output `noisy`.
                     Claims ε-DP. Expected: violation (floating point). diffprivlib samples
                     Laplace noise with Holohan & Braghin's four-uniform formula, a mitigation of
                     Mironov's attack (issue IBM/differential-privacy-library#19), but adds it to
                     x in floating point: the precision-based attack of Haney et al. 2022
                     ("Precision-based attacks and interval refining", arXiv 2207.13793) names
                     diffprivlib; Delta-Siege (Lokna et al., CCS 2023) audits this call
                     (`laplace_ibm`) at ε ∈ {0.1, 1, 3, 10} on inputs (0, 1). Both read bits.
  snapping           `mechanisms.Snapping(epsilon, sensitivity, lower, upper).randomise(x)`;
                     output `noisy`. Claims ε-DP. Expected: none: Mironov's snapping mechanism
                     (CCS 2012), which the library added for issue #19 (PR #46).
  geometric          `mechanisms.Geometric(epsilon, sensitivity).randomise(int x)`; output
                     `noisy`. Claims ε-DP. Expected: none (integers, no floating point: correct
                     by the library's docs).
  gaussian           `mechanisms.Gaussian(epsilon, delta, sensitivity)` (the classic
                     σ = Δ√(2 ln(1.25/δ))/ε, ε ≤ 1); output `noisy`. Claims (ε, δ)-DP.
                     Expected: violation (floating point, as for laplace; Delta-Siege's "Float
                     Gauss", `gauss_ibm`; Jin et al., IEEE S&P 2022, "Are we there yet?", show
                     floating-point attacks on Gaussian samplers).
  gaussian_analytic  `mechanisms.GaussianAnalytic(...)` (Balle & Wang 2018's σ); as gaussian
                     (Delta-Siege's `gauss_ibm_analytic`).
  gaussian_discrete  `mechanisms.GaussianDiscrete(...)` on int x (Canonne, Kamath & Steinke
                     2020's exact sampler); Expected: none (Delta-Siege's `gauss_ibm_discrete`;
                     correct by the library's docs).
  mean               `tools.mean(D, epsilon, bounds)`; output `mean`. Claims ε-DP. Expected:
                     violation under add/remove-one neighbours: the noise scale (U − L)/n takes
                     n from the data (diffprivlib/tools/utils.py), the bug class Kifer reported
                     for SmartNoise's mean (opendp/smartnoise-core#355): D = [0.5] and D' =
                     [0.5, 0.5] have the same mean, and scales 1/ε and 1/(2ε), whose densities
                     differ by a factor 2 at the mean: a loss of ln 2, whatever ε.
  sum                `tools.sum(D, epsilon, bounds)`; output `sum`. Claims ε-DP. Expected:
                     violation under add/remove-one neighbours: the noisy sum is truncated to
                     [nL, nU] with n from the data, so D = [1] never releases more than 1 and
                     D' = [1, 1] mostly does (the same data-dependent n as mean).
  sum (float)        The same call, `tools.sum(D, epsilon, bounds)`, with bounds
                     [2^52, 2^52 + 2] under replace-one neighbours (n known: the sensitivity
                     U − L = 2 the library uses is the ideal one); output `sum`. Expected:
                     violation (floating-point rounding in the aggregate: Casacuberta,
                     Shoemate, Vadhan & Wagaman, CCS 2022, "Widespread underestimation of
                     sensitivity in differentially private libraries", which names
                     diffprivlib): D = L + [0, 0, 1, 2] sums to 4L in float64 and
                     D' = L + [2, 0, 1, 2] to 4L + 8, four times U − L.
  histogram          `tools.histogram(D, epsilon, bins, range)`; outputs `count0` … and the
                     bin edges `edge0` … (what the call returns). Claims ε-DP. With
                     `range: null`: expected violation: the range is taken from the data, so
                     the edges reveal min and max (the library's docs: "If the range parameter
                     is not specified correctly, a PrivacyLeakWarning is thrown"). With a range:
                     expected none (correct by the library's docs).
  count              `tools.count_nonzero(D, epsilon)`; output `count`. Claims ε-DP. It is
                     `tools.sum` of the indicators with bounds (0, 1), so its count is truncated
                     to [0, n] with n from the data: under add/remove-one neighbours ([1] and
                     [1, 1]) expected violation, as sum (first written as a control; the audit
                     flagged it and the source shows why); under replace-one neighbours
                     ([1, 0] and [1, 1], n known) expected none.
  linear_regression  `models.LinearRegression(epsilon, bounds_X, bounds_y,
                     fit_intercept=False).fit(X, y).coef_`; output `coef`. Claims ε-DP.
                     Expected: violation: the sensitivity of the quadratic terms uses the lower
                     bound twice, `max(|bounds_X[0]|, |bounds_X[0]|)²`, which is 0 for
                     bounds_X = (0, 1), so Σx² is released without noise
                     (IBM/differential-privacy-library#105, Cebere 2026; also #104).

Parameters: `mechanism`, `samples` (set by the audit), and the mechanism's own: epsilon,
delta, sensitivity, lower/upper (snapping), bounds, bins, range, bounds_X, bounds_y,
and `datasets: [D, D']` for the tools and models (see common.py).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from common import dataset, neighbour, random_state, rows, serve_mechanisms
from diffprivlib import mechanisms, models, tools
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.utils import DiffprivlibCompatibilityWarning, PrivacyLeakWarning

warnings.simplefilter("ignore", PrivacyLeakWarning)
warnings.simplefilter("ignore", DiffprivlibCompatibilityWarning)


def _draws(n: int, draw: Any, dtype: type = np.float64) -> np.ndarray:
    """Call `draw()` n times; return the results as an array."""
    return np.fromiter((draw() for _ in range(n)), dtype=dtype, count=n)


def _sensitivity(p: dict[str, Any]) -> float:
    return float(p.get("sensitivity", 1.0))


def laplace(job: Any, n: int) -> dict[str, np.ndarray]:
    """`Laplace(epsilon, sensitivity).randomise(x)`."""
    x = neighbour(job)
    p = job.params
    mech = mechanisms.Laplace(
        epsilon=p["epsilon"], sensitivity=_sensitivity(p), random_state=random_state(job)
    )
    return {"noisy": _draws(n, lambda: mech.randomise(x))}


def snapping(job: Any, n: int) -> dict[str, np.ndarray]:
    """`Snapping(epsilon, sensitivity, lower, upper).randomise(x)`."""
    x = neighbour(job)
    p = job.params
    mech = mechanisms.Snapping(
        epsilon=p["epsilon"],
        sensitivity=_sensitivity(p),
        lower=p["lower"],
        upper=p["upper"],
        random_state=random_state(job),
    )
    return {"noisy": _draws(n, lambda: mech.randomise(x))}


def geometric(job: Any, n: int) -> dict[str, np.ndarray]:
    """`Geometric(epsilon, sensitivity).randomise(x)` on the integer x."""
    x = neighbour(job)
    p = job.params
    mech = mechanisms.Geometric(
        epsilon=p["epsilon"], sensitivity=int(_sensitivity(p)), random_state=random_state(job)
    )
    return {"noisy": _draws(n, lambda: mech.randomise(int(x)), np.int64)}


def _gaussian(kind: type, integer: bool = False) -> Any:
    def run(job: Any, n: int) -> dict[str, np.ndarray]:
        x = neighbour(job)
        p = job.params
        sens = _sensitivity(p)
        mech = kind(
            epsilon=p["epsilon"],
            delta=p["delta"],
            sensitivity=int(sens) if integer else sens,
            random_state=random_state(job),
        )
        if integer:
            return {"noisy": _draws(n, lambda: mech.randomise(int(x)), np.int64)}
        return {"noisy": _draws(n, lambda: mech.randomise(x))}

    run.__doc__ = f"`{kind.__name__}(epsilon, delta, sensitivity).randomise(x)`."
    return run


def mean(job: Any, n: int) -> dict[str, np.ndarray]:
    """`tools.mean(D, epsilon, bounds)`."""
    p, data, rs = job.params, dataset(job), random_state(job)
    bounds = tuple(p["bounds"])

    def draw() -> float:
        return tools.mean(
            data,
            epsilon=p["epsilon"],
            bounds=bounds,
            random_state=rs,
            accountant=BudgetAccountant(),
        )

    return {"mean": _draws(n, draw)}


def sum_(job: Any, n: int) -> dict[str, np.ndarray]:
    """`tools.sum(D, epsilon, bounds)`."""
    p, data, rs = job.params, dataset(job), random_state(job)
    bounds = tuple(p["bounds"])

    def draw() -> float:
        return tools.sum(
            data,
            epsilon=p["epsilon"],
            bounds=bounds,
            random_state=rs,
            accountant=BudgetAccountant(),
        )

    return {"sum": _draws(n, draw)}


def histogram(job: Any, n: int) -> dict[str, np.ndarray]:
    """`tools.histogram(D, epsilon, bins, range)`: the noisy counts and the bin edges."""
    p, data, rs = job.params, dataset(job), random_state(job)
    bins = int(p["bins"])
    given = p.get("range")
    counts = np.empty((n, bins), dtype=np.int64)
    edges = np.empty((n, bins + 1), dtype=np.float64)
    for i in range(n):
        counts[i], edges[i] = tools.histogram(
            data,
            epsilon=p["epsilon"],
            bins=bins,
            range=None if given is None else tuple(given),
            random_state=rs,
            accountant=BudgetAccountant(),
        )
    out = {f"count{j}": counts[:, j] for j in range(bins)}
    out.update({f"edge{j}": edges[:, j] for j in range(bins + 1)})
    return out


def count(job: Any, n: int) -> dict[str, np.ndarray]:
    """`tools.count_nonzero(D, epsilon)`."""
    p, data, rs = job.params, dataset(job), random_state(job)

    def draw() -> float:
        return tools.count_nonzero(
            data, epsilon=p["epsilon"], random_state=rs, accountant=BudgetAccountant()
        )

    return {"count": _draws(n, draw, np.int64)}


def _xy(job: Any) -> tuple[np.ndarray, np.ndarray]:
    """The neighbouring dataset's records (x, y): X as one feature column, and y."""
    records = rows(job)
    return records["x"].astype(np.float64).reshape(-1, 1), records["y"].astype(np.float64)


def linear_regression(job: Any, n: int) -> dict[str, np.ndarray]:
    """`LinearRegression(epsilon, bounds_X, bounds_y, fit_intercept=False).fit(X, y).coef_`."""
    p, rs = job.params, random_state(job)
    features, labels = _xy(job)

    def draw() -> float:
        model = models.LinearRegression(
            epsilon=p["epsilon"],
            bounds_X=tuple(p["bounds_X"]),
            bounds_y=tuple(p["bounds_y"]),
            fit_intercept=False,
            random_state=rs,
            accountant=BudgetAccountant(),
        )
        return float(model.fit(features, labels).coef_.ravel()[0])

    return {"coef": _draws(n, draw)}


def logistic_regression(job: Any, n: int) -> dict[str, np.ndarray]:
    """`LogisticRegression(epsilon, data_norm).fit(X, y).coef_`, a row per row of `coef_`.

    The model has one row of coefficients for two classes and one per class for more, the
    classes being `np.unique(y)`: so a release has as many rows as the data's label set
    makes it (the audit reads it with `max_rows`).
    """
    p, rs = job.params, random_state(job)
    features, labels = _xy(job)
    samples, coefs = [], []
    for s in range(n):
        model = models.LogisticRegression(
            epsilon=p["epsilon"],
            data_norm=float(p["data_norm"]),
            random_state=rs,
            accountant=BudgetAccountant(),
        )
        coef = model.fit(features, labels).coef_[:, 0]
        samples.append(np.full(len(coef), s, dtype=np.int64))
        coefs.append(coef)
    return {"sample": np.concatenate(samples), "coef": np.concatenate(coefs)}


serve_mechanisms(
    {
        "laplace": laplace,
        "snapping": snapping,
        "geometric": geometric,
        "gaussian": _gaussian(mechanisms.Gaussian),
        "gaussian_analytic": _gaussian(mechanisms.GaussianAnalytic),
        "gaussian_discrete": _gaussian(mechanisms.GaussianDiscrete, integer=True),
        "mean": mean,
        "sum": sum_,
        "histogram": histogram,
        "count": count,
        "linear_regression": linear_regression,
        "logistic_regression": logistic_regression,
    }
)
