#!/usr/bin/env python3
"""Every figure of a results directory is rendered and draws what it declares.

For each plot stage of each pipeline under RESULTS (a `plot.*` stage in its manifest.json), the
figure `<stage>.svg` is
  1. rendered to PNG by an independent renderer (librsvg's rsvg-convert): an SVG a browser
     cannot draw fails here, not in a reader's hands;
  2. held against the frame of what it drew (`<stage>.csv`: panel, series, x, y, ...): every
     series of the frame is named in the figure's legend, and every legend entry of a series
     has marks of its colour outside the legend (a series listed but drawn nowhere is the
     empty-figure class: h14-table3.2 once drew only the thesis's points).
A line figure's frame is written by the plot itself, so a series that stops being drawn also
changes a golden frame; this check ties the picture to that frame.

Usage: check.py RESULTS [--self-test]. Exit 0 when every figure passes, 1 otherwise.
Needs rsvg-convert (Debian: librsvg2-bin) and nothing beyond Python's standard library.
"""
import csv
import json
import re
import subprocess
import sys
import tempfile
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

SVG = "{http://www.w3.org/2000/svg}"
# What the renderer writes in grey or white (grid, axes, frames, legend box), never a series.
NEUTRAL = {"#FFFFFF", "#000000", "#666666", "#BBBBBB", "#222222", "#DDDDDD", "NONE"}
BELOW = "value ≤ 0, below the log axis"


def norm(text):
    """A label as the legend shows it, whitespace aside: mathtext (src/plot/mathtext.rs) turns
    `10^6` into 10 and a raised 6, and `e^(−cε/2)` into e and a raised −cε/2 (the group's
    parentheses are dropped)."""
    text = re.sub(r"\^\(([^)]*)\)", r"\1", text)
    return re.sub(r"[\s^_{}]", "", text)


def colour(el):
    for attr in ("stroke", "fill"):
        v = (el.get(attr) or "").upper()
        if v.startswith("#") and v not in NEUTRAL:
            return v
    return None


