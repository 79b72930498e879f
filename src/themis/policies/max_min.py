"""Instantaneous max-min fair share: each active app is entitled to an equal share of the
GPUs, capped by its demand (water-filling), re-computed at every arrival and job end.

Jobs are preempted only when an app below its share has a job to run and no free GPUs are
left for it: then the app furthest above its share loses its most recently started job.
GPUs nobody below its share can use go to the apps with the smallest held/share ratio
(work conservation), and are the first taken back later.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice

from themis.mechanism.pool import FreePool
from themis.model.placement import pack_gang
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


def water_fill(capacity: int, demands: list[int]) -> list[int]:
    """Max-min fair integer shares of ``capacity`` for the given demands; the remainder of
    an uneven split goes to the earlier entries."""
    shares = [0] * len(demands)
    active = [i for i, d in enumerate(demands) if d > 0]
    left = capacity
    while active and left > 0:
        each, extra = divmod(left, len(active))
        if each == 0:
            for i in active[:extra]:
                shares[i] += 1
            break
        still = []
        for i in active:
            give = min(each, demands[i] - shares[i])
            shares[i] += give
            left -= give
            if shares[i] < demands[i]:
                still.append(i)
        active = still
    return shares


def fast_water_fill(capacity: int, demands: list[int]) -> list[int]:
    """``water_fill``'s shares in closed form: every demand met if they fit; else the
    highest level L with ``sum(min(d, L)) <= capacity`` caps each demand, and the
    ``capacity - sum(min(d, L))`` GPUs left (fewer than the apps above L) go one each to
    the first apps above L, as ``water_fill``'s last pass gives its remainder
    (tests/policies/test_policies.py checks the two against each other)."""
    total = sum(demands)
    if total <= capacity:
        return list(demands)
    ordered = sorted(demands)
    n = len(ordered)
    below = 0  # sum of the demands met in full
    for k, d in enumerate(ordered):
        if below + d * (n - k) > capacity:
            level = (capacity - below) // (n - k)
            left = capacity - below - level * (n - k)
            break
        below += d
    else:  # pragma: no cover - total > capacity breaks above
        return list(demands)
    shares = [d if d <= level else level for d in demands]
    if left:
        for i, d in enumerate(demands):
            if d > level:
                shares[i] += 1
                left -= 1
                if not left:
                    break
    return shares


@register
class MaxMinPolicy(Policy):
    name = "max-min"
    description = "instantaneous equal GPU share among active apps (water-filling)"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        self._books = _Books()

    def changes(self, view: SchedulingView) -> Changes:
        """One round (``_Round``), as what changes: no schedule of every running job, no
        index of them; each app's queue is built only when the round looks at it, victims
        come from the apps above their share (each app's running jobs sorted once per app
        version), and a placement's trial copies nothing unless it has to preempt."""
        view = self.with_books(view)
        self._books.update(view)
        return _Round(view, self._books).run()


class _FreeSet:
    """The free GPUs as a set, with ``FreePool``'s drafting interface (typed clusters, or
    a view without the simulator's pool)."""

    def __init__(self, view: SchedulingView) -> None:
        self.cluster = view.cluster
        self.gpus = set(view.free if view.free is not None else view.free_gpus())

    def __len__(self) -> int:
        return len(self.gpus)

    def peek(self, gang: int) -> tuple[int, ...] | None:
        return pack_gang(self.cluster, self.gpus, gang)

    def draft_add(self, gpus: Iterable[int]) -> None:
        self.gpus.update(gpus)

    def draft_remove(self, gpus: Iterable[int]) -> None:
        self.gpus.difference_update(gpus)


