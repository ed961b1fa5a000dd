"""Report Noisy Max that also releases its noisy maximum: a broken variant for the audit.

Report Noisy Max (Laplace noise of scale 2Δu/ε on each utility, report the arg-max) is ε-DP
when only the arg-max is released. This program also releases the noisy maximum itself, which
is not ε-DP: when every utility moves up by Δu, the maximum of k noisy values moves with all of
them, and in its lower tail (all k noisy values low) the density ratio approaches e^(kε/2).

Input: one frame with columns `candidate` and `utility` (the audit's neighbouring input).
Parameters: epsilon, sensitivity (Δu, default 1), samples (draws, set by the audit).
Output: `samples` rows (sample, winner, value): the arg-max's index and the noisy maximum.
The draws come from the instance's seed only (random.Random), so a run is reproducible.
"""

import math

from dplab_external import load

job = load()
eps = float(job.params["epsilon"])
sens = float(job.params.get("sensitivity", 1))
samples = int(job.params["samples"])
util = [float(r["utility"]) for r in job.rows()]
scale = 2 * sens / eps
rng = job.random

winner, value = [], []
for _ in range(samples):
    best, top = -1, -math.inf
    for i, u in enumerate(util):
        # Laplace by inversion: u ∈ (−½, ½), noise = −b·sgn(u)·ln(1 − 2|u|).
        v = rng.random() - 0.5
        noisy = u - scale * math.copysign(1.0, v) * math.log(1.0 - 2.0 * abs(v))
        if noisy > top:
            best, top = i, noisy
    winner.append(best)
    value.append(top)

job.write({"sample": list(range(samples)), "winner": winner, "value": value}, format="csv")