def same(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def of_instance(row, svg_path, frame_path):
    """Whether a row of a plot stage's frame belongs to this figure: a stage with one figure per
    instance writes `<stage>__axis=value,….svg` (values percent-encoded), and its frame holds
    every instance's rows with their axis columns."""
    stem = svg_path.stem
    if stem == frame_path.stem or "__" not in stem:
        return True
    for part in stem.split("__", 1)[1].split(","):
        key, _, value = part.partition("=")
        key, value = urllib.parse.unquote(key), urllib.parse.unquote(value)
        if key in row and not same(row[key], value):
            return False
    return True


def rendered(png):
    """Whether `png` is a PNG image with a width and a height: what rendering made, whatever
    its byte count (a renderer compresses a nearly blank image to a few hundred bytes)."""
    try:
        head = Path(png).read_bytes()[:24]
    except OSError:
        return False
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return False
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    return width > 0 and height > 0


def check_figure(svg_path, frame_path, png_dir):
    problems = []
    png = Path(png_dir) / (svg_path.stem + ".png")
    r = subprocess.run(["rsvg-convert", "-o", str(png), str(svg_path)], capture_output=True, text=True)
    if r.returncode != 0 or not rendered(png):
        return [f"{svg_path}: rsvg-convert could not render it: {r.stderr.strip()[:300]}"]
    with open(frame_path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if of_instance(r, svg_path, frame_path)]
    if not rows or "series" not in rows[0]:
        # A heatmap draws cells, not series: its frame (panel, x, y, z) is what the goldens see.
        return problems
    series = []
    for row in rows:
        if row["series"] not in series:
            series.append(row["series"])
    elements = list(ET.parse(svg_path).getroot().iter())
    texts = [(i, norm("".join(el.itertext()))) for i, el in enumerate(elements) if el.tag == SVG + "text"]
    shown = {t for _, t in texts}
    for s in series:
        if norm(s) not in shown and s != "":
            problems.append(f"{svg_path}: series `{s}` is in the drawn frame but not in the legend")
    # Legend entries: a text naming a series; its glyph is the run of coloured elements right
    # before it (band, line, marker), which the legend's box or the panel's frame (grey) ends.
    # A text naming a series without a glyph before it is a tick label or a title that happens
    # to read the same (`1.0`, the y label): only a series with no glyph-led text at all fails.
    wanted = {norm(s): s for s in series}
    legend_use = {}
    entries = []
    for i, t in texts:
        if t not in wanted:
            continue
        glyph = []
        j = i - 1
        while j >= 0 and colour(elements[j]) and elements[j].tag != SVG + "text":
            glyph.append(colour(elements[j]))
            j -= 1
        if glyph:
            entries.append((wanted[t], glyph[0]))
            for c in glyph:
                legend_use[c] = legend_use.get(c, 0) + 1
    with_glyph = {name for name, _ in entries}
    for s in series:
        if s != "" and norm(s) in shown and s not in with_glyph:
            problems.append(f"{svg_path}: series `{s}` has no legend entry with a coloured glyph")
    total = {}
    for el in elements:
        c = colour(el)
        if c:
            total[c] = total.get(c, 0) + 1
    for name, c in entries:
        if total.get(c, 0) - legend_use.get(c, 0) < 1:
            problems.append(f"{svg_path}: series `{name}` (colour {c}) is in the legend and drawn nowhere")
    return problems


def check_results(results):
    problems, figures = [], 0
    with tempfile.TemporaryDirectory() as png_dir:
        for manifest in sorted(Path(results).glob("*/manifest.json")):
            d = manifest.parent
            m = json.loads(manifest.read_text())
            for st in m.get("stages", []):
                if not st.get("kind", "").startswith("plot."):
                    continue
                frame = d / f"{st['name']}.csv"
                svgs = sorted(d.glob(f"{st['name']}.svg")) + sorted(d.glob(f"{st['name']}__*.svg"))
                if not svgs:
                    problems.append(f"{d}: plot stage `{st['name']}` wrote no figure")
                    continue
                if not frame.exists():
                    problems.append(f"{d}: plot stage `{st['name']}` wrote no frame of what it drew")
                    continue
                for svg in svgs:
                    figures += 1
                    problems += check_figure(svg, frame, png_dir)
    return figures, problems


def self_test():
    """The check fails on the classes it guards: a series in the legend drawn nowhere, and a
    series of the frame missing from the legend."""
    ok_svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">'
        '<rect x="0" y="0" width="200" height="100" fill="#FFFFFF"/>'
        '<polyline fill="none" stroke="#0072B2" points="10,90 50,10 90,50"/>'
        '<rect x="5" y="5" width="95" height="90" fill="none" stroke="#666666"/>'
        '<polyline fill="none" stroke="#0072B2" points="100,20 130,20"/>'
        "<text x=\"135\" y=\"20\">ours</text></svg>"
    )
    empty_svg = ok_svg.replace('<polyline fill="none" stroke="#0072B2" points="10,90 50,10 90,50"/>', "")
    frame = "panel,series,x,y,lo,hi\n,ours,1,2,,\n"
    frame_more = frame + ",thesis,1,3,,\n"
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "f.csv").write_text(frame)
        (d / "g.csv").write_text(frame_more)
        for name, text in [("ok", ok_svg), ("empty", empty_svg)]:
            (d / f"{name}.svg").write_text(text)
        assert check_figure(d / "ok.svg", d / "f.csv", d) == [], "a good figure must pass"
        (d / "broken.png").write_bytes(b"<svg/>")
        assert not rendered(d / "broken.png") and not rendered(d / "missing.png")
        p = check_figure(d / "empty.svg", d / "f.csv", d)
        assert any("drawn nowhere" in x for x in p), p
        p = check_figure(d / "ok.svg", d / "g.csv", d)
        assert any("`thesis` is in the drawn frame but not in the legend" in x for x in p), p
    print("figure check: self-test passed")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    self_test()
    figures, problems = check_results(sys.argv[1])
    for p in problems:
        print("FIGURE:", p)
    print(f"figure check: {figures} figures rendered and held against their frames, {len(problems)} problem(s)")
    if figures == 0:
        print("figure check: no figures found under", sys.argv[1])
        sys.exit(1)
    sys.exit(1 if problems else 0)