class _Round:
    """One round of ``MaxMinPolicy.changes``, its state kept as what changes: the jobs
    placed (``start``) and the running jobs taken out (``popped``). "The schedule" below
    is the round's full schedule: the running jobs not taken out, in the order of apps and
    jobs, then the jobs placed this round, in placement order."""

    def __init__(self, view: SchedulingView, books: _Books) -> None:
        self.view = view
        apps = view.apps
        self.apps = apps
        order = view.order
        assert order is not None
        self.rank = order
        # Shares, GPUs held and who waits, from the policy's books (kept per app version):
        # no pass over every app. ``shares`` and ``held`` fill in on first use.
        books.water_level(view.cluster.size)
        self.shares: dict[AppState, int] = _Lazy(books.share)
        self.held: dict[AppState, int] = _Lazy(books.held.__getitem__, store=False)
        self.waiting_apps = list(books.waiting)  # apps with idle jobs at the round's start
        self.demand = books.demand
        self.base_held = books.held
        # The free GPUs: the simulator's pool when it packs as ``pack_gang`` does (drafted
        # changes, undone by the simulator after the round), else a set.
        self.free: FreePool | _FreeSet = (
            view.free
            if isinstance(view.free, FreePool) and not view.cluster.typed
            else _FreeSet(view)
        )
        self.queues: dict[AppState, list[JobState]] = {}
        self.start: Schedule = {}  # placed this round, in schedule order
        self.stop: list[JobState] = []  # running jobs preempted (and not placed again)
        self.popped: set[JobState] = set()  # running jobs out of the schedule
        self.seq = 0  # placement order: the tail of the full schedule
        self.placed_at: dict[JobState, int] = {}
        # apps above their share: victims come from these
        self.over = {a: a for a in books.over()}
        self._sorted = books.newest_first  # kept by the policy from round to round
        self.victim_apps: list[AppState] = []  # apps whose queues got victims back

    # -- queues and keys ----------------------------------------------------------------

    def queue(self, app: AppState) -> list[JobState]:
        """The app's queue: its idle jobs (in ``AppState.idle_jobs`` order: longest
        remaining first), as changed this round (victims go back to its head)."""
        q = self.queues.get(app)
        if q is None:
            q = self.queues[app] = app.idle_jobs()
        return q

    def waiting(self, app: AppState) -> bool:
        q = self.queues.get(app)
        if q is not None:
            return bool(q)
        return self.demand[app] > self.base_held[app]  # idle jobs exist

    def ratio_key(self, app: AppState) -> tuple[float, float, int]:
        """The order apps are served in: GPUs held over the share, then arrival, ties in
        the order of apps."""
        return (self.held[app] / max(self.shares[app], 1), app.arrival, self.rank[app])

    def scheduled(self, job: JobState) -> bool:
        return job in self.start or (bool(job.gpus) and job not in self.popped)

    # -- victims ------------------------------------------------------------------------

    def running_newest_first(self, app: AppState) -> list[JobState]:
        """The app's running jobs, best victim first: latest start, then the first in
        schedule order (lowest index); cached per app version."""
        cached = self._sorted.get(app)
        if cached is None or cached[0] != app.version:
            jobs = sorted(app.running_jobs(), key=lambda j: (-(j.started_at or 0.0), j.index))
            cached = self._sorted[app] = (app.version, jobs)
        return cached[1]

    def newest_victim(
        self, mine: AppState, chosen: list[JobState], taken: dict[AppState, int]
    ) -> JobState | None:
        """The job to preempt for a gang of ``mine`` (``taken``: GPUs already chosen away
        from each app): over the scheduled jobs of apps that stay at or above their share
        without them (not ``mine``, not already chosen), the newest started, then the app
        that arrived last, then the first in schedule order (running jobs in the order of
        apps and jobs, then the jobs placed this round in placement order)."""
        best: JobState | None = None
        best_key: tuple | None = None
        shares, held = self.shares, self.held
        for app in self.over:
            extra = held[app] - taken.get(app, 0) - shares[app]
            if extra <= 0 or app is mine:
                continue
            for j in self.running_newest_first(app):
                if j.gang <= extra and j not in self.popped and j not in chosen:
                    key: tuple = (j.started_at or 0.0, app.arrival, 1, -self.rank[app], -j.index)
                    if best_key is None or key > best_key:
                        best, best_key = j, key
                    break
            for j, seq in self.placed_at.items():
                if j.app is app and j.gang <= extra and j not in chosen:
                    key = (j.started_at or 0.0, app.arrival, 0, -seq)
                    if best_key is None or key > best_key:
                        best, best_key = j, key
        return best

    def grant_of(self, job: JobState) -> tuple[int, ...]:
        grant = self.start.get(job)
        return grant.gpus if grant is not None else job.gpus

    def place(self, job: JobState) -> tuple[tuple[int, ...], list[JobState]] | None:
        """GPUs for ``job``: the free ones if its gang fits them, else the free ones plus
        those of victims (``newest_victim``, one at a time) until it fits; none (and no
        victim) if it never does. The victims' GPUs are added to the free ones while
        trying (and taken back if the gang still does not fit)."""
        free = self.free
        given: list[int] = []
        taken: dict[AppState, int] = {}
        chosen: list[JobState] = []
        while True:
            gpus = free.peek(job.gang)
            if gpus is not None:
                for victim in chosen:
                    if victim in self.start:
                        del self.start[victim]
                        del self.placed_at[victim]
                    else:
                        self.popped.add(victim)
                    self.set_held(victim.app, self.held[victim.app] - victim.gang)
                free.draft_remove(gpus)
                return gpus, chosen
            newest = self.newest_victim(job.app, chosen, taken)
            if newest is None:
                free.draft_remove(given)
                return None
            chosen.append(newest)
            grant = self.grant_of(newest)
            free.draft_add(grant)
            given.extend(grant)
            taken[newest.app] = taken.get(newest.app, 0) + newest.gang

    def add(self, job: JobState, gpus: tuple[int, ...]) -> None:
        self.start[job] = Assignment(gpus)
        self.placed_at[job] = self.seq
        self.seq += 1

    def run(self) -> Changes:
        """Apps below their share, the furthest below first, place the head of their queue
        (preempting if they must) one job at a time until none can; then every GPU still
        free goes to whoever can use it, apps in the same order."""
        held, shares = self.held, self.shares
        cand = {a: a for a in self.waiting_apps if held[a] < shares[a]}

        def touch(app: AppState) -> None:
            if held[app] < shares[app] and self.waiting(app):
                cand[app] = app
            else:
                cand.pop(app, None)

        progress = True
        while progress:
            progress = False
            for app in sorted(cand.values(), key=self.ratio_key):
                queue = self.queue(app)
                job = queue[0]
                placed = self.place(job)
                if placed is None:
                    queue.pop(0)  # cannot run now; try its next job
                    touch(app)
                    progress = True
                    continue
                gpus, preempted = placed
                for victim in preempted:  # may still run on GPUs nobody below share can use
                    self.queue(victim.app).insert(0, victim)
                    self.victim_apps.append(victim.app)
                    touch(victim.app)
                self.add(job, gpus)
                queue.pop(0)
                self.set_held(app, held[app] + len(gpus))
                touch(app)
                progress = True
                break
        # Work conservation: whatever is still free goes to whoever can use it.
        free = self.free
        if len(free):
            # (apps with nothing waiting would try nothing: left out before sorting; an
            # app waits now if it did at the start or got a victim back)
            waiting = dict.fromkeys(self.waiting_apps + self.victim_apps)
            for app in sorted((a for a in waiting if self.waiting(a)), key=self.ratio_key):
                for job in self.queue(app):
                    if not len(free):
                        break
                    if self.scheduled(job) or job.gang > len(free):
                        continue
                    packed = free.peek(job.gang)
                    if packed is not None:
                        self.add(job, packed)
                        free.draft_remove(packed)
                        held[app] += len(packed)
                if not len(free):
                    break
        return Changes([j for j in self.popped if j not in self.start], self.start)

    def set_held(self, app: AppState, value: int) -> None:
        self.held[app] = value
        if value > self.shares[app]:
            self.over[app] = app
        else:
            self.over.pop(app, None)


