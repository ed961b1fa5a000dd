"""The client side of `--message-format json`, against a scripted stand-in for the binary
(DPLAB_BINARY): arguments, events, exit codes, errors and interrupts. These need no
particular dplab build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dplab
import pytest

FAKE = """
import json, os, signal, sys, time
from pathlib import Path
here = Path(os.environ["FAKE_DIR"])
(here / "argv.json").write_text(json.dumps(sys.argv[1:]))
scenario = os.environ["FAKE_SCENARIO"]
def ev(**k):
    print(json.dumps({"format": 1, **k}), flush=True)
def results(name):
    d = here / "out" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps(
        {"dplab_version": "0", "pipeline": {"name": name}, "stages": []}))
    return str(d)
stages = [{"stage": "s", "kind": "k", "instances": 3, "to_run": 2, "in_store": 1,
           "reasons": {"new": 2}}]
if scenario == "ok":
    print("not an event", flush=True)
    ev(event="plan", pipeline="p", file="p.yaml", store="/st", stages=stages)
    print(json.dumps({"format": 2, "event": "plan"}), flush=True)
    for i in range(3):
        ev(event="instance_started", pipeline="p", stage="s", instance=f"x={i}")
        ev(event="instance_finished", pipeline="p", stage="s", instance=f"x={i}",
           seconds=0.1, from_store=i == 0)
    ev(event="progress", pipeline="p", total=3, done=3, from_store=1, failed=0)
    ev(event="something_new", pipeline="p")
    print("a line of human text", file=sys.stderr, flush=True)
    ev(event="pipeline_done", pipeline="p", file="p.yaml", results=results("p"),
       status="ok", message=None)
    ev(event="run_done", pipelines=1, failed=0, exit=0)
elif scenario == "several":
    for name in ("a", "b"):
        ev(event="pipeline_done", pipeline=name, file=name + ".yaml", results=results(name),
           status="ok", message=None)
    ev(event="run_done", pipelines=2, failed=0, exit=0)
elif scenario == "dry":
    ev(event="plan", pipeline="p", file="p.yaml", store=None, stages=stages)
    ev(event="run_done", pipelines=1, failed=0, exit=0)
elif scenario == "invalid":
    ev(event="error", file="p.yaml", line=6, col=5, message="unknown key `wiht`",
       hint="did you mean `with`?")
    ev(event="error", file="p.yaml", line=None, col=None, message="no stages", hint=None)
    ev(event="pipeline_done", pipeline="p", file="p.yaml", results=None, status="invalid",
       message="2 errors")
    ev(event="run_done", pipelines=1, failed=1, exit=2)
    sys.exit(2)
elif scenario == "failed":
    ev(event="instance_failed", pipeline="p", stage="ext", instance="x=2",
       message="exited with status 3", log="/logs/x2.log")
    ev(event="pipeline_done", pipeline="p", file="p.yaml", results=results("p"),
       status="failed", message="stage `ext`: 1 instance(s) failed")
    ev(event="run_done", pipelines=1, failed=1, exit=1)
    sys.exit(1)
elif scenario == "old":
    print("error: unexpected argument '--message-format' found", file=sys.stderr)
    sys.exit(2)
elif scenario == "validate":
    ev(event="validated", file="p.yaml", pipeline="p", stages=2, instances=7,
       programs=["sh code/prog.sh"])
    ev(event="run_done", pipelines=1, failed=0, exit=0)
elif scenario == "show":
    ev(event="show", file="p.yaml", pipeline="p", yaml="name: p\\n")
    ev(event="run_done", pipelines=1, failed=0, exit=0)
elif scenario in ("interrupt", "stubborn"):
    def on_int(*_):
        with open(here / "signals", "a") as f:
            f.write("INT\\n")
        if scenario == "interrupt":
            ev(event="run_done", pipelines=1, failed=0, exit=130)
            sys.exit(130)
    signal.signal(signal.SIGINT, on_int)
    ev(event="plan", pipeline="p", file="p.yaml", store=None, stages=stages)
    # Written then renamed: the test polls for the file and reads it at once, and an
    # open-then-write would let it read the empty file in between (CI did, once).
    (here / "started.tmp").write_text(str(os.getpid()))
    os.replace(here / "started.tmp", here / "started")
    while True:
        time.sleep(0.05)
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "fake-dplab"
    exe.write_text(f"#!{sys.executable}\n" + textwrap.dedent(FAKE))
    exe.chmod(0o755)
    monkeypatch.setenv("DPLAB_BINARY", str(exe))
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    return tmp_path


