"""Instantaneous max-min fair share: each active app is entitled to an equal share of the
GPUs, capped by its demand (water-filling), re-computed at every arrival and job end.

Jobs are preempted only when an app below its share has a job to run and no free GPUs are
left for it: then the app furthest above its share loses its most recently started job.
GPUs nobody below its share can use go to the apps with the smallest held/share ratio
(work conservation), and are the first taken back later.
"""

from __future__ import annotations

from themis.agent.app_scheduler import waiting_order
from themis.model.placement import pack_gang
from themis.model.state import AppState, JobState
from themis.policies.base import Assignment, Policy, Schedule, SchedulingView
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


@register
class MaxMinPolicy(Policy):
    name = "max-min"
    description = "instantaneous equal GPU share among active apps (water-filling)"

    def schedule(self, view: SchedulingView) -> Schedule:
        apps = list(view.apps)
        shares = dict(
            zip(
                (a.app_id for a in apps),
                water_fill(view.cluster.size, [a.demand() for a in apps]),
                strict=True,
            )
        )
        schedule = self.keep_running(view)
        held = {a.app_id: len(a.held()) for a in apps}
        free = set(view.free_gpus())
        # Every scheduled job is a running one (``keep_running``), so excluding an app's own
        # running jobs excludes the same jobs as excluding all of them, without building
        # the set of every running job once per app.
        queues = {
            a.app_id: list(waiting_order(a, view.now, {id(j) for j in a.running_jobs()}))
            for a in apps
        }

        def below_share() -> list[AppState]:
            return sorted(
                (a for a in apps if held[a.app_id] < shares[a.app_id] and queues[a.app_id]),
                key=lambda a: (held[a.app_id] / max(shares[a.app_id], 1), a.arrival),
            )

        index = _Scheduled(schedule)
        progress = True
        while progress:
            progress = False
            for app in below_share():
                job = queues[app.app_id][0]
                placed = self._place(view, job, free, schedule, held, shares, index)
                if placed is None:
                    queues[app.app_id].pop(0)  # cannot run now; try its next job
                    progress = True
                    continue
                gpus, preempted = placed
                for victim in preempted:  # may still run on GPUs nobody below share can use
                    queues[victim.app.app_id].insert(0, victim)
                schedule[job] = Assignment(gpus)
                index.add(job)
                queues[app.app_id].pop(0)
                held[app.app_id] += len(gpus)
                progress = True
                break
        # Work conservation: whatever is still free goes to whoever can use it.
        by_ratio = sorted(
            apps, key=lambda a: (held[a.app_id] / max(shares[a.app_id], 1), a.arrival)
        )
        for app in by_ratio:
            for job in queues[app.app_id]:
                if not free:
                    return schedule
                if job in schedule or job.gang > len(free):
                    continue
                packed = pack_gang(view.cluster, free, job.gang)
                if packed is not None:
                    schedule[job] = Assignment(packed)
                    free.difference_update(packed)
                    held[app.app_id] += len(packed)
        return schedule

    @staticmethod
    def _place(
        view: SchedulingView,
        job: JobState,
        free: set[int],
        schedule: Schedule,
        held: dict[str, int],
        shares: dict[str, int],
        index: _Scheduled,
    ) -> tuple[tuple[int, ...], list[JobState]] | None:
        """GPUs for ``job``, preempting over-share apps' newest jobs if needed.

        Victims are chosen on a copy first: nothing is preempted unless the gang then fits.
        Returns (GPUs, preempted jobs), or None with nothing changed.
        """
        trial_free = set(free)
        trial_held = dict(held)
        chosen: list[JobState] = []
        while True:
            gpus = pack_gang(view.cluster, trial_free, job.gang)
            if gpus is not None:
                for victim in chosen:
                    free.update(schedule.pop(victim).gpus)
                    index.remove(victim)
                    held[victim.app.app_id] -= victim.gang
                free.difference_update(gpus)
                return gpus, chosen
            newest = index.newest_victim(job.app.app_id, chosen, trial_held, shares)
            if newest is None:
                return None
            chosen.append(newest)
            trial_free.update(schedule[newest].gpus)
            trial_held[newest.app.app_id] -= newest.gang


class _Scheduled:
    """The round's schedule indexed by app, so that looking for a victim costs the jobs of
    the apps above their share, not every scheduled job.

    It picks what ``max(victims, key=(started_at or 0, arrival))`` over the schedule in
    its order would: the newest-started job of an app that stays at or above its share
    without it, ties to the first in schedule order (each job's insertion position, kept
    here, is the last part of the key).
    """

    def __init__(self, schedule: Schedule) -> None:
        self.position: dict[JobState, int] = {}
        self.by_app: dict[str, set[JobState]] = {}
        self._next = 0
        for job in schedule:
            self.add(job)

    def add(self, job: JobState) -> None:
        """``job`` was added to the end of the schedule."""
        self.position[job] = self._next
        self._next += 1
        self.by_app.setdefault(job.app.app_id, set()).add(job)

    def remove(self, job: JobState) -> None:
        del self.position[job]
        self.by_app[job.app.app_id].discard(job)

    def newest_victim(
        self,
        mine: str,
        chosen: list[JobState],
        held: dict[str, int],
        shares: dict[str, int],
    ) -> JobState | None:
        best: JobState | None = None
        best_key: tuple[float, float, int] | None = None
        for app_id, jobs in self.by_app.items():
            extra = held[app_id] - shares[app_id]
            if extra <= 0 or app_id == mine:
                continue  # no job of it can go without dropping it below its share
            for j in jobs:
                if j.gang > extra or j in chosen:
                    continue
                key = (j.started_at or 0.0, j.app.arrival, -self.position[j])
                if best_key is None or key > best_key:
                    best, best_key = j, key
        return best
