"""Reading a results directory (`ROOT/<pipeline>/`): frames, provenance, audits, figures.

Nothing here needs the binary. Frames come back in polars (the default when installed), pandas
or pyarrow, each imported only when asked for.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Literal

from ._base import DplabError

__all__ = ["AUDIT_KIND", "PROVENANCE", "Figure", "Lib", "Results", "RunSet", "open"]

Lib = Literal["polars", "pandas", "pyarrow"]
"""A frame library: `"polars"`, `"pandas"` or `"pyarrow"`."""

AUDIT_KIND = "audit.epsilon"
"""The stage kind whose rows :meth:`Results.audits` gathers."""

PROVENANCE = (
    "instance",
    "rep",
    "seed",
    "key",
    "computed_at",
    "build",
    "from_store",
    "environment",
)
"""The columns `frame(..., provenance=True)` adds, in order (see :meth:`Results.frame`)."""

# The instances table: its columns and their types, as instances.parquet holds them.
_INSTANCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("stage", "str"),
    ("instance", "str"),
    ("axes", "str"),
    ("rep", "int"),
    ("seed", "str"),
    ("key", "str"),
    ("content_key", "str"),
    ("first_row", "int"),
    ("rows", "int"),
    ("from_store", "bool"),
    ("computed_at", "str"),
    ("build", "str"),
    ("seconds", "float"),
    ("kept", "bool"),
    ("environment", "str"),
)
_TYPES = dict(_INSTANCE_COLUMNS)

Columns = dict[str, list[Any]]


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _lib(lib: Lib | None) -> Lib:
    """Choose the library: the one asked for, else polars, pandas (with pyarrow), pyarrow."""
    if lib is not None:
        if lib not in ("polars", "pandas", "pyarrow"):
            raise ValueError(f"lib={lib!r}: expected 'polars', 'pandas' or 'pyarrow'")
        needs = ("pandas", "pyarrow") if lib == "pandas" else (lib,)
        for m in needs:
            if not _has(m):
                raise ImportError(
                    f"lib={lib!r} needs {m}: pip install {m} (or dplab-pipelines[{lib}])"
                )
        return lib
    if _has("polars"):
        return "polars"
    if _has("pandas") and _has("pyarrow"):
        return "pandas"
    if _has("pyarrow"):
        return "pyarrow"
    raise ImportError(
        "reading frames needs polars, pandas (with pyarrow) or pyarrow: "
        "pip install polars (or dplab-pipelines[polars])"
    )


def _import(name: str) -> Any:
    return importlib.import_module(name)


# --- Parquet, in whichever library is there ------------------------------------------------


def _parquet_meta(path: Path) -> tuple[dict[str, str], int]:
    """Read a Parquet file's key-value metadata and its row count."""
    if _has("pyarrow"):
        pq = _import("pyarrow.parquet")
        meta = pq.ParquetFile(path).metadata
        kv = {
            k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
            for k, v in (meta.metadata or {}).items()
        }
        return kv, int(meta.num_rows)
    if _has("polars"):
        pl = _import("polars")
        kv = dict(pl.read_parquet_metadata(path)) if hasattr(pl, "read_parquet_metadata") else {}
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        return {str(k): str(v) for k, v in kv.items()}, int(rows)
    raise ImportError("reading Parquet metadata needs pyarrow or polars: pip install pyarrow")


def _read_parquet(path: Path, lib: Lib) -> Any:
    """Read a Parquet file as a frame, with the types it holds (nullable integers stay integers)."""
    if lib == "polars":
        return _import("polars").read_parquet(path)
    table = _import("pyarrow.parquet").read_table(path)
    if lib == "pyarrow":
        return table
    return _to_pandas(table)


def _to_pandas(table: Any) -> Any:
    """Convert a pyarrow table to pandas; integer columns with nulls as nullable integers."""
    pa = _import("pyarrow")
    pd = _import("pandas")
    df = table.to_pandas()
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_integer(col.type) and col.null_count > 0:
            df[name] = pd.array(col.to_pylist(), dtype="Int64")
    return df


