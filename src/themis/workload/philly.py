"""Reader of Microsoft Philly's ``cluster_job_log`` (msr-fiddle/philly-traces).

The file is one JSON list of jobs ``{status, vc, jobid, user, submitted_time,
attempts: [{start_time, end_time, detail: [{ip, gpus: [...]}]}]}``, streamed element by
element. Mapping (docs/traces.md):

- one job per element; it arrives at ``submitted_time``;
- an attempt holds the GPUs listed in its ``detail`` for ``end_time - start_time``; the
  job's gang is the most GPUs any attempt held, and its work is the GPU-seconds of all
  attempts spread over that gang (``sum(duration * gpus) / gang`` seconds on the gang);
- apps are ``session`` groups of one user in one virtual cluster (``grouping``);
- the trace names no model: seeded draw per app.

Not simulable, counted (never dropped silently): ``never_started`` (no attempts),
``unfinished`` (the last attempt has no ``end_time``: still running when the trace was
taken), ``attempt_without_times`` (another attempt lacks a time: a logging gap),
``no_gpus`` (no attempt held a GPU), ``no_submitted_time``. Times are
``YYYY-MM-DD HH:MM:SS``; a missing time is ``null`` or the text ``None``.

Keys the format does not have are ignored and reported, as the CSV readers report extra
columns: ``[].cluster``, ``attempts[].exit_code``, ``attempts[].detail[].port``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from themis.errors import ThemisError
from themis.workload.grouping import Grouping
from themis.workload.jsonstream import JsonStream
from themis.workload.locate import line_of, node_lines
from themis.workload.plugin import Claim, TraceFormatPlugin
from themis.workload.records import Exclusions, TraceJob, TraceRead
from themis.workload.textio import open_binary, seconds_of_stamp

FIELDS = ("status", "vc", "jobid", "user", "submitted_time", "attempts")
ATTEMPT_FIELDS = ("start_time", "end_time", "detail")
MACHINE_FIELDS = ("ip", "gpus")


class _Unknown:
    """Keys outside the format, by path, in the order first met."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def check(self, obj: dict[str, Any], known: tuple[str, ...], prefix: str) -> None:
        for key in obj:
            if key not in known:
                path = f"{prefix}.{key}"
                if path not in self.paths:
                    self.paths.append(path)


