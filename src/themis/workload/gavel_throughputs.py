"""Gavel's measured throughputs, to turn a Gavel trace's step counts into time.

A Gavel trace gives each job a number of steps, which Gavel made from a duration drawn
for the job times the job's measured throughput (steps per second) on its reference GPU
type, ``v100``. Dividing by themis's own model profiles instead gives durations far from
the trace's intent (0.4-35x, median 2.5x, on Gavel's ``msr`` traces), so with Gavel's
throughput file (``--throughputs``) each job ran ``total_steps / throughput`` seconds on
its gang.

Gavel writes the file in two shapes, both read here::

    {"v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 2.1, ...}, ...}, ...}
    {"v100": {"ResNet-50 (batch size 64)": {"null": 2.1, ...}, ...}, ...}

The first (``simulation_throughputs.json``) is keyed by ``(job_type, scale_factor)``;
the second (``oracle_throughputs.json``) by job type alone, scale factor 1 (or
``"<type> (scale factor N)"``). ``null`` is the job's throughput running alone; the
other entries (co-located pairs) are not used.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from themis.errors import ThemisError
from themis.workload.records import TraceJob, TraceRead

#: Gavel's reference GPU type: the one its trace generator measured steps on.
REFERENCE_WORKER = "v100"

_TUPLE_KEY = re.compile(r"^\('(?P<type>.*)', (?P<scale>\d+)\)$")
_SCALE_SUFFIX = re.compile(r"^(?P<type>.*) \(scale factor (?P<scale>\d+)\)$")


@dataclass(frozen=True)
class GavelThroughputs:
    """Steps per second of each ``(job_type, scale_factor)`` on one GPU type."""

    source: str
    worker: str
    steps_per_second: dict[tuple[str, int], float]

    def seconds(self, job: TraceJob, trace_source: str) -> TraceJob:
        """``job`` with its steps turned into seconds on its gang."""
        key = (job.model or "", job.gang)
        rate = self.steps_per_second.get(key)
        if rate is None:
            raise ThemisError(
                f"no throughput for job type '{key[0]}' at scale factor {key[1]} on "
                f"{self.worker} in {self.source}",
                source=trace_source,
                line=job.line,
                field="job_type",
            )
        steps = job.iterations if job.iterations is not None else 0.0
        return replace(job, seconds=steps / rate, iterations=None)

    def apply(self, read: TraceRead, trace_source: str) -> TraceRead:
        """The same read, each job's work given as seconds (streamed, like the read)."""

        def jobs() -> Iterator[TraceJob]:
            for job in read.jobs:
                yield self.seconds(job, trace_source)

        return TraceRead(
            jobs(), read.exclusions, read.ignored_columns, read.strict_models, read.grouping
        )

    def notes(self) -> dict[str, object]:
        return {"file": self.source, "worker": self.worker, "entries": len(self.steps_per_second)}


def _line_of(text: str, key: str) -> int | None:
    at = text.find(json.dumps(key))
    return None if at < 0 else text.count("\n", 0, at) + 1


def _key(name: str) -> tuple[str, int] | None:
    for pattern in (_TUPLE_KEY, _SCALE_SUFFIX):
        match = pattern.match(name)
        if match:
            return match.group("type"), int(match.group("scale"))
    if name.startswith("("):
        return None
    return name, 1


def load_throughputs(path: str | Path, worker: str = REFERENCE_WORKER) -> GavelThroughputs:
    """Read Gavel's throughput file; errors name the file, the line and the entry."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ThemisError("no such throughput file", source=source, field="--throughputs") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemisError(f"cannot read: {exc}", source=source) from None
    try:
        raw: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThemisError(f"not JSON: {exc.msg}", source=source, line=exc.lineno) from None
    if not isinstance(raw, dict) or not raw:
        raise ThemisError(
            "expected an object of GPU type -> job type -> throughputs", source=source, line=1
        )
    if worker not in raw:
        raise ThemisError(
            f"no GPU type '{worker}' (has: {', '.join(map(str, raw))})", source=source, line=1
        )
    table = raw[worker]
    if not isinstance(table, dict):
        raise ThemisError(
            "must be an object of job type -> throughputs",
            source=source,
            line=_line_of(text, worker),
            field=worker,
        )
    rates: dict[tuple[str, int], float] = {}
    for name, entry in table.items():
        where = f"{worker}.{name}"
        key = _key(name)
        if key is None:
            raise ThemisError(
                "expected a job type or \"('<job type>', <scale factor>)\"",
                source=source,
                line=_line_of(text, name),
                field=where,
            )
        value = entry.get("null") if isinstance(entry, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ThemisError(
                "missing the job's own throughput 'null' (steps per second, a number)",
                source=source,
                line=_line_of(text, name),
                field=f"{where}.null",
            )
        if not math.isfinite(value) or value < 0:
            raise ThemisError(
                f"must be a number of steps per second >= 0, got {value}",
                source=source,
                line=_line_of(text, name),
                field=f"{where}.null",
            )
        if value > 0:  # 0: Gavel's mark for a combination that does not run
            rates[key] = float(value)
    return GavelThroughputs(source, worker, rates)
