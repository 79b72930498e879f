"""Turn a trace into a :class:`Workload`: find the file, read it, place arrivals.

Arrivals (``--arrivals``):

- ``trace``: each app arrives when its first job started in the trace. The HyperDrive
  trace spreads 19,590 GPU-hours over 63 days, about 20% of a 64-GPU cluster: no
  contention, so every policy looks alike.
- ``interval`` (default): apps arrive one every ``app_interval`` seconds in trace order,
  each job keeping its run time, as the paper's authors replayed it. The default interval
  makes the default 64-GPU cluster contended (see ``DEFAULT_APP_INTERVAL``).
"""

from __future__ import annotations

import math
from enum import StrEnum
from importlib import resources
from pathlib import Path

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile, load_profiles
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.workload.hyperdrive import assign_models, read_rows

#: Seconds between app arrivals in ``interval`` mode: with the HyperDrive trace on 64 GPUs
#: this offers about 1.4 GPU-seconds of work per GPU-second while apps arrive.
DEFAULT_APP_INTERVAL = 9000.0

BUNDLED_TRACES = {"hyperdrive": "philly_hyperdrive_workload.csv"}


class ArrivalMode(StrEnum):
    TRACE = "trace"
    INTERVAL = "interval"


def resolve_trace(name_or_path: str) -> tuple[Path, str]:
    """A bundled trace by name, or a file path. Returns (path, name to show in errors)."""
    if name_or_path in BUNDLED_TRACES:
        ref = resources.files("themis.data").joinpath(BUNDLED_TRACES[name_or_path])
        return Path(str(ref)), f"{BUNDLED_TRACES[name_or_path]} (bundled)"
    path = Path(name_or_path)
    if not path.exists():
        known = ", ".join(BUNDLED_TRACES)
        raise ThemisError(
            f"no such trace file or bundled trace (bundled: {known})", source=name_or_path
        )
    if path.is_dir():
        raise ThemisError("is a directory, expected a trace file", source=name_or_path)
    return path, name_or_path


def load_workload(
    trace: str = "hyperdrive",
    *,
    profiles: dict[str, ModelProfile] | None = None,
    seed: int = 0,
    arrivals: ArrivalMode | str = ArrivalMode.INTERVAL,
    app_interval: float = DEFAULT_APP_INTERVAL,
) -> Workload:
    profiles = profiles if profiles is not None else load_profiles()
    try:
        mode = ArrivalMode(arrivals)
    except ValueError:
        known = ", ".join(m.value for m in ArrivalMode)
        raise ThemisError(
            f"unknown arrival mode '{arrivals}' (known: {known})", field="--arrivals"
        ) from None
    if mode is ArrivalMode.INTERVAL and not (math.isfinite(app_interval) and app_interval >= 0):
        raise ThemisError(
            f"must be a finite number of seconds >= 0, got {app_interval}", field="--app-interval"
        )
    path, source = resolve_trace(trace)
    rows = read_rows(path, source)
    first_start: dict[str, object] = {}
    jobs: dict[str, list] = {}
    for row in rows:
        jobs.setdefault(row.experiment, []).append(row)
        if row.experiment not in first_start or row.start < first_start[row.experiment]:  # type: ignore[operator]
            first_start[row.experiment] = row.start
    order = sorted(jobs, key=lambda e: (first_start[e], list(jobs).index(e)))  # type: ignore[arg-type,return-value]
    models = assign_models(rows, order, profiles, seed, source)
    origin = min(first_start.values())  # type: ignore[type-var]
    apps = []
    for k, experiment in enumerate(order):
        tpi = profiles[models[experiment]].time_per_iteration
        if mode is ArrivalMode.TRACE:
            arrival = (first_start[experiment] - origin).total_seconds()  # type: ignore[operator]
        else:
            arrival = k * app_interval
        specs = tuple(
            JobSpec(r.job_id, r.gpus, r.run_time * r.gpus / tpi, r.line) for r in jobs[experiment]
        )
        apps.append(AppSpec(experiment, float(arrival), models[experiment], specs))
    notes = {"arrivals": mode.value, "seed": seed}
    if mode is ArrivalMode.INTERVAL:
        notes["app_interval_s"] = app_interval
    return Workload(tuple(apps), profiles, source, notes)