class _Lazy(dict):  # type: ignore[type-arg]
    """A dict that fills a missing key from ``fill`` (kept unless ``store`` is False)."""

    def __init__(self, fill: Callable[[AppState], int], store: bool = True) -> None:
        super().__init__()
        self.fill = fill
        self.store = store

    def __missing__(self, app: AppState) -> int:
        value = self.fill(app)
        if self.store:
            self[app] = value
        return value


class _Books:
    """What ``MaxMinPolicy.changes`` keeps from round to round, per active app, brought
    up to date for the apps the view says changed: its demand, the GPUs it holds, and
    its running jobs in victim order (with the app version they are for); and indexes of
    those: admission ranks by demand, apps by GPUs held, the apps with idle jobs.

    The water-fill's shares follow from them without a pass over the apps
    (``fast_water_fill``'s closed form): every demand when the demands fit, else
    ``min(d, L)`` plus one for the first ``left`` apps (in admission order) above L.
    """

    def __init__(self) -> None:
        self.order: Mapping[AppState, int] = {}  # the simulator books these were built from
        self.demand: dict[AppState, int] = {}
        self.held: dict[AppState, int] = {}
        self.newest_first: dict[AppState, tuple[int, list[JobState]]] = {}
        self.by_demand: dict[int, list[int]] = {}  # demand -> admission ranks, ascending
        self.by_held: dict[int, set[AppState]] = {}  # GPUs held -> apps
        self.waiting: dict[AppState, None] = {}  # apps with idle jobs
        self.total = 0  # sum of the demands
        self.level: int | None = None  # L (None: every demand met)
        self.bonus_until = -1  # apps above L up to this rank get one more GPU

    def update(self, view: SchedulingView) -> None:
        assert view.changed is not None and view.order is not None
        if view.order is not self.order:  # another run: every app afresh
            self.__init__()  # type: ignore[misc]
            self.order = view.order
            changed: Iterable[AppState] = view.apps
        else:
            changed = view.changed
        order = self.order
        for app in changed:
            rank = order[app]
            old = self.demand.pop(app, None)
            if old is not None:
                ranks = self.by_demand[old]
                del ranks[bisect_left(ranks, rank)]
                if not ranks:
                    del self.by_demand[old]
                self.total -= old
                held = self.held.pop(app)
                self.by_held[held].discard(app)
                self.waiting.pop(app, None)
            if app.finish is not None:
                self.newest_first.pop(app, None)
                continue
            d, h = app.demand(), len(app.held())
            self.demand[app] = d
            self.held[app] = h
            insort(self.by_demand.setdefault(d, []), rank)
            self.total += d
            self.by_held.setdefault(h, set()).add(app)
            if d > h:
                self.waiting[app] = None

    def water_level(self, capacity: int) -> None:
        """L and the last rank that gets one more GPU, for this capacity."""
        self.level, self.bonus_until = None, -1
        if self.total <= capacity:
            return
        below = 0  # demands met in full
        above = len(self.demand)  # apps from this demand on
        for d in sorted(self.by_demand):
            count = len(self.by_demand[d])
            if below + d * above > capacity:
                level = (capacity - below) // above
                left = capacity - below - level * above
                self.level = level
                if left:
                    lists = [r for v, r in self.by_demand.items() if v > level]
                    self.bonus_until = next(islice(heapq.merge(*lists), left - 1, None))
                return
            below += d * count
            above -= count
        raise AssertionError("unreachable: the demands exceed the capacity")  # pragma: no cover

    def share(self, app: AppState) -> int:
        d = self.demand[app]
        level = self.level
        if level is None or d <= level:
            return d
        return level + 1 if self.order[app] <= self.bonus_until else level

    def over(self) -> Iterator[AppState]:
        """The apps holding more GPUs than their share."""
        level = self.level
        if level is None:
            return  # every share is the demand, which nobody holds more than
        for held, apps in self.by_held.items():
            if held >= level + 2:
                yield from apps  # above L, so at most L + 1
            elif held == level + 1:
                yield from (a for a in apps if self.order[a] > self.bonus_until)
