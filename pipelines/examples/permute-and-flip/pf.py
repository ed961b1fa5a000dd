"""Permute-and-flip (McKenna & Sheldon, NeurIPS 2020) as a dplab external stage.

Input: one frame with columns `candidate` and `utility` (a `load.table` stage).
Parameters: epsilon, sensitivity (Δu, default 1), samples (Monte-Carlo draws).
Output: the columns of `mechanism.select` (method, candidate, utility, probability, count,
frequency), so dplab's `evaluate.utility_tail` evaluates it like a built-in mechanism.

With p_r = exp(ε(u_r − u*)/(2Δu)), PF visits the candidates in a uniformly random order and
stops at the first r for which a coin of bias p_r comes up heads (the best has p = 1, so it
always stops). Its exact output distribution is
    Pr[r] = p_r ∫₀¹ Π_{j≠r} (1 − p_j t) dt,
computed here by expanding the product as a polynomial in t.
"""

import math

from dplab_external import serve


def exact(p, r):
    """Pr[r] = p_r ∫₀¹ Π_{j≠r}(1 − p_j t) dt, by expanding the product as a polynomial."""
    poly = [1.0]  # coefficients of Π_{j≠r}(1 − p_j t), lowest degree first
    for j, pj in enumerate(p):
        if j != r:
            poly = [a - pj * b for a, b in zip(poly + [0.0], [0.0] + poly)]
    return p[r] * math.fsum(c / (k + 1) for k, c in enumerate(poly))


def release(job):
    eps = float(job.params["epsilon"])
    sens = float(job.params.get("sensitivity", 1))
    samples = int(job.params["samples"])
    rows = job.rows()
    cands = [str(r["candidate"]) for r in rows]
    util = [float(r["utility"]) for r in rows]
    best = max(util)
    p = [math.exp(eps * (u - best) / (2 * sens)) for u in util]
    rng = job.random
    order = list(range(len(cands)))
    count = [0] * len(cands)
    for _ in range(samples):
        rng.shuffle(order)
        for r in order:
            if rng.random() < p[r]:
                count[r] += 1
                break
    job.write(
        {
            "method": ["permute_and_flip"] * len(cands),
            "candidate": cands,
            "utility": util,
            "probability": [exact(p, r) for r in range(len(cands))],
            "count": count,
            "frequency": [c / samples if samples else float("nan") for c in count],
        },
        format="csv",
    )


# One instance per process, or — with `worker: true` in the stage, as here — one process per
# dplab thread serving instance after instance: it keeps nothing between them.
serve(release)
