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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from themis.model.cluster import Cluster
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
