"""Mutable progress of apps and jobs, shared by the simulator and the runtime.

Progress is kept exactly as the integral of speed: a running job's iterations done are
``done + rate * (t - updated_at)``; ``advance`` folds that into ``done`` whenever the
job's speed is about to change. Policies read these objects and never change them: only
the mechanism (simulator or runtime) applies a schedule.

What these objects say is what a scheduler knows (DESIGN §9): ``spec.work`` is the work
the user declared, so ``remaining_at`` and ``remaining_by_gang`` are estimates (declared
work minus observed progress, never below 0). The simulator keeps each job's true work
to itself (``themis.model.knowledge``). A (re)start that costs ``restart`` seconds makes
no progress for that long: ``updated_at`` is then in the future, so the remaining work a
scheduler sees includes the rest of the restart, and ``held_since`` keeps counting the
GPU-time held (``attained``) from the start.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, insort
from collections.abc import Iterable
from functools import reduce
from typing import Any, NamedTuple

from themis.model.knowledge import OVERRUN_SHARE
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec


class GangWork(NamedTuple):
    """Live jobs of one gang size: their remaining iterations in total, the longest one's,
    and how many there are."""

    total: float
    longest: float
    jobs: int


class JobState:
    """A job's live progress: iterations ``done`` (plus ``rate`` per second since
    ``updated_at`` while it runs), the GPUs it holds and when its grant ends (``until``),
    when it started and finished, and the GPU-seconds it held (``attained``; of them
    ``best_placed`` at the best span for its gang). Its work, ``spec.work``, is the
    declared one, which may differ from the truth the simulator runs (docs/knowledge.md)."""

    __slots__ = (
        "spec",
        "app",
        "done",
        "updated_at",
        "held_since",
        "rate",
        "gpus",
        "until",
        "started_at",
        "finished_at",
        "attained",
        "best_placed",
        "index",
        "listed",
        "order_listed",
        "observed",
    )

    def __init__(self, spec: JobSpec, app: AppState, index: int = 0) -> None:
        self.spec = spec
        self.app = app
        self.index = index  # position in its app's job list (ties in the idle order)
        # where its app's cache lists it: None, or the idle sort key, or _RUNNING
        self.listed: tuple[float, int] | str | None = None
        # its key in its app's idle list (``listed`` unless its app orders its own trials
        # by another measure of work: ``AppState.order_factor``)
        self.order_listed: tuple[float, int] | None = None
        self.done = 0.0
        self.updated_at = 0.0
        self.held_since = 0.0  # attained GPU-time is counted up to here
        self.rate = 0.0
        self.gpus: tuple[int, ...] = ()
        self.until: float | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.attained = 0.0  # GPU-seconds held
        self.best_placed = 0.0  # GPU-seconds held at the best span for its gang
        #: Iterations it had made when it finished, as observed (``done`` then becomes the
        #: declared work): what the arbiter can verify.
        self.observed: float | None = None

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
        """Declared work left at ``t`` (an estimate: see the module docstring); a live job
        that has run past its declared work is believed to have ``OVERRUN_SHARE`` of it
        left (``themis.model.knowledge``)."""
        rem = self.spec.work - self.done - self.rate * (t - self.updated_at)
        if rem > 0.0:
            return rem
        if self.finished_at is None:
            return OVERRUN_SHARE * self.spec.work
        return 0.0

    def order_remaining_at(self, t: float) -> float:
        """Work left at ``t`` as its app's own scheduler counts it to order its trials:
        ``remaining_at`` with the declared work times ``AppState.order_factor`` and the work
        made times the app's ``progress_weight``."""
        app = self.app
        factor, weight = app.order_factor, app.progress_weight
        if factor == 1.0 and weight == 1.0:
            return self.remaining_at(t)
        work = factor * self.spec.work
        # Term by term, so that a weight of 2 orders exactly as a factor of 0.5 (scaling
        # by a power of two commutes with rounding).
        rem = work - weight * self.done - weight * self.rate * (t - self.updated_at)
        if rem > 0.0:
            return rem
        if self.finished_at is None:
            return OVERRUN_SHARE * work
        return 0.0

    def start(self, gpus: tuple[int, ...], rate: float, now: float, restart: float = 0.0) -> None:
        """Run on ``gpus`` at ``rate`` iterations/s after ``restart`` seconds of no progress."""
        self.advance(now, False)
        self.gpus = gpus
        self.rate = rate
        self.started_at = now
        if restart > 0.0:
            self.updated_at = now + restart
        self.app.job_changed(self)

    def stop(self, now: float, best: bool) -> None:
        """Release the GPUs at ``now``, progress counted up to then (``advance``)."""
        self.advance(now, best)
        self.gpus = ()
        self.rate = 0.0
        self.until = None
        self.started_at = None
        self.app.job_changed(self)

    def finish(self, now: float) -> None:
        """Done at ``now``: ``observed`` keeps the iterations seen, ``done`` becomes the
        declared work."""
        self.observed = self.done
        self.done = self.spec.work
        self.finished_at = now
        self.app.job_changed(self)

    def advance(self, t: float, best: bool) -> None:
        """Count progress and held GPU-seconds up to ``t`` (``best``: the GPUs are on the
        best span for the gang, so the GPU-seconds count in ``best_placed`` too)."""
        # Not capped at spec.work: the declared work may be less than the true work.
        if self.gpus:
            dt = t - self.updated_at
            if dt > 0:
                self.done += self.rate * dt
            held_dt = t - self.held_since
            if held_dt > 0:
                held = len(self.gpus) * held_dt
                self.attained += held
                if best:
                    self.best_placed += held
        if t > self.updated_at or not self.gpus:
            self.updated_at = t
        self.held_since = t

    def __repr__(self) -> str:
        return (
            f"JobState({self.job_id}, gpus={self.gpus}, done={self.done:.1f}/{self.spec.work:.1f})"
        )


