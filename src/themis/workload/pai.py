"""Reader of the Alibaba PAI 2020 GPU trace (alibaba/clusterdata, cluster-trace-gpu-v2020).

Two tables, joined on ``job_name``: ``pai_job_table.csv`` (``job_name, inst_id, user,
status, start_time, end_time``) and ``pai_task_table.csv`` (``job_name, task_name,
inst_num, status, start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type``). The
published CSVs have no header line (it ships in ``*.header`` files); a first line equal
to the header is accepted too. Times are seconds on a shifted clock; ``plan_gpu`` is in
percent of a GPU. The trace is given as the folder holding both files, or as the path of
either (the other is found beside it).

Mapping:

- one job per job-table row, arriving at its ``start_time`` (the submission time);
- its GPU tasks are its tasks with ``plan_gpu > 0``; gang = the GPUs they request,
  ``ceil(sum(inst_num * plan_gpu) / 100)`` (a job asking for half a GPU gets one);
- it held its gang from its first GPU task's start to its last GPU task's end, so its
  work is that many seconds on the gang;
- apps are ``session`` groups of one user (the tables carry no virtual cluster);
- the trace names no model: seeded draw per app.

Not simulable, counted: ``no_tasks`` (no task row), ``cpu_only`` (no GPU task),
``unfinished`` (a GPU task without start or end: running or waiting when the trace was
taken), ``no_submit_time``, and ``task_without_job`` (task rows naming a job the job
table lacks).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from themis.errors import ThemisError
from themis.workload.csvtable import CsvSpec, CsvTable
from themis.workload.grouping import Grouping
from themis.workload.plugin import Claim, TraceFormatPlugin
from themis.workload.records import Exclusions, TraceJob, TraceRead

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
JOB_SPEC = CsvSpec(JOB_COLUMNS, extra="ignore", headerless=True)
TASK_SPEC = CsvSpec(TASK_COLUMNS, extra="ignore", headerless=True, what="tasks")
JOB_FILE = "pai_job_table.csv"
TASK_FILE = "pai_task_table.csv"


def table_paths(path: Path, source: str) -> tuple[Path, Path]:
    """(job table, task table) of a PAI trace given as a folder or as either file."""
    if path.is_dir():
        jobs, tasks = path / JOB_FILE, path / TASK_FILE
    elif "task_table" in path.name:
        jobs, tasks = path.with_name(path.name.replace("task_table", "job_table")), path
    elif "job_table" in path.name:
        jobs, tasks = path, path.with_name(path.name.replace("job_table", "task_table"))
    else:
        jobs, tasks = path, path.with_name(TASK_FILE)
    for table in (jobs, tasks):
        if not table.is_file():
            raise ThemisError(
                f"a PAI trace needs {JOB_FILE} and {TASK_FILE} side by side; missing {table}",
                source=source,
            )
    return jobs, tasks


@dataclass(slots=True)
class _Gpus:
    """The GPU tasks of one job, folded as the task table streams by."""

    line: int
    percent: float = 0.0
    start: float | None = None
    end: float | None = None
    unfinished: bool = False
    tasks: int = 0


def read(path: Path, source: str) -> TraceRead:
    job_path, task_path = table_paths(path, source)
    job_source = source if job_path == path else str(job_path)
    exclusions = Exclusions()
    tasks = _read_tasks(task_path, str(task_path))
    table = CsvTable(job_path, job_source, JOB_SPEC)
    return TraceRead(
        _jobs(table, tasks, exclusions),
        exclusions,
        ignored_columns=table.ignored,
        grouping=Grouping.SESSION,
    )


def _read_tasks(path: Path, source: str) -> dict[str, _Gpus]:
    table = CsvTable(path, source, TASK_SPEC)
    jobs: dict[str, _Gpus] = {}
    names: set[tuple[str, str]] = set()
    for row in table.rows():
        job = row.text("job_name")
        task = row.text("task_name")
        if (job, task) in names:
            raise row.fail("task_name", f"duplicate task '{task}' of job '{job}'")
        names.add((job, task))
        instances = row.integer("inst_num", minimum=1, float_ok=True)
        row.text("status")
        start = row.number_or_none("start_time")
        end = row.number_or_none("end_time")
        if start is not None and end is not None and end < start:
            raise row.fail("end_time", f"ends before it starts ({row.cell('start_time')})")
        row.number_or_none("plan_cpu", minimum=0.0)
        row.number_or_none("plan_mem", minimum=0.0)
        gpu = row.number_or_none("plan_gpu", minimum=0.0)
        entry = jobs.get(job)
        if entry is None:
            entry = jobs[job] = _Gpus(row.line)
        entry.tasks += 1
        if not gpu:
            continue
        entry.percent += instances * gpu
        if start is None or end is None:
            entry.unfinished = True
            continue
        entry.start = start if entry.start is None else min(entry.start, start)
        entry.end = end if entry.end is None else max(entry.end, end)
    return jobs


def _jobs(table: CsvTable, tasks: dict[str, _Gpus], exclusions: Exclusions) -> Iterator[TraceJob]:
    seen: dict[str, int] = {}
    for row in table.rows():
        name = row.text("job_name")
        first = seen.setdefault(name, row.line)
        if first != row.line:
            raise row.fail("job_name", f"duplicate job_name '{name}' (first on line {first})")
        row.text("inst_id")
        user = row.text("user")
        row.text("status")
        submit = row.number_or_none("start_time")
        end = row.number_or_none("end_time")
        if submit is not None and end is not None and end < submit:
            raise row.fail("end_time", f"ends before it starts ({row.cell('start_time')})")
        gpus = tasks.pop(name, None)
        if gpus is None:
            exclusions.add("no_tasks", row.line)
        elif gpus.percent == 0:
            exclusions.add("cpu_only", row.line)
        elif gpus.unfinished or gpus.start is None or gpus.end is None:
            exclusions.add("unfinished", row.line)
        elif submit is None:
            exclusions.add("no_submit_time", row.line)
        else:
            gang = max(1, math.ceil(gpus.percent / 100 - 1e-9))
            yield TraceJob(
                name, submit, gang, gpus.end - gpus.start, None, None, row.line, user=user
            )
    for entry in tasks.values():  # the task table's lines are not this file's: no line
        for _ in range(entry.tasks):
            exclusions.add("task_without_job", None)


#: The format, as the registry (``formats.py``) knows it: a folder holding
#: ``pai_job_table.csv``, a file named ``pai_job_table*`` or ``pai_task_table*``, or a CSV
#: header with ``job_name`` and ``inst_id`` (or ``task_name``).
FORMAT = TraceFormatPlugin(
    "pai",
    "Alibaba PAI 2020 pai_job_table + pai_task_table CSVs",
    gang_field="plan_gpu",
    read=read,
    claims=(
        Claim(0, lambda p: (p.path / "pai_job_table.csv").exists(), folder=True),
        Claim(1, lambda p: p.name.startswith(("pai_job_table", "pai_task_table"))),
        Claim(
            160,
            lambda p: {"job_name", "inst_id"} <= p.cells or {"job_name", "task_name"} <= p.cells,
        ),
    ),
    folder=True,
    folder_hint="a folder with pai_job_table.csv and pai_task_table.csv",
)
