"""Optimus (Peng et al., EuroSys 2018), applied to apps as the Themis paper did: GPUs go,
one gang at a time, to the app whose remaining time drops the most per GPU.

Optimus allocates greedily by marginal gain (§4.1): every job first gets the least it can
run with, then one unit at a time goes to the job whose completion time shrinks most per
unit of resource, until nothing is left. Here:

- The unit is one job's whole gang (gangs are rigid), given to an app; which of its jobs
  runs is its app scheduler's choice: jobs already running first (no needless restart),
  then the longest remaining.
- An app's remaining time with k GPUs is ``estimate_time`` (``themis.fairness.ftf``, the
  estimator Themis itself uses) on the best-packed set of k GPUs, from the exact remaining
  iterations and speeds the simulator knows; Optimus fits them online from the loss curve
  and a throughput model (§3). Placement is a separate step (Optimus §4.2 places tasks after
  allocating them): gangs are packed on the best span the free GPUs allow.
- Minimum allocation first: while an app could never finish on what it holds (nothing yet,
  or fewer GPUs than its largest gang) its gain is unbounded. Such apps come first, the one
  with the shortest remaining time after the unit first: Optimus minimises the sum of
  completion times, which shortest-first does when not everyone can start.
- Then the largest gain per GPU, ``(T(k) - T(k + g)) / g``; ties go to the earlier app.
  GPUs nobody gains from still go out in that order (work conservation).

Allocation is re-planned at every quantum boundary (Optimus's scheduling interval); between
boundaries, arrivals and job ends only hand out the free GPUs.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from functools import lru_cache, partial

from themis.fairness.ftf import RemainingWork
from themis.model.cluster import Cluster, SetShape
from themis.model.state import AppState, GangWork, JobState
from themis.policies._quantum import check_quantum, open_round, place
from themis.policies.base import Policy, PolicyOptions, Schedule, SchedulingView
from themis.policies.registry import register


@lru_cache(maxsize=4096)
def best_shape(cluster: Cluster, count: int) -> SetShape:
    """The shape of ``count`` GPUs packed as tightly as this cluster allows (shapes are
    immutable: one per cluster and count is shared)."""
    return SetShape(
        count, min(count, cluster.shape.machine_max), min(count, cluster.shape.rack_max)
    )


class AppPlan:
    """One app's side of a round: the GPUs it holds so far and the jobs it could start."""

    def __init__(
        self, app: AppState, order: int, held: int, jobs: list[JobState], now: float
    ) -> None:
        self.app = app
        self.order = order
        self.held = held
        self.jobs = jobs
        self.next = 0
        self.remaining: dict[int, GangWork] = app.remaining_by_gang(now)
        # ``estimate_time`` of the remaining work, its shape-free part computed once, and
        # its answers per GPU count: a round asks the same counts again.
        self._work = RemainingWork(app.profile, self.remaining)
        self._times: dict[int, float] = {}

    def time(self, cluster: Cluster, gpus: int) -> float:
        """The app's remaining time holding ``gpus`` best-packed GPUs (inf: it cannot
        finish on them): ``estimate_time`` on ``best_shape``."""
        time = self._times.get(gpus)
        if time is None:
            time = self._times[gpus] = self._work.time_on(best_shape(cluster, gpus))
        return time

    def candidate(self, capacity: int) -> JobState | None:
        """The app's next job whose gang fits ``capacity`` GPUs. Capacity only shrinks in a
        round, so a job passed over here could not fit later either."""
        while self.next < len(self.jobs) and self.jobs[self.next].gang > capacity:
            self.next += 1
        return self.jobs[self.next] if self.next < len(self.jobs) else None


def priority(plan: AppPlan, cluster: Cluster, gang: int) -> tuple[int, float, int]:
    """Smaller is served first: (0, remaining time after the unit) while the app cannot
    finish on what it holds, else (1, minus the reduction of its remaining time per GPU)."""
    before = plan.time(cluster, plan.held)
    after = plan.time(cluster, plan.held + gang)
    if math.isinf(before):
        return (0, after, plan.order)
    return (1, -(before - after) / gang, plan.order)


@register
class OptimusPolicy(Policy):
    name = "optimus"
    description = "largest marginal reduction of remaining time per GPU (Optimus, EuroSys 2018)"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        check_quantum(options.lease)

    def schedule(self, view: SchedulingView) -> Schedule:
        rnd = open_round(view, self.options.lease)
        capacity = rnd.capacity
        if capacity == 0:  # nothing to hand out (an arrival while every GPU is held)
            return place(rnd, [])
        cluster = view.cluster
        held: Counter[int] = Counter()
        for job in rnd.keep:
            held[id(job.app)] += job.gang
        ending: dict[int, list[JobState]] = {}
        for job in rnd.ending:
            ending.setdefault(id(job.app), []).append(job)
        heap: list[tuple[tuple[int, float, int], AppPlan, JobState]] = []
        for order, app in enumerate(view.apps):
            mine = ending.get(id(app))
            jobs = app.idle_jobs()
            if mine:
                jobs = sorted(mine, key=partial(_negated_remaining, view.now)) + jobs
            elif not jobs:
                continue
            plan = AppPlan(app, order, held[id(app)], jobs, view.now)
            first = plan.candidate(capacity)
            if first is not None:
                heap.append((priority(plan, cluster, first.gang), plan, first))
        heapq.heapify(heap)
        chosen: list[JobState] = []
        while heap and capacity > 0:
            _, plan, job = heapq.heappop(heap)
            if job.gang > capacity:  # stale: the app's candidate no longer fits
                nxt = plan.candidate(capacity)
                if nxt is not None:
                    heapq.heappush(heap, (priority(plan, cluster, nxt.gang), plan, nxt))
                continue
            chosen.append(job)
            capacity -= job.gang
            plan.held += job.gang
            plan.next += 1
            nxt = plan.candidate(capacity)
            if nxt is not None:
                heapq.heappush(heap, (priority(plan, cluster, nxt.gang), plan, nxt))
        return place(rnd, chosen)


# A module function bound with ``partial``, not a lambda: mypyc (2.4) stops with an internal
# error on a closure inside a method of a decorated (``@register``) class.
def _negated_remaining(now: float, job: JobState) -> float:
    return -job.remaining_at(now)
