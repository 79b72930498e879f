"""Reader of Gavel's ``.trace`` files (stanford-futuredata/gavel, ``scheduler/traces``).

One job per line, tab-separated, no header. Gavel's files come in four layouts, told
apart by the number of fields on the first line (a file uses one layout throughout):

- 10 fields (current Gavel): ``job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time``;
- 9 fields (older releases, without ``working_directory``);
- 7 fields (the ``traces/msr`` files, most of Gavel's ``.trace`` files): ``job_type,
  command, num_steps_arg, needs_data_dir, total_steps, arrival_time, scale_factor``;
- 6 fields (the first generated traces): ``job_type, command, num_steps_arg,
  total_steps, arrival_time, scale_factor``.

Mapping:

- the job's id is its 0-based position among the file's lines, as Gavel numbers jobs;
- gang = ``scale_factor``; a row with ``scale_factor`` 0 (Gavel's own parser skips them)
  is counted as ``zero_scale_factor`` and skipped;
- work: ``total_steps`` iterations of the job's model on its whole gang; with Gavel's
  throughput file (``--throughputs``, :mod:`themis.workload.gavel_throughputs`) the
  job instead ran ``total_steps / throughput`` seconds on its gang, Gavel's own measured
  speed of that job type and scale factor, which is how Gavel made the trace;
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
from themis.workload.plugin import Claim, TraceFormatPlugin
from themis.workload.records import Exclusions, TraceJob, TraceRead
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

#: Gavel's layouts by field count (see the module docstring).
LAYOUTS: dict[int, tuple[str, ...]] = {
    10: FIELDS,
    9: tuple(f for f in FIELDS if f != "working_directory"),
    7: (
        "job_type",
        "command",
        "num_steps_arg",
        "needs_data_dir",
        "total_steps",
        "arrival_time",
        "scale_factor",
    ),
    6: ("job_type", "command", "num_steps_arg", "total_steps", "arrival_time", "scale_factor"),
}


def read(path: Path, source: str) -> TraceRead:
    exclusions = Exclusions()
    return TraceRead(_jobs(path, source, exclusions), exclusions, grouping=Grouping.SINGLE)


def _counts() -> str:
    sizes = sorted(LAYOUTS)
    return ", ".join(str(n) for n in sizes[:-1]) + f" or {sizes[-1]}"


def layout_of(cells: list[str], source: str, line: int) -> tuple[str, ...]:
    """The layout a first line of ``len(cells)`` fields is in, or an error naming the
    first field missing from the next larger layout (or the extra one)."""
    fields = LAYOUTS.get(len(cells))
    if fields is not None:
        return fields
    larger = [n for n in sorted(LAYOUTS) if n > len(cells)]
    name = LAYOUTS[larger[0]][len(cells)] if larger else f"after {FIELDS[-1]}"
    hint = " (is it tab-separated?)" if len(cells) == 1 else ""
    raise ThemisError(
        f"expected {_counts()} tab-separated fields (Gavel's layouts), got {len(cells)}{hint}",
        source=source,
        line=line,
        field=name,
    )


def _jobs(path: Path, source: str, exclusions: Exclusions) -> Iterator[TraceJob]:
    fields: tuple[str, ...] | None = None
    count = 0
    with open_binary(path, source) as handle:
        for line, text in enumerate(decoded_lines(handle, source), start=1):
            text = text.rstrip("\r\n")
            if not text.strip():
                raise ThemisError("blank line", source=source, line=line)
            cells = text.split("\t")
            if fields is None:
                fields = layout_of(cells, source, line)
            if len(cells) != len(fields):
                name = fields[len(cells)] if len(cells) < len(fields) else f"after {fields[-1]}"
                raise ThemisError(
                    f"expected {len(fields)} tab-separated fields like line 1, got {len(cells)}",
                    source=source,
                    line=line,
                    field=name,
                )
            job = _job(dict(zip(fields, cells, strict=True)), count, line, source)
            count += 1
            if job is None:
                exclusions.add("zero_scale_factor", line)
                continue
            yield job
    if count == 0:
        raise ThemisError("the trace has no jobs", source=source, line=1)


def _job(cell: dict[str, str], index: int, line: int, source: str) -> TraceJob | None:
    """The job of one line, or None for a well-formed line with ``scale_factor`` 0."""

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
    if "needs_data_dir" in cell and cell["needs_data_dir"].strip() not in ("0", "1"):
        raise fail("needs_data_dir", f"must be 0 or 1, got '{cell['needs_data_dir'].strip()}'")
    steps = whole("total_steps", 0)
    gang = whole("scale_factor", 0)
    if "priority_weight" in cell and number("priority_weight") <= 0:
        raise fail("priority_weight", f"must be > 0, got {cell['priority_weight'].strip()}")
    if "SLO" in cell:
        slo = number("SLO")
        if slo <= 0 and slo != -1:
            raise fail("SLO", f"must be > 0 or -1 (none), got {cell['SLO'].strip()}")
    arrival = number("arrival_time", 0.0)
    if gang == 0:
        return None
    return TraceJob(str(index), arrival, gang, None, float(steps), job_type, line)


#: The format, as the registry (``formats.py``) knows it: a ``.trace`` file, or a first
#: line with tabs.
FORMAT = TraceFormatPlugin(
    "gavel",
    "Gavel .trace (tab-separated, one job per line)",
    gang_field="scale_factor",
    read=read,
    claims=(Claim(3, lambda p: p.suffix == ".trace"), Claim(120, lambda p: "\t" in p.first)),
    model_field="job_type",
    throughputs=True,
)
