"""FIFO: apps served in arrival order, jobs in submission order, never preempted.

A job that does not fit the free GPUs does not block the ones behind it (first-fit
backfill), which is how FIFO queues are usually run on gang-scheduled clusters; each gang
is packed on the best span available.

A round costs the apps and the jobs it starts, not the backlog: each app's waiting jobs
(in submission order) and their smallest gang are kept per app version, so an app none of
whose waiting gangs fits the free GPUs is passed over at once. A gang fits exactly when it
is no larger than the free pool (``Packer.take`` then always succeeds), so skipping those
apps changes nothing: the same jobs are tried in the same order and the same start.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping

from themis.mechanism.pool import FreePool
from themis.model.placement import Packer
from themis.model.state import AppState, JobState
from themis.policies.base import (
    Assignment,
    Changes,
    Policy,
    PolicyOptions,
    Schedule,
    SchedulingView,
)
from themis.policies.registry import register


@register
class FifoPolicy(Policy):
    name = "fifo"
    description = "first come first served, first-fit backfill, no preemption"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        # app -> (its version, its waiting jobs in submission order, their smallest gang)
        self._waiting: dict[AppState, tuple[int, list[JobState], int]] = {}
        # ``changes``'s index of the apps with waiting jobs, kept from round to round:
        # per smallest waiting gang, the admission ranks of those apps (ascending)
        self._order: Mapping[AppState, int] | None = None  # the books it was built from
        self._smallest: dict[AppState, int] = {}
        self._ranks: dict[int, list[int]] = {}
        self._app_at: dict[int, AppState] = {}

    def changes(self, view: SchedulingView) -> Changes:
        """The jobs this round starts (FIFO never stops one), in time proportional to the
        apps that changed and the jobs started: the apps with waiting jobs are indexed by
        their smallest waiting gang, so a round visits, in admission order, exactly the
        apps that can start a job (those whose smallest waiting gang is no larger than the
        pool left) and no other."""
        view = self.with_books(view)
        assert view.changed is not None and view.order is not None and view.free is not None
        if view.order is not self._order:  # another run: index every app afresh
            self._order = view.order
            self._smallest, self._ranks, self._app_at = {}, {}, {}
            self._waiting = {}
            self._index(view.apps, view.order)
        else:
            self._index(view.changed, view.order)
        start: Schedule = {}
        free = len(view.free)
        fitting = [(ranks[0], smallest, 0) for smallest, ranks in self._ranks.items() if ranks]
        fitting = [f for f in fitting if f[1] <= free]
        if not fitting:
            return Changes([], start)  # nothing waiting fits: no pool to build
        # The simulator's own pool when it can carve gangs as a Packer would (it then
        # gives back what was taken), else a Packer of the free GPUs.
        pool: Packer | FreePool = (
            view.free
            if isinstance(view.free, FreePool) and not view.cluster.typed
            else Packer(view.cluster, view.free_gpus())
        )
        heapq.heapify(fitting)
        waiting_of = self._waiting
        while fitting:
            rank, smallest, k = heapq.heappop(fitting)
            size = len(pool)
            if not size:
                break
            if smallest > size:
                continue  # no app of this list fits any more: the pool only shrinks
            ranks = self._ranks[smallest]
            if k + 1 < len(ranks):
                heapq.heappush(fitting, (ranks[k + 1], smallest, k + 1))
            for job in waiting_of[self._app_at[rank]][1]:
                if not len(pool):
                    break
                gpus = pool.take(job.gang)
                if gpus is not None:
                    start[job] = Assignment(gpus)
        return Changes([], start)

    def _index(self, apps: Iterable[AppState], order: Mapping[AppState, int]) -> None:
        """Bring the index up to date for these apps (new, changed or finished)."""
        for app in apps:
            old = self._smallest.pop(app, None)
            rank = order[app]
            if old is not None:
                ranks = self._ranks[old]
                del ranks[bisect_left(ranks, rank)]
            if app.finish is not None:
                self._waiting.pop(app, None)
                self._app_at.pop(rank, None)
                continue
            cached = self._waiting.get(app)
            if cached is None or cached[0] != app.version:
                cached = self._queue(app)
            if cached[1]:
                self._smallest[app] = cached[2]
                insort(self._ranks.setdefault(cached[2], []), rank)
                self._app_at[rank] = app

    def _queue(self, app: AppState) -> tuple[int, list[JobState], int]:
        """The app's waiting jobs at its current version, and their smallest gang."""
        waiting = [j for j in app.jobs if j.finished_at is None and not j.gpus]
        smallest = min((j.gang for j in waiting), default=0)
        cached = self._waiting[app] = (app.version, waiting, smallest)
        return cached
