"""Run the binary with `--message-format json`.

Its events are read from stdout, its stderr is passed through, and Ctrl-C is passed on as
SIGINT.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Union

from ._binary import binary
from ._events import Event, Plan, Shown, Validated, parse
from ._progress import Display, make_display
from .errors import DplabError, Failure, Located, PipelineError, ProtocolError, RunError
from .results import Results, RunSet

__all__ = ["INTERRUPT_GRACE", "plan", "run", "run_all", "show", "validate"]

StrPath = Union[str, "os.PathLike[str]"]
"""A path: a string or a path-like object."""

Settings = Union[Mapping[str, Any], Sequence[str], None]
"""`--set`/`--sweep` values: a mapping `{key: value}` or a list of `"KEY=VALUE"` strings."""

INTERRUPT_GRACE = 30.0
"""Seconds the binary gets to stop after SIGINT before it (and its process group) is killed."""

_STDERR_TAIL = 40


def _yaml(value: Any) -> str:
    """Write a value as `--set` reads it (YAML): strings as written, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, range):
        value = list(value)
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, ensure_ascii=False)


def _settings(flag: str, values: Settings) -> list[str]:
    """Repeated `flag K=V` arguments from a mapping or a list of `K=V` strings."""
    if values is None:
        return []
    if isinstance(values, Mapping):
        items = [f"{k}={_yaml(v)}" for k, v in values.items()]
    elif isinstance(values, str):
        items = [values]
    else:
        items = [str(v) for v in values]
    out: list[str] = []
    for item in items:
        if "=" not in item:
            raise ValueError(f"{flag} {item!r}: expected KEY=VALUE")
        out += [flag, item]
    return out


def _common(
    profile: str | None, set: Settings, sweep: Settings, allow_read: Sequence[StrPath]
) -> list[str]:
    args: list[str] = []
    if profile is not None:
        args += ["--profile", profile]
    args += _settings("--set", set)
    args += _settings("--sweep", sweep)
    for d in allow_read:
        args += ["--allow-read", os.fspath(d)]
    return args


def _stages(stages: Sequence[str] | str | None) -> list[str]:
    if stages is None:
        return []
    names = [stages] if isinstance(stages, str) else list(stages)
    if not names:
        raise ValueError("stages: name at least one stage (or pass None for all)")
    return ["--stages", ",".join(names)]


def _store(store: StrPath | bool | None) -> list[str]:
    if store is None or store is True:
        return []
    if store is False:
        return ["--no-store"]
    return ["--store", os.fspath(store)]


@dataclass
class _Progress:
    total: int = 0
    done: int = 0
    cached: int = 0
    failed: int = 0


@dataclass
class _Outcome:
    """What one invocation of the binary said."""

    args: list[str]
    cwd: Path
    exit: int = 0
    plans: list[Plan] = field(default_factory=list)
    errors: list[Located] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    done: list[Event] = field(default_factory=list)
    validated: list[Validated] = field(default_factory=list)
    shown: list[Shown] = field(default_factory=list)
    run_done: Event | None = None
    events: int = 0
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=_STDERR_TAIL))

    def tail(self) -> str:
        """Return the binary's last lines of stderr, indented, for an error message."""
        lines = [line.rstrip("\n") for line in self.stderr if line.strip()]
        if not lines:
            return ""
        return "\n" + "\n".join("  | " + line for line in lines)

    def results(self) -> RunSet:
        """Open the results directories the run wrote, by pipeline, in order."""
        found: dict[str, Results] = {}
        for e in self.done:
            where = e.get("results")
            if isinstance(where, str) and where:
                path = Path(where)
                if not path.is_absolute():
                    path = self.cwd / path
                if (path / "manifest.json").is_file():
                    found[str(e.get("pipeline", path.name))] = Results(path)
        return RunSet(found)


