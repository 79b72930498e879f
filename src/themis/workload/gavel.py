"""Reader of Gavel's ``.trace`` files (stanford-futuredata/gavel, ``scheduler/traces``).

One job per line, tab-separated, no header: ``job_type, command, working_directory,
num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO,
arrival_time`` (the 9-field form of older Gavel releases, without
``working_directory``, is read too; a file uses one form throughout). Mapping:

- the job's id is its 0-based position in the file, as Gavel numbers jobs;
- gang = ``scale_factor``; work = ``total_steps`` iterations (one Gavel step is one
  iteration of the job's model on its whole gang);
- the job arrives at ``arrival_time`` seconds; each job is its own app (Gavel has no
  users);
- the model is ``job_type`` (``ResNet-50 (batch size 64)``) matched by normalized name
  against the profiles, else assigned per job type (``models``).

``command``, ``num_steps_arg``, ``priority_weight`` and ``SLO`` are checked and not used.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from themis.errors import ThemisError
from themis.workload.grouping import Grouping
from themis.workload.records import TraceJob, TraceRead
from themis.workload.textio import decoded_lines, open_binary, parse_int, parse_number

FIELDS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)
OLD_FIELDS = tuple(f for f in FIELDS if f != "working_directory")


def read(path: Path, source: str) -> TraceRead:
    return TraceRead(_jobs(path, source), grouping=Grouping.SINGLE)


def _jobs(path: Path, source: str) -> Iterator[TraceJob]:
    fields: tuple[str, ...] | None = None
    count = 0
    with open_binary(path, source) as handle:
        for line, text in enumerate(decoded_lines(handle, source), start=1):
            text = text.rstrip("\r\n")
            if not text.strip():
                raise ThemisError("blank line", source=source, line=line)
            cells = text.split("\t")
            if fields is None:
                if len(cells) not in (len(FIELDS), len(OLD_FIELDS)):
                    raise ThemisError(
                        f"expected {len(FIELDS)} tab-separated fields "
                        f"({', '.join(FIELDS)}), got {len(cells)}",
                        source=source,
                        line=line,
                    )
                fields = FIELDS if len(cells) == len(FIELDS) else OLD_FIELDS
            if len(cells) != len(fields):
                name = fields[len(cells)] if len(cells) < len(fields) else f"after {fields[-1]}"
                raise ThemisError(
                    f"expected {len(fields)} tab-separated fields, got {len(cells)}",
                    source=source,
                    line=line,
                    field=name,
                )
            yield _job(dict(zip(fields, cells, strict=True)), count, line, source)
            count += 1
    if count == 0:
        raise ThemisError("the trace has no jobs", source=source, line=1)


def _job(cell: dict[str, str], index: int, line: int, source: str) -> TraceJob:
    def fail(name: str, message: str) -> ThemisError:
        return ThemisError(message, source=source, line=line, field=name)

    def number(name: str, minimum: float | None = None) -> float:
        text = cell[name].strip()
        try:
            value = parse_number(text)
        except ValueError:
            raise fail(name, f"'{text}' is not a number") from None
        if minimum is not None and value < minimum:
            raise fail(name, f"must be >= {minimum:g}, got {text}")
        return value

    def whole(name: str, minimum: int) -> int:
        text = cell[name].strip()
        try:
            value = parse_int(text)
        except ValueError:
            raise fail(name, f"'{text}' is not a whole number") from None
        if value < minimum:
            raise fail(name, f"must be >= {minimum}, got {text}")
        return value

    job_type = cell["job_type"].strip()
    if not job_type:
        raise fail("job_type", "empty")
    if not cell["command"].strip():
        raise fail("command", "empty")
    if cell["needs_data_dir"].strip() not in ("0", "1"):
        raise fail("needs_data_dir", f"must be 0 or 1, got '{cell['needs_data_dir'].strip()}'")
    steps = whole("total_steps", 0)
    gang = whole("scale_factor", 1)
    if number("priority_weight") <= 0:
        raise fail("priority_weight", f"must be > 0, got {cell['priority_weight'].strip()}")
    slo = number("SLO")
    if slo <= 0 and slo != -1:
        raise fail("SLO", f"must be > 0 or -1 (none), got {cell['SLO'].strip()}")
    arrival = number("arrival_time", 0.0)
    return TraceJob(str(index), arrival, gang, None, float(steps), job_type, line)
