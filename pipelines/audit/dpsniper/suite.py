"""DP-Sniper's benchmark mechanisms (Bichsel, Gehr, Drachsler-Cohen, Tsankov & Vechev,
"DP-Sniper: Black-Box Discovery of Differential Privacy Violations using Classifiers", IEEE S&P
2021) as one dplab external program, for `audit.epsilon` (pipelines/audit/dpsniper-suite.yaml).

Each mechanism is written here from its definition (the modules beside this file, one per
family, each saying what the mechanism is, what it claims and whether it is known to be broken):
  laplace.py     laplace, laplace_parallel
  geometric.py   truncated_geometric
  noisy_hist.py  noisy_hist1, noisy_hist2
  noisy_max.py   report_noisy_max1 … report_noisy_max4
  svt.py         svt1 … svt6, svt34_parallel, numerical_svt
  prefix_sum.py  prefix_sum
  rappor.py      rappor, one_time_rappor

Input: one frame (the audit's neighbouring input) with a column `value`, one row per query
answer. Parameters: `mechanism` (one of the names above), `samples` (draws, set by the audit),
and the mechanism's own: `epsilon`; `c`, `t` (SVT); `copies` (laplace_parallel); `n`
(truncated_geometric); `hashes`, `bits`, `f`, and `p`, `q` (RAPPOR).

Output: one row per draw: `sample` (0 … samples−1) and one float64 column per coordinate of the
release, named by the mechanism's module (⊥ and "stopped" encoded as numbers, as DP-Sniper does).

Randomness: only `job.rng` (numpy's PCG64 from the instance's seed), drawn in a fixed order, so
the same seed gives the same frame, bit for bit, in a worker or not. Every draw is vectorised
with numpy: loops run over queries or hash functions, never over draws.
"""

import numpy as np
from dplab_external import serve

import geometric
import laplace
import noisy_hist
import noisy_max
import prefix_sum
import rappor
import svt

MECHANISMS = {}
for _family in (laplace, geometric, noisy_hist, noisy_max, svt, prefix_sum, rappor):
    MECHANISMS.update(_family.MECHANISMS)


def _write(job, columns, n):
    """The frame as Parquet (pyarrow) when it is installed, else as CSV with every float in 17
    significant digits (exact round trip)."""
    try:
        import pyarrow as pa
    except ImportError:
        pa = None
    names = ["sample"] + [name for name, _ in columns]
    if pa is not None:
        arrays = [pa.array(np.arange(n, dtype=np.int64))]
        arrays += [pa.array(np.ascontiguousarray(v, dtype=np.float64)) for _, v in columns]
        job.write(pa.table(arrays, names=names))
        return
    table = np.column_stack([np.arange(n, dtype=np.float64)] + [v for _, v in columns])
    fmt = ["%d"] + ["%.17g"] * len(columns)
    np.savetxt(job.output["csv"], table, fmt=fmt, delimiter=",", header=",".join(names), comments="")


def release(job):
    p = job.params
    name = p["mechanism"]
    if name not in MECHANISMS:
        raise ValueError(f"no mechanism {name!r}; these are: {', '.join(sorted(MECHANISMS))}")
    n = int(p["samples"])
    (inp,) = job.input_names[:1]
    x = np.asarray(job.columns(inp)["value"], dtype=np.float64)
    columns = MECHANISMS[name](x, n, job.rng, p)
    for col, v in columns:
        if v.shape != (n,):
            raise AssertionError(f"{name}: column {col} has shape {v.shape}, not ({n},)")
    _write(job, columns, n)


serve(release)
