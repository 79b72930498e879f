"""A run's output files: ``summary.json``, ``apps.csv`` and ``allocations.csv``.

Floats are written at full precision (``repr``, which round-trips), so that every derived
column can be recomputed exactly from the others: ``rho_paper`` in ``apps.csv`` equals
``posthoc_rho(arrival_s, finish_s, t_cluster_s, n_avg)`` bit for bit, ``rho_slice`` equals
``(finish_s - arrival_s) / t_slice_s``, and ``rho`` is the one of the run's ideal time
(``summary.json``'s ``ideal_time``). JSON has no infinity:
a non-finite number (the offered load of apps that all arrive at once) is written as
``null``. Column and key meanings: ``docs/metrics.md``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from themis.errors import ThemisError
from themis.reports.metrics import AppRow, RunSummary
from themis.simulator.engine import Interval, SimulationResult

SUMMARY_FILE = "summary.json"
APPS_FILE = "apps.csv"
ALLOCATIONS_FILE = "allocations.csv"
COMPARISON_FILE = "comparison.json"
#: A finished run's inputs hash and record, for resuming (``experiments/saved.py``).
RECORD_FILE = "themis-record.json"

#: The first seven are the fairness arithmetic; ``model``, ``gangs`` and ``wait_s`` come
#: after them, then both ideal times' figures (``t_slice_s``, ``rho_paper``, ``rho_slice``)
#: and whether the app shared the cluster (``shared``, 1 or 0), so that readers of the
#: older files keep working.
APPS_COLUMNS = (
    "app_id",
    "arrival_s",
    "finish_s",
    "completion_s",
    "t_cluster_s",
    "n_avg",
    "rho",
    "model",
    "gangs",
    "wait_s",
    "t_slice_s",
    "rho_paper",
    "rho_slice",
    "shared",
)
ALLOCATIONS_COLUMNS = ("start_s", "end_s", "app_id", "job_id", "gpus")


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    """The summary as JSON-ready data (non-finite floats become ``None``)."""
    return {key: _json_number(value) for key, value in asdict(summary).items()}


def write_run(
    out_dir: Path,
    result: SimulationResult,
    summary: RunSummary,
    rows: Sequence[AppRow],
    config: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write the three files of one run into ``out_dir`` (created if needed); returns them.
    ``options``: the ``themis simulate`` options that reproduce the run (``--config``)."""
    return write_texts(out_dir, run_texts(result, summary, rows, config, options=options))


def run_texts(
    result: SimulationResult,
    summary: RunSummary,
    rows: Sequence[AppRow],
    config: Mapping[str, Any] | None = None,
    names: Sequence[str] = (SUMMARY_FILE, APPS_FILE, ALLOCATIONS_FILE),
    options: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The files of one run (those of ``names``) as text, by file name: what a worker
    process or a Ray task sends back for the process that owns the output folder to write.
    ``options``: the ``themis simulate`` options that reproduce the run, in the summary."""
    texts = {}
    if SUMMARY_FILE in names:
        payload = summary_dict(summary)
        if config is not None:
            payload["config"] = _jsonable(dict(config))
        if options is not None:
            payload["options"] = _jsonable(dict(options))
        texts[SUMMARY_FILE] = json_text(payload)
    if APPS_FILE in names:
        texts[APPS_FILE] = _csv_text(write_apps_rows, rows)
    if ALLOCATIONS_FILE in names:
        texts[ALLOCATIONS_FILE] = _csv_text(write_allocations_rows, result.intervals)
    return texts


def write_texts(out_dir: Path, texts: Mapping[str, str]) -> list[Path]:
    """Write each ``name -> text`` into ``out_dir`` (created if needed) as it is, bytes for
    bytes; returns the paths."""
    ensure_dir(out_dir)
    paths = []
    for name, text in texts.items():
        path = out_dir / name
        try:
            path.write_text(text, encoding="utf-8", newline="")
        except OSError as exc:
            raise ThemisError(f"cannot write: {exc.strerror}", source=str(path)) from None
        paths.append(path)
    return paths


def _csv_text(write: Callable[[Any, Any], None], data: Any) -> str:
    buffer = io.StringIO(newline="")
    write(csv.writer(buffer, lineterminator="\n"), data)
    return buffer.getvalue()


def write_apps_csv(path: Path, rows: Iterable[AppRow]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        write_apps_rows(csv.writer(handle, lineterminator="\n"), rows)


def write_apps_rows(writer: Any, rows: Iterable[AppRow]) -> None:
    writer.writerow(APPS_COLUMNS)
    for r in rows:
        writer.writerow(
            [
                r.app_id,
                _float(r.arrival_s),
                _float(r.finish_s),
                _float(r.completion_s),
                _float(r.t_cluster_s),
                _float(r.n_avg),
                _float(r.rho),
                r.model,
                r.gangs,
                _float(r.wait_s),
                _float(r.t_slice_s),
                _float(r.rho_paper),
                _float(r.rho_slice),
                int(r.shared),
            ]
        )


def write_allocations_csv(path: Path, intervals: Iterable[Interval]) -> None:
    """One row per interval, sorted by start; ``gpus`` is the GPU ids separated by spaces."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        write_allocations_rows(csv.writer(handle, lineterminator="\n"), intervals)


def write_allocations_rows(writer: Any, intervals: Iterable[Interval]) -> None:
    ordered = sorted(intervals, key=lambda i: (i.start, i.end, i.app_id, i.job_id))
    writer.writerow(ALLOCATIONS_COLUMNS)
    for i in ordered:
        gpus = " ".join(str(g) for g in i.gpus)
        writer.writerow([_float(i.start), _float(i.end), i.app_id, i.job_id, gpus])


def json_text(payload: Any) -> str:
    """What :func:`write_json` writes."""
    return json.dumps(_jsonable(payload), indent=2, allow_nan=False) + "\n"


def write_json(path: Path, payload: Any) -> None:
    text = json_text(payload)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ThemisError(f"cannot write: {exc.strerror}", source=str(path)) from None


def ensure_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ThemisError(
            f"cannot create output directory: {exc.strerror}", source=str(path), field="--out"
        ) from None


def _float(value: float) -> str:
    return repr(float(value))


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def jsonable(value: Any) -> Any:
    """``value`` with mappings, sequences and paths made JSON's own types and non-finite
    floats ``None`` (what every JSON themis writes or prints goes through)."""
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return _json_number(value)
