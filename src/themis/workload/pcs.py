"""Reader of the traces PCS's simulator replays (abdullahfsm/PCS, OSDI'24,
``simulation/traces/trace_<id>.csv``), so that its workloads run here as they run there.

Columns ``app_id,submit_time,service,num_jobs,sleep_time`` and an optional ``model_name``.
Mapping, following how PCS's ``sim.py`` reads the file:

- one row is one app; PCS runs it as one malleable job of demand ``num_jobs`` and
  ``service`` GPU-seconds of work, which on ``a <= num_jobs`` GPUs progresses ``a`` times
  as fast under its linear model (the model it uses when the row names none). Here it is
  ``num_jobs`` 1-GPU trials of ``service / num_jobs`` seconds each: the same demand, the
  same total work, the same speed on any number of GPUs up to the demand;
- the app arrives at the running sum of ``sleep_time`` (PCS's clock; ``submit_time``
  is checked and not used: in PCS's bundled traces it is that same sum);
- ``model_name``, when present, names the app's model (matched by normalized name, else
  assigned per name, as for Tiresias). PCS then runs the app at that model's measured
  speedup, not linearly: the work is the same here, the speedup curve is not (1-GPU trials
  have none), so only traces without ``model_name`` are replayed exactly.

Not simulable, counted: rows PCS skips because they contain ``#`` (``commented``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from themis.workload.csvtable import CsvSpec, CsvTable
from themis.workload.plugin import Claim, TraceFormatPlugin
from themis.workload.records import Exclusions, Grouping, TraceJob, TraceRead

COLUMNS = ("app_id", "submit_time", "service", "num_jobs", "sleep_time")
OPTIONAL = ("model_name",)
SPEC = CsvSpec(COLUMNS, OPTIONAL, extra="ignore", what="apps")


def read(path: Path, source: str) -> TraceRead:
    table = CsvTable(path, source, SPEC)
    exclusions = Exclusions()
    return TraceRead(
        _jobs(table, exclusions),
        exclusions,
        ignored_columns=table.ignored,
        grouping=Grouping.KEY,
    )


def _jobs(table: CsvTable, exclusions: Exclusions) -> Iterator[TraceJob]:
    seen: dict[str, int] = {}
    clock = 0.0
    for row in table.rows():
        if any("#" in row.cell(name) for name in table.header if row.has(name)):
            # PCS skips such a row and its sleep_time with it: the clock does not move.
            exclusions.add("commented", row.line)
            continue
        app_id = row.text("app_id")
        first = seen.setdefault(app_id, row.line)
        if first != row.line:
            raise row.fail("app_id", f"duplicate app id '{app_id}' (first on line {first})")
        row.number("submit_time", minimum=0.0)
        service = row.number("service", minimum=0.0)
        if service <= 0:
            raise row.fail("service", f"must be GPU-seconds > 0, got {row.cell('service')}")
        num_jobs = row.integer("num_jobs", minimum=1, float_ok=True)
        clock += row.number("sleep_time", minimum=0.0)
        model = row.text("model_name") if row.has("model_name") else None
        seconds = service / num_jobs
        for k in range(num_jobs):
            yield TraceJob(f"{app_id}-{k}", clock, 1, seconds, None, model, row.line, app_id)


#: The format, as the registry (``formats.py``) knows it: a CSV header with ``service``,
#: ``num_jobs`` and ``sleep_time``.
FORMAT = TraceFormatPlugin(
    "pcs",
    "PCS simulator trace (OSDI'24)",
    gang_field="num_jobs",
    read=read,
    claims=(Claim(160, lambda p: {"service", "num_jobs", "sleep_time"} <= p.cells),),
    model_field="model_name",
)
