"""Reservations: draining GPUs for the worst-off app's gang that fits nowhere.

Leases end one app at a time, so the free pool of a round is usually a few scattered GPUs.
An 8-GPU gang can then wait forever: every round hands the few free GPUs to someone who
can use them, and a whole free machine almost never appears by chance. A reservation makes
room on purpose. When the worst-off app (first in the offer order) has a waiting gang that
cannot be placed on its best span in the pool, the arbiter picks the GPUs that will be
ready soonest for that gang on its best span (a machine, or a rack for larger gangs) and
withholds them from the auction and from leftover allocation as their leases end. Since
every Themis lease is at most one lease long and withheld GPUs are never renewed, the
target is ready within one lease; the gang then starts on it, outside the auction.

The cost is idle GPU-time: a withheld GPU idles until the gang starts. It is bounded per
reservation by ``gang x bound`` GPU-seconds (a reservation older than ``bound`` seconds is
dropped) and reported (``ReservationBook.idle_gpu_seconds``). Only one reservation stands at
a time, so the cluster never drains more than one gang's worth of GPUs.

The round's reservation step (``reservation``) keeps, makes or fulfils that one
reservation, after the renewal step has chosen what it would renew and before the auction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from themis.arbiter.round_state import RoundState
from themis.mechanism.view import Assignment, Schedule, SchedulingView
from themis.model.cluster import Cluster
from themis.model.placement import pack_gang
from themis.model.state import AppState, JobState


@dataclass
class Reservation:
    """GPUs ``target`` held back for a gang of ``gang`` GPUs of app ``app_id``."""

    app_id: str
    gang: int
    target: tuple[int, ...]
    since: float
    deadline: float


@dataclass
class ReservationBook:
    """The standing reservation and what reservations have cost so far."""

    current: Reservation | None = None
    made: int = 0
    fulfilled: int = 0
    expired: int = 0
    #: Gangs of a worst-off app holding nothing started at once, their GPUs free already
    #: (a reservation fulfilled in the round it would be made).
    at_once: int = 0
    idle_gpu_seconds: float = 0.0
    #: (app_id, gang, made at, closed at, fulfilled) of every closed reservation.
    history: list[tuple[str, int, float, float, bool]] = field(default_factory=list)
    #: (from, to, GPUs): every stretch of time GPUs were held idle for a reservation.
    withheld: list[tuple[float, float, tuple[int, ...]]] = field(default_factory=list)
    #: GPUs withheld in the last round and when: they idle until the next round.
    _held: tuple[int, ...] = ()
    _since: float | None = None

    def account(self, now: float) -> None:
        """Charge the GPUs withheld since the last round for their idle time."""
        if self._since is not None and now > self._since and self._held:
            self.idle_gpu_seconds += len(self._held) * (now - self._since)
            self.withheld.append((self._since, now, self._held))
        self._since = now
        self._held = ()

    def withhold(self, gpus: Iterable[int]) -> None:
        self._held = tuple(sorted(gpus))

    def close(self, now: float, fulfilled: bool) -> None:
        res = self.current
        if res is None:
            return
        self.history.append((res.app_id, res.gang, res.since, now, fulfilled))
        if fulfilled:
            self.fulfilled += 1
        else:
            self.expired += 1
        self.current = None


def ready_times(
    cluster: Cluster, apps: Iterable[AppState], pool: set[int], now: float
) -> dict[int, float]:
    """When each GPU of the cluster is free at the latest: now for the pool, the end of its
    grant for a held GPU (inf for a grant without an end)."""
    ready = {g.id: now for g in cluster.gpus}
    for app in apps:
        for job in app.running_jobs():
            end = math.inf if job.until is None else max(job.until, now)
            for g in job.gpus:
                if g not in pool:
                    ready[g] = end
    return ready


def choose_target(
    cluster: Cluster, gang: int, ready: Mapping[int, float], now: float
) -> tuple[int, ...]:
    """The ``gang`` GPUs on the gang's best span that are all ready soonest.

    Candidates are each machine (a gang that fits one machine), each rack (a gang that
    fits one rack) or the whole cluster; inside a candidate the soonest-ready GPUs are
    taken. Ties go to the candidate with more GPUs free now (less to drain), then to
    topology order, so the choice is deterministic."""
    span_groups: dict[int, list[int]] = {}
    key: Mapping[int, int] | Sequence[int]
    if gang <= cluster.shape.machine_max:
        key = cluster.machine_of
    elif gang <= cluster.shape.rack_max:
        key = cluster.rack_of
    else:
        key = {g.id: 0 for g in cluster.gpus}
    for g in cluster.gpus:
        span_groups.setdefault(key[g.id], []).append(g.id)
    best: tuple[float, int, int] | None = None
    chosen: tuple[int, ...] = ()
    for group_id, gpus in span_groups.items():
        if len(gpus) < gang:
            continue
        order = sorted(gpus, key=lambda g: (ready[g], cluster.topology_rank[g]))
        picked = order[:gang]
        score = (ready[picked[-1]], -sum(1 for g in picked if ready[g] <= now), group_id)
        if best is None or score < best:
            best, chosen = score, tuple(sorted(picked))
    return chosen


def next_gang(app: AppState) -> JobState | None:
    """The app's next waiting job to start: its longest-remaining idle job (the app
    scheduler's order), or None when none waits."""
    idle = app.idle_jobs()
    return idle[0] if idle else None


