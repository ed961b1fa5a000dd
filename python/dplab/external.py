"""dplab's helper for external stages (hand-off protocol 1).

dplab writes this file into every external program's working directory and puts that
directory first on PYTHONPATH, so a stage is five lines:

    from dplab_external import load
    job = load()                               # dplab.json: params, axes, seed, inputs
    rng = job.random                           # random.Random from the instance's seed
    rows = [{"x": rng.random() * job.params["scale"]} for _ in range(job.params["n"])]
    job.write(rows)                            # the instance's frame

It needs nothing beyond the standard library, and imports nothing else unless asked: inputs
are read from their CSV files (typed by the description; floats are written in shortest
round-trip form, so they come back exact) and rows or columns go out as CSV. Importing
polars costs ~0.7 s of CPU per instance on a small machine, more than most instances
compute, so it happens only for `job.polars()`, `job.arrow()` (pyarrow), `write(...,
format="parquet")`, or a polars/pyarrow/pandas frame handed to `write` (already imported).

What a stage uses:
- `job.params` (the stage's `params:` with axis values put in), `job.axes`, `job.stage`,
  `job.instance` (its label), `job.threads`;
- `job.seed`: the instance's 128-bit seed as an int; `job.random`: a `random.Random` seeded
  from it; `job.rng`: a numpy `Generator` (PCG64 through `SeedSequence(job.seed)`), needs numpy;
- `job.rows(name)`, `job.columns(name)`: an input as dicts; `job.polars(name)`,
  `job.arrow(name)`: as a polars DataFrame or pyarrow Table;
- `job.write(data)`: the frame (numpy arrays or a pyarrow table as binary columns, the
  fast path; rows, columns, or another library's frame); `job.artifact("f.svg")`: where to
  write an artifact kept with the instance;
- `serve(fn)`: calls `fn(job)` for the instance dplab hands over, or, in a stage with
  `worker: true`, for each instance of a stream of them (the program starts once per dplab
  thread instead of once per instance).
"""

import csv
import importlib
import json
import math
import os
import random
import re
import sys
import traceback

PROTOCOL = 1
WORKER_PROTOCOL = 1

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _optional(module):
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def load(path=None):
    """The job dplab described in `path` (default: $DPLAB_JSON)."""
    path = path or os.environ.get("DPLAB_JSON")
    if not path:
        raise RuntimeError(
            "DPLAB_JSON is not set: this program is meant to be run by dplab as an external stage"
        )
    with open(path, encoding="utf-8") as f:
        return Job(json.load(f))


def serve(fn):
    """Runs `fn(job)` for each instance dplab hands this program: the one instance of
    protocol 1, or — in a stage with `worker: true` — one instance after another (worker
    protocol 1, see the README): a request line on stdin names the instance's dplab.json,
    `fn` runs with the instance's directory as the current directory, and the answer goes
    back on the descriptor DPLAB_WORKER_ANSWERS names. An exception in `fn` fails that
    instance (its traceback is the instance's log) and the next one is served.

    Whatever `fn` keeps between calls (a global, a cache, numpy's global generator) must not
    change its results: draw from `job.rng` or `job.random` only. `dplab run --verify N`
    computes instances again in a fresh worker and fails the run when they differ."""
    if os.environ.get("DPLAB_WORKER") is None:
        fn(load())
        return
    if os.environ["DPLAB_WORKER"] != str(WORKER_PROTOCOL):
        raise RuntimeError(
            f"dplab speaks worker protocol {os.environ['DPLAB_WORKER']}, this helper "
            f"{WORKER_PROTOCOL}: use the dplab_external.py dplab wrote next to the program"
        )
    answers = os.fdopen(int(os.environ["DPLAB_WORKER_ANSWERS"]), "w", encoding="utf-8")
    home = os.getcwd()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            os.chdir(request["dir"])
            fn(load(request["json"]))
            answer = {"ok": True}
        except Exception as e:  # the instance fails; the worker serves the next one
            traceback.print_exc()
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"[:4000]}
        finally:
            os.chdir(home)
        sys.stdout.flush()
        sys.stderr.flush()
        answers.write(json.dumps(answer) + "\n")
        answers.flush()

