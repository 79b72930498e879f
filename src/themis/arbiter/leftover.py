"""Leftover allocation (docs/design.md §5 step 5): no GPU idles while some job could run.

GPUs the auction did not grant (hidden payments, unbid GPUs, GPUs a winner cannot use) go
round-robin, one gang per app per pass, first to the apps that were not offered, then to
every app with unmet demand, each list worst rho first. Placement-aware: a first series of
passes only places gangs on the best span their size can have in this cluster; only when
nobody can use the rest that well are worse placements allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

from themis.agent.app_scheduler import waiting_order
from themis.model.cluster import Cluster
from themis.model.placement import Packer, fastest_place, worth_moving
from themis.model.state import AppState, JobState


def allocate_leftover(
    cluster: Cluster,
    candidates: Sequence[AppState],
    planned: set[int],
    leftover: set[int],
    now: float,
) -> dict[JobState, tuple[int, ...]]:
    """Place waiting jobs of ``candidates`` (in priority order) on ``leftover`` GPUs.

    ``planned`` holds ids of JobState objects already running after this round. Returns new
    placements; ``leftover`` is consumed in place.
    """
    queues: dict[int, list[JobState]] = {}  # built on first use: leftover often runs out early
    placed: dict[JobState, tuple[int, ...]] = {}
    for best_only in (True, False):
        progress = True
        while progress and leftover:
            progress = False
            for app in candidates:
                queue = queues.get(id(app))
                if queue is None:
                    queue = queues[id(app)] = list(waiting_order(app, now, planned))
                job, gpus = _next_fit(cluster, queue, leftover, best_only)
                if job is None or gpus is None:
                    continue
                placed[job] = gpus
                queue.remove(job)
                leftover.difference_update(gpus)
                progress = True
                if not leftover:
                    break
    return placed


def _next_fit(
    cluster: Cluster, queue: list[JobState], leftover: set[int], best_only: bool
) -> tuple[JobState | None, tuple[int, ...] | None]:
    pool: Packer | None = None
    for job in queue:
        if job.gang > len(leftover):
            continue
        if cluster.typed:
            # Typed: each gang where its model runs fastest; a renewal stays on its GPUs
            # unless another type is worth the restart.
            if pool is None:
                pool = Packer(cluster, leftover)
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
        if job.gpus and leftover.issuperset(job.gpus):
            return job, job.gpus  # a lease renewal on the same GPUs: no restart
        if pool is None:
            pool = Packer(cluster, leftover)
        gpus = pool.peek(job.gang)
        if gpus is None:
            continue
        if best_only and cluster.span(gpus) > cluster.best_span(job.gang):
            continue
        return job, gpus
    return None, None
