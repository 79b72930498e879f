"""What a user submits: apps (hyperparameter sweeps) made of rigid-gang jobs."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from themis.model.frozen import by_fields
from themis.model.halving import rungs
from themis.model.profiles import ModelProfile


@dataclass(frozen=True)
class JobSpec:
    """A trial: ``work`` iterations of its app's model on a rigid gang of ``gang`` GPUs."""

    job_id: str
    gang: int
    work: float
    line: int | None = None  # where the job came from in its trace, for error messages

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return by_fields(self)  # picklable compiled too (model/frozen.py)


@dataclass(frozen=True)
class Search:
    """A declared successive-halving search (DESIGN §2): the app's trials all have one
    iteration budget (their ``work``); at each rung (``min_work * eta**k`` iterations, below
    the budget) the best ``ceil(n / eta)`` of the ``n`` trials that reached it go on and the
    others stop (``themis.model.halving``). What a user declares, so policies may read it;
    which trial stops where is decided in the run, at the rungs."""

    eta: int
    min_work: float
    mode: str = "min"

    def rungs(self, budget: float) -> list[float]:
        return rungs(self.min_work, self.eta, budget)

    def total_work(self, trials: int, budget: float) -> float:
        """Iterations the whole search runs, whichever trials stop: ``n`` trials to the
        first rung, ``ceil(n / eta)`` of them on to the next, ..., the last ones to the
        budget. The same for every outcome (no trial ends for another reason here)."""
        total, alive, done = 0.0, trials, 0.0
        for rung in self.rungs(budget):
            total += alive * (rung - done)
            alive, done = math.ceil(alive / self.eta), rung
        return total + alive * (budget - done)

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return by_fields(self)  # picklable compiled too (model/frozen.py)


@dataclass(frozen=True)
class LossCurve:
    """A trial's validation loss after a fraction ``x`` of its budget:
    ``final + scale * x**-decay`` (a power law, as learning curves are fitted; Domhan et al.
    2015). Seeded per trial by whoever makes the workload; the truth of a search, which only
    the simulator reads, never a policy."""

    final: float
    scale: float
    decay: float

    def at(self, x: float) -> float:
        return self.final + self.scale * math.pow(max(x, 1e-9), -self.decay)

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return by_fields(self)  # picklable compiled too (model/frozen.py)


@dataclass(frozen=True)
class AppSpec:
    """An app: one model, a set of jobs, an arrival time in seconds, and optionally the
    successive-halving search its app scheduler runs online and its owner (a tenant or
    user: owners share the cluster equally, an owner's apps share its slice;
    ``fairness/shares.py``)."""

    app_id: str
    arrival: float
    model: str
    jobs: tuple[JobSpec, ...]
    search: Search | None = None
    owner: str | None = None
    #: How much a trial's progress lowers its place in the app's own order: its trials run
    #: by declared work minus ``progress_weight`` times the work made, largest first. 1
    #: (the default) is longest remaining first; 0 keeps the longest trials first however
    #: far they got (depth first: fewest restarts); 2 and above put fresh trials before
    #: partly run ones (breadth first). The app's own choice, declared honestly: it is the
    #: order a uniform misstatement of work would otherwise buy (docs/knowledge.md).
    progress_weight: float = 1.0

    @property
    def tenant(self) -> str:
        """Whose slice of the cluster this app shares: its owner, or itself."""
        return self.app_id if self.owner is None else self.owner

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return by_fields(self)  # picklable compiled too (model/frozen.py)


@dataclass(frozen=True)
class Workload:
    """A validated workload, whatever trace it came from: its apps (jobs, gangs, work,
    arrival), the profiles of the models they train, its ``source`` and the reader's
    ``notes`` (arrival interval, how trace names were mapped to models, ...)."""

    apps: tuple[AppSpec, ...]
    profiles: dict[str, ModelProfile]
    source: str = "<memory>"
    notes: dict[str, object] = field(default_factory=dict)
    #: (app, job) -> loss curve, for the jobs of apps with a ``search``: the simulator's
    #: truth, from which the rungs are decided. Never reachable from what policies read.
    curves: Mapping[tuple[str, str], LossCurve] = field(default_factory=dict)

    @property
    def job_count(self) -> int:
        return sum(len(a.jobs) for a in self.apps)

    def gpu_seconds(self) -> float:
        """Work in GPU-seconds at the best (one-machine) placement (a search: the work its
        successive halving runs, ``Search.total_work``)."""
        return sum(self._gpu_seconds_terms())  # one flat sum, in job order

    def _gpu_seconds_terms(self) -> Iterator[float]:
        for app in self.apps:
            tpi = self.profiles[app.model].time_per_iteration
            if app.search is None:
                yield from (job.work * tpi for job in app.jobs)
            else:
                budget = max(j.work for j in app.jobs)
                yield app.search.total_work(len(app.jobs), budget) * tpi

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

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return by_fields(self)  # picklable compiled too (model/frozen.py)
