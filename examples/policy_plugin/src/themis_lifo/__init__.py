"""LIFO, an example policy shipped as its own package.

The newest app is served first, its jobs in submission order, first-fit, never
preempted. It is not a good policy; it is the smallest one that is clearly not a
built-in, to show the ``themis.policies`` entry point. The package's pyproject.toml names
the class; themis imports it when it loads its policies, and registers it under ``name``.
"""

from __future__ import annotations

from themis.model.placement import Packer
from themis.policies import Assignment, Policy, Schedule, SchedulingView


class LifoPolicy(Policy):
    name = "lifo"
    description = "last come first served, first-fit, no preemption (example plugin)"

    def schedule(self, view: SchedulingView) -> Schedule:
        schedule = self.keep_running(view)
        pool = Packer(view.cluster, view.free_gpus())
        for app in reversed(view.apps):
            for job in app.jobs:
                if not len(pool):
                    return schedule
                if job.finished_at is not None or job.gpus:
                    continue
                gpus = pool.take(job.gang)
                if gpus is not None:
                    schedule[job] = Assignment(gpus)
        return schedule
