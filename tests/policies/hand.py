"""Tiny workloads for the quantum-based baselines (Gandiva, Optimus, SLAQ), run through the
real simulator with no batching window, so that every round happens exactly at an arrival,
a job end or a quantum boundary and each schedule can be derived by hand.

``TOY``: one iteration takes 1 s on one GPU (a 1-GPU job of w iterations runs w seconds).
``VGG``: as placement sensitive as VGG: a gang across machines runs at half speed.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, JobState
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions, SchedulingView, make_policy
from themis.simulator.engine import SimulationResult, simulate

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)
VGG = ModelProfile("vgg", time_per_iteration=1.0, cross_machine=0.5, cross_rack=0.25)
PROFILES = {p.name: p for p in (TOY, VGG)}

#: (app_id, arrival, [(gang, work), ...]) or (app_id, arrival, [...], model)
AppRow = tuple


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def workload(apps: Sequence[AppRow]) -> Workload:
    """Job ids are the app id + the job's index."""
    specs = []
    for row in apps:
        app_id, arrival, jobs = row[:3]
        model = row[3] if len(row) > 3 else "toy"
        specs.append(
            AppSpec(
                app_id,
                arrival,
                model,
                tuple(JobSpec(f"{app_id}{k}", g, w) for k, (g, w) in enumerate(jobs)),
            )
        )
    return Workload(tuple(specs), PROFILES, "hand")


def run(apps: Sequence[AppRow], cluster: str, policy: str, lease: float) -> SimulationResult:
    options = PolicyOptions(lease=lease, gandiva_slice=lease)  # one quantum for all
    return simulate(
        workload(apps), Cluster.from_spec(cluster), make_policy(policy, options), batch_window=0.0
    )


def finishes(result: SimulationResult) -> dict[str, float]:
    return {a.app_id: a.finish for a in result.apps}  # type: ignore[misc]


def assert_intervals(result: SimulationResult, expected: list[tuple]) -> None:
    """``expected``: (start, end, job_id, gpus) of every uninterrupted run, in any order."""
    got = sorted((i.start, i.end, i.job_id, i.gpus) for i in result.intervals)
    want = sorted(expected)
    assert [(j, g) for _, _, j, g in got] == [(j, g) for _, _, j, g in want]
    for (s, e, _, _), (s2, e2, _, _) in zip(got, want, strict=True):
        assert s == approx(s2)
        assert e == approx(e2)


def make_app(app_id: str, arrival: float, jobs: Sequence[tuple[int, float]]) -> AppState:
    """A toy app for hand-built views (not run by the simulator)."""
    spec = AppSpec(
        app_id,
        arrival,
        "toy",
        tuple(JobSpec(f"{app_id}{k}", g, w) for k, (g, w) in enumerate(jobs)),
    )
    app = AppState(spec, TOY, 0.0)
    for job in app.jobs:
        job.updated_at = arrival
    return app


def hold(job: JobState, gpus: tuple[int, ...], since: float, until: float | None) -> None:
    """``job`` has held ``gpus`` since ``since`` at 1 it/s per GPU."""
    job.updated_at = since
    job.start(gpus, float(len(gpus)), since)
    job.until = until


def view(cluster: Cluster, apps: list[AppState], now: float) -> SchedulingView:
    return SchedulingView(now, cluster, apps, lambda _app: 1.0)
