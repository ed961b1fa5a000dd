"""The JSON events `--message-format json` writes on stdout, one object per line (format 1)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FORMAT", "Plan", "PlannedStage", "Shown", "Validated", "parse"]

FORMAT = 1
"""The event format this package reads; events of another format are ignored."""

Event = dict[str, Any]


def parse(line: str) -> Event | None:
    """One line of stdout as an event, or `None` when it is not one of format 1.

    A line that is not a JSON object with `"format": 1` and a string `"event"` (a stray print,
    an event of a later format) is not an event: the caller skips it.
    """
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    if value.get("format") != FORMAT or not isinstance(value.get("event"), str):
        return None
    return value


def _int(value: Any, default: int = 0) -> int:
    """Read an integer field, `default` when absent or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return int(value)


def _opt_int(value: Any) -> int | None:
    """Read an integer field that may be null."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _opt_str(value: Any) -> str | None:
    """Read a string field that may be null."""
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a plan: how many of its instances would run, and why."""

    stage: str
    kind: str
    instances: int
    """Its instances in all."""
    to_run: int
    """How many would be computed."""
    in_store: int
    """How many the instance store has (taken, not computed)."""
    reasons: dict[str, int] = field(default_factory=dict)
    """Why instances would run, each reason with how many it applies to."""

    @classmethod
    def from_event(cls, value: Any) -> PlannedStage:
        """Read one entry of a `plan` event's `stages`."""
        v: dict[str, Any] = value if isinstance(value, dict) else {}
        reasons = v.get("reasons")
        return cls(
            stage=str(v.get("stage", "")),
            kind=str(v.get("kind", "")),
            instances=_int(v.get("instances")),
            to_run=_int(v.get("to_run")),
            in_store=_int(v.get("in_store")),
            reasons={str(k): _int(n) for k, n in reasons.items()}
            if isinstance(reasons, dict)
            else {},
        )


@dataclass(frozen=True)
class Plan:
    """What a run of one pipeline would do (`dplab run --dry-run`), stage by stage."""

    pipeline: str
    file: str
    store: str | None
    """The instance store it would use, or `None` without one (`--no-store`)."""
    stages: list[PlannedStage] = field(default_factory=list)

    @classmethod
    def from_event(cls, event: Event) -> Plan:
        """Read a `plan` event."""
        stages = event.get("stages")
        return cls(
            pipeline=str(event.get("pipeline", "")),
            file=str(event.get("file", "")),
            store=_opt_str(event.get("store")),
            stages=[PlannedStage.from_event(s) for s in stages] if isinstance(stages, list) else [],
        )

    @property
    def instances(self) -> int:
        """Instances of every stage."""
        return sum(s.instances for s in self.stages)

    @property
    def to_run(self) -> int:
        """Instances that would be computed."""
        return sum(s.to_run for s in self.stages)

    @property
    def in_store(self) -> int:
        """Instances the store has."""
        return sum(s.in_store for s in self.stages)

    def stage(self, name: str) -> PlannedStage:
        """Return the stage named `name` (KeyError if the pipeline has none)."""
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(f"pipeline {self.pipeline!r} has no stage {name!r}")

    def _repr_html_(self) -> str:
        """Show the stages as a table, for notebooks."""
        from html import escape

        rows = "".join(
            f"<tr><td>{escape(s.stage)}</td><td>{escape(s.kind)}</td><td>{s.instances}</td>"
            f"<td>{s.to_run}</td><td>{s.in_store}</td>"
            f"<td>{escape(', '.join(f'{r}: {n}' for r, n in s.reasons.items()))}</td></tr>"
            for s in self.stages
        )
        return (
            f"<b>{escape(self.pipeline)}</b> ({escape(self.file)}): {self.to_run} of "
            f"{self.instances} instances to run, {self.in_store} in the store"
            "<table><tr><th>stage</th><th>kind</th><th>instances</th><th>to run</th>"
            f"<th>in store</th><th>why</th></tr>{rows}</table>"
        )


@dataclass(frozen=True)
class Validated:
    """A valid pipeline file, as `dplab validate` checked it."""

    file: str
    pipeline: str
    stages: int
    instances: int
    programs: list[str] = field(default_factory=list)
    """The commands its `kind: external` stages run (what `--allow-exec` would allow)."""

    @classmethod
    def from_event(cls, event: Event) -> Validated:
        """Read a `validated` event."""
        programs = event.get("programs")
        return cls(
            file=str(event.get("file", "")),
            pipeline=str(event.get("pipeline", "")),
            stages=_int(event.get("stages")),
            instances=_int(event.get("instances")),
            programs=[str(p) for p in programs] if isinstance(programs, list) else [],
        )


@dataclass(frozen=True)
class Shown:
    """A pipeline as it will run (`dplab show`): profile and `--set` applied."""

    file: str
    pipeline: str
    yaml: str

    @classmethod
    def from_event(cls, event: Event) -> Shown:
        """Read a `show` event."""
        return cls(
            file=str(event.get("file", "")),
            pipeline=str(event.get("pipeline", "")),
            yaml=str(event.get("yaml", "")),
        )
