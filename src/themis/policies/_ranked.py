"""Rank and pack: the mechanism shared by policies that order live jobs by one number and
run the best-ranked ones that fit (LAS ranks by attained service, SRTF by remaining time).

One round:

1. Running jobs the policy protects (LAS: their quantum has not ended) keep their GPUs.
2. Every other live job is ranked by the policy's ``rank``, smallest first. Ties: a job
   that holds GPUs before one that waits (a tie is no reason to preempt), then the app that
   arrived first, then submission order.
3. Walking the ranking, a job is chosen when its gang fits the GPUs not yet promised to
   better-ranked jobs; one that does not fit is passed over for smaller ones behind it, so
   no GPU idles while a waiting gang would fit (work conservation; ``_quantum.fill``).
4. Chosen running jobs keep their exact GPUs; running jobs not chosen are preempted; the
   newly chosen are packed largest gang first on the best span of what is free, as the
   quantum baselines do (``_quantum.place``).

A waiting job's rank cannot change while it waits (it makes no progress and holds no
GPUs), so each app keeps its waiting jobs ranked: when the app changes
(``AppState.version``) jobs that started leave the ranking and jobs that stopped join it.
The apps' rankings are merged lazily: a round costs its running jobs and the jobs it looks
at, not every live job of every app.

In the simulator a round is asked as ``changes``: the policy keeps one ranking of every
waiting job (``_books``) from round to round, per gang size, and only the running jobs
that compete (LAS: those whose quantum ended) are ranked in the round; the jobs it starts
are carved from the simulator's own free pool. Same choices, same GPUs, same order as
``schedule`` (``tests/simulator/test_incremental.py``).
"""

from __future__ import annotations

import heapq
from abc import abstractmethod
from bisect import insort
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from themis.model.cluster import Cluster
from themis.model.placement import Packer
from themis.model.state import AppState, JobState
from themis.policies._books import Books, Key
from themis.policies._quantum import fill, place_changes
from themis.policies.base import (
    Assignment,
    Changes,
    Policy,
    PolicyOptions,
    Schedule,
    SchedulingView,
)

#: (rank, 0 if it runs else 1, app position in the view, submission index, job): tuples
#: sort in the order jobs are served; (position, index) is unique, so jobs never compare.
_Ranked = tuple[float, int, int, int, JobState]


def attained_at(job: JobState, now: float) -> float:
    """GPU-seconds ``job`` has held up to ``now``: what it held in earlier stretches plus
    the stretch it is running now."""
    if job.gpus:
        return job.attained + len(job.gpus) * (now - job.held_since)
    return job.attained


@dataclass
class _AppRanking:
    """One app's waiting jobs as (rank, submission index, job), sorted, valid for one app
    version; ``running``: the app's running jobs at that version."""

    version: int
    running: frozenset[JobState]
    ranked: list[tuple[float, int, JobState]]
    touches: int = 0  # the app's ``touches`` when built