def _frame(columns: Columns, types: Mapping[str, str], lib: Lib) -> Any:
    """Make a frame of Python columns in `lib`, typed as `types` says (str, int, float, bool)."""
    if lib == "polars":
        pl = _import("polars")
        kinds = {"str": pl.Utf8, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}
        return pl.DataFrame(columns, schema={n: kinds[types[n]] for n in columns})
    pa = _import("pyarrow")
    kinds = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    table = pa.table({n: pa.array(v, type=kinds[types[n]]) for n, v in columns.items()})
    return table if lib == "pyarrow" else _to_pandas(table)


def _height(frame: Any, lib: Lib) -> int:
    return int(frame.num_rows if lib == "pyarrow" else len(frame))


def _names(frame: Any, lib: Lib) -> list[str]:
    if lib == "pyarrow":
        return list(frame.column_names)
    return [str(c) for c in frame.columns]


def _append(frame: Any, extra: Any, lib: Lib) -> Any:
    """`extra`'s columns after `frame`'s (the same height)."""
    if lib == "polars":
        return _import("polars").concat([frame, extra], how="horizontal")
    if lib == "pyarrow":
        for name in extra.column_names:
            frame = frame.append_column(name, extra.column(name))
        return frame
    pd = _import("pandas")
    return pd.concat([frame.reset_index(drop=True), extra.reset_index(drop=True)], axis=1)


def _take(frame: Any, indices: list[int], lib: Lib) -> Any:
    """Take the rows of `frame` at `indices`, in that order."""
    if lib == "polars":
        pl = _import("polars")
        return frame[pl.Series(indices, dtype=pl.UInt32 if len(frame) < 2**32 else pl.UInt64)]
    if lib == "pyarrow":
        pa = _import("pyarrow")
        return frame.take(pa.array(indices, type=pa.int64()))
    return frame.iloc[indices].reset_index(drop=True)


def _prepend(frame: Any, name: str, value: str, lib: Lib) -> Any:
    """Insert a first column `name` holding `value` on every row."""
    if lib == "polars":
        pl = _import("polars")
        return frame.select(pl.lit(value, dtype=pl.Utf8).alias(name), pl.all())
    if lib == "pyarrow":
        pa = _import("pyarrow")
        return frame.add_column(0, name, pa.array([value] * frame.num_rows, type=pa.string()))
    frame = frame.copy()
    frame.insert(0, name, value)
    return frame


def _stack(frames: list[Any], lib: Lib) -> Any:
    """Frames one under the other; a column one lacks is null there."""
    if lib == "polars":
        return _import("polars").concat(frames, how="diagonal_relaxed")
    if lib == "pandas":
        return _import("pandas").concat(frames, ignore_index=True)
    pa = _import("pyarrow")
    try:
        return pa.concat_tables(frames, promote_options="permissive")
    except TypeError:  # pyarrow < 14
        return pa.concat_tables(frames, promote=True)


def _rows(frame: Any, lib: Lib) -> list[dict[str, Any]]:
    """Return a frame's rows as dicts."""
    if lib == "polars":
        return list(frame.to_dicts())
    if lib == "pyarrow":
        return list(frame.to_pylist())
    return list(frame.astype(object).where(frame.notna(), None).to_dict("records"))


# --- Labels --------------------------------------------------------------------------------


def _axes_of(label: str, axes: Sequence[str], values: Mapping[str, Any]) -> dict[str, Any]:
    """Read `{axis: value}` from a label `a=1, b=x` (split before each `axis=`).

    Values are their canonical text, as instances.parquet writes them; a record axis's value
    is its record from the manifest's `axes` (`values`), found by its `name`.
    """
    if not label or not axes:
        return {}
    names = "|".join(re.escape(a) for a in sorted(axes, key=len, reverse=True))
    starts = [m for m in re.finditer(rf"(?:^|, )({names})=", label)]
    found: dict[str, Any] = {}
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(label)
        name, text = m.group(1), label[m.end() : end]
        found[name] = text
        for value in values.get(name) or []:
            if isinstance(value, dict) and str(value.get("name")) == text:
                found[name] = value
                break
    return found