class Job:
    """One instance: its parameters, seed, inputs and where its results go."""

    def __init__(self, description):
        version = description.get("protocol")
        if version != PROTOCOL:
            raise RuntimeError(
                f"dplab.json speaks protocol {version}, this helper protocol {PROTOCOL}: "
                "use the dplab_external.py dplab wrote next to dplab.json"
            )
        self.description = description
        self.stage = description["stage"]
        self.instance = description["instance"]
        self.params = description["params"]
        self.axes = description["axes"]
        self.threads = description["threads"]
        seed = description["seed"]
        # The 128-bit seed: hex is hi * 2**64 + lo.
        self.seed = int(seed["hex"], 16)
        self.random = random.Random(self.seed)
        self._rng = None
        self._inputs = description["inputs"]
        self.output = description["output"]
        self.artifacts_dir = description["artifacts_dir"]

    @property
    def rng(self):
        """A numpy Generator (PCG64) seeded from the instance's seed; needs numpy."""
        if self._rng is None:
            np = _optional("numpy")
            if np is None:
                raise RuntimeError(
                    "job.rng needs numpy, which is not installed; use job.random (random.Random), "
                    "or list numpy's interpreter in the stage's command"
                )
            self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.seed)))
        return self._rng

    @property
    def input_names(self):
        return [i["name"] for i in self._inputs]

    def _input(self, name):
        if name is None:
            if len(self._inputs) != 1:
                raise ValueError(
                    f"the stage has {len(self._inputs)} inputs ({', '.join(self.input_names)}): "
                    "name the one to read"
                )
            return self._inputs[0]
        for i in self._inputs:
            if i["name"] == name:
                return i
        raise KeyError(f"no input {name!r} (inputs: {', '.join(self.input_names)})")

    def rows(self, name=None):
        """An input as a list of dicts (column name -> value; None where missing)."""
        cols = self.columns(name)
        names = list(cols)
        n = len(cols[names[0]]) if names else 0
        return [{c: cols[c][r] for c in names} for r in range(n)]

    def columns(self, name=None):
        """An input as a dict of column name -> list of values (from its CSV, typed by the
        description: no library is imported)."""
        return _read_csv(self._input(name))

    def polars(self, name=None):
        """An input as a polars DataFrame; needs polars."""
        import polars as pl

        return pl.read_parquet(self._input(name)["parquet"])

    def arrow(self, name=None):
        """An input as a pyarrow Table; needs pyarrow."""
        import pyarrow.parquet as pq

        return pq.read_table(self._input(name)["parquet"])

    def artifact(self, name):
        """The path to write an artifact `name` to (e.g. "figure.svg")."""
        if not _NAME.match(name):
            raise ValueError(
                f"artifact name {name!r}: use letters, digits, '.', '_' and '-' (e.g. figure.svg)"
            )
        return os.path.join(self.artifacts_dir, name)

    def write(self, data, format="auto"):
        """Writes the instance's frame: a dict of numpy arrays, a pyarrow table, a list of
        dicts, a dict of lists, or a polars or pandas frame. `format` is "auto" (numpy
        arrays and pyarrow tables as binary columns, out.cols, with one write per column and
        no Python loop per row: the fast path for many rows; other rows and columns as CSV,
        with the standard library; a polars or pandas frame as Parquet, by that library),
        "cols", "parquet" or "csv". Call it once."""
        if format not in ("auto", "cols", "parquet", "csv"):
            raise ValueError(f"format {format!r}: use 'auto', 'cols', 'parquet' or 'csv'")
        if format in ("auto", "cols"):
            binary = _binary_columns(data)
            if binary is not None:
                return _write_cols(binary, self.output["cols"])
            if format == "cols":
                raise ValueError(
                    "format='cols' takes a dict of numpy arrays or a pyarrow table without missing values"
                )
        columns = _as_columns(data)
        if columns is None:
            # A frame object of a library: let it write itself.
            kind = type(data).__module__.split(".")[0]
            if format == "csv":
                if kind == "polars":
                    return data.write_csv(self.output["csv"])
                if kind == "pandas":
                    return data.to_csv(self.output["csv"], index=False)
                import pyarrow.csv as pc

                return pc.write_csv(data, self.output["csv"])
            if kind == "polars":
                return data.write_parquet(self.output["parquet"])
            if kind == "pandas":
                return data.to_parquet(self.output["parquet"], index=False)
            import pyarrow.parquet as pq

            # A file dplab reads once and deletes: no dictionary and no compression, which
            # cost a draw-heavy program (an audit's) a tenth of its time for nothing.
            return pq.write_table(
                data, self.output["parquet"], use_dictionary=False, compression="none"
            )
        if format == "parquet":
            pl = _optional("polars")
            if pl is not None:
                return pl.DataFrame(columns).write_parquet(self.output["parquet"])
            pa = _optional("pyarrow")
            if pa is not None:
                import pyarrow.parquet as pq

                return pq.write_table(
                    pa.table(columns), self.output["parquet"], use_dictionary=False, compression="none"
                )
            raise RuntimeError("writing Parquet needs polars or pyarrow; use format='csv'")
        _write_csv(columns, self.output["csv"])


