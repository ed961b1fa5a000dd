"""numpy's textbook Laplace mechanism, as user code (and many libraries) write it.

Audits: x + numpy's Laplace(0, Δ/ε) draw, the call a user makes for "the Laplace mechanism"
(`x + np.random.laplace(0, sensitivity / epsilon)`; here the same sampler through the
instance's Generator, `job.rng.laplace`, which uses numpy's same textbook inverse-CDF formula,
loc ∓ scale·ln(2U) on a 53-bit uniform U). Claimed: ε-DP (Dwork & Roth 2014, Thm 3.6), which
holds over the reals.

Expected verdict: violation at ε = 0.1. Floating point: the sampler's outputs form a sparse,
irregular set of doubles that moves with x (Mironov, CCS 2012, "On significance of the least
significant bits for differential privacy"), and DP-Sniper (Bichsel et al., IEEE S&P 2021)
measured ε_lcb = 0.252 for this sampler at the claim ε = 0.1 from its outputs' bits. An audit
that reads only the outputs' values (thresholds, intervals) sees a correct Laplace mechanism.

Mechanisms (parameter `mechanism`):
  laplace   x + Laplace(0, sensitivity/epsilon); output `noisy`.
Parameters: epsilon, sensitivity (default 1), samples (set by the audit).
Randomness: `job.rng` only, so the frame is a function of dplab's seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from common import neighbour, serve_mechanisms


def laplace(job: Any, n: int) -> dict[str, np.ndarray]:
    """Release x + Laplace(0, Δ/ε) from numpy's textbook sampler, n times."""
    x = neighbour(job)
    scale = float(job.params.get("sensitivity", 1.0)) / float(job.params["epsilon"])
    return {"noisy": x + job.rng.laplace(0.0, scale, size=n)}


serve_mechanisms({"laplace": laplace})
