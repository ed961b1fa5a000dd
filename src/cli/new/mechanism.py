"""__NAME__'s mechanism: Laplace noise on every count, clamped at 0.

dplab runs this once per instance in a private working directory and hands it, through
`dplab_external` (a helper it writes beside this file):
- `job.params`: the stage's `params:` with the instance's axis values put in;
- `job.rng`: a numpy Generator seeded from the instance's seed. Draw every random number from
  it: the same seed then gives the same bytes for any --jobs and any number of shards, and
  `dplab run --verify N` checks that it does;
- `job.columns()`: the input frame (here the stage `histogram`) as a dict of lists;
- `job.write(...)`: the instance's frame, whose columns the stage lists in `columns:`.
"""

import numpy as np

from dplab_external import load

job = load()
eps = float(job.params["epsilon"])
sensitivity = float(job.params.get("sensitivity", 1))
histogram = job.columns()
count = np.asarray(histogram["count"], dtype=float)

noisy = count + job.rng.laplace(0.0, sensitivity / eps, size=count.size)
# Clamping is post-processing: the release stays ε-DP.
noisy = np.maximum(noisy, 0.0)

job.write({"bin": histogram["bin"], "count": histogram["count"], "noisy": noisy.tolist()})