def _binary_columns(data):
    """(name, 1-D numpy array) pairs for the binary format, or None when `data` is not
    numpy arrays or a pyarrow table, or has missing values (then CSV or Parquet takes it)."""
    kind = type(data).__module__.split(".")[0]
    if kind == "pyarrow" and hasattr(data, "column_names"):
        if any(c.null_count for c in data.columns):
            return None
        import numpy as np

        out = []
        for name, col in zip(data.column_names, data.columns):
            out.append((str(name), np.asarray(col.to_numpy())))
        return out
    if isinstance(data, dict) and any(type(v).__module__ == "numpy" for v in data.values()):
        import numpy as np

        return [(str(k), np.asarray(v)) for k, v in data.items()]
    return None


_COLS_MAGIC = b"DPLABCOL"
_COLS_VERSION = 1


def _write_cols(columns, path):
    """Writes `columns` in dplab's binary column format, version 1 (see the external-programs
    chapter): a JSON header, then each column's values back to back, one write per column."""
    import numpy as np

    lengths = {name: len(a) for name, a in columns}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"columns of different lengths: {lengths}")
    rows = next(iter(lengths.values()), 0)
    parts = []
    for name, a in columns:
        if a.ndim != 1:
            raise ValueError(f"column {name!r} has shape {a.shape}: give 1-D arrays (one value a row)")
        k = a.dtype.kind
        if k == "f":
            parts.append((name, "f64", np.ascontiguousarray(a, dtype="<f8")))
        elif k in "iu":
            if k == "u" and rows and int(a.max()) > 2**63 - 1:
                raise ValueError(f"column {name!r} holds integers above 2**63 - 1")
            parts.append((name, "i64", np.ascontiguousarray(a, dtype="<i8")))
        elif k == "b":
            parts.append((name, "bool", np.ascontiguousarray(a, dtype="u1")))
        elif k in "USO":
            values = a.tolist()
            if any(not isinstance(v, str) for v in values):
                raise ValueError(
                    f"column {name!r} holds values that are not text (None?): missing values go through format='parquet'"
                )
            encoded = [v.encode("utf-8") for v in values]
            offsets = np.zeros(rows + 1, dtype="<u8")
            np.cumsum([len(e) for e in encoded], out=offsets[1:])
            parts.append((name, "str", (offsets, b"".join(encoded))))
        else:
            raise ValueError(f"column {name!r} has numpy dtype {a.dtype}: use numbers, bools or text")
    header = json.dumps(
        {"rows": rows, "columns": [{"name": n, "type": t} for n, t, _ in parts]}
    ).encode("utf-8")
    with open(path, "wb") as f:
        f.write(_COLS_MAGIC)
        f.write(_COLS_VERSION.to_bytes(4, "little"))
        f.write(len(header).to_bytes(4, "little"))
        f.write(header)
        for _, t, values in parts:
            if t == "str":
                offsets, text = values
                f.write(offsets.data)
                f.write(text)
            else:
                # The array's own memory, written as it is: no copy, no loop.
                f.write(values.data)


def _as_columns(data):
    """A dict of lists from rows or columns; None for a library's frame object."""
    if isinstance(data, dict):
        lengths = {k: len(v) for k, v in data.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"columns of different lengths: {lengths}")
        return {str(k): list(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValueError("no rows to write (dplab needs the columns: pass a dict of empty lists)")
        names = list(data[0])
        out = {n: [] for n in names}
        for i, row in enumerate(data):
            if list(row) != names:
                raise ValueError(f"row {i} has columns {list(row)}, row 0 has {names}")
            for n in names:
                out[n].append(row[n])
        return out
    return None


def _cell(v):
    """A value as dplab reads it back from CSV (shortest exact text for floats)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return str(v)


def _write_csv(columns, path):
    names = list(columns)
    n = len(columns[names[0]]) if names else 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(names)
        for r in range(n):
            w.writerow([_cell(columns[c][r]) for c in names])


def _parse(text, kind):
    if text == "":
        return None
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    return text


def _read_csv(spec):
    kinds = {c["name"]: c["type"] for c in spec["columns"]}
    with open(spec["csv"], newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        out = {h: [] for h in header}
        for row in reader:
            for h, text in zip(header, row):
                out[h].append(_parse(text, kinds.get(h, "str")))
    return out
