"""The rules every schedule keeps, whoever computed it: no GPU granted twice or out of
range, exact gangs, only live jobs of active apps. A policy that breaks them has a bug,
which is reported, never silently repaired.

One rule set, three ways to apply it: the Ray runtime checks a whole schedule
(:func:`check_schedule`); the simulator, which knows the running job on each GPU, checks
only the grants that move (:func:`check_moves`) or a round given as changes
(:func:`check_changes`), so a round costs what changes, not every running job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from themis.mechanism.view import Changes, Schedule
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState


def check_grant(
    job: JobState,
    gpus: tuple[int, ...],
    live: bool,
    size: int,
    seen: set[int],
    holder: Mapping[int, JobState] | None = None,
    keeps: Callable[[JobState], bool] | None = None,
) -> None:
    """One grant against the rules. ``seen`` collects the GPUs granted so far in the round;
    with ``holder`` (the running job on each GPU), a GPU whose running job ``keeps`` it
    collides. Asked only of held GPUs: a free one costs one lookup."""
    if not live:
        raise AssertionError(f"policy scheduled {job.job_id}, which cannot run")
    if len(gpus) != job.gang:
        raise AssertionError(f"policy gave {job.job_id} {len(gpus)} GPUs for a gang of {job.gang}")
    for g in gpus:
        if not 0 <= g < size or g in seen:
            raise AssertionError(f"policy granted GPU {g} twice or out of range")
        seen.add(g)
        if holder is not None:
            other = holder.get(g)
            if other is not None and keeps is not None and keeps(other):
                raise AssertionError(f"policy granted GPU {g} twice or out of range")


def check_schedule(schedule: Schedule, active: Sequence[AppState], cluster: Cluster) -> None:
    """Every grant of a full schedule against the rules (the runtime's check)."""
    seen: set[int] = set()
    ids = {id(a) for a in active}
    for job, grant in schedule.items():
        live = job.finished_at is None and id(job.app) in ids
        check_grant(job, grant.gpus, live, cluster.size, seen)


def _stays(job: JobState, gpus: tuple[int, ...]) -> bool:
    """Whether a grant continues ``job`` where it runs: its GPUs were checked when it
    started and no other running job holds them, so only new grants can collide."""
    return bool(job.gpus) and (gpus is job.gpus or gpus == job.gpus)


def check_moves(
    schedule: Schedule, active: Sequence[AppState], size: int, holder: Mapping[int, JobState]
) -> None:
    """:func:`check_schedule` for a mechanism that keeps ``holder``, the running job on each
    GPU: only grants that start or move a job are checked, a GPU colliding when the running
    job on it keeps it."""
    ids = {id(a) for a in active}
    seen: set[int] = set()

    def keeps(other: JobState) -> bool:
        return other in schedule and _stays(other, schedule[other].gpus)

    for job, grant in schedule.items():
        if _stays(job, grant.gpus):
            continue
        live = job.finished_at is None and id(job.app) in ids
        check_grant(job, grant.gpus, live, size, seen, holder, keeps)


def check_changes(changes: Changes, size: int, holder: Mapping[int, JobState]) -> None:
    """:func:`check_moves` of the full schedule ``changes`` stands for, in time proportional
    to the changes: a stopped job must run, and a GPU collides when the running job on it
    is neither stopped nor moved."""
    start = changes.start
    for job in changes.stop:
        if not job.gpus:
            raise AssertionError(f"policy stopped {job.job_id}, which does not run")
    stopped = set(changes.stop)
    seen: set[int] = set()

    def keeps(other: JobState) -> bool:
        grant_of = start.get(other)
        return grant_of.gpus == other.gpus if grant_of is not None else other not in stopped

    for job, grant in start.items():
        if _stays(job, grant.gpus):
            continue
        live = job.finished_at is None and job.app.finish is None
        check_grant(job, grant.gpus, live, size, seen, holder, keeps)
