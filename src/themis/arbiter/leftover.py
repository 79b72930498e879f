"""Leftover allocation (docs/design.md §5 step 5): no GPU idles while some job could run.

GPUs the auction did not grant (hidden payments, unbid GPUs, GPUs a winner cannot use) go
round-robin, one gang per app per pass, first to the apps that were not offered, then to
every app with unmet demand, each list worst rho first. Placement-aware: a first series of
passes only places gangs on the best span their size can have in this cluster; only when
nobody can use the rest that well are worse placements allowed.

The round's leftover step (``leftover``) orders the candidates: every wanting app worst-off
first, the auction's winners last, so that no bidder gets its own hidden payment back.
"""

from __future__ import annotations

from collections.abc import Sequence

from themis.agent.app_scheduler import waiting_order
from themis.arbiter.round_state import RoundState
from themis.mechanism.view import Assignment
from themis.model.cluster import Cluster
from themis.model.placement import OfferIndex, Packer, fastest_place, worth_moving
from themis.model.state import AppState, JobState


def leftover(state: RoundState) -> None:
    """Place waiting jobs of the wanting apps on the GPUs the auction left over, each
    granted until the round's lease end, and record who got what."""
    if not state.leftover:
        return
    outcome, record, wanting = state.outcome, state.record, state.wanting
    assert outcome is not None and record is not None and state.index is not None
    winners = {a for a, o in outcome.apps.items() if o.choice}
    order = [a for a in wanting if a.app_id not in winners] + [
        a for a in wanting if a.app_id in winners
    ]
    offer = (state.index, state.pool)
    placed = allocate_leftover(
        state.knobs.cluster, order, state.planned, state.leftover, state.now, offer
    )
    for job, gpus in placed.items():
        state.grants[job] = Assignment(gpus, state.until)
        record.leftover_grants.setdefault(job.app.app_id, []).extend(gpus)


def allocate_leftover(
    cluster: Cluster,
    candidates: Sequence[AppState],
    planned: set[int],
    leftover: set[int],
    now: float,
    offer: tuple[OfferIndex, set[int]] | None = None,
) -> dict[JobState, tuple[int, ...]]:
    """Place waiting jobs of ``candidates`` (in priority order) on ``leftover`` GPUs.

    ``planned`` holds ids of JobState objects already running after this round. Returns new
    placements; ``leftover`` is consumed in place. ``offer``: the round's offer index and
    its GPUs, when the leftover is mostly that offer (the arbiter's): the packer over the
    leftover then starts from the offer's lists, changed where they differ.
    """
    queues: dict[int, list[JobState]] = {}  # built on first use: leftover often runs out early
    placed: dict[JobState, tuple[int, ...]] = {}
    pool = _Pool(cluster, leftover, offer)
    for best_only in (True, False):
        # Untyped clusters: a job that cannot be placed now cannot be later in the same
        # series of passes (the leftover only shrinks: no more room, no renewal on GPUs
        # given away, no better span), so it leaves the series' queue: each pass then
        # looks at the jobs that may still fit, not every waiting job again.
        series: dict[int, list[JobState]] = {}
        progress = True
        while progress and leftover:
            progress = False
            for app in candidates:
                queue = queues.get(id(app))
                if queue is None:
                    queue = queues[id(app)] = list(waiting_order(app, now, planned))
                if cluster.typed:
                    job, gpus = _next_fit(cluster, queue, pool, best_only)
                else:
                    mine = series.get(id(app))
                    if mine is None:
                        mine = series[id(app)] = list(queue)
                    job, gpus = _next_fit(cluster, mine, pool, best_only, prune=True)
                    if job is not None:
                        mine.remove(job)
                if job is None or gpus is None:
                    continue
                placed[job] = gpus
                queue.remove(job)
                pool.remove(gpus)
                progress = True
                if not leftover:
                    break
    return placed


class _Pool:
    """The leftover GPUs, and a packer over them built on first need and kept in step
    with every placement: one packer per allocation instead of one per gang placed (a
    packer's answers depend only on the GPUs it holds, so they are the same)."""

    def __init__(
        self, cluster: Cluster, leftover: set[int], offer: tuple[OfferIndex, set[int]] | None
    ) -> None:
        self.cluster = cluster
        self.leftover = leftover
        self._offer = offer
        self._packer: Packer | None = None

    def packer(self) -> Packer:
        if self._packer is None:
            if self._offer is None or not self._offer[0].shared:
                self._packer = Packer(self.cluster, self.leftover)
            else:  # the same lists, from a large offer's: two set differences in C
                index, offered = self._offer
                self._packer = Packer(self.cluster, shared=index.by_machine, size=index.size)
                self._packer.settle(offered - self.leftover, self.leftover - offered)
        return self._packer

    def remove(self, gpus: tuple[int, ...]) -> None:
        self.leftover.difference_update(gpus)
        if self._packer is not None and not self._packer.take_exact(gpus):
            raise AssertionError("placed GPUs that were not left over")


def _next_fit(
    cluster: Cluster, queue: list[JobState], free: _Pool, best_only: bool, prune: bool = False
) -> tuple[JobState | None, tuple[int, ...] | None]:
    """The first job of ``queue`` that fits the leftover, and where. ``prune`` (untyped
    clusters): drop from ``queue`` the jobs passed over, which cannot fit later in this
    series of passes either."""
    leftover = free.leftover
    pool: Packer | None = None
    passed = 0
    found: tuple[JobState | None, tuple[int, ...] | None] = (None, None)
    for job in queue:
        if cluster.typed:
            if job.gang > len(leftover):
                continue
            # Typed: each gang where its model runs fastest; a renewal stays on its GPUs
            # unless another type is worth the restart.
            if pool is None:
                pool = free.packer()
            there = fastest_place(pool, job.gang, job.app.profile)
            renewal = bool(job.gpus) and leftover.issuperset(job.gpus)
            if renewal and (
                there is None or not worth_moving(cluster, job.app.profile, job.gpus, there)
            ):
                return job, job.gpus
            if there is None:
                continue
            if best_only and cluster.span(there) > cluster.best_span(job.gang):
                continue
            return job, there
        if job.gang <= len(leftover):
            if job.gpus and leftover.issuperset(job.gpus):
                found = job, job.gpus  # a lease renewal on the same GPUs: no restart
                break
            if pool is None:
                pool = free.packer()
            gpus = pool.peek(job.gang)
            if gpus is not None and not (
                best_only and cluster.span(gpus) > cluster.best_span(job.gang)
            ):
                found = job, gpus
                break
        passed += 1
    if prune and passed:
        del queue[:passed]
    return found
