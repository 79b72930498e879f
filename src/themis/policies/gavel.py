"""Gavel (Narayanan et al., OSDI 2020) as it ships: finish-time fairness per job (``gavel``)
or max-min fairness per job (``gavel-mmf``), in synchronous 360 s rounds.

Sources followed (stanford-futuredata/gavel, commit c4fa400):
``scheduler/policies/finish_time_fairness.py``, ``isolated.py`` and ``max_min_fairness.py``
for the allocation (``_gavel_program``), and ``scheduler/scheduler.py`` (``simulate``,
``_update_priorities``, ``_allocation_thread``, ``_reset_time_run_so_far``,
``_schedule_jobs_on_workers[_helper]``, ``_assign_workers_to_job``, ``_done_callback``) for
the rounds (``_gavel_mechanism``).

- Every live job of every active app is one Gavel job, submitted at its app's arrival; Gavel
  knows nothing of apps. The allocation is one time fraction per job. ``gavel``: the
  min-max of Gavel's rho, ``(time since submission + remaining / share) / (isolated time
  of the work done + remaining / isolated share)``, the work done counted across solves
  (``_gavel_program.solve_ftf``, its leximin optimum). ``gavel-mmf``: Gavel's max-min split.
- Rounds are synchronous and 360 s long, whatever ``--lease`` says. A round ends when its
  360 s are over, or earlier when every job in it has finished (Gavel's simulator jumps to
  the latest finish). Arrivals wait for the round's end; GPUs a job frees mid-round stay
  idle until then. When nothing runs at all, a round starts at the next arrival.
- At a round's end, jobs are ordered by priority (allocation over the share of time
  received since the last reset), then deficit, then allocation, and taken greedily while
  their gangs fit. ``resolve="simulator"`` (the default, Gavel's simulator, which its
  paper's figures use): the allocation and the time counters are renewed together, when
  something changed and at least 1920 s after the last renewal. ``resolve="cluster"``
  (Gavel's cluster scheduler): the allocation is solved again at the first round after
  every arrival or completion; the counters still reset at most every 1920 s.

On a typed cluster (``--cluster 1x4x8:v100+1x4x8:k80``) it is Gavel's heterogeneity-aware
variant: the allocation is a time fraction per (job, GPU type) over the jobs' throughput
matrix (``_gavel_program.solve_typed``), the books, deficits and priorities are per type,
the (job, type) queue is walked type by type, fastest first, and each chosen job is placed
on its type's servers (``_gavel_mechanism.TypedBooks``, ``pick_typed``, ``assign``). An
untyped cluster takes the one-type path above, unchanged.

Knowledge: remaining work is the job's declared total minus what it ran (Gavel's
``total_steps - steps_run``), and its speed the best placement's (Gavel's throughputs are
per job type and gang, placement-unaware); the same estimates ``ftf-oracle`` reads.
Placement is Gavel's: biggest gangs first, server by server; jobs then run at the speed of
the span they really get. rho per app is not Gavel's concern: the simulator reports it
afterwards from the apps' finish times, like every policy's. See docs/policies/gavel.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from themis.model.cluster import Cluster, SetShape
from themis.model.state import AppState, JobState
from themis.policies._gavel_mechanism import (
    ROUND_SECONDS,
    GavelBooks,
    Solver,
    TypedBooks,
    TypedSolver,
    assign,
    pick,
    pick_typed,
    type_order,
)
from themis.policies._gavel_program import (
    FtfJob,
    TypedJobLoad,
    gavel_isolated,
    isolated_typed,
    solve_ftf,
    solve_gangs,
    solve_typed,
)
from themis.policies.base import (
    Assignment,
    Changes,
    Policy,
    PolicyOptions,
    Schedule,
    SchedulingView,
)
from themis.policies.knobs import GAVEL_RESOLVE
from themis.policies.registry import register

Gpus = tuple[int, ...]

#: Calls this close (seconds) to the round's end are its end.
_EPSILON = 1e-6


#: When the allocation is solved again: Gavel's simulator or its cluster scheduler.
RESOLVE_MODES = GAVEL_RESOLVE


@register
class GavelPolicy(Policy):
    name = "gavel"
    description = "Gavel as it ships: per-job min-max FTF, 360 s synchronous rounds, priorities"
    #: The allocation: ``ftf`` (Gavel's finish-time fairness) or ``mmf`` (its max-min).
    program = "ftf"

    def __init__(
        self,
        options: PolicyOptions,
        round_length: float = ROUND_SECONDS,
        resolve: str | None = None,
    ) -> None:
        super().__init__(options)
        if resolve is None:
            resolve = options.gavel_resolve
        if resolve not in RESOLVE_MODES:
            raise ValueError(f"resolve must be one of {RESOLVE_MODES}, got {resolve!r}")
        self.round_length = round_length
        self.resolve = resolve
        self._start_run(None)

    def _start_run(self, cluster: Cluster | None) -> None:
        self._cluster = cluster
        self.books = GavelBooks(self.round_length)
        #: Per (job, GPU type) books on a typed cluster (``books`` is then unused).
        self.typed_books: TypedBooks | None = None
        if cluster is not None and cluster.typed:
            self.typed_books = TypedBooks(type_order(cluster.types), self.round_length)
        self._ran_on: dict[JobState, str] = {}  # typed: the type each job of the round ran on
        self.round_start: float | None = None
        self.round_end: float | None = None
        self._ran: list[JobState] = []  # the jobs of the current round
        self._now: float | None = None
        #: The apps changed since the last round (``_sync``); None: not known.
        self._dirty: set[AppState] | None = set()
        #: Finish-time fairness across solves (Gavel's ``_cumulative_isolated_time``).
        self.isolated_time = IsolatedTime()

    #: Mid-round calls change nothing and a new round's changes are known from the jobs
    #: it picks and the ones the last round ran: ``changes`` answers without a walk of
    #: every running job.
    incremental = True

    def schedule(self, view: SchedulingView) -> Schedule:
        self._begin(view)
        round_ = self._decide(view)
        if round_ is None:
            return self.keep_running(view)  # mid-round: nothing starts, freed GPUs idle
        return round_

    def changes(self, view: SchedulingView) -> Changes:
        """The round ``schedule`` makes, as what changes: nothing mid-round; at a new round
        the jobs of the round that ends which still run and were not picked again stop
        (only the policy starts jobs, so they are all the running ones), and the picked
        jobs start, or continue until the new round's end."""
        before = self._begin(view)
        round_ = self._decide(view)
        if round_ is None:
            return Changes()
        start = {
            job: grant
            for job, grant in round_.items()
            if not (job.gpus and grant.gpus == job.gpus and grant.until == job.until)
        }
        return Changes([j for j in before if j.gpus and j not in round_], start)

    def _begin(self, view: SchedulingView) -> list[JobState]:
        """Start a new run when the view is of another one, and note the apps that changed
        (``_sync``); the jobs of the current round."""
        now = view.now
        if self._cluster is not view.cluster or (self._now is not None and now < self._now):
            self._start_run(view.cluster)  # a new run: nothing carries over
        if view.changed is None:
            self._dirty = None
        elif self._dirty is not None:
            self._dirty.update(view.changed)
        return self._ran

    def _decide(self, view: SchedulingView) -> Schedule | None:
        """A new round's schedule, or None mid-round (nothing changes)."""
        now = view.now
        self._now = now
        # Some job runs exactly when some GPU is busy: a count, not a walk of the jobs.
        running = view.free_count() < view.cluster.size
        if running and self.round_end is not None and now < self.round_end - _EPSILON:
            return None
        return self._new_round(view)

    def _new_round(self, view: SchedulingView) -> Schedule:
        now = view.now
        self._close_round(now)
        if self.typed_books is not None:
            self._sync(view, self.typed_books)
            placed = self._typed_round(view, self.typed_books)
        else:
            self._sync(view, self.books)
            placed = self._untyped_round(view)
        self.round_start = now
        self.round_end = now + self.round_length
        self._ran = list(placed)
        return {job: Assignment(gpus, self.round_end) for job, gpus in placed.items()}

    def _sync(self, view: SchedulingView, books: GavelBooks | TypedBooks) -> None:
        """Make the books hold exactly the live jobs of the active apps, the new ones added
        in (app, job) order (their submission order). A job lives or dies only with a
        change its app is marked for (``SchedulingView.changed``), so when the mechanism
        says which apps changed since the last round only their jobs are looked at; else
        every job of every active app is."""
        dirty, rank = self._dirty, view.order
        if dirty is None or rank is None:
            live = [j for app in view.apps for j in app.jobs if j.finished_at is None]
            alive = set(live)
            for job in [j for j in books.jobs if j not in alive]:
                books.remove(job)
            for job in live:
                if job not in books:
                    books.add(job)
        else:
            # Removals first or interleaved, the books end in the same order: a removal
            # moves no other job, and additions come in (app, job) order either way.
            for app in sorted(dirty, key=partial(_rank_or_first, rank)):
                for job in app.jobs:
                    if job.finished_at is None:
                        if job not in books:
                            books.add(job)
                    elif job in books:
                        books.remove(job)
        self._dirty = None if view.changed is None else set()

    def _untyped_round(self, view: SchedulingView) -> dict[JobState, Gpus]:
        now = view.now
        books = self.books
        solver = self._solver(view, now)
        self._renew(books, now, solver)
        placed = assign(view.cluster, pick(books.ranked(), view.cluster.size), books.allocation)
        if not placed and len(books):
            # Nothing allocated can run (every live job arrived since the last solve) and
            # the cluster is idle: Gavel's simulator forces a reset here when no arrival is
            # queued; we always do, so that an idle cluster never waits for an arrival.
            books.reset(now, solver)
            placed = assign(view.cluster, pick(books.ranked(), view.cluster.size), books.allocation)
        return placed

    def _typed_round(self, view: SchedulingView, books: TypedBooks) -> dict[JobState, Gpus]:
        """Gavel on several GPU types: one allocation per (job, type), the (job, type)
        queue walked type by type, each chosen job placed on its type's servers."""
        now = view.now
        solver = self._typed_solver(view, now)
        self._renew(books, now, solver)
        placed = self._place_typed(view.cluster, books)
        if not placed and len(books):
            books.reset(now, solver)  # as in the untyped round
            placed = self._place_typed(view.cluster, books)
        return placed

    def _renew(self, books: GavelBooks | TypedBooks, now: float, solver: Any) -> None:
        """Solve and reset as Gavel's simulator does, or as its cluster scheduler does
        (see the module docstring)."""
        if self.resolve == "simulator":
            if books.reset_due(now):
                books.reset(now, solver)
            return
        if books.need_update:
            books.resolve(solver)
        if books.counters_due(now):
            books.reset(now, None)

    def _solver(self, view: SchedulingView, now: float) -> Solver:
        if self.program == "mmf":
            return _max_min_solver(view, now)
        return _ftf_solver(view, now, self.isolated_time)

    def _typed_solver(self, view: SchedulingView, now: float) -> TypedSolver:
        return _typed_solver(view, now, None if self.program == "mmf" else self.isolated_time)

    def _place_typed(self, cluster: Cluster, books: TypedBooks) -> dict[JobState, Gpus]:
        workers = {t: part.count for t, part in cluster.shape.parts}
        chosen = pick_typed(books.queue(books.types), workers)
        placed: dict[JobState, Gpus] = {}
        self._ran_on = {}
        for gpu_type in books.types:
            jobs = [job for job, t in chosen.items() if t == gpu_type]
            got = assign(cluster, jobs, books.by_type[gpu_type].allocation, gpu_type)
            placed.update(got)
            self._ran_on.update(dict.fromkeys(got, gpu_type))
        return placed

    def _close_round(self, now: float) -> None:
        """Charge each job of the round that ends its execution time (Gavel's
        ``_done_callback``): up to its finish when it finished, else the whole round."""
        if self.round_start is None or self.round_end is None:
            return
        last = min(now, self.round_end)
        for job in self._ran:
            end = last if job.finished_at is None else min(job.finished_at, last)
            seconds = max(0.0, end - self.round_start)
            if self.typed_books is not None:
                self.typed_books.ran(job, self._ran_on[job], seconds, job.finished_at is None)
            else:
                self.books.ran(job, seconds, job.finished_at is None)
        self._ran = []