def scenario(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", name)


def argv(fake: Path) -> list[str]:
    return list(json.loads((fake / "argv.json").read_text()))


def test_run_passes_its_arguments_and_reads_the_events(
    fake: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    scenario(monkeypatch, "ok")
    r = dplab.run(
        "p.yaml",
        profile="ci",
        set={"eps": [0.5, 1], "seed": 7, "noisy.noise": "laplace", "flag": True},
        sweep=["noisy.samples=[100, 1000]"],
        stages=["a", "b"],
        jobs=2,
        store=fake / "st",
        allow_exec=True,
    )
    assert isinstance(r, dplab.Results) and r.name == "p"
    args = argv(fake)
    assert args[:3] == ["run", "--message-format", "json"]
    assert args[-2:] == ["--", "p.yaml"]
    pairs = list(zip(args, args[1:]))
    for pair in [
        ("--profile", "ci"),
        ("--set", "eps=[0.5, 1]"),
        ("--set", "seed=7"),
        ("--set", "noisy.noise=laplace"),
        ("--set", "flag=true"),
        ("--sweep", "noisy.samples=[100, 1000]"),
        ("--stages", "a,b"),
        ("--jobs", "2"),
        ("--store", str(fake / "st")),
        ("--out", "results"),
    ]:
        assert pair in pairs, (pair, args)
    assert "--allow-exec" in args
    out, err = capfd.readouterr()
    assert out == ""  # events are read, never printed
    assert "a line of human text" in err  # stderr passes through
    assert "not an event" in err


def test_quiet_shows_nothing(
    fake: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    scenario(monkeypatch, "ok")
    dplab.run("p.yaml", quiet=True, store=False, out=fake / "o")
    assert ("--no-store") in argv(fake) and str(fake / "o") in argv(fake)
    assert capfd.readouterr() == ("", "")


def test_run_all_returns_every_pipeline(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario(monkeypatch, "several")
    runs = dplab.run_all(["a.yaml", "b.yaml"], quiet=True)
    assert list(runs) == ["a", "b"] and runs["b"].name == "b"
    with pytest.raises(ValueError, match="run_all"):
        dplab.run(fake)  # a directory


def test_plan(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario(monkeypatch, "dry")
    plan = dplab.plan("p.yaml", set=["eps=[1]"])
    assert "--dry-run" in argv(fake)
    assert plan.pipeline == "p" and plan.store is None
    assert plan.stage("s") == dplab.PlannedStage("s", "k", 3, 2, 1, {"new": 2})
    assert (plan.instances, plan.to_run, plan.in_store) == (3, 2, 1)
    assert "to run" in plan._repr_html_()


def test_an_invalid_pipeline_raises_located_errors(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario(monkeypatch, "invalid")
    with pytest.raises(dplab.PipelineError) as e:
        dplab.run("p.yaml", quiet=True)
    assert e.value.errors[0] == dplab.Located(
        "p.yaml", 6, 5, "unknown key `wiht`", "did you mean `with`?"
    )
    assert e.value.errors[1].line is None
    assert "p.yaml:6:5: unknown key `wiht`" in str(e.value)
    assert "hint: did you mean" in str(e.value)


def test_failed_instances_raise_run_error_with_the_partial_results(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario(monkeypatch, "failed")
    with pytest.raises(dplab.RunError) as e:
        dplab.run("p.yaml", quiet=True)
    assert e.value.failures == [
        dplab.Failure("p", "ext", "x=2", "exited with status 3", "/logs/x2.log")
    ]
    assert e.value.results is not None and e.value.results.name == "p"
    assert "stage `ext`: 1 instance(s) failed" in str(e.value)
    assert "x2.log" in str(e.value)


def test_a_binary_without_json_events_is_explained(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario(monkeypatch, "old")
    with pytest.raises(dplab.ProtocolError, match="no JSON event") as e:
        dplab.run("p.yaml", quiet=True)
    assert "unexpected argument" in str(e.value)


def test_validate_and_show(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario(monkeypatch, "validate")
    v = dplab.validate(["p.yaml"])
    assert argv(fake)[:3] == ["validate", "--message-format", "json"]
    assert v == [dplab.Validated("p.yaml", "p", 2, 7, ["sh code/prog.sh"])]
    scenario(monkeypatch, "show")
    assert dplab.show("p.yaml", profile="ci") == "name: p\n"
    scenario(monkeypatch, "invalid")
    with pytest.raises(dplab.PipelineError):
        dplab.validate("p.yaml")


SCRIPT = """
import sys, dplab
try:
    dplab.run("p.yaml", quiet=True, interrupt_grace=float(sys.argv[1]))
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(42)
print("returned", flush=True)
"""


def interrupt(fake: Path, grace: float) -> tuple[subprocess.CompletedProcess[str], int, float]:
    """Run dplab.run in a Python process, SIGINT it once the binary runs; its outcome, the
    binary's pid, and how long the Python process took to exit after the signal."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(grace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t0 = time.monotonic()
    while not (fake / "started").exists():
        assert time.monotonic() - t0 < 30 and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    child = int((fake / "started").read_text())
    os.kill(proc.pid, signal.SIGINT)
    t1 = time.monotonic()
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - t1
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), child, took


def gone(pid: int) -> bool:
    for _ in range(100):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_an_interrupt_is_passed_on_once_and_raised(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario(monkeypatch, "interrupt")
    done, child, _ = interrupt(fake, 30)
    assert done.returncode == 42 and "KeyboardInterrupt" in done.stdout, done
    assert (fake / "signals").read_text() == "INT\n"
    assert gone(child)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_a_binary_that_does_not_stop_is_killed_after_the_grace(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario(monkeypatch, "stubborn")
    done, child, took = interrupt(fake, 1)
    assert done.returncode == 42 and "KeyboardInterrupt" in done.stdout, done
    assert (fake / "signals").read_text() == "INT\n"
    assert 0.9 < took < 20
    assert gone(child)
