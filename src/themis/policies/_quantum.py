"""The re-allocation quantum of the baselines that do not lease (Gandiva, Optimus, SLAQ), and
the two halves of their rounds around each policy's own choice of jobs.

These schedulers re-decide periodically (Gandiva's time slice, Optimus's scheduling
interval, SLAQ's epoch); here the period is ``PolicyOptions.lease``. Every grant they make
ends on one global grid, the multiples of the quantum, so that all running jobs come up for
re-allocation in the same round: a periodic scheduler re-plans the whole cluster at once,
and a gang then finds whole machines free instead of the odd GPU a staggered end returns.

A round changes nothing that is not up for grabs. Jobs whose grants do not end keep their
GPUs; jobs whose grants end compete with the waiting jobs for the free GPUs plus their own;
a job that runs again keeps its exact GPUs unless its policy moves it (Gandiva's migration).
Between boundaries (arrivals, job ends) only the free GPUs are handed out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from themis.mechanism.pool import FreePool
from themis.model.placement import Packer
from themis.model.state import JobState
from themis.policies._books import Books
from themis.policies.base import Assignment, Changes, Schedule, SchedulingView

#: Moves continuing jobs to other GPUs: given the GPUs nobody holds after the continuing jobs
#: kept theirs (a set it updates in place) and those jobs, returns the jobs it moved.
Relocate = Callable[[set[int], list[JobState]], dict[JobState, tuple[int, ...]]]


def check_quantum(quantum: float) -> float:
    """The quantum, if usable: a programming error otherwise (the CLI checks user input)."""
    if not (math.isfinite(quantum) and quantum > 0):
        raise ValueError(f"the re-allocation quantum must be a number of seconds > 0: {quantum}")
    return quantum


def quantum_end(now: float, window: float, quantum: float) -> float:
    """The first multiple of ``quantum`` beyond ``now + window``.

    Beyond the round's batching horizon, so that a grant made now never counts as ending in
    this same round; a grant made just before a boundary, inside the window, runs to the
    boundary after it instead of being re-decided twice within the window.
    """
    return (math.floor((now + window) / quantum) + 1) * quantum


@dataclass
class Round:
    """What one round may re-allocate.

    ``keep``: running jobs whose grants do not end (untouched); ``ending``: running jobs
    whose grants end now (they compete again); ``free``: GPUs nobody holds; ``until``: the
    end of every grant made in this round.
    """

    view: SchedulingView
    until: float
    keep: list[JobState]
    ending: list[JobState]
    free: list[int]

    @property
    def capacity(self) -> int:
        """GPUs up for grabs: the free ones and the ending jobs' own."""
        return len(self.free) + sum(j.gang for j in self.ending)

    @property
    def boundary(self) -> bool:
        """Whether some grant ends in this round (a quantum boundary)."""
        return bool(self.ending)


def open_round(view: SchedulingView, quantum: float) -> Round:
    keep: list[JobState] = []
    ending: list[JobState] = []
    for app in view.apps:  # as ``view.running()``, from each app's running jobs only
        for job in app.running_jobs():
            (ending if view.ending(job) else keep).append(job)
    return Round(view, quantum_end(view.now, view.window, quantum), keep, ending, view.free_gpus())


def fill(candidates: Iterable[JobState], capacity: int) -> list[JobState]:
    """Candidates in order while GPUs last. A gang that does not fit is passed over for the
    smaller ones behind it, so that no GPU idles while some candidate could use it."""
    chosen: list[JobState] = []
    if capacity <= 0:
        return chosen
    for job in candidates:
        if job.gang <= capacity:
            chosen.append(job)
            capacity -= job.gang
            if capacity == 0:
                break
    return chosen


def place(rnd: Round, chosen: Iterable[JobState], relocate: Relocate | None = None) -> Schedule:
    """The round's schedule: ``keep`` unchanged, then ``chosen`` (ending or waiting jobs whose
    gangs add up to at most ``rnd.capacity``) on concrete GPUs.

    Continuing jobs keep their exact GPUs (or go where ``relocate`` moves them); starting
    jobs are packed largest gang first, each on the best span left (best fit), so that big
    gangs get whole machines before small ones fragment them.
    """
    view = rnd.view
    schedule: Schedule = {j: Assignment(j.gpus, j.until) for j in rnd.keep}
    chosen = list(chosen)
    continuing = [j for j in chosen if j.gpus]
    starting = [j for j in chosen if not j.gpus]
    staying = set(continuing)
    available = set(rnd.free)
    for job in rnd.ending:
        if job not in staying:
            available.update(job.gpus)
    moved = relocate(available, continuing) if relocate is not None and continuing else {}
    for job in continuing:
        schedule[job] = Assignment(moved.get(job, job.gpus), rnd.until)
    pool = Packer(view.cluster, available)
    for job in sorted(starting, key=lambda j: -j.gang):  # stable: the policy's order on ties
        gpus = pool.take(job.gang)
        if gpus is None:
            if view.cluster.typed:
                continue  # chosen by count, type-blind: no one type holds it this round
            raise AssertionError(f"chose more gangs than GPUs: {job.job_id} does not fit")
        schedule[job] = Assignment(gpus, rnd.until)
    return schedule


def place_changes(
    view: SchedulingView,
    books: Books,
    chosen: list[JobState],
    contenders: Iterable[JobState],
    until: float | None,
    relocate: Relocate | None = None,
) -> Changes:
    """``place``'s schedule as what changes (``Policy.changes``), for a round whose
    running jobs not in ``contenders`` keep their GPUs and grant ends: the contenders not
    chosen stop, the chosen ones that run continue (or move, if ``relocate`` moves them)
    until ``until``, the chosen ones that wait start on GPUs carved as ``place`` carves
    them. ``books`` learns what it granted. ``view.free`` must be the simulator's books."""
    assert view.free is not None
    cluster = view.cluster
    kept = set(chosen)
    stop = [j for j in contenders if j not in kept]
    continuing = [j for j in chosen if j.gpus]
    starting = [j for j in chosen if not j.gpus]
    pool: Packer | FreePool | None = None
    moved: dict[JobState, tuple[int, ...]] = {}

    def available() -> set[int]:  # the free GPUs and those of the jobs that stop
        return set(view.free or ()).union(*(j.gpus for j in stop))

    if relocate is not None and continuing:
        gpus_up = available()
        moved = relocate(gpus_up, continuing)
        pool = Packer(cluster, gpus_up)
    start: Schedule = {}
    for job in continuing:
        gpus = moved.get(job, job.gpus)
        if gpus != job.gpus or until != job.until:
            start[job] = Assignment(gpus, until)
            books.granted(job, until)
    if not starting:
        return Changes(stop, start)
    if pool is None:
        if isinstance(view.free, FreePool) and not cluster.typed:
            pool = view.free  # the simulator gives back what is carved from it
            for job in stop:
                pool.draft_add(job.gpus)
        else:
            pool = Packer(cluster, available())
    starting.sort(key=lambda j: -j.spec.gang)  # stable: the policy's order on ties
    for job in starting:
        taken = pool.take(job.spec.gang)
        if taken is None:
            if cluster.typed:
                continue  # chosen by count, type-blind: no one type holds it this round
            raise AssertionError(f"chose more gangs than GPUs: {job.job_id} does not fit")
        # ``tuple.__new__``: the named tuple without its Python ``__new__``, at every start
        # of a time slice (``simulator/engine.py``'s ``_stop`` says why).
        start[job] = tuple.__new__(Assignment, (taken, until))
        books.started.append(job)
        books.granted(job, until)
    return Changes(stop, start)
