"""Reader of the paper's HyperDrive trace (``philly_hyperdrive_workload.csv``).

Mapping (DESIGN §2, the paper's own simulator): one experiment is one app, one row one of
its jobs; the gang is ``num-gpus``; the job ran ``run-time`` seconds on its gang inside one
machine, so its work is ``run-time * num-gpus / time_per_iteration`` iterations of the
app's model. The trace names no model: each app gets a seeded uniform draw from the
profiles, as the paper's authors did, unless the file has an optional ``model`` column.

Every row is checked; the first bad one stops the load with its line and field named.
Nothing is skipped silently.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile

COLUMNS = ("experiment-id", "job-id", "start-time", "run-time", "num-gpus")
OPTIONAL = ("model",)


@dataclass(frozen=True)
class TraceJob:
    line: int
    experiment: str
    job_id: str
    start: datetime
    run_time: float
    gpus: int
    model: str | None


def read_rows(path: Path, source: str) -> list[TraceJob]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ThemisError(f"cannot read trace: {exc.strerror}", source=source) from None
    with handle:
        reader = csv.reader(_decoded_lines(handle, source), skipinitialspace=True)
        try:
            return _parse(reader, source)
        except csv.Error as exc:
            raise ThemisError(
                f"malformed CSV: {exc}", source=source, line=reader.line_num
            ) from None


def _decoded_lines(handle: BinaryIO, source: str) -> Iterator[str]:
    """Decode line by line (streaming), so that a byte that is not UTF-8 is reported on its
    own line; a leading byte-order mark (spreadsheet exports) is dropped."""
    for number, raw in enumerate(handle, start=1):
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise ThemisError(
                f"not UTF-8 text (byte {exc.start + 1} of the line)", source=source, line=number
            ) from None


def _parse(reader: csv.reader, source: str) -> list[TraceJob]:  # type: ignore[valid-type]
    header = next(reader, None)
    if header is None:
        raise ThemisError(
            "empty file: expected a header " + ",".join(COLUMNS), source=source, line=1
        )
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ThemisError(
            f"missing column(s) {', '.join(missing)} (header: {','.join(header)})",
            source=source,
            line=1,
            field=missing[0],
        )
    unknown = [h for h in header if h not in COLUMNS + OPTIONAL]
    if unknown:
        raise ThemisError(f"unknown column '{unknown[0]}'", source=source, line=1, field=unknown[0])
    index = {name: header.index(name) for name in header}
    rows: list[TraceJob] = []
    seen: dict[str, int] = {}
    for values in reader:
        line = reader.line_num
        if not values or all(not v.strip() for v in values):
            raise ThemisError("blank row", source=source, line=line)
        if len(values) != len(header):
            # Name the first column the row does not line up with.
            missing = header[len(values)] if len(values) < len(header) else f"after {header[-1]}"
            raise ThemisError(
                f"expected {len(header)} fields, got {len(values)}",
                source=source,
                line=line,
                field=missing,
            )

        def cell(name: str, _values: list[str] = values) -> str:
            return _values[index[name]].strip()

        def fail(name: str, message: str, _line: int = line) -> ThemisError:
            return ThemisError(message, source=source, line=_line, field=name)

        experiment = cell("experiment-id")
        if not experiment:
            raise fail("experiment-id", "empty")
        job_id = cell("job-id")
        if not job_id:
            raise fail("job-id", "empty")
        if job_id in seen:
            raise fail("job-id", f"duplicate job id '{job_id}' (first on line {seen[job_id]})")
        seen[job_id] = line
        try:
            start = datetime.strptime(cell("start-time"), "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise fail("start-time", f"'{cell('start-time')}' is not YYYY-MM-DD HH:MM:SS") from None
        try:
            run_time = float(cell("run-time"))
        except ValueError:
            raise fail("run-time", f"'{cell('run-time')}' is not a number") from None
        if not math.isfinite(run_time) or run_time < 0:
            # 0 is real (two HyperDrive trials died at once): a job with no work.
            raise fail("run-time", f"must be a number of seconds >= 0, got {cell('run-time')}")
        try:
            gpus = int(cell("num-gpus"))
        except ValueError:
            raise fail("num-gpus", f"'{cell('num-gpus')}' is not a whole number") from None
        if gpus < 1:
            raise fail("num-gpus", f"must be >= 1, got {gpus}")
        model = cell("model") if "model" in index else None
        if model == "":
            raise fail("model", "empty")
        rows.append(TraceJob(line, experiment, job_id, start, run_time, gpus, model))
    if not rows:
        raise ThemisError("the trace has a header but no jobs", source=source, line=2)
    return rows


def assign_models(
    rows: list[TraceJob], apps: list[str], profiles: dict[str, ModelProfile], seed: int, source: str
) -> dict[str, str]:
    """One model per app: the file's ``model`` column if it has one, else a seeded uniform draw."""
    rng = random.Random(seed)
    names = sorted(profiles)
    given: dict[str, TraceJob] = {}
    for row in rows:
        if row.model is None:
            continue
        if row.model not in profiles:
            raise ThemisError(
                f"unknown model '{row.model}' (known: {', '.join(names)})",
                source=source,
                line=row.line,
                field="model",
            )
        first = given.setdefault(row.experiment, row)
        if first.model != row.model:
            raise ThemisError(
                f"experiment {row.experiment} mixes models {first.model} and {row.model}",
                source=source,
                line=row.line,
                field="model",
            )
    return {app: given[app].model if app in given else rng.choice(names) for app in apps}  # type: ignore[misc]