def _build_text(build: Any) -> str:
    """Format a manifest's `build` as a store entry's `computed.by` writes it."""
    if not isinstance(build, dict):
        return ""
    parts = [
        str(build.get("version", "")),
        str(build.get("commit", ""))[:12],
        str(build.get("binary_sha256", ""))[:12],
    ]
    return " ".join(p for p in parts if p)


# --- Figures -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """An SVG figure of a results directory; notebooks show it as it is."""

    name: str
    """Its file name without `.svg`."""
    path: Path

    @property
    def svg(self) -> str:
        """The SVG text."""
        return self.path.read_text(encoding="utf-8")

    def _repr_svg_(self) -> str:
        """Return the SVG, for IPython's rich display."""
        return self.svg

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a copy of the SVG to `path` (a directory: `path/<name>.svg`); returns it."""
        target = Path(path)
        if target.is_dir():
            target = target / self.path.name
        target.write_bytes(self.path.read_bytes())
        return target


# --- Results -------------------------------------------------------------------------------


class Results:
    """One pipeline's results directory (`ROOT/<pipeline>/`), as `dplab run` wrote it.

    Reading it needs no binary: frames are the `<stage>.parquet` files, provenance comes from
    `instances.parquet` (or, written by an older dplab without it, from `manifest.json` and
    the Parquet files' metadata).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open the results directory `path` (the one holding `manifest.json`)."""
        self.path: Path = Path(path).resolve()
        """The directory."""
        manifest = self.path / "manifest.json"
        if not manifest.is_file():
            raise FileNotFoundError(f"{self.path}: no manifest.json: not a dplab results directory")
        value = json.loads(manifest.read_text(encoding="utf-8"))
        if not isinstance(value, dict):
            raise DplabError(f"{manifest}: not a dplab manifest (not a JSON object)")
        self.manifest: dict[str, Any] = value
        """`manifest.json`, as a dict (fields missing in older manifests are absent)."""
        self._instances: list[dict[str, Any]] | None = None

    def __repr__(self) -> str:
        """`Results('path')`."""
        return f"Results({str(self.path)!r})"

    def __fspath__(self) -> str:
        """Return the directory, so a Results can be passed where a path is expected."""
        return str(self.path)

    @property
    def name(self) -> str:
        """The pipeline's name (the directory's name)."""
        pipeline = self.manifest.get("pipeline")
        name = pipeline.get("name") if isinstance(pipeline, dict) else None
        return str(name) if name else self.path.name

    @property
    def title(self) -> str:
        """The pipeline's title (empty when it has none)."""
        pipeline = self.manifest.get("pipeline")
        return str(pipeline.get("title", "")) if isinstance(pipeline, dict) else ""

    def _entries(self) -> list[dict[str, Any]]:
        stages = self.manifest.get("stages")
        return [s for s in stages if isinstance(s, dict)] if isinstance(stages, list) else []

    @property
    def stages(self) -> list[str]:
        """The names of every stage, in the manifest's order."""
        return [str(s.get("name", "")) for s in self._entries()]

    def stage(self, name: str) -> dict[str, Any]:
        """Return the manifest's entry for stage `name` (kind, axes, instances, params, …)."""
        for s in self._entries():
            if s.get("name") == name:
                return s
        raise KeyError(f"{self.name}: no stage {name!r} (stages: {', '.join(self.stages)})")

    def _parquet(self, stage: str) -> Path:
        entry = self.stage(stage)
        path = self.path / f"{stage}.parquet"
        if not path.is_file():
            why = "it is not stored (`store: false`)" if entry.get("stored") is False else ""
            raise FileNotFoundError(
                f"{self.name}: stage {stage!r} has no frame here ({path.name})"
                + (f": {why}" if why else "")
            )
        return path

    # -- frames --

    def frame(self, stage: str, lib: Lib | None = None, provenance: bool = False) -> Any:
        """Stage `stage`'s frame, from `<stage>.parquet`, with the types it holds.

        Args:
            stage: the stage's name.
            lib: `"polars"` (the default when installed), `"pandas"` or `"pyarrow"`.
            provenance: add, on every row, where it came from: `instance` (its instance's
                label), `rep`, `seed` (32 hex digits), `key` (its store key), `computed_at`
                (RFC 3339 UTC, null when not recorded), `build` (version, commit and binary
                sha256 of the dplab that computed it), `from_store` and `environment` (JSON:
                what the stage's probes printed, e.g. the Python and numpy versions). The axis
                values are columns of every frame already. A name the frame has already gets
                the prefix `dplab_` (`dplab_key`), except `rep` when the stage has a `rep`
                axis: that column is the instance's repetition already, and is not repeated.

        Returns:
            A polars or pandas DataFrame, or a pyarrow Table.

        """
        use = _lib(lib)
        frame = _read_parquet(self._parquet(stage), use)
        if not provenance:
            return frame
        instances = [i for i in self._instance_rows() if i["stage"] == stage]
        instances.sort(key=lambda i: i["first_row"] if i["first_row"] is not None else -1)
        height = _height(frame, use)
        if any(i["rows"] is None for i in instances) or sum(i["rows"] for i in instances) != height:
            raise DplabError(
                f"{self.name}: which rows of {stage}.parquet are whose instance is not recorded "
                "(no instances.parquet, and the file lists no instances: more than 100 000?); "
                "rerun with a newer dplab to get instances.parquet"
            )
        indices: list[int] = []
        for n, inst in enumerate(instances):
            indices.extend([n] * inst["rows"])
        existing = set(_names(frame, use))
        axes = self.stage(stage).get("axes")
        has_rep = isinstance(axes, list) and "rep" in axes
        columns: Columns = {}
        types: dict[str, str] = {}
        for name in PROVENANCE:
            if name in existing:
                if name == "rep" and has_rep:
                    continue
                target = "dplab_" + name
            else:
                target = name
            columns[target] = [i[name] for i in instances]
            types[target] = _TYPES[name]
        extra = _take(_frame(columns, types, use), indices, use)
        return _append(frame, extra, use)

    def frames(self, lib: Lib | None = None, provenance: bool = False) -> dict[str, Any]:
        """Every stored stage's frame, by stage name (see :meth:`frame`)."""
        return {
            s: self.frame(s, lib=lib, provenance=provenance)
            for s in self.stages
            if (self.path / f"{s}.parquet").is_file()
        }

    # -- instances --

    def _instance_rows(self) -> list[dict[str, Any]]:
        if self._instances is None:
            file = self.path / "instances.parquet"
            if file.is_file():
                use: Lib = "pyarrow" if _has("pyarrow") else _lib(None)
                self._instances = _rows(_read_parquet(file, use), use)
            else:
                self._instances = self._instances_from_manifest()
        return self._instances

    def _instances_from_manifest(self) -> list[dict[str, Any]]:
        """Build the instances table of a results directory without instances.parquet."""
        out: list[dict[str, Any]] = []
        build = _build_text(self.manifest.get("build"))
        resolved = self.manifest.get("axes")
        axis_values = resolved if isinstance(resolved, dict) else {}
        for entry in self._entries():
            name = str(entry.get("name", ""))
            raw = entry.get("seeds")
            seeds = [s for s in raw if isinstance(s, dict)] if isinstance(raw, list) else []
            axes = [str(a) for a in entry.get("axes") or [] if isinstance(a, str)]
            environment = entry.get("environment")
            env = json.dumps(
                environment if isinstance(environment, dict) else {},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            rows = self._rows_per_instance(entry, seeds)
            first = 0
            for seed, n in zip(seeds, rows):
                label = str(seed.get("instance", ""))
                values = _axes_of(label, axes, axis_values)
                computed = seed.get("computed")
                computed = computed if isinstance(computed, dict) else None
                rep_text = values.get("rep")
                rep = int(rep_text) if isinstance(rep_text, str) and rep_text.isdigit() else None
                out.append(
                    {
                        "stage": name,
                        "instance": label,
                        "axes": json.dumps(values, ensure_ascii=False, separators=(",", ":")),
                        "rep": rep,
                        "seed": str(seed.get("seed", "")),
                        "key": str(seed.get("key", "")),
                        "content_key": seed.get("content_key")
                        if isinstance(seed.get("content_key"), str)
                        else None,
                        "first_row": first if n is not None else None,
                        "rows": n,
                        "from_store": computed is not None,
                        "computed_at": str(computed.get("at")) if computed else None,
                        "build": str(computed.get("by", "")) if computed else build,
                        "seconds": float(computed["seconds"])
                        if computed and isinstance(computed.get("seconds"), (int, float))
                        else None,
                        "kept": entry.get("kept") is not None,
                        "environment": env,
                    }
                )
                first += n or 0
        return out

    def _rows_per_instance(
        self, entry: dict[str, Any], seeds: list[dict[str, Any]]
    ) -> list[int | None]:
        """Each instance's rows in `<stage>.parquet`, from its metadata (None: unknown)."""
        path = self.path / f"{entry.get('name', '')}.parquet"
        if entry.get("stored") is False or not path.is_file():
            return [0 if entry.get("stored") is False else None for _ in seeds]
        kv, total = _parquet_meta(path)
        if len(seeds) == 1:
            return [total]
        listed = kv.get("dplab.instances")
        if listed:
            try:
                pairs = json.loads(listed)
            except ValueError:
                pairs = None
            if isinstance(pairs, list) and len(pairs) == len(seeds):
                keys = [str(p[0]) for p in pairs]
                counts = [int(p[1]) for p in pairs]
                if keys == [str(s.get("key", "")) for s in seeds]:
                    return list(counts)
                by_key = dict(zip(keys, counts))
                if len(by_key) == len(keys):
                    return [by_key.get(str(s.get("key", ""))) for s in seeds]
        return [None for _ in seeds]

    def instances(self, lib: Lib | None = None) -> Any:
        """Return the instances table: one row per instance of every stage.

        Columns: `stage`, `instance` (its label), `axes` (JSON object), `rep`, `seed`, `key`,
        `content_key`, `first_row` and `rows` (its rows in `<stage>.parquet`), `from_store`,
        `computed_at`, `build`, `seconds`, `kept`, `environment` (JSON object). Read from
        `instances.parquet`; for a directory an older dplab wrote, built from `manifest.json`
        and the frames' Parquet metadata (there `computed_at` and `seconds` are known only for
        instances taken from the store, and `rows` is null where no metadata lists them).
        """
        use = _lib(lib)
        file = self.path / "instances.parquet"
        if file.is_file():
            return _read_parquet(file, use)
        rows = self._instance_rows()
        columns: Columns = {n: [r[n] for r in rows] for n, _ in _INSTANCE_COLUMNS}
        return _frame(columns, _TYPES, use)

    # -- audits --

    def _audit_stages(self) -> list[str]:
        return [
            str(s.get("name"))
            for s in self._entries()
            if s.get("kind") == AUDIT_KIND and (self.path / f"{s.get('name')}.parquet").is_file()
        ]

    def audits(self, lib: Lib | None = None) -> Any:
        """Every row of every `audit.epsilon` stage, with a first column `stage`.

        Each row is one audit: the claim (`epsilon`, `delta`), the lower bound `epsilon_lb`
        at `confidence`, the `samples`, the neighbouring `pair` and `event`, and `violation`
        (the bound exceeds the claim: not ε-DP as claimed) and `detectable`. A column one stage
        lacks (an axis) is null in the others' rows. No audit stage: an empty frame.
        """
        use = _lib(lib)
        frames = [
            _prepend(_read_parquet(self._parquet(s), use), "stage", s, use)
            for s in self._audit_stages()
        ]
        if not frames:
            return _frame({"stage": []}, {"stage": "str"}, use)
        return _stack(frames, use)

    def _violations(self) -> tuple[int, int]:
        """Audits in all and those flagged, from the CSV files (no frame library needed)."""
        total = flagged = 0
        for s in self._audit_stages():
            path = self.path / f"{s}.csv"
            if not path.is_file():
                continue
            with path.open(newline="", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    total += 1
                    flagged += row.get("violation", "").strip().lower() == "true"
        return total, flagged

    # -- figures and the report --

    def figures(self) -> list[str]:
        """List the names of the SVG figures (`<name>.svg`), sorted."""
        return sorted(p.stem for p in self.path.glob("*.svg"))

    def figure(self, name: str) -> Figure:
        """Return the figure `<name>.svg` (a plot stage's name); shown as SVG in notebooks."""
        path = self.path / (name if name.endswith(".svg") else f"{name}.svg")
        if not path.is_file():
            raise FileNotFoundError(
                f"{self.name}: no figure {name!r} (figures: {', '.join(self.figures()) or 'none'})"
            )
        return Figure(name=path.stem, path=path)

    def report(self) -> Path:
        """Return the HTML report of the results root (`ROOT/index.html`).

        Raises FileNotFoundError when it was not written: `dplab report ROOT` writes it.
        """
        page = self.path.parent / "index.html"
        if not page.is_file():
            raise FileNotFoundError(
                f"{page} does not exist: write it with `dplab report {self.path.parent}`"
            )
        return page

    @property
    def incomplete(self) -> dict[str, Any] | None:
        """The manifest's `incomplete` (failed, left-out and stale stages), or None."""
        value = self.manifest.get("incomplete")
        return value if isinstance(value, dict) else None

    def _repr_html_(self) -> str:
        """Summarise for notebooks: title, stages, instances, failures, flagged audits."""
        entries = self._entries()
        run = sum(int(s.get("instances_run") or 0) for s in entries)
        cached = sum(int(s.get("instances_cached") or 0) for s in entries)
        rows = "".join(
            f"<tr><td>{escape(str(s.get('name', '')))}</td><td>{escape(str(s.get('kind', '')))}"
            f"</td><td>{s.get('instances', '')}</td><td>{s.get('instances_run', '')}</td>"
            f"<td>{s.get('instances_cached', '')}</td>"
            f"<td>{'kept' if s.get('kept') else ''}</td></tr>"
            for s in entries
        )
        html = [
            f"<div><b>{escape(self.name)}</b>: {escape(self.title)}<br>",
            f"<code>{escape(str(self.path))}</code><br>",
            f"{run + cached} instances: {run} computed, {cached} from the store",
        ]
        incomplete = self.incomplete
        failed = incomplete.get("failed") if incomplete else None
        if isinstance(failed, list) and failed:
            items = "".join(f"<li>{escape(str(f))}</li>" for f in failed)
            html.append(f"<br><b>failures</b>: <ul>{items}</ul>")
        total, flagged = self._violations()
        if total:
            html.append(f"<br>audits: {total}, <b>{flagged} flagged</b> (violation)")
        html.append(
            "<table><tr><th>stage</th><th>kind</th><th>instances</th><th>computed</th>"
            f"<th>from store</th><th></th></tr>{rows}</table></div>"
        )
        return "".join(html)


class RunSet(Mapping[str, Results]):
    """The results of a run of several pipelines (:func:`dplab.run_all`), by pipeline name."""

    def __init__(self, results: Mapping[str, Results]) -> None:
        """Hold `results`, keeping their order."""
        self._results = dict(results)

    def __getitem__(self, name: str) -> Results:
        """Return the results of pipeline `name`."""
        return self._results[name]

    def __iter__(self) -> Iterator[str]:
        """Iterate over the pipelines' names, in run order."""
        return iter(self._results)

    def __len__(self) -> int:
        """How many pipelines wrote results."""
        return len(self._results)

    def __repr__(self) -> str:
        """`RunSet([...names])`."""
        return f"RunSet({list(self._results)!r})"

    def _repr_html_(self) -> str:
        """Each pipeline's summary, for notebooks."""
        return "<hr>".join(r._repr_html_() for r in self._results.values())


def open(path: str | os.PathLike[str]) -> Results:  # noqa: A001 - dplab.open
    """Open a results directory: `ROOT/<pipeline>/`, or a root holding exactly one.

    Needs no binary. Raises FileNotFoundError when `path` holds no results.
    """
    where = Path(path)
    if (where / "manifest.json").is_file():
        return Results(where)
    if where.is_dir():
        found = sorted(p.parent for p in where.glob("*/manifest.json"))
        if len(found) == 1:
            return Results(found[0])
        if found:
            names = ", ".join(p.name for p in found)
            raise FileNotFoundError(
                f"{where} holds the results of several pipelines ({names}): open one of them"
            )
    raise FileNotFoundError(f"{where}: no manifest.json: not a dplab results directory")
