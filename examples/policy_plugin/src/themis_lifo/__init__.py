"""LIFO, an example policy shipped as its own package.

The newest app is served first, its jobs in submission order, first-fit, never
preempted. It is not a good policy; it is the smallest one that is clearly not a
built-in, to show the ``themis.policies`` entry point. The package's pyproject.toml names
the class; themis imports it when it loads its policies, and registers it under ``name``.

It declares one knob of its own, ``--lifo-depth``: like a built-in's, it is a flag of every
command that runs a policy, a key of config files and a setting ``summary.json`` records.
"""

from __future__ import annotations

from typing import Any

from themis.model.placement import Packer
from themis.policies import Assignment, Policy, Schedule, SchedulingView
from themis.policies.knobs import Knob


def _depth(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return None if ok else f"must be a number of apps >= 0, got {value}"


DEPTH = Knob(
    "lifo_depth",
    "--lifo-depth",
    "lifo: only the newest N apps are served at once (0: every app).",
    int,
    _depth,
    metavar="N",
    default=0,
)


class LifoPolicy(Policy):
    name = "lifo"
    description = "last come first served, first-fit, no preemption (example plugin)"
    knobs = (DEPTH,)

    def schedule(self, view: SchedulingView) -> Schedule:
        schedule = self.keep_running(view)
        pool = Packer(view.cluster, view.free_gpus())
        depth = self.options.value(DEPTH.field)
        newest = list(reversed(view.apps))
        for app in newest[:depth] if depth else newest:
            for job in app.jobs:
                if not len(pool):
                    return schedule
                if job.finished_at is not None or job.gpus:
                    continue
                gpus = pool.take(job.gang)
                if gpus is not None:
                    schedule[job] = Assignment(gpus)
        return schedule
