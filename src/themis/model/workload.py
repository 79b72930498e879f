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
        """Work offered per GPU-second while apps arrive, capped by what the jobs could
        use at all.

        The rate-based load is the work over the arrival period: the span of arrivals
        plus one mean inter-arrival gap, so that ``n`` apps arriving every ``d`` seconds
        have a period of ``n * d`` (HyperDrive: 1.46 at the default interval). On a short
        trace of long jobs that period is no measure of contention: three jobs arriving
        seconds apart once read "offered load 275" on 64 GPUs where they never contend.
        So the load is capped by the GPUs every job would hold at once, over the cluster's
        (the load if all ran together): those three jobs offer 0.06. With one arrival, or
        all at once, the cap is the load.
        """
        work = self.gpu_seconds()
        if work <= 0:
            return 0.0
        demand = sum(job.gang for app in self.apps for job in app.jobs) / gpus
        arrivals = sorted(a.arrival for a in self.apps)
        span = arrivals[-1] - arrivals[0]
        if span <= 0:
            return demand
        period = span + span / (len(arrivals) - 1)
        return min(work / (gpus * period), demand)
