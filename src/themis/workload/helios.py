"""Reader of SenseTime Helios ``cluster_log.csv`` (S-Lab-System-Group/HeliosData).

Columns ``job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time,
end_time, duration, queue`` (extra columns, such as the ``cluster`` of the merged
all-cluster log, are ignored and reported). Times are ``YYYY-MM-DD HH:MM:SS``;
``start_time``/``end_time`` may be empty for a job cancelled before it started.
Mapping:

- one job per row, arriving at ``submit_time``; apps are ``session`` groups of one user in
  one virtual cluster (``grouping``);
- gang = ``gpu_num``; the job held its gang for ``duration`` seconds (Slurm's
  ``end_time - start_time``), so its work is ``duration * gpu_num / time_per_iteration``
  iterations of the app's model, whatever its final ``state`` (a failed or cancelled
  job used the cluster too); a job of duration 0 is a job without work;
- the trace names no model: seeded draw per app.

Not simulable, counted: ``cpu_only`` (``gpu_num`` 0; most Helios jobs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from themis.workload.csvtable import CsvSpec, CsvTable
from themis.workload.grouping import Grouping
from themis.workload.plugin import Claim, TraceFormatPlugin
from themis.workload.records import Exclusions, TraceJob, TraceRead

COLUMNS = (
    "job_id",
    "user",
    "vc",
    "gpu_num",
    "cpu_num",
    "node_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
    "queue",
)
SPEC = CsvSpec(COLUMNS, extra="ignore")


def read(path: Path, source: str) -> TraceRead:
    table = CsvTable(path, source, SPEC)
    exclusions = Exclusions()
    return TraceRead(
        _jobs(table, exclusions),
        exclusions,
        ignored_columns=table.ignored,
        grouping=Grouping.SESSION,
    )


def _jobs(table: CsvTable, exclusions: Exclusions) -> Iterator[TraceJob]:
    seen: dict[str, int] = {}
    for row in table.rows():
        job_id = row.text("job_id")
        first = seen.setdefault(job_id, row.line)
        if first != row.line:
            raise row.fail("job_id", f"duplicate job id '{job_id}' (first on line {first})")
        user = row.text("user")
        vc = row.text("vc")
        gpus = row.integer("gpu_num", minimum=0, float_ok=True)
        row.integer("cpu_num", minimum=0, float_ok=True)
        row.integer("node_num", minimum=0, float_ok=True)
        row.text("state")
        submit = row.stamp("submit_time")
        start = row.stamp_or_none("start_time")
        end = row.stamp_or_none("end_time")
        if start is not None and end is not None and end < start:
            raise row.fail("end_time", f"ends before it starts ({row.cell('start_time')})")
        duration = row.number("duration", minimum=0.0)
        row.number("queue", minimum=0.0)
        if gpus == 0:
            exclusions.add("cpu_only", row.line)
            continue
        yield TraceJob(job_id, submit, gpus, duration, None, None, row.line, user=f"{vc}/{user}")


#: The format, as the registry (``formats.py``) knows it: a CSV header with ``gpu_num``
#: and ``node_num``.
FORMAT = TraceFormatPlugin(
    "helios",
    "SenseTime Helios cluster_log.csv",
    gang_field="gpu_num",
    read=read,
    claims=(Claim(150, lambda p: {"gpu_num", "node_num"} <= p.cells),),
)
