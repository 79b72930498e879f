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

Knowledge: remaining work is the job's declared total minus what it ran (Gavel's
``total_steps - steps_run``), and its speed the best placement's (Gavel's throughputs are
per job type and gang, placement-unaware); the same estimates ``ftf-oracle`` reads.
Placement is Gavel's: biggest gangs first, server by server; jobs then run at the speed of
the span they really get. rho per app is not Gavel's concern: the simulator reports it
afterwards from the apps' finish times, like every policy's. See docs/policies/gavel.md.
"""

from __future__ import annotations

from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies._gavel_mechanism import ROUND_SECONDS, GavelBooks, Solver, assign, pick
from themis.policies._gavel_program import JobLoad, solve
from themis.policies.base import Assignment, Policy, PolicyOptions, Schedule, SchedulingView
from themis.policies.registry import register

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
        self.round_start: float | None = None
        self.round_end: float | None = None
        self._ran: list[JobState] = []  # the jobs of the current round
        self._now: float | None = None

    def schedule(self, view: SchedulingView) -> Schedule:
        now = view.now
        if self._cluster is not view.cluster or (self._now is not None and now < self._now):
            self._start_run(view.cluster)  # a new run: nothing carries over
        self._now = now
        running = view.running()
        if running and self.round_end is not None and now < self.round_end - _EPSILON:
            return self.keep_running(view)  # mid-round: nothing starts, freed GPUs idle
        return self._new_round(view)

    def _new_round(self, view: SchedulingView) -> Schedule:
        now = view.now
        self._close_round(now)
        live = [j for app in view.apps for j in app.jobs if j.finished_at is None]
        books = self.books
        alive = set(live)
        for job in [j for j in books.job_time if j not in alive]:
            books.remove(job)
        for job in live:
            if job not in books.job_time:
                books.add(job)
        solver = _solver(view, now)
        if books.reset_due(now):
            books.reset(now, solver)
        placed = assign(view.cluster, pick(books.order(), view.cluster.size), books.allocation)
        if not placed and live:
            # Nothing allocated can run (every live job arrived since the last solve) and
            # the cluster is idle: Gavel's simulator forces a reset here when no arrival is
            # queued; we always do, so that an idle cluster never waits for an arrival.
            books.reset(now, solver)
            placed = assign(view.cluster, pick(books.order(), view.cluster.size), books.allocation)
        self.round_start = now
        self.round_end = now + self.round_length
        self._ran = list(placed)
        return {job: Assignment(gpus, self.round_end) for job, gpus in placed.items()}

    def _close_round(self, now: float) -> None:
        """Charge each job of the round that ends its execution time (Gavel's
        ``_done_callback``): up to its finish when it finished, else the whole round."""
        if self.round_start is None or self.round_end is None:
            return
        last = min(now, self.round_end)
        for job in self._ran:
            end = last if job.finished_at is None else min(job.finished_at, last)
            self.books.ran(job, max(0.0, end - self.round_start), job.finished_at is None)
        self._ran = []


def _solver(view: SchedulingView, now: float) -> Solver:
    """Gavel's allocation over the given jobs, as time fractions by job."""

    def solve_jobs(jobs: list[JobState]) -> dict[JobState, float]:
        loads = []
        kept = []
        for job in jobs:
            load = _job_load(job.app, job, view.cluster, now)
            if load is not None:
                loads.append(load)
                kept.append(job)
        allocation = solve(loads, float(view.cluster.size))
        return dict(zip(kept, allocation.fractions, strict=True))

    return solve_jobs


def _job_load(app: AppState, job: JobState, cluster: Cluster, now: float) -> JobLoad | None:
    remaining = job.remaining_at(now)
    if remaining <= 0:
        return None
    profile = app.profile
    speed = job.gang * profile.best_factor_on(job.gang, cluster.shape) / profile.time_per_iteration
    return JobLoad(max(0.0, now - app.arrival), remaining / speed, job.gang)
