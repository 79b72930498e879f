"""What a user submits: apps (hyperparameter sweeps) made of rigid-gang jobs."""

from __future__ import annotations

from dataclasses import dataclass, field

from themis.model.profiles import ModelProfile


@dataclass(frozen=True)
class JobSpec:
    """A trial: ``work`` iterations of its app's model on a rigid gang of ``gang`` GPUs."""

    job_id: str
    gang: int
    work: float
    line: int | None = None  # where the job came from in its trace, for error messages


@dataclass(frozen=True)
class AppSpec:
    """An app: one model, a set of jobs, an arrival time in seconds."""

    app_id: str
    arrival: float
    model: str
    jobs: tuple[JobSpec, ...]


@dataclass(frozen=True)
class Workload:
    apps: tuple[AppSpec, ...]
    profiles: dict[str, ModelProfile]
    source: str = "<memory>"
    notes: dict[str, object] = field(default_factory=dict)

    @property
    def job_count(self) -> int:
        return sum(len(a.jobs) for a in self.apps)

    def gpu_seconds(self) -> float:
        """Work in GPU-seconds at the best (one-machine) placement."""
        return sum(
            job.work * self.profiles[app.model].time_per_iteration
            for app in self.apps
            for job in app.jobs
        )

    def offered_load(self, gpus: int) -> float:
        """Work offered per GPU-second of the arrival period.

        The period is the span of arrivals plus one mean inter-arrival gap, so that ``n``
        apps arriving every ``d`` seconds have a period of ``n * d``; a single app (or all
        arriving at once) has no period, and the load is reported as infinite.
        """
        arrivals = sorted(a.arrival for a in self.apps)
        if len(arrivals) < 2 or arrivals[-1] == arrivals[0]:
            return float("inf")
        span = arrivals[-1] - arrivals[0]
        period = span + span / (len(arrivals) - 1)
        return self.gpu_seconds() / (gpus * period)