_RUNNING = "running"


class AppState:
    """An app's live view: its jobs' progress and its place in fairness accounting."""

    def __init__(
        self, spec: AppSpec, profile: ModelProfile, t_cluster: float, order_factor: float = 1.0
    ) -> None:
        self.spec = spec
        #: The app's own scheduler orders its trials as if each had this many times its
        #: declared work (1: by what it declares). A strategy, not a report: what it
        #: declares to the arbiter is ``spec`` (the ``order`` kind of ``model/lies.py``).
        self.order_factor = order_factor
        #: The app's declared ``AppSpec.progress_weight``.
        self.progress_weight = spec.progress_weight
        #: Whether its trials are ordered by another measure than ``JobState.remaining_at``.
        self.own_order = order_factor != 1.0 or spec.progress_weight != 1.0
        self.app_id: str = spec.app_id  # plain attributes: read millions of times a run
        self.arrival: float = spec.arrival
        self.profile = profile
        self.t_cluster = t_cluster
        #: The work it declared at arrival, ready to time on a slice of the cluster: built
        #: by ``fairness.ftf.app_ideal_time`` when a ``slice`` ideal time is first asked.
        # Typed loosely: the model does not import ``fairness`` (which imports the model).
        self.ideal_work: Any = None
        self.jobs = [JobState(j, self, k) for k, j in enumerate(spec.jobs)]
        self.finish: float | None = None
        # Bumped by every start, stop and finish of a job: the caches below are only valid
        # for one version. Jobs that are not running do not progress, so what is derived
        # from them stays exact between versions.
        self.version = 0
        # Bumped by ``touch`` alone: a change that is not a start, stop or finish (a trial
        # paused at a rung, or resumed), after which caches built from job events rebuild.
        self.touches = 0
        self._cached_version = -1
        # Jobs changed through start/stop/finish since the caches were last brought up to
        # date; ``touch`` (any other change) makes the next refresh rebuild everything.
        self._changed: list[JobState] = []
        self._stale = True
        self._idle: list[JobState] = []  # longest remaining first, ties: submission order
        self._idle_keys: list[tuple[float, int]] = []  # their sort keys, for bisection
        self._running: list[JobState] = []  # submission order
        # per gang size: the idle jobs' sort keys and remaining iterations, in idle order
        self._gang_keys: dict[int, list[tuple[float, int]]] = {}
        self._gang_rems: dict[int, list[float]] = {}
        self._idle_work: dict[int, GangWork] = {}
        self._held: tuple[int, ...] = ()
        self._demand = 0
        #: A set this app adds itself to whenever its version changes (the simulator's
        #: books of the apps that changed since the last round), or None.
        self.changes: set[AppState] | None = None
        # done_by_gang's progress of the jobs not running, for one version, and (when no
        # job runs) its whole answer, which then cannot change until the version does
        self._done_version = -1
        self._done_stopped: dict[int, list[float]] = {}
        self._done_idle: dict[int, GangWork] | None = None

    def touch(self) -> None:
        """Mark every cache stale (after changing jobs other than by start/stop/finish)."""
        self.version += 1
        self.touches += 1
        self._stale = True
        if self.changes is not None:
            self.changes.add(self)

    def job_changed(self, job: JobState) -> None:
        """``job`` started, stopped or finished: only its place in the caches changes."""
        self.version += 1
        if not self._stale:
            if len(self._changed) < len(self.jobs):
                self._changed.append(job)
            else:  # nobody read the caches for a while: rebuild them when someone does
                self._changed.clear()
                self._stale = True
        if self.changes is not None:
            self.changes.add(self)

    def _refresh(self) -> None:
        # Callers test the version first: this runs millions of times per simulation.
        if self._stale:
            self._rebuild()
        else:
            touched: set[int] = set()
            seen: set[int] = set()
            for job in self._changed:
                if id(job) not in seen:
                    seen.add(id(job))
                    self._replace(job, touched)
            if touched:
                self._sum_idle_work()
        self._changed.clear()
        self._held = tuple(g for j in self._running for g in j.gpus)
        self._cached_version = self.version

    def _rebuild(self) -> None:
        self._idle, self._idle_keys, self._running = [], [], []
        self._gang_keys, self._gang_rems = {}, {}
        self._demand = 0
        for job in self.jobs:
            job.listed = None
            if job.finished_at is None:
                self._demand += job.spec.gang
                self._place(job, None)
        self._sum_idle_work()
        self._stale = False

    def _replace(self, job: JobState, touched: set[int] | None) -> None:
        """Move ``job`` to where its current state lists it."""
        listed = job.listed
        if listed is _RUNNING:
            self._running.remove(job)
        elif listed is not None:
            k = bisect_left(self._idle_keys, job.order_listed or listed)
            del self._idle[k]
            del self._idle_keys[k]
            gang = job.spec.gang
            keys = self._gang_keys[gang]
            k = bisect_left(keys, listed)
            del keys[k]
            del self._gang_rems[gang][k]
            if touched is not None:
                touched.add(gang)
        job.listed = None
        if job.finished_at is not None:
            if listed is not None:
                self._demand -= job.spec.gang
            return
        if listed is None:
            self._demand += job.spec.gang
        self._place(job, touched)

    def _place(self, job: JobState, touched: set[int] | None) -> None:
        if job.gpus:
            job.listed = _RUNNING
            insort(self._running, job, key=operator.attrgetter("index"))
            return
        # longest remaining first, stable in submission order (a sort by done - work)
        rem = job.spec.work - job.done
        if not rem > 0.0:  # overrun: as remaining_at
            rem = OVERRUN_SHARE * job.spec.work
        key = (-rem, job.index)
        job.listed = key
        order_key = key
        if self.own_order:
            order_key = (-job.order_remaining_at(job.updated_at), job.index)
        job.order_listed = order_key
        k = bisect_left(self._idle_keys, order_key)
        self._idle_keys.insert(k, order_key)
        self._idle.insert(k, job)
        gang = job.spec.gang
        keys = self._gang_keys.setdefault(gang, [])
        k = bisect_left(keys, key)
        keys.insert(k, key)
        self._gang_rems.setdefault(gang, []).insert(k, rem)
        if touched is not None:
            touched.add(gang)

    def _sum_idle_work(self) -> None:
        # Gangs in the order their first idle job comes (as a walk of the idle list meets
        # them), each summed left to right in idle order: the same floats as that walk.
        gangs = sorted((keys[0], g) for g, keys in self._gang_keys.items() if keys)
        work: dict[int, GangWork] = {}
        for _, gang in gangs:
            rems = self._gang_rems[gang]
            work[gang] = GangWork(reduce(operator.add, rems), rems[0], len(rems))
        self._idle_work = work

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

    def done_by_gang(self, t: float) -> dict[int, GangWork]:
        """Iterations its jobs have made by ``t``, as observed (finished ones: what they
        had made when they ended), grouped by gang size: what the arbiter can verify,
        whatever the app declared."""
        if self._cached_version != self.version:
            self._refresh()
        if self._done_version != self.version:
            self._count_stopped()
        if self._done_idle is not None:  # nothing runs: the same answer at any ``t``
            return dict(self._done_idle)
        acc = {g: list(v) for g, v in self._done_stopped.items()}
        running = self._running
        _tally(acc, ((j.spec.gang, j.done + j.rate * max(0.0, t - j.updated_at)) for j in running))
        return _made_work(acc)

    def _count_stopped(self) -> None:
        """``done_by_gang``'s sums over the jobs not running, for this version (finished
        ones: what they had made when they ended), in submission order."""
        acc: dict[int, list[float]] = {}
        stopped = (j for j in self.jobs if not j.gpus)
        _tally(acc, ((j.spec.gang, j.done if j.observed is None else j.observed) for j in stopped))
        self._done_stopped = acc
        self._done_idle = None if self._running else _made_work(acc)
        self._done_version = self.version

    def remaining_by_gang(self, t: float) -> dict[int, GangWork]:
        """Live jobs' remaining iterations at time ``t``, grouped by gang size."""
        if self._cached_version != self.version:
            self._refresh()
        if not self._running:
            return dict(self._idle_work)
        acc: dict[int, list[float]] = {g: list(v) for g, v in self._idle_work.items()}
        for job in self._running:
            rem = job.spec.work - job.done - job.rate * (t - job.updated_at)  # remaining_at
            if not rem > 0.0:  # overrun: as remaining_at
                rem = OVERRUN_SHARE * job.spec.work
            entry = acc.get(job.spec.gang)
            if entry is None:
                acc[job.spec.gang] = [rem, rem, 1]
            else:
                entry[0] += rem
                if rem > entry[1]:
                    entry[1] = rem
                entry[2] += 1
        return {g: GangWork(v[0], v[1], int(v[2])) for g, v in acc.items()}


def _tally(acc: dict[int, list[float]], made: Iterable[tuple[int, float]]) -> None:
    """Count each job's (gang, iterations made) into ``acc``'s [total, most, jobs] per
    gang, in the order given. One loop for all the jobs, not a call per job: the arbiter
    asks every wanting app each round, so this runs millions of times a simulation."""
    get = acc.get
    for gang, value in made:
        entry = get(gang)
        if entry is None:
            acc[gang] = [value, value, 1]
        else:
            entry[0] += value
            if value > entry[1]:
                entry[1] = value
            entry[2] += 1


def _made_work(acc: dict[int, list[float]]) -> dict[int, GangWork]:
    """``done_by_gang``'s answer from its [total, most, jobs] sums: gangs that made some."""
    return {g: GangWork(v[0], v[1], int(v[2])) for g, v in acc.items() if v[0] > 0.0}
