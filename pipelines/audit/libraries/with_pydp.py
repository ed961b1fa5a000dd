"""Google's differential-privacy library (python-dp, `import pydp`), audited as a user calls it.

How the library is called: each draw is one call, as a user makes it: a noise mechanism's
`add_noise(x)`, or a fresh algorithm object's `quick_result(data)` (one release per object,
as the library means them to be used). The library draws from its own C++ generator, which
cannot be seeded from Python: these audits are not bit-for-bit reproducible (the pipeline
says `seeded: false`).

Mechanisms (parameter `mechanism`), each with its expected verdict and its source:

  laplace      `numerical_mechanisms.LaplaceMechanism(epsilon, sensitivity).add_noise(x)`;
               output `noisy`. Claims ε-DP. Expected: none: the library draws its noise on a
               grid of a power-of-two granularity and rounds x onto it, the mitigation of
               floating-point attacks of its "Secure noise generation" design (Google's
               differential-privacy repository, common_docs/Secure_Noise_Generation.pdf).
               Delta-Siege (Lokna et al., CCS 2023) audits this call (`laplace_pydp`).
  gaussian     `numerical_mechanisms.GaussianMechanism(epsilon, delta, sensitivity)
               .add_noise(x)`; output `noisy`. Claims (ε, δ)-DP (σ from the analytic Gaussian
               of Balle & Wang 2018). Expected: none (the same secure noise; Delta-Siege's
               `gauss_pydp`).
  bounded_sum  `algorithms.laplacian.BoundedSum(epsilon, lower_bound, upper_bound,
               dtype="float").quick_result(D)`; output `sum`. Claims ε-DP for one record added
               or removed (sensitivity max(|L|, |U|)). Expected: none (correct by the library's
               docs) on D = [1], D' = [1, 1], the pair that breaks diffprivlib's sum.
  bounded_mean `algorithms.laplacian.BoundedMean(...).quick_result(D)`; output `mean`. Claims
               ε-DP (a noisy sum over a noisy count). Expected: none on D = [0.5],
               D' = [0.5, 0.5], the pair that breaks diffprivlib's mean.
  count        `algorithms.laplacian.Count(epsilon, dtype="float").quick_result(D)`; output
               `count`. Claims ε-DP. Expected: none.

Parameters: `mechanism`, `samples` (set by the audit), and the mechanism's own: epsilon,
delta, sensitivity (Δ, default 1), bounds, and `datasets: [D, D']` for the algorithms (see
common.py).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pydp.algorithms.laplacian as algorithms
import pydp.algorithms.numerical_mechanisms as numerical
from common import dataset, neighbour, serve_mechanisms


def _draws(n: int, draw: Callable[[], float]) -> np.ndarray:
    return np.fromiter((draw() for _ in range(n)), dtype=np.float64, count=n)


def laplace(job: Any, n: int) -> dict[str, np.ndarray]:
    """`LaplaceMechanism(epsilon, sensitivity).add_noise(x)`."""
    x = neighbour(job)
    p = job.params
    mech = numerical.LaplaceMechanism(float(p["epsilon"]), float(p.get("sensitivity", 1.0)))
    return {"noisy": _draws(n, lambda: mech.add_noise(float(x)))}


def gaussian(job: Any, n: int) -> dict[str, np.ndarray]:
    """`GaussianMechanism(epsilon, delta, sensitivity).add_noise(x)`."""
    x = neighbour(job)
    p = job.params
    mech = numerical.GaussianMechanism(
        float(p["epsilon"]), float(p["delta"]), float(p.get("sensitivity", 1.0))
    )
    return {"noisy": _draws(n, lambda: mech.add_noise(float(x)))}


def _algorithm(kind: type, column: str, bounded: bool) -> Any:
    def run(job: Any, n: int) -> dict[str, np.ndarray]:
        p = job.params
        data = dataset(job).tolist()
        kwargs: dict[str, Any] = {"epsilon": float(p["epsilon"]), "dtype": "float"}
        if bounded:
            kwargs["lower_bound"], kwargs["upper_bound"] = (float(b) for b in p["bounds"])
        return {column: _draws(n, lambda: kind(**kwargs).quick_result(data))}

    run.__doc__ = f"`{kind.__name__}(...).quick_result(D)`, a fresh object per draw."
    return run


serve_mechanisms(
    {
        "laplace": laplace,
        "gaussian": gaussian,
        "bounded_sum": _algorithm(algorithms.BoundedSum, "sum", bounded=True),
        "bounded_mean": _algorithm(algorithms.BoundedMean, "mean", bounded=True),
        "count": _algorithm(algorithms.Count, "count", bounded=False),
    }
)
