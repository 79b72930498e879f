"""LAS: least attained service first, per job, in GPU-seconds held; preemptive at every
re-allocation quantum (``PolicyOptions.lease``).

Quanta run on one clock, the grid of the other quantum baselines (``_quantum.quantum_end``):
they end at the multiples of ``lease``. At a quantum's end every live job competes, least
attained service first, and the best-ranked that fit run for the next quantum on the best
span available (see ``_ranked``). Between quantum ends (at
arrivals and job ends) running jobs keep their GPUs and free GPUs go to the waiting jobs
with the least attained service. Quanta give LAS its time sharing (equal jobs take turns)
without preempting at every arrival or job end.
"""

from __future__ import annotations

from themis.model.cluster import Cluster
from themis.model.state import JobState
from themis.policies._quantum import quantum_end
from themis.policies._ranked import RankedPolicy, attained_at
from themis.policies.base import SchedulingView
from themis.policies.registry import register


@register
class LasPolicy(RankedPolicy):
    name = "las"
    description = "least attained GPU-time first, per job, preemptive every quantum (--lease)"
    protects_grants = True

    def rank(self, job: JobState, now: float, cluster: Cluster) -> float:
        return attained_at(job, now)

    def grant_until(self, view: SchedulingView) -> float | None:
        return quantum_end(view.now, view.window, self.options.lease)
