"""Slurm accounting as a themis trace: the output of

    sacct --allusers --parsable2 --format JobID,User,Submit,Start,Elapsed,AllocTRES,State

(``|``-separated, a header line first; the columns in any order, others ignored and
reported). Each job with GPUs (``gres/gpu=N`` in ``AllocTRES``) that started becomes one
job of that gang, its ``Elapsed`` time the work; a user's jobs are grouped into apps by
sessions (``--app-gap``). A job that never started, one without GPUs and the steps of a
job (``123.batch``) are excluded and counted, never dropped silently. Times are Slurm's
``YYYY-MM-DDTHH:MM:SS`` and ``[D-]HH:MM:SS``.

The whole format is the :data:`FORMAT` object at the bottom, which the package's entry
point (``themis.trace_formats``) names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from themis.errors import ThemisError
from themis.workload.plugin import PLUGIN, Claim, TraceFormatPlugin
from themis.workload.records import Exclusions, Grouping, TraceJob, TraceRead

COLUMNS = ("JobID", "User", "Submit", "Start", "Elapsed", "AllocTRES")
_ELAPSED = re.compile(r"^(?:(\d+)-)?(\d+):(\d\d):(\d\d)$")
_GPUS = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)")


def _seconds(text: str, source: str, line: int) -> float:
    found = _ELAPSED.match(text)
    if found is None:
        raise ThemisError(
            f"not a duration [D-]HH:MM:SS: '{text}'", source=source, line=line, field="Elapsed"
        )
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def _stamp(text: str, source: str, line: int, name: str) -> float:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ThemisError(
            f"not a time YYYY-MM-DDTHH:MM:SS: '{text}'", source=source, line=line, field=name
        ) from None


def read(path: Path, source: str) -> TraceRead:
    with path.open(encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split("|")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ThemisError(f"missing columns: {', '.join(missing)}", source=source, line=1)
    at = {name: header.index(name) for name in COLUMNS}
    exclusions = Exclusions()

    def jobs() -> Iterator[TraceJob]:
        with path.open(encoding="utf-8") as rows:
            next(rows)
            for line, text in enumerate(rows, start=2):
                cells = text.rstrip("\n").split("|")
                if cells == [""]:
                    continue
                if len(cells) != len(header):
                    raise ThemisError(
                        f"{len(cells)} fields, the header has {len(header)}",
                        source=source,
                        line=line,
                    )
                job_id = cells[at["JobID"]]
                if "." in job_id:  # a step (123.batch, 123.0) of a job counted once
                    exclusions.add("job_step", line)
                    continue
                gpus = _GPUS.search(cells[at["AllocTRES"]])
                if gpus is None or int(gpus.group(1)) == 0:
                    exclusions.add("cpu_only", line)
                    continue
                if cells[at["Start"]] in ("", "None", "Unknown"):
                    exclusions.add("never_started", line)
                    continue
                yield TraceJob(
                    job_id,
                    _stamp(cells[at["Submit"]], source, line, "Submit"),
                    int(gpus.group(1)),
                    _seconds(cells[at["Elapsed"]], source, line),
                    None,
                    None,
                    line,
                    user=cells[at["User"]],
                )

    ignored = [c for c in header if c not in COLUMNS]
    return TraceRead(jobs(), exclusions, ignored, grouping=Grouping.SESSION)


FORMAT = TraceFormatPlugin(
    "sacct",
    "Slurm sacct --parsable2 (JobID|User|Submit|Start|Elapsed|AllocTRES)",
    gang_field="AllocTRES",
    read=read,
    claims=(
        Claim(5, lambda p: p.suffix == ".sacct"),
        Claim(PLUGIN, lambda p: p.first.startswith("JobID|")),
    ),
)
