"""Mutable progress of apps and jobs, shared by the simulator and the runtime.

Progress is kept exactly as the integral of speed: a running job's iterations done are
``done + rate * (t - updated_at)``; ``advance`` folds that into ``done`` whenever the
job's speed is about to change. Policies read these objects and never change them: only
the mechanism (simulator or runtime) applies a schedule.
"""

from __future__ import annotations

from themis.fairness.ftf import GangWork
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec


class JobState:
    __slots__ = (
        "spec",
        "app",
        "done",
        "updated_at",
        "rate",
        "gpus",
        "until",
        "started_at",
        "finished_at",
        "attained",
        "best_placed",
    )

    def __init__(self, spec: JobSpec, app: AppState) -> None:
        self.spec = spec
        self.app = app
        self.done = 0.0
        self.updated_at = 0.0
        self.rate = 0.0
        self.gpus: tuple[int, ...] = ()
        self.until: float | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.attained = 0.0  # GPU-seconds held
        self.best_placed = 0.0  # GPU-seconds held at the best span for its gang

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def gang(self) -> int:
        return self.spec.gang

    @property
    def running(self) -> bool:
        return bool(self.gpus)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def remaining_at(self, t: float) -> float:
        return max(0.0, self.spec.work - self.done - self.rate * (t - self.updated_at))

    def advance(self, t: float, best: bool) -> None:
        dt = t - self.updated_at
        if dt > 0 and self.gpus:
            self.done = min(self.spec.work, self.done + self.rate * dt)
            held = len(self.gpus) * dt
            self.attained += held
            if best:
                self.best_placed += held
        self.updated_at = t

    def __repr__(self) -> str:
        return f"JobState({self.job_id}, gpus={self.gpus}, done={self.done:.1f}/{self.spec.work:.1f})"


class AppState:
    """An app's live view: its jobs' progress and its place in fairness accounting."""

    def __init__(self, spec: AppSpec, profile: ModelProfile, t_cluster: float) -> None:
        self.spec = spec
        self.profile = profile
        self.t_cluster = t_cluster
        self.jobs = [JobState(j, self) for j in spec.jobs]
        self.finish: float | None = None
        self.n_avg_at_finish: float | None = None

    @property
    def app_id(self) -> str:
        return self.spec.app_id

    @property
    def arrival(self) -> float:
        return self.spec.arrival

    def live_jobs(self) -> list[JobState]:
        return [j for j in self.jobs if j.finished_at is None]

    def running_jobs(self) -> list[JobState]:
        return [j for j in self.jobs if j.gpus]

    def demand(self) -> int:
        """GPUs its live jobs could use at once."""
        return sum(j.gang for j in self.jobs if j.finished_at is None)

    def held(self) -> list[int]:
        return [g for j in self.jobs for g in j.gpus]

    def remaining_by_gang(self, t: float) -> dict[int, GangWork]:
        """Live jobs' remaining iterations at time ``t``, grouped by gang size."""
        acc: dict[int, list[float]] = {}
        for job in self.jobs:
            if job.finished_at is not None:
                continue
            rem = job.remaining_at(t)
            entry = acc.get(job.gang)
            if entry is None:
                acc[job.gang] = [rem, rem, 1]
            else:
                entry[0] += rem
                if rem > entry[1]:
                    entry[1] = rem
                entry[2] += 1
        return {g: GangWork(v[0], v[1], int(v[2])) for g, v in acc.items()}


def job_speed(profile: ModelProfile, cluster: Cluster, gpus: tuple[int, ...]) -> float:
    return profile.speed(len(gpus), cluster.span(gpus))
