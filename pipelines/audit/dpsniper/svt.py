"""The sparse vector technique (SVT): the six variants Lyu, Su & Li compare ("Understanding the
Sparse Vector Technique for Differential Privacy", PVLDB 10(6), 2017, Algs. 1–6), SVT3 and SVT4
run side by side, and Numerical SVT (Wang, Ding, Wang, Kifer & Zhang, "Proving Differential
Privacy with Shadow Execution", PLDI 2019), as DP-Sniper's benchmark defines them (its
SparseVectorTechnique1–6, SVT34Parallel, NumericalSVT). StatDP (Ding et al., CCS'18) tested the
SVT variants on the same input patterns.

Mechanism. Query answers x of length `answers` (DP-Sniper: 10), each of sensitivity 1, neighbours
moving each answer by at most 1 (component-wise, `relation: linf` here), a threshold t and a
cutoff c (the number of "above" answers after which the mechanism stops). With ε₁ the budget of
the noisy threshold T = t + ρ and ε₂ = ε − ε₁ that of the query noise ν_i, answer i is "above"
when x_i + ν_i ≥ T:
  svt1: ε₁ = ε/2, ρ ~ Lap(1/ε₁), ν_i ~ Lap(2c/ε₂); releases 1 (above) or 0, and stops after c 1s;
  svt2: ε₁ = ε/2, ρ ~ Lap(c/ε₁), ν_i ~ Lap(2c/ε₂); as svt1, and draws a fresh ρ after each 1;
  svt3: ε₁ = ε/2, ρ ~ Lap(1/ε₁), ν_i ~ Lap(c/ε₂); releases the noisy answer x_i + ν_i when above;
  svt4: ε₁ = ε/4, ρ ~ Lap(1/ε₁), ν_i ~ Lap(1/ε₂); releases 1 or 0, stops after c 1s;
  svt5: ε₁ = ε/2, ρ ~ Lap(1/ε₁), no query noise (ν_i = 0); releases 1 or 0, never stops;
  svt6: ε₁ = ε/2, ρ ~ Lap(1/ε₁), ν_i ~ Lap(1/ε₂); releases 1 or 0, never stops;
  svt34_parallel: svt3 and svt4 on the same answers, with independent noise, both released;
  numerical_svt: ρ₁ ~ Lap(3/ε), ν_i ~ Lap(6c/ε) for the comparison x_i + ν_i ≥ t + ρ₁, and a
    second, independent noise η_i ~ Lap(3c/ε): releases x_i + η_i when above, 0 when not, and
    stops after c answers above.
DP-Sniper runs svt1 at c = 1, t = 0.5; svt2–svt6 at c = 1, t = 1; svt34_parallel and
numerical_svt at its constructors' defaults c = 2, t = 1; ε = 0.1 throughout.

Encoding of the release (DP-Sniper's, so that every output is a number): 1 = above, 0 = below,
−1 = not answered (after the cutoff) for svt1, svt2, svt4; svt3 releases the noisy answer when
above, −1000.0 for below (⊥) and −2000.0 after the cutoff; numerical_svt releases the noisy
answer when above, 0 when below and −1000.0 after the cutoff; svt5 and svt6 release 1 or 0.

Claimed guarantee and status. Every variant is claimed ε-DP. Lyu, Su & Li prove Algs. 1 and 2
ε-DP and show the others broken: Alg. 3 (releases noisy answers) is not ε′-DP for any finite ε′,
Alg. 4 is only ((1 + 6c)/4)·ε-DP (1.75ε at c = 1), Alg. 5 (no query noise) and Alg. 6 (no
cutoff) are not ε′-DP for any finite ε′. svt34_parallel contains svt3 and is broken with it.
Numerical SVT is proved ε-DP by Wang et al. (ShadowDP) and is not known to be broken.

Output columns: `q0` … `q{answers-1}`, one per query (svt34_parallel: `svt3_q0` …, then
`svt4_q0` …).
"""

import numpy as np


def _budget(p, share):
    eps = float(p["epsilon"])
    eps1 = eps * share
    return eps, eps1, eps - eps1


def _stopped(above, c):
    """True where an answer comes after the c-th "above" one (the mechanism has stopped)."""
    before = np.cumsum(above, axis=1) - above  # "above" answers strictly before each one
    return before >= c


