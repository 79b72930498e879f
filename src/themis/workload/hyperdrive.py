"""Reader of the paper's HyperDrive trace (``philly_hyperdrive_workload.csv``).

Mapping (docs/design.md §2, the paper's own simulator): one experiment is one app, one row one of
its jobs; the gang is ``num-gpus``; the job ran ``run-time`` seconds on its gang inside one
machine, so its work is ``run-time * num-gpus / time_per_iteration`` iterations of the
app's model. The app arrives with its first job's ``start-time``. The trace names no
model: each app gets a seeded uniform draw from the profiles, as the paper's authors did,
unless the file has an optional ``model`` column (which must name a known profile).

Every row is checked; the first bad one stops the load with its line and field named.
Nothing is skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from themis.workload.csvtable import CsvSpec, CsvTable
from themis.workload.plugin import Claim, TraceFormatPlugin
from themis.workload.records import Grouping, TraceJob, TraceRead

COLUMNS = ("experiment-id", "job-id", "start-time", "run-time", "num-gpus")
OPTIONAL = ("model",)
SPEC = CsvSpec(COLUMNS, OPTIONAL, extra="error")


def read(path: Path, source: str) -> TraceRead:
    table = CsvTable(path, source, SPEC)
    return TraceRead(_jobs(table), strict_models=True, grouping=Grouping.KEY)


def _jobs(table: CsvTable) -> Iterator[TraceJob]:
    seen: dict[str, int] = {}
    for row in table.rows():
        experiment = row.text("experiment-id")
        job_id = row.text("job-id")
        first = seen.setdefault(job_id, row.line)
        if first != row.line:
            raise row.fail("job-id", f"duplicate job id '{job_id}' (first on line {first})")
        start = row.stamp("start-time")
        text = row.cell("run-time")
        run_time = row.number("run-time")
        if run_time < 0:
            # 0 is real (two HyperDrive trials died at once): a job with no work.
            raise row.fail("run-time", f"must be a number of seconds >= 0, got {text}")
        gpus = row.integer("num-gpus", minimum=1)
        model = row.text("model") if row.has("model") else None
        yield TraceJob(
            job_id,
            start,
            gpus,
            run_time,
            None,
            model,
            row.line,
            group=experiment,
        )


#: The format, as the registry (``formats.py``) knows it: a CSV whose header names
#: ``experiment-id``; its apps arrive one every ``--app-interval`` by default, as the
#: paper's authors replayed them.
FORMAT = TraceFormatPlugin(
    "hyperdrive",
    "the Themis paper's HyperDrive CSV (Philly sweeps)",
    gang_field="num-gpus",
    read=read,
    claims=(Claim(130, lambda p: "experiment-id" in p.cells),),
    arrivals="interval",
)
