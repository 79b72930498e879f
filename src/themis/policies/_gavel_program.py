"""Gavel's finish-time-fairness allocation as it ships, on one GPU type: one time fraction
per job, plain min-max of Gavel's rho.

Followed: ``scheduler/policies/finish_time_fairness.py`` (``FinishTimeFairnessPolicyWithPerf.
get_allocation``) and ``scheduler/policies/max_min_fairness.py`` (``MaxMinFairnessPolicy``,
its isolated allocation) in stanford-futuredata/gavel; the constraints are
``Policy.get_base_constraints`` in ``scheduler/policies/policy.py``.

Job ``j`` (a gang of ``g_j`` GPUs) holds its gang a fraction ``x_j`` of the time. Gavel's
program, with ``e_j`` the time since the job was submitted and ``r_j`` its remaining
seconds on its gang (remaining steps / throughput):

    minimize max_j  (e_j + r_j / x_j) / (e_j + r_j / x_iso_j)
    subject to      0 <= x_j <= 1,   sum_j g_j x_j <= C

``x_iso`` is the *isolated* allocation Gavel computes with its max-min policy
(throughputs set to 1): maximize ``min_j g_j x_j`` under the same constraints, i.e. each
job's time on an isolated ``1/N`` share of the cluster. When ``C / N`` is at most the
smallest gang that optimum is unique (every job holds ``C / N`` GPUs on average); when it is
not unique we take its water-filling optimum (each job ``min(g_j, L)`` GPUs, ``L`` filling
the cluster), one of Gavel's optima, so that the result does not depend on a solver's path.

Gavel solves the program with cvxpy (ECOS), as a convex program (``1 / x`` is not linear,
so it is not an LP). On one GPU type its optimum is known exactly: ``rho_j <= 1`` if and
only if ``x_j >= x_iso_j`` (numerator and denominator share ``e_j`` and ``r_j``), the
isolated fractions are feasible and, when the jobs do not all fit, already fill the cluster
(``sum_j g_j x_iso_j = C``). So the min-max is 1, reached only at ``x = x_iso``; when they
all fit, ``x = 1`` is the only split with every ``rho_j <= 1``. ``solve`` returns that optimum
exactly. A numerical solve (ECOS's, or the water-level root of ``_ftf_program`` that a test
runs to confirm it) returns it up to rounding noise, and that noise would decide Gavel's
priority ties, which its deficits are meant to break (in the root's answer the error of a
job's share scales with ``e_j x_j / r_j``: jobs with a long wait and little work left would
lose, or win, every tie). There is no second stage: this is
the plain min-max, not the lexicographic optimum ``ftf-oracle`` takes.

What it means: on one GPU type Gavel's finish-time fairness gives every job the same share
of GPU-time (``C / N`` GPUs each while that is below every gang), whatever its remaining
work or its wait; an app's share grows with its number of live jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported when a program is solved, not when policies load
    import numpy as np


@dataclass(frozen=True)
class JobLoad:
    """What Gavel's program knows about one job: seconds and GPUs."""

    elapsed: float  # since the job was submitted (its app's arrival)
    remaining: float  # seconds to finish holding its gang all the time (best placement)
    gang: int

    def __post_init__(self) -> None:
        if not (self.remaining > 0 and self.gang > 0 and self.elapsed >= 0):
            raise ValueError(f"a job in Gavel's program needs work and a gang: {self}")


@dataclass(frozen=True)
class GavelAllocation:
    """Time fractions (0..1) per job, in input order, and the isolated ones they are
    measured against; ``level`` is the min-max rho (None: every job fits at once and holds
    its gang all the time, each at rho 1)."""

    fractions: tuple[float, ...]
    isolated: tuple[float, ...]
    level: float | None


def isolated_fractions(gangs: Sequence[int], capacity: float) -> np.ndarray:
    """Each job's time fraction on an isolated 1/N share: water-filling of ``capacity``
    GPUs over the jobs, each capped at its gang; a fraction is its GPUs over its gang."""
    import numpy as np

    g = np.asarray(gangs, dtype=float)
    if g.size == 0:
        return g
    if g.sum() <= capacity:
        return np.ones_like(g)
    order = np.sort(g)
    # Find the level L with sum(min(g, L)) == capacity: walk the sorted gangs.
    filled = 0.0
    level = 0.0
    for k, gang in enumerate(order):
        rest = order.size - k
        if filled + gang * rest >= capacity:
            level = (capacity - filled) / rest
            break
        filled += gang
    return np.minimum(g, level) / g


def rho(job: JobLoad, fraction: float, isolated: float) -> float:
    """Gavel's finish-time fairness of ``job`` holding its gang ``fraction`` of the time."""
    if fraction <= 0:
        return float("inf")
    return (job.elapsed + job.remaining / fraction) / (job.elapsed + job.remaining / isolated)


def solve(jobs: Sequence[JobLoad], capacity: float) -> GavelAllocation:
    """The min-max of Gavel's rho over per-job time fractions: exactly the isolated
    fractions (see the module docstring for why; a test checks it against a numerical
    solve and against any other split)."""
    if capacity <= 0:
        raise ValueError("the cluster needs at least one GPU")
    if not jobs:
        return GavelAllocation((), (), None)
    gangs = [j.gang for j in jobs]
    iso = tuple(float(x) for x in isolated_fractions(gangs, capacity))
    return GavelAllocation(iso, iso, None if sum(gangs) <= capacity else 1.0)