@register
class GavelMaxMinPolicy(GavelPolicy):
    """Gavel's max-min fairness (``MaxMinFairnessPolicy``) with the same rounds: the split
    of ``_gavel_program.solve_gangs``. It is also what ``gavel`` was before it followed
    Gavel's fixed finish-time-fairness formula: same decisions, bit for bit."""

    name = "gavel-mmf"
    description = "Gavel's max-min fairness: per-job equal GPU shares, Gavel's 360 s rounds"
    program = "mmf"


class IsolatedTime:
    """Gavel's ``FinishTimeFairnessPolicyWithPerf`` state across solves: each job's
    cumulative isolated time (seconds), and its remaining iterations and isolated speed
    (iterations per second) at the last solve. At each solve a job that was in the last
    one adds the iterations it ran since over its isolated speed then."""

    def __init__(self) -> None:
        self.done: dict[JobState, float] = {}
        self._last: dict[JobState, tuple[float, float]] = {}

    def update(self, jobs: list[JobState], remaining: list[float]) -> list[float]:
        """The jobs' cumulative isolated times now (``remaining``: their iterations left)."""
        out = []
        for job, rem in zip(jobs, remaining, strict=True):
            total = self.done.get(job, 0.0)
            last = self._last.get(job)
            if last is not None:
                total += (last[0] - rem) / last[1]
            self.done[job] = total
            out.append(total)
        return out

    def solved(self, jobs: list[JobState], remaining: list[float], speeds: list[float]) -> None:
        """Note what this solve saw (Gavel replaces its previous-solve maps each time);
        jobs not in it are gone for good."""
        self._last = {
            job: (rem, speed) for job, rem, speed in zip(jobs, remaining, speeds, strict=True)
        }
        self.done = {job: self.done[job] for job in jobs}


