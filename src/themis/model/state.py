"""Mutable progress of apps and jobs, shared by the simulator and the runtime.

Progress is kept exactly as the integral of speed: a running job's iterations done are
``done + rate * (t - updated_at)``; ``advance`` folds that into ``done`` whenever the
job's speed is about to change. Policies read these objects and never change them: only
the mechanism (simulator or runtime) applies a schedule.
"""

from __future__ import annotations

from themis.fairness.ftf import GangWork
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

    def start(self, gpus: tuple[int, ...], rate: float, now: float) -> None:
        self.advance(now, False)
        self.gpus = gpus
        self.rate = rate
        self.started_at = now
        self.app.touch()

    def stop(self, now: float, best: bool) -> None:
        self.advance(now, best)
        self.gpus = ()
        self.rate = 0.0
        self.until = None
        self.started_at = None
        self.app.touch()

    def finish(self, now: float) -> None:
        self.done = self.spec.work
        self.finished_at = now
        self.app.touch()

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
        return (
            f"JobState({self.job_id}, gpus={self.gpus}, done={self.done:.1f}/{self.spec.work:.1f})"
        )


class AppState:
    """An app's live view: its jobs' progress and its place in fairness accounting."""

    def __init__(self, spec: AppSpec, profile: ModelProfile, t_cluster: float) -> None:
        self.spec = spec
        self.profile = profile
        self.t_cluster = t_cluster
        self.jobs = [JobState(j, self) for j in spec.jobs]
        self.finish: float | None = None
        # Bumped by every start, stop and finish of a job: the caches below are only valid
        # for one version. Jobs that are not running do not progress, so what is derived
        # from them stays exact between versions.
        self.version = 0
        self._cached_version = -1
        self._idle: list[JobState] = []
        self._running: list[JobState] = []
        self._idle_work: dict[int, tuple[float, float, int]] = {}
        self._held: tuple[int, ...] = ()
        self._demand = 0

    def touch(self) -> None:
        self.version += 1

    def _refresh(self) -> None:
        # Callers test the version first: this runs millions of times per simulation.
        live = [j for j in self.jobs if j.finished_at is None]
        self._running = [j for j in live if j.gpus]
        idle = [j for j in live if not j.gpus]
        idle.sort(key=lambda j: j.done - j.spec.work)  # longest remaining first, stable
        self._idle = idle
        work: dict[int, list[float]] = {}
        for job in idle:
            rem = job.spec.work - job.done
            entry = work.get(job.gang)
            if entry is None:
                work[job.gang] = [rem, rem, 1]
            else:
                entry[0] += rem
                entry[2] += 1  # idle is sorted: the first seen is the longest
        self._idle_work = {g: (v[0], v[1], int(v[2])) for g, v in work.items()}
        self._demand = sum(j.spec.gang for j in live)
        self._held = tuple(g for j in self._running for g in j.gpus)
        self._cached_version = self.version

    @property
    def app_id(self) -> str:
        return self.spec.app_id

    @property
    def arrival(self) -> float:
        return self.spec.arrival

    def live_jobs(self) -> list[JobState]:
        return [j for j in self.jobs if j.finished_at is None]

    def running_jobs(self) -> list[JobState]:
        if self._cached_version != self.version:
            self._refresh()
        return list(self._running)

    def idle_jobs(self) -> list[JobState]:
        """Live jobs holding no GPUs, longest remaining first (ties: submission order)."""
        if self._cached_version != self.version:
            self._refresh()
        return list(self._idle)

    def demand(self) -> int:
        """GPUs its live jobs could use at once."""
        if self._cached_version != self.version:
            self._refresh()
        return self._demand

    def held(self) -> tuple[int, ...]:
        """GPUs its running jobs hold."""
        if self._cached_version != self.version:
            self._refresh()
        return self._held

    def remaining_by_gang(self, t: float) -> dict[int, GangWork]:
        """Live jobs' remaining iterations at time ``t``, grouped by gang size."""
        if self._cached_version != self.version:
            self._refresh()
        acc: dict[int, list[float]] = {g: list(v) for g, v in self._idle_work.items()}
        for job in self._running:
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
