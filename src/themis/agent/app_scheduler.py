"""The app scheduler: splits the GPUs an app holds among its jobs.

Jobs that already run keep their GPUs when the app still holds all of them (no needless
restarts across lease renewals). Waiting jobs are then started longest-remaining-first,
since an app finishes when its last job does, or in the order the app declares
(``AppSpec.progress_weight``), and each gang is packed on the best span its app's free
GPUs allow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter

from themis.model.cluster import Cluster
from themis.model.placement import Packer, fastest_place, move_target
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, JobState


def waiting_order(app: AppState, now: float, exclude: set[int] | None = None) -> Iterator[JobState]:
    """Live jobs whose ids (``id(job)``) are not in ``exclude``, longest remaining first
    (ties: idle jobs before running ones, then submission order), remaining as the app's
    own scheduler measures it (``order_measure``)."""
    skip = exclude or set()
    idle_jobs = app.idle_jobs()
    running_jobs = app.running_jobs()
    idle: Iterator[JobState]
    if not skip or skip.issubset(map(id, running_jobs)):  # no idle job is excluded
        idle = iter(idle_jobs)
    else:
        idle = (j for j in idle_jobs if id(j) not in skip)
    left = order_measure(app)
    running = [(-left(j, now), j) for j in running_jobs if id(j) not in skip]
    if not running:
        return idle
    running.sort(key=itemgetter(0))  # stable: submission order on ties
    return _merge(idle, running, left, now)


def _merge(
    idle: Iterator[JobState],
    running: list[tuple[float, JobState]],
    left: Callable[[JobState, float], float],
    now: float,
) -> Iterator[JobState]:
    """``heapq.merge(idle, running jobs, key=lambda j: -left(j, now))`` for two inputs,
    ties to the idle job as there; ``running`` comes sorted with its keys, each computed
    once. A generator of its own, so that a compiled core compiles it (``heapq.merge``
    is Python)."""
    k = 0
    n = len(running)
    for job in idle:
        mine = -left(job, now)
        while k < n and running[k][0] < mine:
            yield running[k][1]
            k += 1
        yield job
    while k < n:
        yield running[k][1]
        k += 1


def order_measure(app: AppState) -> Callable[[JobState, float], float]:
    """How the app's own scheduler measures a job's work left, to order its trials: its
    declared remaining work, or that work as its ``progress_weight`` (or an ``order``
    strategy) counts it."""
    return JobState.order_remaining_at if app.own_order else JobState.remaining_at


def assign_jobs(
    cluster: Cluster,
    app: AppState,
    owned: Iterable[int],
    now: float,
    placed: set[int] | None = None,
    movable: set[int] | None = None,
) -> tuple[dict[JobState, tuple[int, ...]], set[int]]:
    """Map the app's GPUs to its jobs. Returns (job -> GPUs, GPUs left unused).

    ``placed``: ids of jobs already given GPUs elsewhere in this round (not placed again).
    ``movable``: ids of running jobs whose grants end now, which on a typed cluster may
    move to a faster type among the app's GPUs (the others keep theirs until it ends)."""
    pool = Packer(cluster, owned)
    plan: dict[JobState, tuple[int, ...]] = {}
    may_move = movable if cluster.typed and movable else set()
    for job in app.running_jobs():
        if not pool.take_exact(job.gpus):
            continue
        # Typed: a renewing job stays unless a faster type among the app's GPUs is worth a move.
        if id(job) in may_move and move_target(pool, app.profile, job.gpus) is not None:
            pool.give_back(job.gpus)
            continue
        plan[job] = job.gpus
    skip = {id(j) for j in plan}
    if placed:
        skip |= placed
    fill(pool, waiting_order(app, now, skip), plan, app.profile if cluster.typed else None)
    return plan, pool.gpus()


def fill(
    pool: Packer,
    jobs: Iterable[JobState],
    plan: dict[JobState, tuple[int, ...]],
    profile: ModelProfile | None = None,
) -> None:
    """Start ``jobs`` in order on the pool while GPUs last; a gang that does not fit is
    passed over for smaller ones behind it. With ``profile`` (typed clusters) each gang
    goes where its model runs fastest, so the longest jobs get the fastest GPUs."""
    for job in jobs:
        if not len(pool):
            return
        if profile is not None:
            gpus = fastest_place(pool, job.gang, profile)
            if gpus is not None:
                pool.take_exact(gpus)
        else:
            gpus = pool.take(job.gang)
        if gpus is not None:
            plan[job] = gpus
