"""SLAQ (Zhang et al., SoCC 2017): GPUs go to the jobs whose loss would drop the most per GPU
over the next quantum, so that jobs early on their loss curves (big, cheap gains) run before
jobs near convergence. Job-level, as SLAQ is: apps play no part.

- Loss model (SLAQ §3.2): SLAQ fits each job's loss history online to the sublinear family
  ``L(k) = 1 / (a k^2 + b k + c) + d``. Here each model has a fixed curve of that family in
  the fraction of its work done, ``x = k / K``, normalised so that every job starts at loss
  1 and converges (loss 0) exactly at its total work K (the table below; the values and why
  are in ``docs/policies/gandiva_optimus_slaq.md``).
- Normalisation (SLAQ §3.1): SLAQ divides loss reductions by the job's largest one so that
  jobs with losses of different scales compare; the curve above is normalised the same way.
- Gain (SLAQ §3.3): a job of gang g, a fraction x done, ``K`` iterations in all, running at
  ``s`` iterations/s on its gang's best span, would reach ``x + dx`` after one quantum Q,
  ``dx = min(1 - x, s Q / K)``. Its priority is ``(loss(x) - loss(x + dx)) / g``, highest
  first; ties go to the earlier app, then the earlier job. SLAQ's allocation does not look at
  placement; gangs are then packed on the best span the free GPUs allow.

Allocation is re-planned at every quantum boundary (SLAQ's scheduling epoch); between
boundaries, arrivals and job ends only hand out the free GPUs.

The waiting jobs are kept in one ranking across rounds (``_books``); only the jobs whose
grants end are ranked in the round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies._books import Books, Key
from themis.policies._quantum import (
    check_quantum,
    place_changes,
    quantum_end,
)
from themis.policies.base import Changes, Policy, PolicyOptions, SchedulingView
from themis.policies.registry import register


@dataclass(frozen=True)
class LossCurve:
    """``L(x) = 1 / (a x^2 + b x + 1)`` over the fraction of work done ``x`` in [0, 1] (SLAQ's
    family with c = 1; d cancels out), reported normalised: 1 at x = 0, 0 at x = 1."""

    a: float
    b: float

    def __post_init__(self) -> None:
        if self.a < 0 or self.b < 0 or self.a + self.b <= 0:
            raise ValueError(f"a loss curve needs a, b >= 0 and a + b > 0: {self}")

    @classmethod
    def halfway(cls, x_half: float) -> LossCurve:
        """The curve with a = 0 (SLAQ's 1/k convergence) that has made half of its loss
        reduction at ``x_half`` of its work: ``loss(x) = (1 - x) / (1 + b x)``, so that
        ``loss(x_half) = 1/2`` gives ``b = (1 - 2 x_half) / x_half``."""
        if not 0 < x_half < 0.5:
            raise ValueError(f"half the loss reduction must come before half the work: {x_half}")
        return cls(0.0, (1 - 2 * x_half) / x_half)

    def _raw(self, x: float) -> float:
        return 1.0 / (self.a * x * x + self.b * x + 1.0)

    def loss(self, x: float) -> float:
        """Normalised loss after a fraction ``x`` of the work (clamped to [0, 1])."""
        x = min(max(x, 0.0), 1.0)
        end = self._raw(1.0)
        return (self._raw(x) - end) / (1.0 - end)


#: Per-model curves by the fraction of training at which half of the loss reduction is done.
#: Modelling choices, not measurements (see the doc): batch-normalised nets (ResNet,
#: Inception) converge earliest, VGG (no batch norm) latest.
LOSS_CURVES: dict[str, LossCurve] = {
    "alexnet": LossCurve.halfway(0.08),
    "vgg11": LossCurve.halfway(0.10),
    "vgg16": LossCurve.halfway(0.10),
    "vgg19": LossCurve.halfway(0.10),
    "resnet50": LossCurve.halfway(0.05),
    "resnet101": LossCurve.halfway(0.05),
    "resnet152": LossCurve.halfway(0.05),
    "inception3": LossCurve.halfway(0.05),
    "inception4": LossCurve.halfway(0.05),
    "googlenet": LossCurve.halfway(0.06),
}
#: Models not in the table (user profiles): the slowest of the curves above.
DEFAULT_CURVE = LossCurve.halfway(0.10)


def curve_for(model: str) -> LossCurve:
    return LOSS_CURVES.get(model, DEFAULT_CURVE)


def gain_per_gpu(
    job: JobState, done: float, cluster: Cluster, curve: LossCurve, quantum: float
) -> float:
    """Normalised loss reduction per GPU of one more quantum on the gang's best span."""
    work = job.spec.work
    if work <= 0:
        return 0.0
    x = done / work
    speed = job.app.profile.speed(job.gang, cluster.best_span(job.gang))
    dx = min(1.0 - x, speed * quantum / work)
    return (curve.loss(x) - curve.loss(x + dx)) / job.gang


class Gains:
    """``gain_per_gpu`` with what is fixed per job (its curve's constants, its step of
    one quantum on its gang's best span) computed once per job: the same floating-point
    operations in the same order, so the same gains. Valid for one cluster."""

    def __init__(self, quantum: float) -> None:
        self.quantum = quantum
        self._fixed: dict[JobState, tuple[float, float, float, float, float, float, int]] = {}

    def __call__(self, job: JobState, done: float, cluster: Cluster) -> float:
        fixed = self._fixed.get(job)
        if fixed is None:
            work = job.spec.work
            if work <= 0:
                return 0.0
            curve = curve_for(job.app.spec.model)
            end = curve._raw(1.0)
            speed = job.app.profile.speed(job.gang, cluster.best_span(job.gang))
            step = speed * self.quantum / work
            fixed = (work, curve.a, curve.b, end, 1.0 - end, step, job.gang)
            self._fixed[job] = fixed
        work, a, b, end, span, step, gang = fixed
        x = done / work
        dx = min(1.0 - x, step)
        lo = min(max(x, 0.0), 1.0)
        hi = min(max(x + dx, 0.0), 1.0)
        before = (1.0 / (a * lo * lo + b * lo + 1.0) - end) / span
        after = (1.0 / (a * hi * hi + b * hi + 1.0) - end) / span
        return (before - after) / gang

    def forget(self) -> None:
        self._fixed.clear()


@register
class SlaqPolicy(Policy):
    name = "slaq"
    description = "largest predicted loss reduction per GPU (SLAQ, SoCC 2017)"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        self.quantum = check_quantum(options.lease)
        self._books = Books(self._waiting_key)
        self._gains = Gains(self.quantum)
        self._cluster: Cluster | None = None

    def changes(self, view: SchedulingView) -> Changes:
        """One round: the jobs whose grants end now compete with the waiting jobs (kept
        ranked across rounds) for the GPUs free and theirs, highest gain per GPU first
        (ties: the earlier app, then the earlier job)."""
        view = self.with_books(view)
        books = self._books
        if view.cluster is not self._cluster:  # gains depend on the cluster (best span)
            self._cluster = view.cluster
            self._gains.forget()
        books.sync(view)
        now, cluster, order = view.now, view.cluster, view.order
        assert order is not None and view.free is not None
        ending = books.ending(view)
        keys = [self._key(j, j.spec.work - j.remaining_at(now), cluster, order) for j in ending]
        capacity = len(view.free) + sum(j.spec.gang for j in ending)
        chosen = books.waiting.fill(capacity, keys)
        until = quantum_end(now, view.window, self.quantum)
        return place_changes(view, books, chosen, ending, until)

    def _waiting_key(self, job: JobState, view: SchedulingView) -> Key:
        assert view.order is not None
        return self._key(job, job.done, view.cluster, view.order)

    def _key(
        self, job: JobState, done: float, cluster: Cluster, order: Mapping[AppState, int]
    ) -> Key:
        return (-self._gains(job, done, cluster), order[job.app], job.index, job)
