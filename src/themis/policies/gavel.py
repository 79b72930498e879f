"""Gavel (Narayanan et al., OSDI 2020) as it ships: finish-time fairness per job, in
synchronous 360 s rounds.

Sources followed (stanford-futuredata/gavel): ``scheduler/policies/finish_time_fairness.py``
and ``max_min_fairness.py`` for the allocation (``_gavel_program``), and
``scheduler/scheduler.py`` (``simulate``, ``_update_priorities``,
``_reset_time_run_so_far``, ``_schedule_jobs_on_workers[_helper]``,
``_assign_workers_to_job``, ``_done_callback``) for the rounds (``_gavel_mechanism``).

- Every live job of every active app is one Gavel job, submitted at its app's arrival; Gavel
  knows nothing of apps. The allocation is one time fraction per job: the plain min-max of
  Gavel's rho, whose denominator is the job's time on an isolated 1/N share of the cluster.
- Rounds are synchronous and 360 s long, whatever ``--lease`` says. A round ends when its
  360 s are over, or earlier when every job in it has finished (Gavel's simulator jumps to
  the latest finish). Arrivals wait for the round's end; GPUs a job frees mid-round stay
  idle until then. When nothing runs at all, a round starts at the next arrival.
- At a round's end, jobs are ordered by priority (allocation over the share of time
  received since the last reset), then deficit, then allocation, and taken greedily while
  their gangs fit; the allocation and the time counters are renewed at most every 1920 s.

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
from themis.policies._gavel_program import TypedJobLoad, solve_gangs, solve_typed
from themis.policies.base import (
    Assignment,
    Changes,
    Policy,
    PolicyOptions,
    Schedule,
    SchedulingView,
)
from themis.policies.registry import register

Gpus = tuple[int, ...]

#: Calls this close (seconds) to the round's end are its end.
_EPSILON = 1e-6


@register
class GavelPolicy(Policy):
    name = "gavel"
    description = "Gavel as it ships: per-job min-max FTF, 360 s synchronous rounds, priorities"

    def __init__(self, options: PolicyOptions, round_length: float = ROUND_SECONDS) -> None:
        super().__init__(options)
        self.round_length = round_length
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
            for app in sorted(dirty, key=lambda a: rank.get(a, -1)):
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
        solver = _solver(view, now)
        if books.reset_due(now):
            books.reset(now, solver)
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
        solver = _typed_solver(view, now)
        if books.reset_due(now):
            books.reset(now, solver)
        placed = self._place_typed(view.cluster, books)
        if not placed and len(books):
            books.reset(now, solver)  # as in the untyped round
            placed = self._place_typed(view.cluster, books)
        return placed

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


def _solver(view: SchedulingView, now: float) -> Solver:
    """Gavel's allocation over the given jobs, as time fractions by job: the jobs with work
    left (each would be a ``JobLoad``), split by their gangs alone (``solve_gangs``)."""
    capacity = float(view.cluster.size)

    def solve_jobs(jobs: list[JobState]) -> dict[JobState, float]:
        kept = [job for job in jobs if job.remaining_at(now) > 0]
        allocation = solve_gangs([job.gang for job in kept], capacity)
        return dict(zip(kept, allocation.fractions, strict=True))

    return solve_jobs


def _typed_solver(view: SchedulingView, now: float) -> TypedSolver:
    """Gavel's heterogeneity-aware allocation over the given jobs: time fractions by job
    and GPU type."""
    cluster = view.cluster
    parts = cluster.shape.parts
    capacities = [float(part.count) for _, part in parts]

    def solve_jobs(jobs: list[JobState]) -> dict[JobState, dict[str, float]]:
        loads = []
        kept = []
        for job in jobs:
            load = _typed_load(job, parts, now)
            if load is not None:
                loads.append(load)
                kept.append(job)
        allocation = solve_typed(loads, capacities)
        return {
            job: {t: x for (t, _), x in zip(parts, row, strict=True)}
            for job, row in zip(kept, allocation.fractions, strict=True)
        }

    return solve_jobs


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
