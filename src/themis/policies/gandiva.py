"""Gandiva (Xiao et al., OSDI 2018), as the Themis paper used it as a baseline: greedy,
locality-aware packing, round-robin time slicing when the cluster is oversubscribed, and
migration of badly placed gangs to better spots. Job-level: apps and fairness play no part.

- Packing (Gandiva's reactive mode, §4.2): each gang starts on the best span the free GPUs
  offer (one machine > one rack > anywhere), best fit, largest gangs placed first.
- Time slicing (§4.1 suspend/resume): all waiting jobs form one round-robin queue, ordered by
  when they began waiting (arrival, or the end of their last turn). A turn lasts until the
  next quantum boundary; at a boundary the jobs at the head of the queue take the GPUs and
  the jobs whose turn ended join the back of the queue, unless GPUs are left for them (an
  undersubscribed cluster rotates nothing). Progress is kept across turns.
- Migration (introspective mode, §4.2): at a boundary, a continuing multi-GPU job that spans
  more than its gang needs (machines or racks) moves to the best spot that the free GPUs
  plus its own now offer, if that spot has a strictly better span. Spans only improve, so
  a job never moves back and forth.

Not modelled: packing several jobs on one GPU by memory, grow-shrink (our gangs are rigid)
and interference profiling; see ``docs/policies/gandiva_optimus_slaq.md``.
"""

from __future__ import annotations

from functools import partial
from itertools import chain

from themis.model.cluster import Cluster
from themis.model.placement import pack_gang
from themis.model.state import AppState, JobState
from themis.policies._quantum import check_quantum, fill, open_round, place
from themis.policies.base import Policy, PolicyOptions, Schedule, SchedulingView
from themis.policies.registry import register


@register
class GandivaPolicy(Policy):
    name = "gandiva"
    description = "locality-aware packing, round-robin time slices, migration (Gandiva, OSDI 2018)"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        check_quantum(options.lease)
        # Waiting jobs in round-robin order (insertion order = when they began waiting: every
        # insertion happens at the current time, which never decreases within a run).
        self._queue: dict[JobState, None] = {}
        self._apps: set[AppState] = set()
        self._last = float("-inf")

    def schedule(self, view: SchedulingView) -> Schedule:
        self._sync(view)
        rnd = open_round(view, self.options.lease)
        # Waiting jobs first, in queue order; jobs whose turn ends now come last.
        waiting = (j for j in self._queue if not j.gpus and not j.finished)
        chosen = fill(chain(waiting, rnd.ending), rnd.capacity)
        schedule = place(rnd, chosen, partial(migrate, view.cluster) if rnd.boundary else None)
        for job in chosen:
            self._queue.pop(job, None)
        for job in rnd.ending:
            if job not in schedule:
                self._queue[job] = None
        return schedule

    def _sync(self, view: SchedulingView) -> None:
        """Queue the jobs of newly arrived apps; resynchronise if the queue and the view
        disagree (a new run, or a mechanism that did not apply the last schedule)."""
        if view.now < self._last:  # time went back: a new run with this policy object
            self._queue.clear()
            self._apps.clear()
        self._last = view.now
        for app in view.apps:
            if app not in self._apps:
                for job in app.jobs:
                    if not job.finished and not job.gpus:
                        self._queue[job] = None
        self._apps = set(view.apps)
        waiting = sum(len(app.idle_jobs()) for app in view.apps)
        if waiting != len(self._queue):
            kept = [j for j in self._queue if not j.gpus and not j.finished]
            self._queue = dict.fromkeys(kept)
            for app in view.apps:
                for job in app.idle_jobs():
                    self._queue.setdefault(job, None)


def migrate(
    cluster: Cluster, available: set[int], continuing: list[JobState]
) -> dict[JobState, tuple[int, ...]]:
    """Move each continuing gang that spans more than it must (largest first) to the best
    spot among ``available`` plus its own GPUs, when that spot has a strictly better span.
    ``available`` is updated in place; returns the jobs moved and their new GPUs."""
    moved: dict[JobState, tuple[int, ...]] = {}
    spread = [
        j for j in continuing if j.gang > 1 and cluster.span(j.gpus) > cluster.best_span(j.gang)
    ]
    for job in sorted(spread, key=lambda j: -j.gang):
        better = pack_gang(cluster, available | set(job.gpus), job.gang)
        if better is not None and cluster.span(better) < cluster.span(job.gpus):
            moved[job] = better
            available.update(job.gpus)
            available.difference_update(better)
    return moved
