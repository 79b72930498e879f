"""FIFO: apps served in arrival order, jobs in submission order, never preempted.

A job that does not fit the free GPUs does not block the ones behind it (first-fit
backfill), which is how FIFO queues are usually run on gang-scheduled clusters; each gang
is packed on the best span available when its turn comes.

The rule is the rank-and-pack engine's (``_ranked.py``) with every job ranked alike, so
the engine's tie-break is the whole order: the app that arrived first, then submission
order. The engine keeps the queue from round to round, per gang size, so a round costs
the jobs it starts, not the backlog.
"""

from __future__ import annotations

from themis.model.cluster import Cluster
from themis.model.state import JobState
from themis.policies._ranked import RankedPolicy
from themis.policies.registry import register


@register
class FifoPolicy(RankedPolicy):
    name = "fifo"
    description = "first come first served, first-fit backfill, no preemption"
    preempts = False
    first_fit = True

    def rank(self, job: JobState, now: float, cluster: Cluster) -> float:
        return 0.0
