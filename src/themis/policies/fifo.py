"""FIFO: apps served in arrival order, jobs in submission order, never preempted.

A job that does not fit the free GPUs does not block the ones behind it (first-fit
backfill), which is how FIFO queues are usually run on gang-scheduled clusters; each gang
is packed on the best span available.

A round costs the apps and the jobs it starts, not the backlog: each app's waiting jobs
(in submission order) and their smallest gang are kept per app version, so an app none of
whose waiting gangs fits the free GPUs is passed over at once. A gang fits exactly when it
is no larger than the free pool (``Packer.take`` then always succeeds), so skipping those
apps changes nothing: the same jobs are tried in the same order and the same start.
"""

from __future__ import annotations

from themis.model.placement import Packer
from themis.model.state import AppState, JobState
from themis.policies.base import Assignment, Policy, PolicyOptions, Schedule, SchedulingView
from themis.policies.registry import register


@register
class FifoPolicy(Policy):
    name = "fifo"
    description = "first come first served, first-fit backfill, no preemption"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        # app -> (its version, its waiting jobs in submission order, their smallest gang)
        self._waiting: dict[AppState, tuple[int, list[JobState], int]] = {}
        self._kept: dict[JobState, Assignment] = {}  # running job -> its unchanged grant

    def schedule(self, view: SchedulingView) -> Schedule:
        apps = view.apps
        # The current schedule unchanged (``keep_running``), from each app's cached list of
        # running jobs (submission order, as a walk of its jobs gives) instead of every job,
        # reusing a job's Assignment while its GPUs and end are unchanged (building one per
        # running job per round was most of the round).
        schedule: Schedule = {}
        kept = self._kept
        for app in apps:
            for j in app.running_jobs():
                a = kept.get(j)
                if a is None or a.gpus is not j.gpus or a.until != j.until:
                    a = kept[j] = Assignment(j.gpus, j.until)
                schedule[j] = a
        if len(kept) > 2 * len(schedule) + 64:
            self._kept = {j: kept[j] for j in schedule}
        if len(self._waiting) > 2 * len(apps):
            active = set(apps)
            self._waiting = {a: w for a, w in self._waiting.items() if a in active}
        waiting_of = self._waiting
        queues = []
        for app in apps:
            cached = waiting_of.get(app)
            if cached is None or cached[0] != app.version:
                cached = self._queue(app)
            queues.append(cached)
        free = view.cluster.size - sum(len(app.held()) for app in apps)
        if not any(q[1] and q[2] <= free for q in queues):
            return schedule  # nothing waiting fits: no pool to build
        pool = Packer(view.cluster, view.free_gpus())
        for _, waiting, smallest in queues:
            size = len(pool)
            if not size:
                return schedule
            if smallest > size:
                continue  # none of this app's waiting gangs fits
            for job in waiting:
                if not len(pool):
                    return schedule
                gpus = pool.take(job.gang)
                if gpus is not None:
                    schedule[job] = Assignment(gpus)
        return schedule

    def _queue(self, app: AppState) -> tuple[int, list[JobState], int]:
        """The app's waiting jobs at its current version, and their smallest gang."""
        waiting = [j for j in app.jobs if j.finished_at is None and not j.gpus]
        smallest = min((j.gang for j in waiting), default=0)
        cached = self._waiting[app] = (app.version, waiting, smallest)
        return cached