class _Session:
    """One running binary: reads its two streams on threads, handles events on the caller's."""

    def __init__(
        self, args: list[str], quiet: bool, cwd: Path, grace: float = INTERRUPT_GRACE
    ) -> None:
        self.grace = grace
        self.outcome = _Outcome(args=args, cwd=cwd)
        self.display: Display = make_display(quiet)
        self.quiet = quiet
        self.progress: dict[str, _Progress] = {}
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        exe = binary()
        kwargs: dict[str, Any] = {}
        if os.name == "posix":
            # Its own process group: a terminal's Ctrl-C reaches this process only, which
            # passes it on once, and a kill after the grace period reaches its programs too.
            kwargs["start_new_session"] = True
        else:  # pragma: no cover - Windows
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
        self.proc = subprocess.Popen(
            [os.fspath(exe), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            **kwargs,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.open = 2
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def _pump(self, name: str, stream: IO[str]) -> None:
        try:
            for line in stream:
                self.lines.put((name, line))
        finally:
            self.lines.put((name, None))

    def _state(self, pipeline: str) -> _Progress:
        return self.progress.setdefault(pipeline, _Progress())

    def _show(self, pipeline: str) -> None:
        p = self._state(pipeline)
        self.display.progress(pipeline, p.done, p.total, p.cached, p.failed)

    def _handle(self, kind: str, line: str) -> None:
        if kind == "err":
            self.outcome.stderr.append(line)
            self.display.stderr(line)
            return
        event = parse(line)
        if event is None:
            # Not an event (never expected): shown as the binary's output, not parsed.
            if line.strip():
                self.display.stderr(line)
            return
        self.outcome.events += 1
        name = event["event"]
        pipeline = str(event.get("pipeline", ""))
        if name == "plan":
            plan = Plan.from_event(event)
            self.outcome.plans.append(plan)
            self._state(pipeline).total = plan.instances
        elif name == "instance_finished":
            # `progress` events count the same instances, and one may come before the
            # instance's own event: never count past the total (the last `progress` event
            # has the exact counts).
            p = self._state(pipeline)
            p.done = min(p.done + 1, p.total) if p.total else p.done + 1
            if event.get("from_store") is True:
                p.cached = min(p.cached + 1, p.done)
            self._show(pipeline)
        elif name == "instance_failed":
            log = event.get("log")
            self.outcome.failures.append(
                Failure(
                    pipeline=pipeline,
                    stage=str(event.get("stage", "")),
                    instance=str(event.get("instance", "")),
                    message=str(event.get("message", "")),
                    log=log if isinstance(log, str) else None,
                )
            )
            self._state(pipeline).failed += 1
            self._show(pipeline)
        elif name == "progress":
            p = self._state(pipeline)
            for attr, key in (
                ("total", "total"),
                ("done", "done"),
                ("cached", "from_store"),
                ("failed", "failed"),
            ):
                value = event.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    setattr(p, attr, value if attr == "total" else max(getattr(p, attr), value))
            self._show(pipeline)
        elif name == "pipeline_done":
            self.outcome.done.append(event)
        elif name == "error":
            line_no, col, hint = event.get("line"), event.get("col"), event.get("hint")
            self.outcome.errors.append(
                Located(
                    file=str(event.get("file", "")),
                    line=line_no if isinstance(line_no, int) else None,
                    col=col if isinstance(col, int) else None,
                    message=str(event.get("message", "")),
                    hint=hint if isinstance(hint, str) else None,
                )
            )
        elif name == "validated":
            self.outcome.validated.append(Validated.from_event(event))
        elif name == "show":
            self.outcome.shown.append(Shown.from_event(event))
        elif name == "run_done":
            self.outcome.run_done = event
        # Any other event (a later addition) is skipped.

    def _drain(self, until: float | None) -> bool:
        """Handle lines until both streams end (True) or `until` passes (False)."""
        while self.open:
            if until is not None and time.monotonic() >= until:
                return False
            try:
                kind, line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                self.open -= 1
            else:
                self._handle(kind, line)
        return True

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        if os.name == "posix":
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _interrupt(self) -> None:
        """Pass an interrupt on: SIGINT, then wait for the binary to stop (kill after grace)."""
        if self.proc.poll() is None:
            if os.name == "posix":
                self.proc.send_signal(signal.SIGINT)
            else:  # pragma: no cover - Windows
                self.proc.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined]
        deadline = time.monotonic() + self.grace
        try:
            if self._drain(until=deadline):
                self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            else:
                raise subprocess.TimeoutExpired(self.proc.args, self.grace)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            # A second Ctrl-C, or the grace period is over: no more waiting.
            self._kill()
        self.proc.wait()
        if os.name == "posix":
            # What it started and left in its process group goes with it.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def wait(self) -> _Outcome:
        """Run to the end and return what the binary said."""
        try:
            self._drain(until=None)
            self.outcome.exit = self.proc.wait()
        except KeyboardInterrupt:
            self._interrupt()
            raise
        except BaseException:
            self._kill()
            raise
        finally:
            self.display.close()
        if self.outcome.exit in (130, -signal.SIGINT):
            # Interrupted from outside (a SIGINT sent to the binary itself).
            raise KeyboardInterrupt
        return self.outcome


def _command(command: str, args: list[str]) -> list[str]:
    """`dplab COMMAND --message-format json ARGS`."""
    return [command, "--message-format", "json", *args]


def _unexpected(outcome: _Outcome, what: str) -> DplabError:
    if outcome.events == 0:
        return ProtocolError(
            f"{what}: dplab exited with code {outcome.exit} and wrote no JSON event (a dplab "
            "binary older than --message-format json? `dplab --version` says which; "
            "DPLAB_BINARY overrides it)" + outcome.tail()
        )
    return DplabError(f"{what}: dplab exited with code {outcome.exit}" + outcome.tail())


def _check(outcome: _Outcome, what: str) -> None:
    """Raise what the exit code and the events say went wrong (success: nothing)."""
    if outcome.exit == 0 and not outcome.errors:
        return
    if outcome.exit == 2 or outcome.errors:
        files = sorted({e.file for e in outcome.errors})
        if outcome.errors:
            message = f"invalid pipeline ({', '.join(files)}): {len(outcome.errors)} error(s)"
        elif outcome.events:
            message = f"{what}: bad input" + outcome.tail()
        else:
            raise _unexpected(outcome, what)
        raise PipelineError(message, outcome.errors, exit_code=outcome.exit)
    if outcome.exit == 4:
        # Every pipeline ran, but a checking stage's verdict (an audit's) differs from its
        # `expect:` (with none, any flag): the results are there, and the error says so.
        runs = outcome.results()
        first_run = next(iter(runs.values()), None)
        raise RunError(
            f"{what}: a verdict differs from what its stage expects (exit 4: an audit flagged "
            "a mechanism it did not expect to, or missed one it did)" + outcome.tail(),
            outcome.failures,
            results=first_run,
            runs=runs,
            exit_code=4,
        )
    if outcome.exit == 1 and (outcome.events or outcome.failures):
        runs = outcome.results()
        failed = [e for e in outcome.done if e.get("status") == "failed"]
        first: Results | None = None
        for e in failed:
            name = str(e.get("pipeline", ""))
            if name in runs:
                first = runs[name]
                break
        lines = [
            f"{e.get('pipeline')}: {e.get('message') or 'failed'}"
            for e in failed
            if isinstance(e.get("pipeline"), str)
        ]
        message = f"{what}: " + ("; ".join(lines) if lines else "failed")
        if not lines and not outcome.failures:
            message += outcome.tail()
        raise RunError(message, outcome.failures, results=first, runs=runs, exit_code=1)
    raise _unexpected(outcome, what)


def _run_args(
    paths: Sequence[StrPath],
    *,
    profile: str | None,
    set: Settings,
    sweep: Settings,
    stages: Sequence[str] | str | None,
    jobs: int | None,
    store: StrPath | bool | None,
    out: StrPath | None,
    allow_exec: bool,
    allow_read: Sequence[StrPath],
    force: bool | Sequence[str],
    dry_run: bool,
    args: Sequence[str],
) -> list[str]:
    argv = _common(profile, set, sweep, allow_read)
    argv += _stages(stages)
    argv += _store(store)
    if jobs is not None:
        argv += ["--jobs", str(int(jobs))]
    if out is not None:
        argv += ["--out", os.fspath(out)]
    if allow_exec:
        argv.append("--allow-exec")
    if force is True:
        argv.append("--force")
    elif force and not isinstance(force, bool):
        argv.append("--force=" + ",".join([force] if isinstance(force, str) else list(force)))
    if dry_run:
        argv.append("--dry-run")
    argv += list(args)
    argv.append("--")
    argv += [os.fspath(p) for p in paths]
    return _command("run", argv)


def run(
    pipeline: StrPath,
    *,
    profile: str | None = None,
    set: Settings = None,
    sweep: Settings = None,
    stages: Sequence[str] | str | None = None,
    jobs: int | None = None,
    store: StrPath | bool | None = None,
    out: StrPath | None = None,
    allow_exec: bool = False,
    allow_read: Sequence[StrPath] = (),
    force: bool | Sequence[str] = False,
    quiet: bool = False,
    args: Sequence[str] = (),
    interrupt_grace: float = INTERRUPT_GRACE,
) -> Results:
    """Run one pipeline file (`dplab run PIPELINE`) and return its results directory.

    Args:
        pipeline: the pipeline's YAML file. For a directory of pipelines, or several files,
            use :func:`run_all`.
        profile: `--profile`: apply the pipeline's named profile (e.g. `"ci"`).
        set: `--set` overrides, a mapping (`{"eps": [0.5, 1], "noisy.samples": 500}`; values
            that are not strings are written as JSON, which YAML reads) or `["eps=[0.5, 1]"]`.
        sweep: `--sweep` stage parameters, like `set` (`{"noisy.samples": [100, 1000]}`).
        stages: `--stages`: run only these stages and what they read.
        jobs: `--jobs`: worker threads (results do not depend on it).
        store: `--store DIR`; `False` for `--no-store`; `None` for the binary's default.
        out: `--out`: the results root (default `results`, under the current directory).
        allow_exec: `--allow-exec`: let `kind: external` stages run their programs.
        allow_read: `--allow-read` directories.
        force: `--force`: `True` for every stage, or the names of stages to recompute.
        quiet: show neither progress nor the binary's stderr (still in error messages).
        args: further command-line arguments, passed as they are.
        interrupt_grace: seconds the binary gets to stop after an interrupt before it is
            killed (with its process group).

    Returns:
        The pipeline's :class:`Results` (`OUT/<pipeline name>/`).

    Raises:
        PipelineError: the pipeline is invalid (`.errors`: each located error).
        RunError: instances failed (`.failures`; `.results`: the partial results, if written).
        KeyboardInterrupt: on Ctrl-C (or a notebook's stop): the binary is sent SIGINT, stops
            its programs, keeps what is in the store and exits (it is killed if it has not
            within `interrupt_grace` seconds; a second Ctrl-C kills it at once); then the
            interrupt is raised again.

    """
    if Path(pipeline).is_dir():
        raise ValueError(
            f"{os.fspath(pipeline)} is a directory: dplab.run takes one pipeline file; "
            "dplab.run_all runs every pipeline of a directory"
        )
    runs = run_all(
        [pipeline],
        profile=profile,
        set=set,
        sweep=sweep,
        stages=stages,
        jobs=jobs,
        store=store,
        out=out,
        allow_exec=allow_exec,
        allow_read=allow_read,
        force=force,
        quiet=quiet,
        args=args,
        interrupt_grace=interrupt_grace,
        _single=True,
    )
    return next(iter(runs.values()))


def run_all(
    pipelines: StrPath | Sequence[StrPath],
    *,
    profile: str | None = None,
    set: Settings = None,
    sweep: Settings = None,
    stages: Sequence[str] | str | None = None,
    jobs: int | None = None,
    store: StrPath | bool | None = None,
    out: StrPath | None = None,
    allow_exec: bool = False,
    allow_read: Sequence[StrPath] = (),
    force: bool | Sequence[str] = False,
    quiet: bool = False,
    args: Sequence[str] = (),
    interrupt_grace: float = INTERRUPT_GRACE,
    _single: bool = False,
) -> RunSet:
    """Run pipeline files and directories of them (`dplab run PATHS…`) in one invocation.

    The arguments are those of :func:`run`. Returns a :class:`RunSet`: the :class:`Results`
    of every pipeline that wrote a results directory, by pipeline name, in run order
    (pipelines skipped by `stages` are left out). Raises :class:`RunError` when any pipeline
    failed (its `.runs` holds what the others wrote), :class:`PipelineError` when any is
    invalid (nothing is run then).
    """
    paths = [pipelines] if isinstance(pipelines, (str, os.PathLike)) else list(pipelines)
    if not paths:
        raise ValueError("no pipeline given")
    argv = _run_args(
        paths,
        profile=profile,
        set=set,
        sweep=sweep,
        stages=stages,
        jobs=jobs,
        store=store,
        out="results" if out is None else out,
        allow_exec=allow_exec,
        allow_read=allow_read,
        force=force,
        dry_run=False,
        args=args,
    )
    what = "dplab run " + " ".join(os.fspath(p) for p in paths)
    outcome = _Session(argv, quiet, Path.cwd(), interrupt_grace).wait()
    _check(outcome, what)
    runs = outcome.results()
    if _single and not runs:
        skipped = [e for e in outcome.done if e.get("status") == "skipped"]
        if skipped:
            raise DplabError(f"{what}: skipped: {skipped[0].get('message') or 'nothing to run'}")
        raise ProtocolError(f"{what}: the run reported no results directory" + outcome.tail())
    return runs


def plan(
    pipeline: StrPath,
    *,
    profile: str | None = None,
    set: Settings = None,
    sweep: Settings = None,
    stages: Sequence[str] | str | None = None,
    store: StrPath | bool | None = None,
    allow_read: Sequence[StrPath] = (),
    force: bool | Sequence[str] = False,
    args: Sequence[str] = (),
) -> Plan:
    """Tell what :func:`run` would do, as data (`dplab run --dry-run`): nothing runs.

    Returns the pipeline's :class:`Plan`: per stage, its instances, how many would run, how
    many the store has, and why each would run. Raises :class:`PipelineError` when invalid.
    """
    argv = _run_args(
        [pipeline],
        profile=profile,
        set=set,
        sweep=sweep,
        stages=stages,
        jobs=None,
        store=store,
        out=None,
        allow_exec=False,
        allow_read=allow_read,
        force=force,
        dry_run=True,
        args=args,
    )
    what = f"dplab run --dry-run {os.fspath(pipeline)}"
    outcome = _Session(argv, True, Path.cwd()).wait()
    _check(outcome, what)
    if not outcome.plans:
        raise ProtocolError(f"{what}: no plan event" + outcome.tail())
    if len(outcome.plans) > 1:
        names = ", ".join(p.pipeline for p in outcome.plans)
        raise ValueError(f"{what}: several pipelines ({names}): dplab.plan takes one file")
    return outcome.plans[0]


def validate(
    pipelines: StrPath | Sequence[StrPath],
    *,
    profile: str | None = None,
    set: Settings = None,
    sweep: Settings = None,
    allow_read: Sequence[StrPath] = (),
    args: Sequence[str] = (),
) -> list[Validated]:
    """Check pipeline files without running them (`dplab validate`).

    Returns one :class:`Validated` per valid file; raises :class:`PipelineError` listing every
    located error of the invalid ones.
    """
    paths = [pipelines] if isinstance(pipelines, (str, os.PathLike)) else list(pipelines)
    argv = _common(profile, set, sweep, allow_read) + list(args) + ["--"]
    argv += [os.fspath(p) for p in paths]
    outcome = _Session(_command("validate", argv), True, Path.cwd()).wait()
    _check(outcome, "dplab validate " + " ".join(os.fspath(p) for p in paths))
    return outcome.validated


def show(
    pipeline: StrPath,
    *,
    profile: str | None = None,
    set: Settings = None,
    sweep: Settings = None,
    allow_read: Sequence[StrPath] = (),
) -> str:
    """Return the pipeline as it will run (`dplab show`): YAML, profile and `--set` applied.

    Raises :class:`PipelineError` when it is invalid.
    """
    argv = _common(profile, set, sweep, allow_read) + ["--", os.fspath(pipeline)]
    outcome = _Session(_command("show", argv), True, Path.cwd()).wait()
    _check(outcome, f"dplab show {os.fspath(pipeline)}")
    if not outcome.shown:
        raise ProtocolError(f"dplab show {os.fspath(pipeline)}: no show event" + outcome.tail())
    return outcome.shown[0].yaml
