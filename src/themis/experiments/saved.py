"""Finished runs kept in their output folder, so that a batch stopped or failed half-way
resumes where it stopped.

Beside a run's files (``summary.json`` ...) goes ``themis-record.json``: the hash of the
run's inputs and the run's :class:`RunRecord` (what tables and reports need). A later
batch asking for a run whose folder holds a record with the same hash reuses it instead
of simulating again. The hash covers everything a run's result depends on: the workload's
contents (every app, job, profile and loss curve, not the trace's file name), the
cluster, the policy and its options, the batch window, the conditions, the params and
config recorded with the run, which files it writes, themis's version and a digest of
themis's own source and data files (so an edited policy is never answered by a run of
the old code). A run's label and folder are not inputs: they name it, they do not
change it.

Writing is ordered so that an interrupted write is never taken for a finished run: the
old record goes first, then the run's files, then the new record, written to a temporary
name and renamed (atomic on POSIX).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from themis import __version__
from themis.reports.files import RECORD_FILE, write_texts
from themis.reports.metrics import AppRow, RunSummary
from themis.reports.record import RunRecord

if TYPE_CHECKING:
    from themis.experiments.request import RunRequest

#: Bumped when the record file's layout changes: an old layout is simply not reused.
FORMAT = 1


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 over themis's own files (sources and bundled data), by relative path:
    what a run's result may depend on besides its inputs."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def inputs_key(request: RunRequest) -> str:
    """The hash of everything the run's outputs depend on (see the module doc).

    Built from ``repr`` of the request's frozen dataclasses: floats print exactly
    (``repr`` round-trips), dicts in their insertion order, which the same command
    reproduces."""
    parts = (
        __version__,
        code_digest(),
        request.policy,
        request.workload,
        request.cluster,
        request.options,
        request.batch_window,
        sorted(request.params.items()),
        None if request.config is None else sorted(request.config.items()),
        # what summary.json records to replay the run (``--config``)
        None if request.simulate_options is None else sorted(request.simulate_options.items()),
        request.conditions,
        tuple(request.files),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def load(request: RunRequest, key: str | None = None) -> RunRecord | None:
    """The record kept in the request's folder if its inputs were these, else ``None``
    (no folder, no record, another hash, an unreadable file)."""
    if request.out_dir is None:
        return None
    path = request.out_dir / RECORD_FILE
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        return None
    if saved.get("inputs") != (key or inputs_key(request)):
        return None
    if any(not (request.out_dir / name).is_file() for name in request.files):
        return None  # a file deleted by hand: run again
    try:
        record = record_from_json(saved["record"])
    except (KeyError, TypeError, ValueError):
        return None
    return replace(record, label=request.label, params=dict(request.params))


def save(
    request: RunRequest,
    record: RunRecord,
    texts: Mapping[str, str],
    key: str | None = None,
    keep: bool = True,
) -> None:
    """Write the run's files and then, if ``keep``, its record (see the module doc for
    the order)."""
    if request.out_dir is None:
        return
    folder = request.out_dir
    with contextlib.suppress(FileNotFoundError):
        (folder / RECORD_FILE).unlink()
    write_texts(folder, texts)
    if not keep:
        return
    payload = {
        "format": FORMAT,
        "inputs": key or inputs_key(request),
        "themis": __version__,
        "record": record_to_json(record),
    }
    temporary = folder / f".{RECORD_FILE}.{os.getpid()}"
    write_texts(folder, {temporary.name: json.dumps(payload) + "\n"})
    os.replace(temporary, folder / RECORD_FILE)


def record_to_json(record: RunRecord) -> dict[str, Any]:
    """The record as JSON data; floats exact, infinities and NaN as JSON's extensions
    (``Infinity``, ``NaN``: Python reads them back)."""
    data = asdict(record)
    data["rows"] = [asdict(r) for r in record.rows]
    data["summary"] = asdict(record.summary)
    data["params"] = [[k, v] for k, v in record.params.items()]  # keys keep their type
    return data


def record_from_json(data: Mapping[str, Any]) -> RunRecord:
    summary = dict(data["summary"])
    summary["jobs_by_gang"] = {int(k): v for k, v in summary.get("jobs_by_gang", {}).items()}
    known = {f.name for f in fields(RunSummary)}
    return RunRecord(
        label=str(data["label"]),
        summary=RunSummary(**{k: v for k, v in summary.items() if k in known}),
        rows=tuple(AppRow(**row) for row in data["rows"]),
        app_gpu_hours=dict(data["app_gpu_hours"]),
        usage_times=tuple(float(t) for t in data["usage_times"]),
        usage_gpus=tuple(int(g) for g in data["usage_gpus"]),
        capacity=int(data["capacity"]),
        params=dict((k, v) for k, v in data["params"]),
        cpu_s=float(data["cpu_s"]),
        job_waits_h=tuple(float(w) for w in data["job_waits_h"]),
    )


def same_record(a: RunRecord, b: RunRecord) -> bool:
    """Equal field for field, NaN equal to NaN (a record with a NaN never equals itself)."""
    return _plain(record_to_json(a)) == _plain(record_to_json(b))


def _plain(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
