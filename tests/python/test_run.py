"""`dplab.run`, `plan`, `validate` and `show` against the installed binary: they need its
`--message-format json` (and instances.parquet), hence the mark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dplab
import pytest
from conftest import OK, audit, external, started, study, write

pytestmark = pytest.mark.needs_events


def test_run_returns_the_results(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    p = study(tmp_path)
    r = dplab.run(p, profile="ci", set={"seed": 11}, jobs=1)
    assert r.path == (tmp_path / "results" / "my-study").resolve()
    assert r.manifest["set"] == ["seed=11"]
    assert (r.path / "instances.parquet").is_file()
    out, _ = capfd.readouterr()
    assert out == ""  # the events are read, not printed
    t = r.instances()
    assert not t["from_store"].any()
    f = r.frame("noisy", provenance=True)
    assert f["instance"].n_unique() == 60
    # A second run takes everything from the store, and the plan says it would.
    plan = dplab.plan(p, profile="ci", set={"seed": 11})
    assert plan.to_run == 0 and plan.in_store == plan.instances == t.height
    assert plan.stage("noisy").instances == 60
    again = dplab.run(p, profile="ci", set={"seed": 11}, quiet=True)
    assert again.instances()["from_store"].all()


def test_plan_says_what_would_run(tmp_path: Path) -> None:
    p = study(tmp_path)
    plan = dplab.plan(p, profile="ci", stages=["errors"])
    noisy = plan.stage("noisy")
    assert noisy.kind == "mechanism.noise" and noisy.to_run == noisy.instances == 60
    assert noisy.in_store == 0 and sum(noisy.reasons.values()) == 60
    assert not (tmp_path / "results").exists()


def test_sweep_and_stages(tmp_path: Path) -> None:
    p = study(tmp_path)
    r = dplab.run(p, profile="ci", sweep={"noisy.samples": [1, 2]}, stages="noisy", quiet=True)
    assert r.frame("noisy")["samples"].unique().sort().to_list() == [1, 2]


BAD = """
name: bad
title: t
description: d
seed: 1
stages:
  t:
    kind: load.table
    wiht: {columns: {a: [1]}}
"""


def test_an_unknown_key_is_a_located_pipeline_error(tmp_path: Path) -> None:
    p = write(tmp_path / "bad.yaml", BAD)
    for call in (dplab.run, dplab.validate, dplab.show, dplab.plan):
        with pytest.raises(dplab.PipelineError) as e:
            call(p)  # type: ignore[operator]
        assert e.value.errors, call
        err = e.value.errors[0]
        assert Path(err.file).name == "bad.yaml" and err.line == 8, err
        assert "wiht" in err.message
        assert f"bad.yaml:8:{err.col}" in str(e.value)
    assert not (tmp_path / "results").exists()


def test_validate_lists_the_programs(tmp_path: Path) -> None:
    p = external(tmp_path, 2, OK)
    (v,) = dplab.validate(p)
    assert v.pipeline == "day" and v.stages == 2 and v.instances >= 3
    assert any("code/prog.sh" in c for c in v.programs), v.programs
    assert "name: day" in dplab.show(p)


def test_a_failing_program_raises_run_error(tmp_path: Path) -> None:
    p = external(tmp_path, 3, 'if [ "$x" = 2 ]; then echo boom >&2; exit 3; fi\n' + OK)
    with pytest.raises(dplab.RunError) as e:
        dplab.run(p, allow_exec=True, jobs=1, quiet=True)
    (failure,) = e.value.failures
    assert (failure.pipeline, failure.stage, failure.instance) == ("day", "ext", "x=2")
    assert "3" in failure.message
    assert e.value.results is not None
    partial = e.value.results
    assert partial.incomplete and partial.incomplete["failed"]
    assert partial.frame("fine").height == 2


def test_an_unexpected_verdict_raises_run_error_with_exit_4(tmp_path: Path) -> None:
    p = audit(tmp_path)
    # The broken variant, no longer declared broken: its flag is unexpected.
    p.write_text(p.read_text().replace("expect: violation", "expect: none"))
    with pytest.raises(dplab.RunError) as e:
        dplab.run(p, jobs=1, quiet=True)
    assert e.value.exit_code == 4
    assert "a verdict differs" in str(e.value)
    assert e.value.failures == []
    results = e.value.results
    assert results is not None and not results.incomplete
    broken = results.frame("broken")
    assert broken["violation"].to_list() == [True]
    assert broken["unexpected"].to_list() == [True]


def test_an_external_stage_needs_allow_exec(tmp_path: Path) -> None:
    p = external(tmp_path, 1, OK)
    with pytest.raises(dplab.DplabError, match="prog.sh"):
        dplab.run(p, quiet=True)
    assert started(tmp_path) == 0


SCRIPT = """
import sys, dplab
try:
    dplab.run(sys.argv[1], allow_exec=True, jobs=2)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(42)
"""


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_an_interrupt_stops_the_programs_and_keeps_what_finished(tmp_path: Path) -> None:
    slow = tmp_path / "slow"  # outside code/: the same store keys with and without it
    slow.touch()
    body = (
        # A PID a program sees may be its namespace's: the programs are found by their
        # command line instead (a sleep of a length nothing else on the machine asks for).
        f'if [ "$x" -gt 2 ] && [ -e {slow} ]; then touch {tmp_path}/pid.$x; '
        f"exec sleep 30.{os.getpid()}; fi\n" + OK
    )
    p = external(tmp_path, 4, body)
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(p)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t0 = time.monotonic()
    while len(list(tmp_path.glob("pid.*"))) < 2:
        assert time.monotonic() - t0 < 60 and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 42 and "KeyboardInterrupt" in out, (out, err)

    def sleeping() -> list[str]:
        """The processes still running this test's `sleep`."""
        left = []
        for proc_dir in Path("/proc").iterdir():
            try:
                cmd = (proc_dir / "cmdline").read_bytes().split(b"\0")
                state = (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if cmd[:2] == [b"sleep", f"30.{os.getpid()}".encode()] and state != "Z":
                left.append(proc_dir.name)
        return left

    for _ in range(100):
        if not sleeping():
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the programs (sleep 30) still run: {sleeping()}")
    # x = 1 and 2 finished before the interrupt: in the store.
    ext = dplab.plan(p).stage("ext")
    assert ext.in_store == 2 and ext.to_run == 2, ext
    slow.unlink()
    r = dplab.run(p, allow_exec=True, quiet=True)
    import polars as pl

    t = r.instances().filter(pl.col("stage") == "ext").sort("first_row")
    assert t["from_store"].to_list() == [True, True, False, False]
