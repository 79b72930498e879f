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

Gavel solves the program with cvxpy (ECOS), as a convex program: ``1 / x`` is not linear,
so it is not an LP. Here it is solved exactly as the water level of
``_ftf_program.water_level`` (each job a load with ``cap = g_j``, ``work = g_j r_j``,
``longest = r_j``, ``ideal = e_j + r_j / x_iso_j``); there is no second stage: the plain
min-max, not the lexicographic optimum ``ftf-oracle`` takes. On one GPU type the answer is
the isolated allocation itself (``rho_j <= 1`` if and only if ``x_j >= x_iso_j``, and the
isolated shares already fill the cluster): Gavel's finish-time fairness then gives every
job the same share of GPU-time, whatever its remaining work or its wait. A test checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from themis.policies._ftf_program import AppLoad, water_level


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
    """Time fractions (0..1) per job, in input order; ``level`` is the min-max rho (None:
    every job fits at once and holds its gang all the time)."""

    fractions: tuple[float, ...]
    isolated: tuple[float, ...]
    level: float | None


def isolated_fractions(gangs: Sequence[int], capacity: float) -> np.ndarray:
    """Each job's time fraction on an isolated 1/N share: water-filling of ``capacity``
    GPUs over the jobs, each capped at its gang; a fraction is its GPUs over its gang."""
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
    """The min-max of Gavel's rho over per-job time fractions (see the module docstring)."""
    if capacity <= 0:
        raise ValueError("the cluster needs at least one GPU")
    if not jobs:
        return GavelAllocation((), (), None)
    iso = isolated_fractions([j.gang for j in jobs], capacity)
    loads = [
        AppLoad(
            j.elapsed,
            j.elapsed + j.remaining / float(x),
            j.gang * j.remaining,
            j.remaining,
            float(j.gang),
        )
        for j, x in zip(jobs, iso, strict=True)
    ]
    level = water_level(loads, capacity)
    if level is None:
        fractions = [1.0] * len(jobs)
    else:
        shares = [load.need(level) for load in loads]
        total = sum(shares)
        if total > capacity:  # the root is exact to ~1e-15: never hand out more than C
            shares = [s * capacity / total for s in shares]
        fractions = [min(1.0, s / j.gang) for s, j in zip(shares, jobs, strict=True)]
    return GavelAllocation(tuple(fractions), tuple(float(x) for x in iso), level)