def reservation(state: RoundState, book: ReservationBook) -> None:
    """Keep, make or fulfil the one reservation (``book``'s): fill ``reserved`` (the GPUs
    of the pool it withholds this round, which leave the pool) and ``started`` (the job a
    fulfilled reservation starts, granted in ``grants``). Whether the worst-off gang fits
    is judged without the GPUs about to be renewed (``renewing``); its target may take
    them."""
    state.reserved, state.started = _reserve(state, book)
    state.pool.difference_update(state.reserved)


def _reserve(state: RoundState, book: ReservationBook) -> tuple[set[int], JobState | None]:
    knobs, view, pool, now = state.knobs, state.view, state.pool, state.now
    if knobs.reservation_bound <= 0:
        return set(), None
    drop_stale_reservation(view, now, book)
    res = book.current
    if res is None and state.wanting:
        worst = state.wanting[0]
        job = next_gang(worst)
        renewing = state.renewing
        free = pool.difference(renewing) if renewing else pool
        if job is not None and not tenant_holds_gpus(view, worst):
            fit = on_best_span(knobs.cluster, job.gang, free)
            if fit is not None and starts_at_once(knobs.gang_at_once, worst):
                book.at_once += 1
                return set(), _start(state, job, fit)
            if fit is None:
                ready = ready_times(knobs.cluster, view.apps, pool, now)
                target = choose_target(knobs.cluster, job.gang, ready, now)
                if target:
                    res = book.current = Reservation(
                        worst.app_id, job.gang, target, now, now + knobs.reservation_bound
                    )
                    book.made += 1
    if res is None:
        return set(), None
    if pool.issuperset(res.target):
        app = next(a for a in view.apps if a.app_id == res.app_id)
        job = next(j for j in app.idle_jobs() if j.gang == res.gang)
        book.close(now, fulfilled=True)
        return set(), _start(state, job, res.target)
    withheld = pool.intersection(res.target)
    book.withhold(withheld)
    return withheld, None


def _start(state: RoundState, job: JobState, gpus: tuple[int, ...]) -> JobState:
    """Start ``job`` on ``gpus`` of the pool outside the auction, with a normal lease."""
    grants: Schedule = state.grants
    grants[job] = Assignment(gpus, state.knobs.lease_end(state.now))
    state.planned.add(id(job))
    state.pool.difference_update(gpus)
    return job


def drop_stale_reservation(view: SchedulingView, now: float, book: ReservationBook) -> None:
    """Close the standing reservation when its app left, its deadline passed or its gang
    no longer waits."""
    res = book.current
    if res is None:
        return
    app = next((a for a in view.apps if a.app_id == res.app_id), None)
    if app is None or now >= res.deadline or not _waits_for(app, res.gang):
        book.close(now, fulfilled=False)


def starts_at_once(gang_at_once: bool, worst: AppState) -> bool:
    """Whether the worst-off app's gang that fits the pool starts before the auction.

    A reservation serves the worst-off app's gang that fits nowhere; a gang that fits
    went to the auction, which can give its pool away: its proportional-fair choice
    and hidden payment weigh the worst-off app's whole gang against smaller bundles
    for the others. An app whose gang needs a whole machine then waits for a
    reservation to drain one, a lease each time, while the same trials cut into
    smaller gangs start in the holes at once (the lie ``gang:0.5``: +29.5% for a
    64-GPU VGG sweep). So the worst-off app, when it holds nothing (nor does its
    tenant: the caller's check, as for reservations), starts its gang at once on free
    GPUs of its best span: the reservation made and fulfilled in one round. An app
    holding GPUs bids as before, so the rule grants no app a second gang outside the
    auction. On by default since its re-measurement (``gang_at_once``; off,
    the paper's auction for it, as in 0.2.0): docs/knowledge.md has what it
    changes."""
    return gang_at_once and not worst.held()


def on_best_span(cluster: Cluster, gang: int, pool: set[int]) -> tuple[int, ...] | None:
    """The GPUs of ``pool`` a gang would start on (best fit), if on its best span."""
    gpus = pack_gang(cluster, pool, gang)
    if gpus is None or cluster.span(gpus) > cluster.best_span(gang):
        return None
    return gpus


def tenant_holds_gpus(view: SchedulingView, app: AppState) -> bool:
    """Whether ``app`` has an owner that holds GPUs through any of its apps, ``app``
    included: such an app gets no reservation.

    A reservation holds GPUs idle for the worst-off app's gang, whatever that app holds.
    Measured: a sweep split into two apps a second apart has its first part alone when the
    second part's arrival triggers a round, so the first part, holding its machine, is the
    worst-off app that wants GPUs and is reserved the other machine (``split:2`` with
    staggered parts: +10.4% and +8.4% for two liars over eight contexts). An owner that
    holds GPUs is not gang-starved as a tenant: its gangs wait for the auction and the
    leftover like everyone's. Reserving only for apps below their fair share, for
    everyone, closes it too but raised Themis's max rho on four of eight generated
    workloads; for owners only, this costs honest owners 0-7% of max rho
    (docs/knowledge.md). False for an app without an owner: its reservations are as
    before, bit for bit."""
    if app.spec.owner is None:
        return False
    tenant = app.spec.tenant
    return any(other.spec.tenant == tenant and other.held() for other in view.apps)


def _waits_for(app: AppState, gang: int) -> bool:
    return any(j.gang == gang for j in app.idle_jobs())
