"""Deficit rounds for ``ftf-oracle``: continuous time shares become whole gangs each round.

Adapted from Gavel's round-based mechanism (per app, in GPU-seconds, work conserving); the
faithful per-job version is ``_gavel_mechanism``.

A share of 2.5 GPUs cannot be held at any instant; Gavel realizes it over time. Every round
(a lease of fixed length) the apps furthest behind their allotment run first: each app's
*deficit* is the GPU-seconds it was allotted (its share, integrated over time) minus the
GPU-seconds it held, and its claim on the coming round is ``share + deficit / round``
GPUs. Gangs are handed out one at a time to the app with the largest unmet claim, so an
app below its share runs next round and one above it waits, and a fractional share
alternates between its floor and its ceiling in the right proportion.

The deficit is kept within one round of the app's largest gang (anti-windup): that is
enough to round any share to whole gangs, and it stops an app that could not use its share
for a long while (its gang did not fit) from later claiming the cluster for as long; the
program already raises its share, since its projected rho grew while it waited.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from themis.model.state import JobState


class DeficitLedger:
    """Allotted minus held GPU-seconds per app, from one policy call to the next."""

    def __init__(self, round_length: float) -> None:
        if round_length <= 0:
            raise ValueError("the round length must be > 0 seconds")
        self.round_length = round_length
        self.now: float | None = None
        self._deficit: dict[str, float] = {}
        self._shares: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def advance(self, now: float, largest_gang: Mapping[str, int]) -> None:
        """Charge the interval since the last call: each app was allotted its share and
        held the GPUs of the last schedule (nothing changes between calls). Apps absent
        from ``largest_gang`` (finished) are forgotten."""
        dt = 0.0 if self.now is None else now - self.now
        if dt < 0:
            raise ValueError(f"time went backwards: {self.now} -> {now}")
        deficits = {}
        for app_id, gang in largest_gang.items():
            d = self._deficit.get(app_id, 0.0)
            d += (self._shares.get(app_id, 0.0) - self._held.get(app_id, 0)) * dt
            bound = max(gang, 1) * self.round_length
            deficits[app_id] = min(max(d, -bound), bound)
        self._deficit = deficits
        self.now = now

    def deficit(self, app_id: str) -> float:
        return self._deficit.get(app_id, 0.0)

    def claim(self, app_id: str, share: float) -> float:
        """GPUs the app should hold in the coming round: its share plus what it is owed."""
        return share + self.deficit(app_id) / self.round_length

    def record(self, shares: Mapping[str, float], held: Mapping[str, int]) -> None:
        """The shares and the GPUs each app holds from now until the next call."""
        self._shares = dict(shares)
        self._held = dict(held)


@dataclass(frozen=True)
class Claim:
    """One app's bid for the GPUs up for grabs this round.

    ``held`` GPUs it keeps anyway (grants that do not end now); ``queue`` the jobs it would
    run next, in its app scheduler's order; ``tie`` orders equal claims (arrival, id).
    """

    tie: Hashable
    claim: float
    held: int
    queue: Sequence[JobState]


def pick_jobs(claims: Sequence[Claim], free: int) -> list[JobState]:
    """Hand ``free`` GPUs out gang by gang, each to the app with the largest unmet claim
    (``claim - GPUs held so far``). An app's next job that does not fit what is left is
    passed over for its smaller ones (it cannot fit later either: GPUs only run out), and
    the loop stops only when no job of any app fits: no GPU idles while a gang would fit.
    """
    held = [c.held for c in claims]
    cursor = [0] * len(claims)
    heap = [(-(c.claim - c.held), c.tie, i) for i, c in enumerate(claims) if c.queue]
    heapq.heapify(heap)
    chosen: list[JobState] = []
    while free > 0 and heap:
        _, tie, i = heapq.heappop(heap)
        queue = claims[i].queue
        k = cursor[i]
        while k < len(queue) and queue[k].gang > free:
            k += 1
        if k == len(queue):
            continue  # nothing of this app fits any more
        job = queue[k]
        cursor[i] = k + 1
        chosen.append(job)
        free -= job.gang
        held[i] += job.gang
        if cursor[i] < len(queue):
            heapq.heappush(heap, (-(claims[i].claim - held[i]), tie, i))
    return chosen
