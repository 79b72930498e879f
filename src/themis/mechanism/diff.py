"""A round's schedule as what the mechanism does: first the running jobs it stops, then
each scheduled job either keeps its GPUs (it still holds them: a renewal, no restart) or
starts. The simulator and the runtime stop jobs in this one order, so the same schedule
stops the same jobs in both; ``as_schedule`` reads a policy's ``Changes`` as that
schedule."""

from __future__ import annotations

from collections.abc import Sequence

from themis.mechanism.view import Assignment, Changes, Schedule
from themis.model.state import AppState, JobState


def stopping(schedule: Schedule, active: Sequence[AppState]) -> list[JobState]:
    """The running jobs the schedule stops, apps in order and each app's jobs in order: those
    it does not list, and those it moves to other GPUs (a move is a stop, then a start).
    Collected before any stops: stopping one job changes no other job's grant or GPUs."""
    out = []
    for app in active:
        for job in app.running_jobs():
            grant = schedule.get(job)
            if grant is None or grant.gpus != job.gpus:
                out.append(job)
    return out


def as_schedule(running: Sequence[JobState], changes: Changes) -> Schedule:
    """The full schedule ``changes`` stands for: every running job on its GPUs and grant
    end (in the order given) except those it stops or restarts, then the jobs it starts
    (a running job among them continues on its GPUs with a new grant end, or moves)."""
    stop = set(changes.stop)
    start = changes.start
    schedule: Schedule = {
        j: Assignment(j.gpus, j.until) for j in running if j not in stop and j not in start
    }
    schedule.update(start)
    return schedule
