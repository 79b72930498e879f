"""SRTF: shortest remaining time first, per job, preemptive at every arrival and job end.

A job's remaining time is its remaining iterations over its speed on its own gang at the
best span that gang can have on this cluster (``ModelProfile.speed`` at
``Cluster.best_span``): what the job needs if it is placed well, whatever it holds now.
The shortest jobs that fit run, packed on the best span available (see ``_ranked``); a
shorter arrival preempts the running jobs with the longest remaining time.
"""

from __future__ import annotations

from themis.model.cluster import Cluster
from themis.model.state import JobState
from themis.policies._ranked import RankedPolicy
from themis.policies.registry import register


def remaining_time(job: JobState, now: float, cluster: Cluster) -> float:
    """Seconds ``job`` still needs on its gang at the best span the cluster allows it."""
    speed = job.app.profile.speed(job.gang, cluster.best_span(job.gang))
    return job.remaining_at(now) / speed


@register
class SrtfPolicy(RankedPolicy):
    name = "srtf"
    description = "shortest remaining time first, per job, preemptive at arrivals and job ends"

    def rank(self, job: JobState, now: float, cluster: Cluster) -> float:
        return remaining_time(job, now, cluster)
