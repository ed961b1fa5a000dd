"""The OpenDP Library, audited as a user calls it: measurements built with `opendp.prelude`.

How the library is called: `dp.enable_features("contrib")`, a measurement built from a
domain, a metric and a noise scale, its privacy map asked for the claim (the program fails
if the map does not give the claim the pipeline states, so the claim is the library's own),
and the measurement called on the input. A noise primitive is built on a vector domain and
called once on [x, x, …, x] (n copies): OpenDP adds independent noise to each coordinate,
which are n draws of the mechanism on x (as Delta-Siege draws them, Lokna et al., CCS 2023).
OpenDP draws from the operating system's generator: it cannot be seeded, so these audits are
not bit-for-bit reproducible (the pipeline says `seeded: false`).

Mechanisms (parameter `mechanism`), each with its expected verdict and its source:

  laplace            `dp.m.make_laplace(vector_domain(atom_domain(T=float)), l1_distance(T=float),
                     scale=Δ/ε)`; output `noisy`. Claims ε-DP (its map: Δ/scale). Expected:
                     none: OpenDP's float Laplace samples exactly and rounds onto a grid, proven
                     for floating point (opendp/opendp#1321, "prove float Laplace mechanisms";
                     #2134). Delta-Siege audited OpenDP 0.6.1's `make_base_laplace`, before it.
  discrete_laplace   `make_laplace` on integers (T=int): the discrete Laplace (geometric)
                     mechanism; output `noisy`. Claims ε-DP. Expected: none (integers; correct
                     by the library's docs).
  gaussian           `dp.m.make_gaussian(vector_domain(atom_domain(T=float)), l2_distance(T=float),
                     scale=Δ/√(2ρ))`; output `noisy`. Claims ρ-zCDP (its map: Δ²/(2·scale²)).
                     Expected: none (OpenDP's float Gaussian is proven in #2134, closing #1960).
  discrete_gaussian  `make_gaussian` on integers: the discrete Gaussian (Canonne, Kamath &
                     Steinke 2020); output `noisy`. Claims ρ-zCDP. Expected: none.
  sized_sum          `dp.t.make_sum(vector_domain(atom_domain(bounds=(L, U)), size=n),
                     symmetric_distance()) >> dp.m.then_laplace(scale)` on a dataset (one call
                     per draw); output `sum`. Claims the ε its map gives for d_in = 2 (replace one
                     record). Expected: none: OpenDP's float sums account for rounding
                     (Casacuberta, Shoemate, Vadhan & Wagaman, CCS 2022, whose fix it carries):
                     for the data that break diffprivlib's sum (bounds [2^52, 2^52 + 2], n = 4)
                     its map gives a sensitivity of 18 where the ideal one is 2.

Parameters: `mechanism`, `samples` (set by the audit), and the mechanism's own: epsilon (the
ε claim), rho (the ρ claim), sensitivity (Δ, default 1), bounds and scale (sized_sum), and
`datasets: [D, D']` for sized_sum (see common.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import opendp.prelude as dp
from common import dataset, neighbour, serve_mechanisms

dp.enable_features("contrib")

# Relative slack when the library's privacy map is held to the pipeline's claim: the map
# rounds its arithmetic up (conservatively), by a few units in the last place.
SLACK = 1e-9


def _holds(stated: float, claim: float, what: str) -> None:
    """Fails unless the library's own privacy map gives the pipeline's claim."""
    if not stated <= claim * (1 + SLACK):
        raise ValueError(f"OpenDP's map gives {what} = {stated!r}, the pipeline claims {claim!r}")


def _noise(job: Any, x: float, n: int, measure: str, integer: bool) -> dict[str, np.ndarray]:
    p = job.params
    sens = float(p.get("sensitivity", 1.0))
    kind = int if integer else float
    atoms = dp.atom_domain(T=kind) if integer else dp.atom_domain(T=kind, nan=False)
    if measure == "laplace":
        scale = sens / float(p["epsilon"])
        space = (dp.vector_domain(atoms), dp.l1_distance(T=kind))
        meas = dp.m.make_laplace(*space, scale=scale)
        _holds(meas.map(kind(sens)), float(p["epsilon"]), "ε")
    else:
        scale = sens / math.sqrt(2 * float(p["rho"]))
        space = (dp.vector_domain(atoms), dp.l2_distance(T=kind))
        meas = dp.m.make_gaussian(*space, scale=scale)
        _holds(meas.map(kind(sens)), float(p["rho"]), "ρ")
    value = int(x) if integer else float(x)
    noisy = np.asarray(meas([value] * n), dtype=np.int64 if integer else np.float64)
    return {"noisy": noisy}


def laplace(job: Any, n: int) -> dict[str, np.ndarray]:
    """Float Laplace noise, n copies of x in one call."""
    return _noise(job, neighbour(job), n, "laplace", integer=False)


def discrete_laplace(job: Any, n: int) -> dict[str, np.ndarray]:
    """Integer (discrete) Laplace noise, n copies of x in one call."""
    return _noise(job, neighbour(job), n, "laplace", integer=True)


def gaussian(job: Any, n: int) -> dict[str, np.ndarray]:
    """Float Gaussian noise, n copies of x in one call."""
    return _noise(job, neighbour(job), n, "gaussian", integer=False)


def discrete_gaussian(job: Any, n: int) -> dict[str, np.ndarray]:
    """Integer (discrete) Gaussian noise, n copies of x in one call."""
    return _noise(job, neighbour(job), n, "gaussian", integer=True)


def sized_sum(job: Any, n: int) -> dict[str, np.ndarray]:
    """Sum n known records clamped to bounds, then add Laplace noise: one call per draw."""
    p = job.params
    data = dataset(job).tolist()
    lower, upper = (float(b) for b in p["bounds"])
    domain = dp.vector_domain(dp.atom_domain(bounds=(lower, upper)), size=len(data))
    meas = dp.t.make_sum(domain, dp.symmetric_distance()) >> dp.m.then_laplace(
        scale=float(p["scale"])
    )
    _holds(meas.map(2), float(p["epsilon"]), "ε")
    return {"sum": np.fromiter((meas(data) for _ in range(n)), dtype=np.float64, count=n)}


serve_mechanisms(
    {
        "laplace": laplace,
        "discrete_laplace": discrete_laplace,
        "gaussian": gaussian,
        "discrete_gaussian": discrete_gaussian,
        "sized_sum": sized_sum,
    }
)