class _Bad(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def read(path: Path, source: str) -> TraceRead:
    handle = open_binary(path, source)
    exclusions = Exclusions()
    unknown = _Unknown()
    jobs = _jobs(handle, JsonStream(handle, source), exclusions, unknown, source)
    # ``unknown.paths`` fills while the jobs are read, like the exclusions.
    return TraceRead(jobs, exclusions, ignored_columns=unknown.paths, grouping=Grouping.SESSION)


def _jobs(
    handle: BinaryIO,
    stream: JsonStream,
    exclusions: Exclusions,
    unknown: _Unknown,
    source: str,
) -> Iterator[TraceJob]:
    seen: dict[str, int] = {}
    with handle:
        for index, obj, line, text in stream.items():
            try:
                job_id, job = _job(obj, line, exclusions, unknown)
            except _Bad as bad:
                at = line_of(node_lines(text, line, source), bad.path.lstrip("."), line)
                raise ThemisError(
                    bad.message, source=source, line=at, field=f"[{index}]{bad.path}"
                ) from None
            first = seen.setdefault(job_id, line)
            if first != line:
                at = line_of(node_lines(text, line, source), "jobid", line)
                raise ThemisError(
                    f"duplicate jobid '{job_id}' (first on line {first})",
                    source=source,
                    line=at,
                    field=f"[{index}].jobid",
                )
            if job is not None:
                yield job
        stream.end()


def _text(obj: dict[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise _Bad(f".{key}", f"must be text, got {value!r}")
    if not value.strip():
        raise _Bad(f".{key}", "empty")
    return value


def _stamp(value: Any, path: str) -> float | None:
    """Seconds of a time, or None for a missing one (``null`` or ``"None"``)."""
    if value is None or value == "None":
        return None
    if not isinstance(value, str):
        raise _Bad(path, f"must be a time YYYY-MM-DD HH:MM:SS, got {value!r}")
    try:
        return seconds_of_stamp(value)
    except ValueError:
        raise _Bad(path, f"'{value}' is not YYYY-MM-DD HH:MM:SS") from None


def _gpus(attempt: dict[str, Any], path: str, unknown: _Unknown) -> int:
    detail = attempt["detail"]
    if not isinstance(detail, list):
        raise _Bad(f"{path}.detail", f"must be a list of machines, got {detail!r}")
    count = 0
    for k, machine in enumerate(detail):
        where = f"{path}.detail[{k}]"
        if not isinstance(machine, dict):
            raise _Bad(where, f"must be an object {{ip, gpus}}, got {machine!r}")
        for key in MACHINE_FIELDS:
            if key not in machine:
                raise _Bad(f"{where}.{key}", "missing")
        unknown.check(machine, MACHINE_FIELDS, "[].attempts[].detail[]")
        if not isinstance(machine["ip"], str):
            raise _Bad(f"{where}.ip", f"must be text, got {machine['ip']!r}")
        gpus = machine["gpus"]
        if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
            raise _Bad(f"{where}.gpus", f"must be a list of GPU names, got {gpus!r}")
        count += len(gpus)
    return count


def _job(
    obj: Any, line: int, exclusions: Exclusions, unknown: _Unknown
) -> tuple[str, TraceJob | None]:
    """The job's id, and the job (None when it is excluded, counted in ``exclusions``)."""
    if not isinstance(obj, dict):
        raise _Bad("", f"expected a job object, got {obj!r}"[:120])
    for key in FIELDS:
        if key not in obj:
            raise _Bad(f".{key}", "missing")
    unknown.check(obj, FIELDS, "[]")
    job_id = _text(obj, "jobid")
    user = _text(obj, "user")
    vc = _text(obj, "vc")
    _text(obj, "status")
    submit = _stamp(obj["submitted_time"], ".submitted_time")
    attempts = obj["attempts"]
    if not isinstance(attempts, list):
        raise _Bad(".attempts", f"must be a list, got {attempts!r}")
    spans: list[tuple[float | None, float | None, int]] = []
    for k, attempt in enumerate(attempts):
        where = f".attempts[{k}]"
        if not isinstance(attempt, dict):
            raise _Bad(
                where, f"must be an object {{start_time, end_time, detail}}, got {attempt!r}"
            )
        for key in ATTEMPT_FIELDS:
            if key not in attempt:
                raise _Bad(f"{where}.{key}", "missing")
        unknown.check(attempt, ATTEMPT_FIELDS, "[].attempts[]")
        start = _stamp(attempt["start_time"], f"{where}.start_time")
        end = _stamp(attempt["end_time"], f"{where}.end_time")
        if start is not None and end is not None and end < start:
            raise _Bad(f"{where}.end_time", f"ends before it starts ({attempt['start_time']})")
        spans.append((start, end, _gpus(attempt, where, unknown)))
    if submit is None:
        exclusions.add("no_submitted_time", line)
        return job_id, None
    if not spans:
        exclusions.add("never_started", line)
        return job_id, None
    last_start, last_end, _ = spans[-1]
    if last_end is None and last_start is not None:
        exclusions.add("unfinished", line)
        return job_id, None
    if any(start is None or end is None for start, end, _ in spans):
        exclusions.add("attempt_without_times", line)
        return job_id, None
    gang = max(gpus for _, _, gpus in spans)
    if gang == 0:
        exclusions.add("no_gpus", line)
        return job_id, None
    gpu_seconds = sum(
        (end - start) * gpus for start, end, gpus in spans if start is not None and end is not None
    )
    return job_id, TraceJob(
        job_id, submit, gang, gpu_seconds / gang, None, None, line, user=f"{vc}/{user}"
    )


#: The format, as the registry (``formats.py``) knows it: text starting with ``[``.
FORMAT = TraceFormatPlugin(
    "philly",
    "Microsoft Philly cluster_job_log (JSON list of jobs)",
    gang_field="attempts[].detail[].gpus",
    read=read,
    claims=(Claim(110, lambda p: p.head.startswith("[")),),
)
