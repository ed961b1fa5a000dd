#!/usr/bin/env python3
"""Every Parquet frame of a results tree read by two readers that are not dplab's (pyarrow and
duckdb) and held against the CSV dplab wrote beside it: the same column names, a type that fits
the CSV's text (integers stay integers, text stays text), the same values (floats to the bit), and
the key-value metadata naming the pipeline and the stage.

Usage: check.py RESULTS_DIR   (the tree `dplab run --out` wrote, e.g. target/ci-results)
Exit 0 when every frame agrees, 1 with the list of problems otherwise.
"""

import csv
import json
import math
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

# Columns that are integers by construction wherever they appear: the repetition axis.
INTEGER_COLUMNS = {"rep"}
# (pipeline, stage, column): integers dplab must keep as integers (integer-valued axes).
KNOWN_INTEGERS = [
    ("dr-two-diseases", "errors", "c"),
]


def cells_equal(kind, text, value):
    """Whether a CSV cell (text, as dplab wrote it) holds the Parquet value."""
    if value is None:
        return text == ""
    if kind == "int":
        return text != "" and int(text) == value
    if kind == "float":
        if text == "":
            return False
        x = float(text)
        return (math.isnan(x) and math.isnan(value)) or x == value and math.copysign(1, x) == math.copysign(1, value)
    if kind == "bool":
        return text == ("true" if value else "false")
    return text == str(value)


def kind_of(t):
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "str"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def check(parquet, problems):
    name = f"{parquet.parent.name}/{parquet.name}"
    table = pq.read_table(parquet)
    # The file's key-value metadata (pyarrow keeps it apart from the Arrow schema's).
    meta = {k.decode(): v.decode() for k, v in (pq.read_metadata(parquet).metadata or {}).items()}
    if meta.get("dplab.pipeline") != parquet.parent.name or meta.get("dplab.stage") != parquet.stem:
        problems.append(f"{name}: key-value metadata names {meta.get('dplab.pipeline')}/{meta.get('dplab.stage')}")
    if not any(k in meta for k in ("dplab.instance_key", "dplab.instance_keys_sha256")):
        problems.append(f"{name}: no instance key in its metadata")
    # Whose rows are whose: the instances' keys as the manifest lists them, and their rows
    # adding up to the file's.
    if "dplab.instance_keys_sha256" in meta:
        listed = json.loads(meta.get("dplab.instances", "null"))
        manifest = json.loads((parquet.parent / "manifest.json").read_text())
        stage = next(s for s in manifest["stages"] if s["name"] == parquet.stem)
        keys = [s["key"] for s in stage["seeds"]]
        if listed is None:
            problems.append(f"{name}: no dplab.instances in its metadata ({len(keys)} instances)")
        elif [k for k, _ in listed] != keys:
            problems.append(f"{name}: dplab.instances lists other keys than the manifest's seeds")
        elif sum(n for _, n in listed) != pq.read_metadata(parquet).num_rows:
            problems.append(f"{name}: dplab.instances counts {sum(n for _, n in listed)} rows, the file has {pq.read_metadata(parquet).num_rows}")
    # duckdb reads the same file on its own and must see the same values.
    con = duckdb.connect()
    duck = con.read_parquet(str(parquet)).to_arrow_table()
    if duck.column_names != table.column_names or duck.num_rows != table.num_rows:
        problems.append(f"{name}: duckdb reads {duck.column_names} × {duck.num_rows}, pyarrow {table.column_names} × {table.num_rows}")
        return
    with open(parquet.with_suffix(".csv"), newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    if header != table.column_names:
        problems.append(f"{name}: columns {table.column_names}, the CSV's {header}")
        return
    if len(body) != table.num_rows:
        problems.append(f"{name}: {table.num_rows} rows, the CSV {len(body)}")
        return
    for j, col in enumerate(table.column_names):
        kind = kind_of(table.schema.field(col).type)
        texts = [r[j] for r in body]
        if kind == "float" and all(t == "" or t.lstrip("-").isdigit() for t in texts) and any(t for t in texts):
            problems.append(f"{name}: column `{col}` is float in Parquet but every CSV cell is an integer")
        if col in INTEGER_COLUMNS and kind != "int":
            problems.append(f"{name}: column `{col}` is {kind}, not integers")
        values = table.column(j).to_pylist()
        dvalues = duck.column(j).to_pylist()
        for i, (t, v, dv) in enumerate(zip(texts, values, dvalues)):
            same_duck = v == dv or (isinstance(v, float) and isinstance(dv, float) and math.isnan(v) and math.isnan(dv))
            if not same_duck:
                problems.append(f"{name}: `{col}` row {i}: pyarrow {v!r}, duckdb {dv!r}")
                break
            if kind != "null" and not cells_equal(kind, t, v):
                problems.append(f"{name}: `{col}` row {i}: Parquet {v!r} ({kind}), CSV {t!r}")
                break


def check_instances(parquet, problems):
    """`instances.parquet`, read by pyarrow and duckdb: one row per instance of every stage, in
    the manifest's order with its keys and seeds, and rows that tile each stage's frame."""
    name = f"{parquet.parent.name}/{parquet.name}"
    manifest = json.loads((parquet.parent / "manifest.json").read_text())
    table = pq.read_table(parquet)
    rows = table.to_pylist()
    want = [(st["name"], s["key"], s["seed"]) for st in manifest["stages"] for s in st["seeds"]]
    got = [(r["stage"], r["key"], r["seed"]) for r in rows]
    if got != want:
        problems.append(f"{name}: its (stage, key, seed) rows are not the manifest's ({len(got)} rows, {len(want)} instances)")
        return
    for field, kind in [("first_row", "int"), ("rows", "int"), ("from_store", "bool"), ("seconds", "float")]:
        if kind_of(table.schema.field(field).type) != kind:
            problems.append(f"{name}: `{field}` is {table.schema.field(field).type}, not {kind}")
    for st in manifest["stages"]:
        frame = parquet.parent / f"{st['name']}.parquet"
        mine = [r for r in rows if r["stage"] == st["name"] and not r["kept"]]
        if not frame.exists() or not mine:
            continue
        n = pq.read_metadata(frame).num_rows
        at = 0
        for r in mine:
            if r["first_row"] != at:
                problems.append(f"{name}: stage `{st['name']}` instance {r['instance']!r} starts at row {r['first_row']}, not {at}")
                break
            at += r["rows"]
        if at != n:
            problems.append(f"{name}: stage `{st['name']}`'s instances hold {at} rows, its frame {n}")
    count = duckdb.sql(f"SELECT count(*) FROM read_parquet('{parquet}')").fetchall()[0][0]
    if count != len(rows):
        problems.append(f"{name}: duckdb reads {count} rows, pyarrow {len(rows)}")


def main():
    root = Path(sys.argv[1])
    problems = []
    for p in sorted(root.glob("*/instances.parquet")):
        check_instances(p, problems)
    frames = sorted(p for p in root.glob("*/*.parquet") if p.name != "instances.parquet")
    if not frames:
        print(f"parquet-check: no Parquet frames under {root}", file=sys.stderr)
        return 1
    for p in frames:
        check(p, problems)
    for pipeline, stage, col in KNOWN_INTEGERS:
        p = root / pipeline / f"{stage}.parquet"
        if p.exists():
            t = pq.read_schema(p).field(col).type
            if not pa.types.is_integer(t):
                problems.append(f"{pipeline}/{stage}.parquet: `{col}` is {t}, not integers")
    for msg in problems:
        print(msg)
    print(f"parquet-check: {len(frames)} frames read by pyarrow {pa.__version__} and duckdb {duckdb.__version__}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
