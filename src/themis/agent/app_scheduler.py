"""The app scheduler: splits the GPUs an app holds among its jobs.

Jobs that already run keep their GPUs when the app still holds all of them (no needless
restarts across lease renewals). Waiting jobs are then started longest-remaining-first,
since an app finishes when its last job does, and each gang is packed on the best span
its app's free GPUs allow.
"""

from __future__ import annotations

from collections.abc import Iterable

from themis.model.cluster import Cluster
from themis.model.placement import pack_gang
from themis.model.state import AppState, JobState


def waiting_order(app: AppState, now: float, exclude: set[int] | None = None) -> list[JobState]:
    """Live jobs not in ``exclude`` (ids of JobState objects), longest remaining first."""
    skip = exclude or set()
    jobs = [j for j in app.jobs if j.finished_at is None and id(j) not in skip]
    jobs.sort(key=lambda j: -j.remaining_at(now))
    return jobs


def assign_jobs(
    cluster: Cluster, app: AppState, owned: Iterable[int], now: float
) -> tuple[dict[JobState, tuple[int, ...]], set[int]]:
    """Map the app's GPUs to its jobs. Returns (job -> GPUs, GPUs left unused)."""
    free = set(owned)
    plan: dict[JobState, tuple[int, ...]] = {}
    for job in app.jobs:
        if job.gpus and job.finished_at is None and free.issuperset(job.gpus):
            plan[job] = job.gpus
            free.difference_update(job.gpus)
    if not free:
        return plan, free
    smallest = min((j.gang for j in app.jobs if j.finished_at is None and j not in plan), default=0)
    for job in waiting_order(app, now, {id(j) for j in plan}):
        if len(free) < smallest:
            break
        if job.gang > len(free):
            continue
        gpus = pack_gang(cluster, free, job.gang)
        if gpus is not None:
            plan[job] = gpus
            free.difference_update(gpus)
    return plan, free
