"""Permute-and-flip (McKenna & Sheldon 2020) as a dplab external stage.

Input: one frame with a `candidate` and a `score` column. Parameters: `epsilon`,
`sensitivity` (default 1), `samples` (releases to draw). Output: per candidate, its score,
how often it was selected, and that count's frequency.

PF walks the candidates in a random order and stops at the first coin that lands heads,
candidate r's coin having probability exp(ε (q_r − q*) / (2Δ)); the best candidate's coin
always lands heads. Standard library only: the draws come from `job.random`.
"""
import math

from dplab_external import load

job = load()
eps = job.params["epsilon"]
sens = job.params.get("sensitivity", 1)
n = job.params["samples"]
data = job.columns()
names, scores = data["candidate"], data["score"]
best = max(scores)
heads = [math.exp(eps * (q - best) / (2 * sens)) for q in scores]
rng = job.random
order = list(range(len(scores)))
counts = [0] * len(scores)
for _ in range(n):
    rng.shuffle(order)
    for r in order:
        if rng.random() < heads[r]:
            counts[r] += 1
            break
job.write({"candidate": names, "score": scores, "count": counts,
           "frequency": [c / n for c in counts]})