def _ftf_solver(view: SchedulingView, now: float, isolated_time: IsolatedTime) -> Solver:
    """Gavel's finish-time-fairness allocation over the given jobs, as time fractions by
    job (``solve_ftf``): the jobs with work left, each with its time since submission, its
    cumulative isolated time and its remaining seconds at its best placement."""
    cluster = view.cluster
    capacity = float(cluster.size)

    def solve_jobs(jobs: list[JobState]) -> dict[JobState, float]:
        kept = [job for job in jobs if job.remaining_at(now) > 0]
        remaining = [job.remaining_at(now) for job in kept]
        speeds = [
            job.gang
            * job.app.profile.best_factor_on(job.gang, cluster.shape)
            / job.app.profile.time_per_iteration
            for job in kept
        ]
        done = isolated_time.update(kept, remaining)
        loads = [
            FtfJob(max(0.0, now - job.app.arrival), c, rem / speed, job.gang)
            for job, c, rem, speed in zip(kept, done, remaining, speeds, strict=True)
        ]
        allocation = solve_ftf(loads, capacity)
        isolated = gavel_isolated([job.gang for job in kept], capacity).tolist()
        isolated_time.solved(
            kept, remaining, [s * x for s, x in zip(speeds, isolated, strict=True)]
        )
        return dict(zip(kept, allocation.fractions, strict=True))

    return solve_jobs