def _names(x, prefix="q"):
    return [f"{prefix}{i}" for i in range(len(x))]


def _columns(names, out):
    return [(name, out[:, i]) for i, name in enumerate(names)]


def _flags(x, n, rng, p, share, rho_scale, nu_scale, cutoff=True):
    """svt1, svt4, svt5, svt6: 1 above, 0 below, −1 after the cutoff (when there is one)."""
    c, t = int(p["c"]), float(p["t"])
    _, eps1, eps2 = _budget(p, share)
    rho = rng.laplace(0.0, rho_scale(c, eps1), size=(n, 1))
    values = x[None, :]
    if nu_scale is not None:
        values = values + rng.laplace(0.0, nu_scale(c, eps2), size=(n, len(x)))
    above = values >= t + rho
    out = above.astype(np.float64)
    if cutoff:
        out[_stopped(above, c)] = -1.0
    return out


def svt1(x, n, rng, p):
    out = _flags(x, n, rng, p, 0.5, lambda c, e1: 1 / e1, lambda c, e2: 2 * c / e2)
    return _columns(_names(x), out)


def svt2(x, n, rng, p):
    c, t = int(p["c"]), float(p["t"])
    _, eps1, eps2 = _budget(p, 0.5)
    noisy = x[None, :] + rng.laplace(0.0, 2 * c / eps2, size=(n, len(x)))
    rho = rng.laplace(0.0, c / eps1, size=n)
    above = np.empty((n, len(x)), dtype=bool)
    for i in range(len(x)):  # over the queries; every draw at once
        above[:, i] = noisy[:, i] >= t + rho
        fresh = rng.laplace(0.0, c / eps1, size=n)
        rho = np.where(above[:, i], fresh, rho)  # a new threshold after each "above"
    out = above.astype(np.float64)
    out[_stopped(above, c)] = -1.0
    return _columns(_names(x), out)


def _svt3(x, n, rng, p):
    c, t = int(p["c"]), float(p["t"])
    _, eps1, eps2 = _budget(p, 0.5)
    rho = rng.laplace(0.0, 1 / eps1, size=(n, 1))
    noisy = x[None, :] + rng.laplace(0.0, c / eps2, size=(n, len(x)))
    above = noisy >= t + rho
    out = np.where(above, noisy, -1000.0)
    out[_stopped(above, c)] = -2000.0
    return out


def svt3(x, n, rng, p):
    return _columns(_names(x), _svt3(x, n, rng, p))


def _svt4(x, n, rng, p):
    return _flags(x, n, rng, p, 0.25, lambda c, e1: 1 / e1, lambda c, e2: 1 / e2)


def svt4(x, n, rng, p):
    return _columns(_names(x), _svt4(x, n, rng, p))


def svt5(x, n, rng, p):
    out = _flags(x, n, rng, p, 0.5, lambda c, e1: 1 / e1, None, cutoff=False)
    return _columns(_names(x), out)


def svt6(x, n, rng, p):
    out = _flags(x, n, rng, p, 0.5, lambda c, e1: 1 / e1, lambda c, e2: 1 / e2, cutoff=False)
    return _columns(_names(x), out)


def svt34_parallel(x, n, rng, p):
    three = _columns(_names(x, "svt3_q"), _svt3(x, n, rng, p))
    four = _columns(_names(x, "svt4_q"), _svt4(x, n, rng, p))
    return three + four


def numerical_svt(x, n, rng, p):
    eps, c, t = float(p["epsilon"]), int(p["c"]), float(p["t"])
    rho1 = rng.laplace(0.0, 3 / eps, size=(n, 1))
    nu = rng.laplace(0.0, 6 * c / eps, size=(n, len(x)))
    eta = rng.laplace(0.0, 3 * c / eps, size=(n, len(x)))
    above = x[None, :] + nu >= t + rho1
    out = np.where(above, x[None, :] + eta, 0.0)
    out[_stopped(above, c)] = -1000.0
    return _columns(_names(x), out)


MECHANISMS = {
    "svt1": svt1,
    "svt2": svt2,
    "svt3": svt3,
    "svt4": svt4,
    "svt5": svt5,
    "svt6": svt6,
    "svt34_parallel": svt34_parallel,
    "numerical_svt": numerical_svt,
}
