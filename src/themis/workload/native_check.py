"""The own format's per-app check: the ``app`` definition of ``workload.schema.json`` in
plain Python.

Checking each app with ``jsonschema`` costs about 100 microseconds per job, 10 seconds for
a 100,000-job workload; this check costs about 2. The schema stays the contract: a test
feeds both the same generated documents and asserts they accept exactly the same ones.
Two things the schema cannot say are checked here on top: numbers must be finite (YAML
can write ``.inf`` and ``.nan``), and an error names the key it is about.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

_APP_KEYS = ("id", "arrival", "model", "owner", "progress_weight", "jobs")
_JOB_KEYS = ("id", "gpus", "iterations", "duration")


class Problem(Exception):
    """A violation at ``path`` (relative to the app), with a message for the user."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _show(value: Any) -> str:
    if isinstance(value, (datetime, date)):
        return f"the date {value}"  # YAML reads an unquoted 2020-01-01 as a date
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any, path: str, minimum: float) -> float:
    if not _is_number(value):
        raise Problem(path, f"must be a number, got {_show(value)}")
    if not math.isfinite(value):
        raise Problem(path, f"must be a finite number, got {_show(value)}")
    if value < minimum:
        raise Problem(path, f"must be >= {minimum:g}, got {_show(value)}")
    return float(value)


def _ident(value: Any, path: str) -> str:
    if isinstance(value, str):
        if not value:
            raise Problem(path, "must not be empty")
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise Problem(path, f"must be text or a whole number, got {_show(value)}")


def _keys(obj: Any, path: str, known: tuple[str, ...], required: tuple[str, ...]) -> None:
    if not isinstance(obj, dict):
        raise Problem(path, f"expected an object with {', '.join(required)}, got {_show(obj)}")
    for key in obj:
        if key not in known:
            raise Problem(_join(path, str(key)), f"unknown key (known: {', '.join(known)})")
    for key in required:
        if key not in obj:
            raise Problem(_join(path, key), "missing")


def check_job(job: Any, path: str) -> tuple[str, int, float | None, float | None]:
    """(id, gpus, iterations, duration) of a valid job; :class:`Problem` otherwise."""
    _keys(job, path, _JOB_KEYS, ("id", "gpus"))
    job_id = _ident(job["id"], _join(path, "id"))
    gpus = job["gpus"]
    where = _join(path, "gpus")
    if isinstance(gpus, float) and gpus.is_integer():
        gpus = int(gpus)  # 2.0 is an integer to JSON Schema
    if not isinstance(gpus, int) or isinstance(gpus, bool):
        raise Problem(where, f"must be a whole number of GPUs, got {_show(gpus)}")
    if gpus < 1:
        raise Problem(where, f"must be >= 1, got {gpus}")
    has_it, has_du = "iterations" in job, "duration" in job
    if has_it == has_du:
        raise Problem(path, "give exactly one of 'iterations' or 'duration'")
    if has_it:
        return job_id, gpus, _number(job["iterations"], _join(path, "iterations"), 0.0), None
    return job_id, gpus, None, _number(job["duration"], _join(path, "duration"), 0.0)


def check_app(app: Any) -> tuple[str, float, str | None, list[tuple], str | None, float]:
    """(id, arrival, model or None, [job tuples], owner or None, progress weight) of a
    valid app; :class:`Problem` otherwise."""
    _keys(app, "", _APP_KEYS, ("id", "arrival", "jobs"))
    app_id = _ident(app["id"], "id")
    arrival = _number(app["arrival"], "arrival", 0.0)
    model = app.get("model")
    if "model" in app and (not isinstance(model, str) or not model):
        raise Problem("model", f"must be a model name, got {_show(model)}")
    jobs = app["jobs"]
    if not isinstance(jobs, list) or not jobs:
        raise Problem("jobs", f"must be a non-empty list of jobs, got {_show(jobs)}")
    owner = _ident(app["owner"], "owner") if "owner" in app else None
    weight = 1.0
    if "progress_weight" in app:
        weight = _number(app["progress_weight"], "progress_weight", 0.0)
    checked = [check_job(job, f"jobs[{k}]") for k, job in enumerate(jobs)]
    return app_id, arrival, model, checked, owner, weight
