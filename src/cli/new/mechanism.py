"""__NAME__'s mechanism: Laplace noise on every count, clamped at 0.

dplab runs this as a worker (`worker: true`: the program starts once per dplab thread and
serves instance after instance) and hands each instance, through `dplab_external` (a helper it
writes beside this file):
- `job.params`: the stage's `params:` with the instance's axis values put in; `samples` (when
  given: an audit sets it) is how many releases to draw, each numbered in a `sample` column;
- `job.rng`: a numpy Generator seeded from the instance's seed. Draw every random number from
  it: the same seed then gives the same bytes for any --jobs and any number of shards, and
  `dplab run --verify N` checks that it does;
- `job.columns()`: the input frame (the stage `histogram`, or the audit's neighbouring
  histogram) as a dict of lists;
- `job.write(...)`: the instance's frame, whose columns the stage lists in `columns:`. Handed
  numpy arrays, the helper writes them as binary columns, with no Python loop per row: an
  audit's 10⁶ releases cost what drawing them costs.
"""

import numpy as np

from dplab_external import serve


def release(job):
    eps = float(job.params["epsilon"])
    sensitivity = float(job.params.get("sensitivity", 1))
    samples = int(job.params.get("samples", 1))
    histogram = job.columns()
    count = np.asarray(histogram["count"], dtype=float)
    bins = count.size

    noisy = count + job.rng.laplace(0.0, sensitivity / eps, size=(samples, bins))
    # Clamping is post-processing: the release stays ε-DP.
    noisy = np.maximum(noisy, 0.0)

    job.write(
        {
            "sample": np.repeat(np.arange(samples), bins),
            "bin": np.tile(np.asarray(histogram["bin"]), samples),
            "count": np.tile(np.asarray(histogram["count"]), samples),
            "noisy": noisy.ravel(),
        }
    )


serve(release)
