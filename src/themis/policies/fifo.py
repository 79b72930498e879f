"""FIFO: apps served in arrival order, jobs in submission order, never preempted.

A job that does not fit the free GPUs does not block the ones behind it (first-fit
backfill), which is how FIFO queues are usually run on gang-scheduled clusters; each gang
is packed on the best span available.
"""

from __future__ import annotations

from themis.model.placement import Packer
from themis.policies.base import Assignment, Policy, Schedule, SchedulingView
from themis.policies.registry import register


@register
class FifoPolicy(Policy):
    name = "fifo"
    description = "first come first served, first-fit backfill, no preemption"

    def schedule(self, view: SchedulingView) -> Schedule:
        schedule = self.keep_running(view)
        pool = Packer(view.cluster, view.free_gpus())
        for app in view.apps:
            for job in app.jobs:
                if not len(pool):
                    return schedule
                if job.finished_at is not None or job.gpus:
                    continue
                gpus = pool.take(job.gang)
                if gpus is not None:
                    schedule[job] = Assignment(gpus)
        return schedule
