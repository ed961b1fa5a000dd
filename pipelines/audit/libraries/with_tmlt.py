"""Tumult Labs' Core library (`tmlt.core`), audited as a user calls its noise measurements.

How the library is called: a measurement from `tmlt.core.measurements.noise_mechanisms`, built
with its noise scale, its privacy function asked for the claim (the program fails if it does
not give the claim the pipeline states), and called once per draw on x. tmlt.core draws every
random bit from one module-level numpy Generator (`tmlt.core.random.rng.prng()`, backed by
RDRAND or the operating system) and has no seeding API; the program puts the instance's
`job.rng` in its place, so the draws are dplab's and the audit is reproducible, while every
sampler runs unchanged (they take their bits from that Generator alone). tmlt.core 0.20
needs numpy < 2 and pandas < 2 on Python 3.11, so it lives in a virtual environment of its
own (the Makefile's `pyenv-libraries` target makes it and puts its interpreter on the PATH
as `python3-tmlt`).

Mechanisms (parameter `mechanism`), each with its expected verdict and its source:

  laplace            `AddLaplaceNoise(input_domain=NumpyFloatDomain(), scale=Δ/ε)(x)`; output
                     `noisy`. Claims ε-DP (privacy function d_in/scale). Expected: none: its
                     sampler is the interval refining of Haney, Desfontaines, Hartman, Shrestha
                     & Hay 2022 ("Precision-based attacks and interval refining", arXiv
                     2207.13793), Tumult's fix of the floating-point attacks it describes.
  geometric          `AddGeometricNoise(alpha=Δ/ε)(int x)`; output `noisy`. Claims ε-DP.
                     Expected: none (integers; correct by the library's docs).
  discrete_gaussian  `AddDiscreteGaussianNoise(sigma_squared=Δ²/(2ρ))(int x)`; output `noisy`.
                     Claims ρ-zCDP (privacy function d_in²/(2σ²)). Expected: none (Canonne,
                     Kamath & Steinke 2020's exact sampler).

Parameters: `mechanism`, `samples` (set by the audit), epsilon or rho (the claim), and
sensitivity (Δ, default 1).
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any

import numpy as np
import tmlt.core.random.rng as tmlt_rng
from common import neighbour, serve_mechanisms
from tmlt.core.domains.numpy_domains import NumpyFloatDomain
from tmlt.core.measurements.noise_mechanisms import (
    AddDiscreteGaussianNoise,
    AddGeometricNoise,
    AddLaplaceNoise,
)


def _holds(stated: Any, claim: float, what: str) -> None:
    """Fail unless the library's privacy function gives the pipeline's claim (both rationals)."""
    if Fraction(str(stated)) > Fraction(str(claim)):
        raise ValueError(f"tmlt.core's privacy function gives {what} = {stated}, claimed {claim}")


def _seed(job: Any) -> None:
    """Make the instance's Generator the one tmlt.core's samplers draw from."""
    tmlt_rng._core_privacy_prng = job.rng
    tmlt_rng._core_privacy_prng_pid = os.getpid()


def _scale(p: dict[str, Any], parameter: str) -> Fraction:
    """Δ/ε as an exact rational (tmlt.core's scales are exact numbers)."""
    return Fraction(str(p.get("sensitivity", 1))) / Fraction(str(p[parameter]))


def laplace(job: Any, n: int) -> dict[str, np.ndarray]:
    """`AddLaplaceNoise(NumpyFloatDomain(), scale)(x)`, once per draw."""
    x = neighbour(job)
    p = job.params
    _seed(job)
    mech = AddLaplaceNoise(input_domain=NumpyFloatDomain(), scale=_scale(p, "epsilon"))
    _holds(mech.privacy_function(int(p.get("sensitivity", 1))), p["epsilon"], "ε")
    value = float(x)
    return {"noisy": np.fromiter((mech(value) for _ in range(n)), dtype=np.float64, count=n)}


def geometric(job: Any, n: int) -> dict[str, np.ndarray]:
    """`AddGeometricNoise(alpha)(x)` on the integer x, once per draw."""
    x = neighbour(job)
    p = job.params
    _seed(job)
    mech = AddGeometricNoise(alpha=_scale(p, "epsilon"))
    _holds(mech.privacy_function(int(p.get("sensitivity", 1))), p["epsilon"], "ε")
    value = int(x)
    return {"noisy": np.fromiter((mech(value) for _ in range(n)), dtype=np.int64, count=n)}


def discrete_gaussian(job: Any, n: int) -> dict[str, np.ndarray]:
    """`AddDiscreteGaussianNoise(sigma_squared)(x)` on the integer x, once per draw."""
    x = neighbour(job)
    p = job.params
    _seed(job)
    sens = Fraction(str(p.get("sensitivity", 1)))
    mech = AddDiscreteGaussianNoise(sigma_squared=sens * sens / (2 * Fraction(str(p["rho"]))))
    _holds(mech.privacy_function(int(sens)), p["rho"], "ρ")
    value = int(x)
    return {"noisy": np.fromiter((mech(value) for _ in range(n)), dtype=np.int64, count=n)}


serve_mechanisms(
    {"laplace": laplace, "geometric": geometric, "discrete_gaussian": discrete_gaussian}
)