class RankedPolicy(Policy):
    """A policy that is one ranking of jobs; subclasses say what the rank is."""

    incremental = True

    #: Whether a running job keeps its GPUs without competing while its grant has not
    #: ended (LAS's quantum; a grant without an end is re-decided at once). Otherwise
    #: every running job competes in every round.
    protects_grants: ClassVar[bool] = False

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        self._cluster: Cluster | None = None
        self._waiting: dict[AppState, _AppRanking] = {}
        self._index: dict[AppState, dict[JobState, int]] = {}
        self._books = Books(self._waiting_key)

    @abstractmethod
    def rank(self, job: JobState, now: float, cluster: Cluster) -> float:
        """Smaller runs first. It must not change while the job waits (it is cached)."""

    def protected(self, job: JobState, view: SchedulingView) -> bool:
        """Whether a running job keeps its GPUs this round without competing for them."""
        return self.protects_grants and job.until is not None and not view.ending(job)

    def changes(self, view: SchedulingView) -> Changes:
        """``schedule``'s round as what changes, from books kept across rounds: the
        ranking of the waiting jobs is kept, only competing running jobs are ranked."""
        books = self._books
        if not books.sync(view):
            return super().changes(view)  # pragma: no cover - the simulator keeps books
        now, cluster, order = view.now, view.cluster, view.order
        assert order is not None and view.free is not None
        if not self.protects_grants:
            contenders = list(books.running())
        elif books.any_ending(view):
            contenders = [j for j in books.running() if not self.protected(j, view)]
        else:
            contenders = []
        keys: list[Key] = [
            (self.rank(j, now, cluster), 0, order[j.app], j.index, j) for j in contenders
        ]
        capacity = len(view.free) + sum(j.spec.gang for j in contenders)
        chosen = books.waiting.fill(capacity, keys)
        return place_changes(view, books, chosen, contenders, self.grant_until(view))

    def _waiting_key(self, job: JobState, view: SchedulingView) -> Key:
        """A waiting job's place in the ranking (``_Ranked``, with the app's admission
        rank for its position: the same order)."""
        assert view.order is not None
        return (self.rank(job, view.now, view.cluster), 1, view.order[job.app], job.index, job)

    def grant_until(self, view: SchedulingView) -> float | None:
        """When a grant made in this round ends (the policy is called again then), or None."""
        return None

    def schedule(self, view: SchedulingView) -> Schedule:
        now, cluster = view.now, view.cluster
        if cluster is not self._cluster:  # ranks may depend on the cluster (best span)
            self._cluster = cluster
            self._waiting.clear()
            self._index.clear()
        if len(self._index) > len(view.apps):
            self._forget(view.apps)
        schedule: Schedule = {}
        capacity = cluster.size
        contenders: list[_Ranked] = []
        streams: list[Iterator[_Ranked]] = []
        for pos, app in enumerate(view.apps):
            index = submission_index(self._index, app)
            for job in app.running_jobs():
                if self.protected(job, view):
                    schedule[job] = Assignment(job.gpus, job.until)
                    capacity -= job.gang
                else:
                    contenders.append((self.rank(job, now, cluster), 0, pos, index[job], job))
            streams.append(self._waiting_ranked(app, pos, now, cluster))
        contenders.sort()
        ranking = (job for *_, job in heapq.merge(contenders, *streams))
        chosen = fill(ranking, capacity)
        until = self.grant_until(view)
        kept = {job for job in chosen if job.gpus}
        free = set(view.free_gpus())
        for *_, job in contenders:
            if job not in kept:
                free.update(job.gpus)  # preempted: its GPUs go back to the pool
        pool = Packer(cluster, free)
        for job in chosen:
            if job in kept:
                schedule[job] = Assignment(job.gpus, until)
        # Largest gangs first (stable: rank order on ties), each on the best span left, so
        # that big gangs find whole machines before small ones fragment them.
        for job in sorted((j for j in chosen if j not in kept), key=lambda j: -j.gang):
            gpus = pool.take(job.gang)
            if gpus is None:
                if cluster.typed:
                    continue  # chosen by count, type-blind: no one type holds it this round
                raise AssertionError("unreachable: gangs were chosen by count")
            schedule[job] = Assignment(gpus, until)
        return schedule

    # -- caches -----------------------------------------------------------------------------

    def _waiting_ranked(
        self, app: AppState, pos: int, now: float, cluster: Cluster
    ) -> Iterator[_Ranked]:
        cached = self._waiting.get(app)
        if cached is None or cached.touches != app.touches:  # touched: rebuilt
            cached = self._rank_waiting(app, now, cluster)
        elif cached.version != app.version:
            self._update(app, cached, now, cluster)
        for rank, k, job in cached.ranked:
            yield rank, 1, pos, k, job

    def _rank_waiting(self, app: AppState, now: float, cluster: Cluster) -> _AppRanking:
        index = submission_index(self._index, app)
        ranked = sorted((self.rank(job, now, cluster), index[job], job) for job in app.idle_jobs())
        cached = _AppRanking(app.version, frozenset(app.running_jobs()), ranked, app.touches)
        self._waiting[app] = cached
        return cached

    def _update(self, app: AppState, cached: _AppRanking, now: float, cluster: Cluster) -> None:
        """Bring ``cached`` to the app's version: jobs that started (and maybe finished)
        since leave the ranking, jobs that stopped without finishing join it."""
        index = submission_index(self._index, app)
        ranked = [e for e in cached.ranked if not e[2].gpus and e[2].finished_at is None]
        for job in cached.running:
            if not job.gpus and job.finished_at is None:
                insort(ranked, (self.rank(job, now, cluster), index[job], job))
        cached.version, cached.running = app.version, frozenset(app.running_jobs())
        cached.ranked = ranked

    def _forget(self, apps: Sequence[AppState]) -> None:
        """Drop what is cached for apps that have finished."""
        active = set(apps)
        self._waiting = {a: v for a, v in self._waiting.items() if a in active}
        self._index = {a: v for a, v in self._index.items() if a in active}


def submission_index(
    cache: dict[AppState, dict[JobState, int]], app: AppState
) -> dict[JobState, int]:
    """Each job's position in its app's submission order, built once per app in ``cache``:
    a deterministic tie-break that costs a dict lookup per round, not a list scan."""
    index = cache.get(app)
    if index is None:
        index = cache[app] = {job: k for k, job in enumerate(app.jobs)}
    return index
