"""Reading results directories with `dplab.open`: frames, provenance, instances, audits,
figures. The directories are written by the binary itself (no JSON events needed): these pass
with a dplab that writes instances.parquet and with one that does not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dplab
import pytest
from conftest import audit, dplab_cli, study


@pytest.fixture
def study_results(tmp_path: Path) -> dplab.Results:
    p = study(tmp_path)
    dplab_cli("run", p, "--profile", "ci", "--jobs", "1", "--out", tmp_path / "results")
    return dplab.open(tmp_path / "results" / "my-study")


@pytest.fixture
def audit_results(tmp_path: Path) -> dplab.Results:
    p = audit(tmp_path)
    dplab_cli("run", p, "--jobs", "1", "--out", tmp_path / "results")
    return dplab.open(tmp_path / "results")  # the root of one pipeline opens it too


def test_open_reads_the_manifest(study_results: dplab.Results) -> None:
    r = study_results
    assert r.name == "my-study" and r.path.name == "my-study"
    assert r.manifest["pipeline"]["name"] == "my-study"
    assert r.stages == ["histogram", "noisy", "errors", "summary", "figure", "table"]
    assert "Laplace" in r.title
    html = r._repr_html_()
    assert "my-study" in html and "noisy" in html and "computed" in html


def test_open_without_results_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a dplab results directory"):
        dplab.open(tmp_path)


@pytest.mark.parametrize("lib", ["polars", "pandas", "pyarrow"])
def test_frames_keep_the_parquet_types(study_results: dplab.Results, lib: dplab.Lib) -> None:
    f = study_results.frame("noisy", lib=lib)
    if lib == "polars":
        import polars as pl

        assert f.schema["rep"] == pl.Int64 and f.schema["noisy"] == pl.Float64
        assert f.height == 3 * 2 * 10 * 50
    elif lib == "pandas":
        assert str(f["rep"].dtype) in ("int64", "Int64") and len(f) == 3000
    else:
        import pyarrow as pa

        assert f.schema.field("rep").type == pa.int64() and f.num_rows == 3000
    frames = study_results.frames(lib=lib)
    assert set(frames) == set(study_results.stages)


def test_an_unknown_stage_says_which_there_are(study_results: dplab.Results) -> None:
    with pytest.raises(KeyError, match="histogram"):
        study_results.frame("nope")


def test_provenance_leads_each_row_to_its_instance(study_results: dplab.Results) -> None:
    import polars as pl

    r = study_results
    f = r.frame("noisy", provenance=True)
    for c in ("instance", "seed", "key", "computed_at", "build", "from_store", "environment"):
        assert c in f.columns, f.columns
    # `rep` is an axis of the stage: the frame's own column, not repeated.
    assert "dplab_rep" not in f.columns
    seeds = {s["instance"]: s for s in r.stage("noisy")["seeds"]}
    per = f.group_by("instance").agg(
        pl.len().alias("n"),
        pl.col("seed").n_unique().alias("seeds"),
        pl.col("rep").n_unique().alias("reps"),
        pl.col("seed").first(),
        pl.col("key").first(),
        pl.col("rep").first(),
    )
    assert per.height == len(seeds) == 60
    for row in per.iter_rows(named=True):
        assert row["n"] == 50 and row["seeds"] == 1 and row["reps"] == 1
        assert row["seed"] == seeds[row["instance"]]["seed"]
        assert row["key"] == seeds[row["instance"]]["key"]
        assert row["instance"].endswith(f"rep={row['rep']}")
    assert f["build"].str.starts_with(r.manifest["build"]["version"]).all()
    assert f["from_store"].dtype == pl.Boolean


def test_provenance_in_pandas_and_a_stage_without_rep(study_results: dplab.Results) -> None:
    f = study_results.frame("summary", lib="pandas", provenance=True)
    assert len(f) == 3 * 2 * 2
    assert f["rep"].isna().all()  # summary gathers rep: the instances have none
    assert f["instance"].str.startswith("mechanism=").all()
    one = study_results.frame("histogram", lib="pyarrow", provenance=True)
    assert one.num_rows == 50 and set(one.column("instance").to_pylist()) == {""}


def test_the_instances_table(study_results: dplab.Results) -> None:
    import polars as pl

    r = study_results
    t = r.instances()
    expected = [
        "stage", "instance", "axes", "rep", "seed", "key", "content_key", "first_row", "rows",
        "from_store", "computed_at", "build", "seconds", "kept", "environment",
    ]  # fmt: skip
    assert t.columns == expected
    assert t.height == sum(s["instances"] for s in r.manifest["stages"])
    noisy = t.filter(pl.col("stage") == "noisy").sort("first_row")
    assert noisy["rows"].to_list() == [50] * 60
    assert noisy["first_row"].to_list() == list(range(0, 3000, 50))
    assert noisy["rep"].dtype == pl.Int64 and noisy["rep"].min() == 0
    assert noisy["seed"].str.len_chars().to_list() == [32] * 60
    axes = json.loads(noisy["axes"][0])
    assert set(axes) == {"mechanism", "eps", "rep"}
    pandas = r.instances(lib="pandas")
    assert len(pandas) == t.height


def test_a_second_run_is_from_the_store(tmp_path: Path, study_results: dplab.Results) -> None:
    import polars as pl

    dplab_cli("run", tmp_path / "my-study.yaml", "--profile", "ci", "--out", tmp_path / "results")
    r = dplab.open(study_results.path)
    t = r.instances()
    assert t["from_store"].all()
    assert t["computed_at"].null_count() == 0
    f = r.frame("errors", provenance=True)
    assert f["from_store"].all() and f["computed_at"].str.ends_with("Z").all()
    assert t.filter(pl.col("stage") == "noisy")["seconds"].null_count() == 0


def test_instances_parquet_agrees_with_the_manifest(
    tmp_path: Path, study_results: dplab.Results
) -> None:
    """When the binary writes instances.parquet, the table built without it (from the
    manifest and the Parquet metadata, as for an older dplab) says the same."""
    import polars as pl

    if not (study_results.path / "instances.parquet").is_file():
        pytest.skip("this dplab writes no instances.parquet")
    copy = tmp_path / "copy" / "my-study"
    shutil.copytree(study_results.path, copy)
    (copy / "instances.parquet").unlink()
    cols = ["stage", "instance", "rep", "seed", "key", "content_key", "first_row", "rows"]
    new = study_results.instances()
    old = dplab.open(copy).instances()
    assert new.select(cols).equals(old.select(cols)), (new, old)
    # The same axis values (as JSON: numbers may be written 1e-6 or 1e-06).
    assert [json.loads(a) for a in new["axes"]] == [json.loads(a) for a in old["axes"]]
    rows = new.filter(pl.col("stage") == "noisy")
    assert rows["rows"].sum() == study_results.frame("noisy").height


def test_audits_gather_every_audit_stage(audit_results: dplab.Results) -> None:
    import polars as pl

    a = audit_results.audits()
    assert a.columns[0] == "stage"
    for c in ("epsilon", "delta", "epsilon_lb", "confidence", "samples", "violation", "pair"):
        assert c in a.columns
    verdict = dict(zip(a["stage"], a["violation"]))
    assert verdict == {"laplace": False, "broken": True}
    broken = a.filter(pl.col("stage") == "broken")
    assert broken["epsilon_lb"][0] > broken["epsilon"][0]
    assert len(audit_results.audits(lib="pandas")) == 2
    assert audit_results.audits(lib="pyarrow").num_rows == 2
    assert "1 flagged" in audit_results._repr_html_()


def test_a_pipeline_without_audits_has_none(study_results: dplab.Results) -> None:
    assert study_results.audits().height == 0


def test_figures(tmp_path: Path, study_results: dplab.Results) -> None:
    assert study_results.figures() == ["figure"]
    fig = study_results.figure("figure")
    assert "<svg" in fig.svg and fig._repr_svg_() == fig.svg
    saved = fig.save(tmp_path / "copy.svg")
    assert saved.read_text() == fig.svg
    with pytest.raises(FileNotFoundError, match="figures: figure"):
        study_results.figure("nope")


def test_the_report(tmp_path: Path, study_results: dplab.Results) -> None:
    with pytest.raises(FileNotFoundError, match="dplab report"):
        study_results.report()
    dplab_cli("report", tmp_path / "results")
    assert study_results.report() == tmp_path / "results" / "index.html"
