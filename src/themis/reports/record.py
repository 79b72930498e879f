"""A finished run reduced to what reports draw: summary, per-app rows, sizes and usage.

A :class:`SimulationResult` holds every job's state and every interval (tens of MB for the
HyperDrive trace); a :class:`RunRecord` keeps only the numbers the tables and plots use, so
that runs done in worker processes travel back cheaply and a report of many runs fits in
memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from themis.reports.metrics import AppRow, RunSummary, app_rows, job_rows, summarize
from themis.simulator.engine import SimulationResult

#: GPUs-in-use curves are thinned to at most this many steps: a browser plot shows no more.
MAX_USAGE_POINTS = 4000


@dataclass(frozen=True)
class RunRecord:
    """One run: ``label`` names it in a report (a policy, or a policy at a sweep point)."""

    label: str
    summary: RunSummary
    rows: tuple[AppRow, ...]
    #: Each app's work in GPU-hours at its best placement, by app id (its "size").
    app_gpu_hours: Mapping[str, float]
    #: GPUs in use as a step function: at ``usage_times[i]`` it becomes ``usage_gpus[i]``.
    usage_times: tuple[float, ...]
    usage_gpus: tuple[int, ...]
    capacity: int
    params: Mapping[str, Any] = field(default_factory=dict)
    #: CPU seconds the simulation took (0 when not measured): what a batch costs.
    cpu_s: float = 0.0
    #: Each job's wait for its first GPU, in hours (jobs that held a GPU, in app order).
    job_waits_h: tuple[float, ...] = ()

    @property
    def policy(self) -> str:
        return self.summary.policy

    def rhos(self) -> list[float]:
        return [r.rho for r in self.rows]

    def completions_h(self) -> list[float]:
        return [r.completion_s / 3600 for r in self.rows]


def gpus_in_use(result: SimulationResult) -> tuple[list[float], list[int]]:
    """The step function of GPUs held, from the run's intervals (exact, before thinning)."""
    deltas: dict[float, int] = {}
    for interval in result.intervals:
        g = len(interval.gpus)
        deltas[interval.start] = deltas.get(interval.start, 0) + g
        deltas[interval.end] = deltas.get(interval.end, 0) - g
    times: list[float] = []
    levels: list[int] = []
    level = 0
    for t in sorted(deltas):
        level += deltas[t]
        times.append(t)
        levels.append(level)
    return times, levels


def thin(times: list[float], levels: list[int], limit: int) -> tuple[list[float], list[int]]:
    """At most ``limit`` steps: each kept step shows the lowest level of the steps it stands
    for, so dips in usage (the interesting part) stay visible."""
    if len(times) <= limit:
        return times, levels
    stride = -(-len(times) // limit)
    out_t, out_l = [], []
    for i in range(0, len(times), stride):
        out_t.append(times[i])
        out_l.append(min(levels[i : i + stride]))
    return out_t, out_l


def record_run(
    result: SimulationResult, label: str | None = None, params: Mapping[str, Any] | None = None
) -> RunRecord:
    rows = app_rows(result)
    jobs = job_rows(result)
    profiles = result.workload.profiles
    sizes = {
        app.app_id: sum(j.work for j in app.jobs) * profiles[app.model].time_per_iteration / 3600
        for app in result.workload.apps
    }
    times, levels = thin(*gpus_in_use(result), MAX_USAGE_POINTS)
    return RunRecord(
        label=label or result.policy,
        summary=summarize(result, rows, jobs),
        rows=tuple(rows),
        app_gpu_hours=sizes,
        usage_times=tuple(times),
        usage_gpus=tuple(levels),
        capacity=result.cluster.size,
        params=dict(params or {}),
        job_waits_h=tuple(j.wait_s / 3600 for j in jobs),
    )
