"""The Laplace mechanism, alone and as several independent copies (DP-Sniper's LaplaceMechanism
and LaplaceParallel).

Mechanism. One query answer x (the identity query, sensitivity 1 under DP-Sniper's
single-entry neighbourhood, `relation: l1` here) is released as x + Lap(1/ε).
LaplaceParallel releases `copies` such draws of the same answer, each with its own noise at ε
per copy (DP-Sniper: 20 copies at ε = 0.005).

Claimed guarantee. ε-DP for one release (Dwork & Roth 2014, Thm 3.6); the copies together are
(copies·ε)-DP by sequential composition (20 × 0.005 = 0.1). Not known to be broken: both are in
DP-Sniper's suite as correct mechanisms, whose lower bound should approach the claim from below.
(Drawn here from numpy's double-precision sampler; the floating-point flaw of textbook Laplace
samplers, Mironov CCS'12, is a separate question, see audit-mechanisms.yaml.)

Output columns: `noisy` (laplace); `noisy0` … `noisy{copies-1}` (laplace_parallel).
"""


def _one(x):
    if len(x) != 1:
        raise ValueError(f"the Laplace mechanisms take one query answer, got {len(x)}")
    return float(x[0])


def laplace(x, n, rng, p):
    eps = float(p["epsilon"])
    return [("noisy", _one(x) + rng.laplace(0.0, 1.0 / eps, size=n))]


def laplace_parallel(x, n, rng, p):
    eps, copies = float(p["epsilon"]), int(p["copies"])
    out = _one(x) + rng.laplace(0.0, 1.0 / eps, size=(n, copies))
    return [(f"noisy{j}", out[:, j]) for j in range(copies)]


MECHANISMS = {
    "laplace": laplace,
    "laplace_parallel": laplace_parallel,
}