def _max_min_solver(view: SchedulingView, now: float) -> Solver:
    """Gavel's max-min allocation over the given jobs, as time fractions by job: the jobs
    with work left, split by their gangs alone (``solve_gangs``)."""
    capacity = float(view.cluster.size)

    def solve_jobs(jobs: list[JobState]) -> dict[JobState, float]:
        kept = [job for job in jobs if job.remaining_at(now) > 0]
        allocation = solve_gangs([job.gang for job in kept], capacity)
        return dict(zip(kept, allocation.fractions, strict=True))

    return solve_jobs


def _typed_solver(
    view: SchedulingView, now: float, isolated_time: IsolatedTime | None
) -> TypedSolver:
    """Gavel's heterogeneity-aware allocation over the given jobs: time fractions by job
    and GPU type. ``isolated_time`` None: the max-min split (``isolated_typed``, zero on a
    type the gang does not fit); else finish-time fairness (``solve_typed``)."""
    cluster = view.cluster
    parts = cluster.shape.parts
    capacities = [float(part.count) for _, part in parts]

    def max_min(jobs: list[JobState]) -> dict[JobState, dict[str, float]]:
        kept = [job for job in jobs if job.remaining_at(now) > 0]
        fits = [[job.gang <= part.count for _, part in parts] for job in kept]
        kept = [job for job, row in zip(kept, fits, strict=True) if any(row)]
        split = isolated_typed([job.gang for job in kept], capacities).tolist()
        return {
            job: {
                t: (x if job.gang <= part.count else 0.0)
                for (t, part), x in zip(parts, row, strict=True)
            }
            for job, row in zip(kept, split, strict=True)
        }

    def ftf(jobs: list[JobState]) -> dict[JobState, dict[str, float]]:
        assert isolated_time is not None
        loads = []
        kept = []
        for job in jobs:
            load = _typed_load(job, parts, now)
            if load is not None:
                loads.append(load)
                kept.append(job)
        remaining = [load.remaining for load in loads]
        done = isolated_time.update(kept, remaining)
        loads = [replace(load, isolated_done=c) for load, c in zip(loads, done, strict=True)]
        allocation = solve_typed(loads, capacities)
        alone = [
            sum(x * v for x, v in zip(row, load.speeds, strict=True))
            for row, load in zip(allocation.isolated, loads, strict=True)
        ]
        isolated_time.solved(kept, remaining, alone)
        return {
            job: {t: x for (t, _), x in zip(parts, row, strict=True)}
            for job, row in zip(kept, allocation.fractions, strict=True)
        }

    return max_min if isolated_time is None else ftf


def _typed_load(
    job: JobState, parts: tuple[tuple[str, SetShape], ...], now: float
) -> TypedJobLoad | None:
    """A job's row of Gavel's throughput matrix: iterations per second holding its gang
    at its best placement on each type (0 where the gang does not fit), with its declared
    remaining iterations; None when it has no work left or fits no type."""
    remaining = job.remaining_at(now)
    if remaining <= 0:
        return None
    app = job.app
    profile = app.profile
    gang = job.gang
    speeds = tuple(
        gang * profile.best_factor_on(gang, part) / profile.time_on(t) for t, part in parts
    )
    if not any(s > 0 for s in speeds):
        return None
    return TypedJobLoad(max(0.0, now - app.arrival), remaining, gang, speeds)


# A module function bound with ``partial``, not a lambda: mypyc (2.4) stops with an internal
# error on a closure inside a method of a decorated (``@register``) class.
def _rank_or_first(rank: Mapping[AppState, int], app: AppState) -> int:
    return rank.get(app, -1)
