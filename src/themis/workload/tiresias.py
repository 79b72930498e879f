"""Reader of the Tiresias simulator's job CSV (SymbioticLab/Tiresias, ``simulator/*.csv``).

Columns ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval`` (extra
columns, which some forks add, are ignored and reported). Mapping:

- one job per row, its own app (the trace has no users), arriving at ``submit_time``
  seconds;
- gang = ``num_gpu``; the job ran ``duration`` seconds on its gang, so its work is
  ``duration * num_gpu / time_per_iteration`` iterations of its model, like HyperDrive;
  ``iterations`` is checked but not used (traces derived from other logs write 0);
- the model is ``model_name``: the ten TensorFlow-benchmark CNNs of Tiresias are the ten
  bundled profiles; another name is matched by normalized name, else assigned per name;
- ``interval`` (the gap to the next submission) is checked and not used.

Not simulable, counted (as the Helios reader does): ``cpu_only`` (``num_gpu`` 0; traces
derived from Philly logs keep such rows, 184 of 30,940 in one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from themis.workload.csvtable import CsvSpec, CsvTable
from themis.workload.grouping import Grouping
from themis.workload.plugin import Claim, TraceFormatPlugin
from themis.workload.records import Exclusions, TraceJob, TraceRead

COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
SPEC = CsvSpec(COLUMNS, extra="ignore")


def read(path: Path, source: str) -> TraceRead:
    table = CsvTable(path, source, SPEC)
    exclusions = Exclusions()
    return TraceRead(
        _jobs(table, exclusions),
        exclusions,
        ignored_columns=table.ignored,
        grouping=Grouping.SINGLE,
    )


def _jobs(table: CsvTable, exclusions: Exclusions) -> Iterator[TraceJob]:
    seen: dict[str, int] = {}
    for row in table.rows():
        job_id = row.text("job_id")
        first = seen.setdefault(job_id, row.line)
        if first != row.line:
            raise row.fail("job_id", f"duplicate job id '{job_id}' (first on line {first})")
        gang = row.integer("num_gpu", minimum=0)
        submit = row.number("submit_time", minimum=0.0)
        row.integer("iterations", minimum=0)
        model = row.text("model_name")
        duration = row.number("duration", minimum=0.0)
        row.number("interval", minimum=0.0)
        if gang == 0:
            exclusions.add("cpu_only", row.line)
            continue
        yield TraceJob(job_id, submit, gang, duration, None, model, row.line)


#: The format, as the registry (``formats.py``) knows it: a CSV header with ``num_gpu``
#: and ``model_name``.
FORMAT = TraceFormatPlugin(
    "tiresias",
    "Tiresias simulator CSV",
    gang_field="num_gpu",
    read=read,
    claims=(Claim(140, lambda p: {"num_gpu", "model_name"} <= p.cells),),
    model_field="model_name",
)
