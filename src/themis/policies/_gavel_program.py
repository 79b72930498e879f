"""Gavel's finish-time-fairness allocation as it ships: on one GPU type one time fraction
per job, plain min-max of Gavel's rho (``solve``); on several, a time fraction per (job,
type) over a throughput matrix (``solve_typed``, documented there).

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
    return solve_gangs([j.gang for j in jobs], capacity)


def solve_gangs(gangs: Sequence[int], capacity: float) -> GavelAllocation:
    """``solve`` for jobs with these gangs: on one GPU type the optimum is the isolated
    split, which depends on the gangs alone (not on waits or remaining work), so a caller
    with many jobs need not build a ``JobLoad`` for each."""
    if capacity <= 0:
        raise ValueError("the cluster needs at least one GPU")
    if not gangs:
        return GavelAllocation((), (), None)
    iso = tuple(isolated_fractions(gangs, capacity).tolist())  # Python floats
    return GavelAllocation(iso, iso, None if sum(gangs) <= capacity else 1.0)


# -- several GPU types -------------------------------------------------------------------------


@dataclass(frozen=True)
class TypedJobLoad:
    """What Gavel's heterogeneity-aware program knows about one job: its wait, its
    remaining iterations, its gang, and its iterations per second holding its gang on each
    GPU type (its row of Gavel's throughput matrix; 0 where the gang cannot run)."""

    elapsed: float  # since the job was submitted (its app's arrival)
    remaining: float  # iterations left (declared)
    gang: int
    speeds: tuple[float, ...]  # one per type, in the capacities' order

    def __post_init__(self) -> None:
        if not (self.remaining > 0 and self.gang > 0 and self.elapsed >= 0):
            raise ValueError(f"a job in Gavel's program needs work and a gang: {self}")
        if any(s < 0 for s in self.speeds) or not any(s > 0 for s in self.speeds):
            raise ValueError(f"a job in Gavel's program must run on some GPU type: {self}")


@dataclass(frozen=True)
class TypedAllocation:
    """``fractions[j][t]``: job ``j``'s time fraction on type ``t`` (Gavel's ``X``);
    ``isolated`` the isolated allocation its rho is measured against; ``level`` the
    min-max rho reached (rounding aside)."""

    fractions: tuple[tuple[float, ...], ...]
    isolated: tuple[tuple[float, ...], ...]
    level: float


#: The heterogeneous optimum is a solver's answer: its fractions are rounded to this many
#: decimals, so that solver noise (1e-12..1e-9) does not decide Gavel's priority ties.
_DECIMALS = 9
#: Dinkelbach steps stop when the step's LP improves the level by less than this.
_TOLERANCE = 1e-9
_MAX_STEPS = 100
#: LPs up to this many variables go to HiGHS's dual simplex, larger ones to its interior
#: point method (with crossover, so still a vertex): 5x faster at 4,000 jobs on two types,
#: slightly slower below ~500 jobs.
_SIMPLEX_VARIABLES = 1000


def isolated_typed(gangs: Sequence[int], capacities: Sequence[float] | np.ndarray) -> np.ndarray:
    """Gavel's isolated allocation on several types: each job's isolated fraction of the
    whole cluster (``isolated_fractions`` over all GPUs) spread over the types in
    proportion to their sizes, i.e. an equal ``1/N`` share of every type (while ``C / N``
    is at most every gang). Gavel's max-min LP with every throughput 1 is indifferent to
    the split across types; this is the symmetric optimum (the centre an interior-point
    solver such as ECOS lands on), and it is feasible: each type's GPUs are used at most
    in proportion to its size."""
    import numpy as np

    caps = np.asarray(capacities, dtype=float)
    total = float(caps.sum())
    iso = isolated_fractions(gangs, total)
    return np.outer(iso, caps / total) if iso.size else np.zeros((0, caps.size))


def typed_rho(job: TypedJobLoad, row: Sequence[float], isolated: Sequence[float]) -> float:
    """Gavel's finish-time fairness of ``job`` with time fractions ``row`` per type."""
    speed = sum(x * s for x, s in zip(row, job.speeds, strict=True))
    if speed <= 0:
        return float("inf")
    alone = sum(x * s for x, s in zip(isolated, job.speeds, strict=True))
    return (job.elapsed + job.remaining / speed) / (job.elapsed + job.remaining / alone)


def solve_typed(jobs: Sequence[TypedJobLoad], capacities: Sequence[float]) -> TypedAllocation:
    """Gavel's heterogeneity-aware finish-time fairness (``FinishTimeFairnessPolicyWithPerf``
    with a throughput matrix): time fractions ``X[j, t]`` with ``sum_t X[j, t] <= 1`` and
    ``sum_j g_j X[j, t] <= C_t`` minimizing ``max_j rho_j``,

        rho_j = (e_j + r_j / s_j(X)) / (e_j + r_j / s_j(X_iso)),  s_j(X) = sum_t X[j, t] v[j, t]

    (``v`` iterations per second on the job's gang on each type). Normalizing each job by
    its isolated speed, ``u_j = s_j(X) / s_j(X_iso)`` and ``rho_j = a_j + b_j / u_j`` with
    ``a_j = e_j / (e_j + R_j)``, ``b_j = R_j / (e_j + R_j)``, ``R_j`` the job's remaining
    seconds at its isolated speed: ``rho_j = (a_j u_j + b_j) / u_j``, a ratio of two affine
    functions of ``X``. The program is a generalized linear-fractional min-max, solved
    exactly (to the LP's tolerance) by the Dinkelbach-type method of Crouzeix, Ferland and
    Schaible (1985): from ``X_0 = X_iso`` (every ``rho_j = 1``), with ``z_k`` the level of
    ``X_k``, one LP per step

        minimize t  s.t.  a_j u_j(X) + b_j - z_k u_j(X) <= t u_j(X_k)  for every j,  X feasible

    gives ``X_{k+1}``; ``z`` decreases strictly and the optimum is reached when ``t = 0``.
    It takes a handful of LPs (HiGHS, ``scipy.optimize.linprog``) where a bisection on
    ``z`` with a feasibility LP per step takes ~30 for the same precision, and it needs no
    bracket. A test checks it against such a bisection and against a fine grid.

    Two types (the common case, e.g. V100 + K80) need no LP: ``_two_types`` bisects on
    ``z`` with an exact O(n) feasibility test (a fractional knapsack), 100x faster at
    thousands of jobs; it puts every job exactly at the level. Tests check it against the
    LP method, the bisection and the grid.

    One type: the exact one-type optimum (``solve``), spread over nothing."""
    import numpy as np

    caps = np.asarray(capacities, dtype=float)
    if caps.size == 0 or (caps <= 0).any():
        raise ValueError("every GPU type needs at least one GPU")
    for job in jobs:
        if len(job.speeds) != caps.size:
            raise ValueError(f"a job needs one speed per GPU type: {job}")
    if not jobs:
        return TypedAllocation((), (), 1.0)
    gangs = np.array([j.gang for j in jobs], dtype=float)
    iso = isolated_typed([j.gang for j in jobs], caps)
    speeds = np.array([j.speeds for j in jobs], dtype=float)
    iso[speeds <= 0] = 0.0  # time on a type the gang cannot use buys nothing
    isolated = _rows(iso)
    if caps.size == 1:
        one = solve([JobLoad(j.elapsed, j.remaining / j.speeds[0], j.gang) for j in jobs], caps[0])
        return TypedAllocation(tuple((x,) for x in one.fractions), isolated, 1.0)
    alone = (iso * speeds).sum(axis=1)
    weights = speeds / alone[:, None]  # u_j(X) = sum_t X[j, t] weights[j, t]
    elapsed = np.array([j.elapsed for j in jobs])
    seconds = np.array([j.remaining for j in jobs]) / alone
    a = elapsed / (elapsed + seconds)
    b = seconds / (elapsed + seconds)
    x = _two_types(a, b, weights, gangs, caps) if caps.size == 2 else None
    if x is None:
        x = _dinkelbach(iso, a, b, weights, gangs, caps)
    x = np.round(np.clip(x, 0.0, 1.0), _DECIMALS)
    fractions = _rows(x)
    u = (x * weights).sum(axis=1)
    return TypedAllocation(fractions, isolated, float(np.max(a + b / u)))


def _dinkelbach(
    iso: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    weights: np.ndarray,
    gangs: np.ndarray,
    caps: np.ndarray,
) -> np.ndarray:
    """The Dinkelbach-type iteration of ``solve_typed`` from the isolated split."""
    import numpy as np

    x = iso
    level = 1.0
    for _ in range(_MAX_STEPS):
        step = _dinkelbach_step(x, level, a, b, weights, gangs, caps)
        if step is None:
            break
        u = (step * weights).sum(axis=1)
        new = float(np.max(a + b / u)) if (u > 0).all() else float("inf")
        if not new < level - _TOLERANCE:
            break
        x, level = step, new
    return x


def _two_types(
    a: np.ndarray, b: np.ndarray, weights: np.ndarray, gangs: np.ndarray, caps: np.ndarray
) -> np.ndarray | None:
    """The min-max on exactly two types without an LP: a bisection on the level ``z``
    whose feasibility test is exact and O(n).

    At level ``z`` job ``j`` needs ``u_j >= n_j = b_j / (z - a_j)``. Using more than its
    need only costs GPUs, so each job may sit on its need line ``w1 x1 + w2 x2 = n_j``,
    a segment ``x1 in [lo_j, hi_j]`` once ``x >= 0`` and ``x1 + x2 <= 1`` are imposed
    (empty when ``n_j > max(w1, w2)``). Along it, each unit of type-0 GPU-time saves
    ``rho_j = w1 / w2`` units of type-1 GPU-time, so the least type-1 use under the type-0
    capacity is a fractional knapsack: every job at ``lo_j``, then the type-0 GPUs left to
    the jobs of highest ``rho_j`` first, up to ``hi_j``. The level is feasible if and only if
    the type-1 GPUs that leaves suffice. The answer puts every job exactly at the level.
    None when the numbers do not allow it (the LP method then runs)."""
    import numpy as np

    w1, w2 = weights[:, 0], weights[:, 1]
    ratio = np.where(w2 > 0, w1 / np.where(w2 > 0, w2, 1.0), np.inf)
    order = np.argsort(-ratio, kind="stable")  # highest gain from type 0 first
    finite = np.isfinite(ratio)

    def allocate(z: float) -> tuple[bool, np.ndarray]:
        need = b / (z - a)
        with np.errstate(divide="ignore", invalid="ignore"):
            low = np.zeros_like(need)
            high = np.where(w1 > 0, need / np.where(w1 > 0, w1, 1.0), 0.0)
            faster = w1 > w2
            slower = w1 < w2
            low = np.where(faster & (w2 > 0), (need - w2) / (w1 - w2), low)
            high = np.where(slower, np.minimum(high, (w2 - need) / (w2 - w1)), high)
            low = np.where(w2 <= 0, high, np.maximum(low, 0.0))
        ok = bool((need <= np.maximum(w1, w2) * (1 + 1e-12)).all())
        high = np.maximum(high, low)
        x1 = low.copy()
        budget = caps[0] - float(gangs @ low)
        room = (gangs * (high - low))[order]
        room[~finite[order]] = 0.0  # (those sit at lo = hi already)
        before = np.cumsum(room) - room
        taken = np.clip(budget - before, 0.0, room)
        x1[order] += taken / gangs[order]
        x2 = np.where(w2 > 0, (need - w1 * x1) / np.where(w2 > 0, w2, 1.0), 0.0)
        x2 = np.maximum(x2, 0.0)
        ok = ok and budget >= -1e-12 * caps[0] and float(gangs @ x2) <= caps[1] * (1 + 1e-12)
        return ok, np.stack([x1, x2], axis=1)

    hi = 1.0
    feasible, x = allocate(hi)
    if not feasible:
        return None
    lo = float(np.max(a))
    for _ in range(200):
        mid = (lo + hi) / 2
        if not lo < mid < hi:
            break
        good, candidate = allocate(mid)
        if good:
            hi, x = mid, candidate
        else:
            lo = mid
    return x


def _dinkelbach_step(
    x: np.ndarray,
    level: float,
    a: np.ndarray,
    b: np.ndarray,
    weights: np.ndarray,
    gangs: np.ndarray,
    caps: np.ndarray,
) -> np.ndarray | None:
    """One LP of the Dinkelbach-type method (see ``solve_typed``): the allocation that
    minimizes ``max_j (rho_j(X) - level) u_j(X) / u_j(x)``, or None when it does not
    improve on ``x`` (the LP's optimum ``t`` is 0 up to its tolerance) or fails."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, hstack, vstack

    n, k = weights.shape
    m = (x * weights).sum(axis=1)  # u_j at the current point, > 0
    rows = np.repeat(np.arange(n), k)
    cols = np.arange(n * k)
    # (a_j - level) u_j(X) - m_j t <= -b_j
    ratio = csr_matrix((((a - level)[:, None] * weights).ravel(), (rows, cols)), shape=(n, n * k))
    fair = hstack([ratio, csr_matrix(-m[:, None])])
    # sum_t X[j, t] <= 1
    ones = csr_matrix((np.ones(n * k), (rows, cols)), shape=(n, n * k))
    time = hstack([ones, csr_matrix((n, 1))])
    # sum_j g_j X[j, t] <= C_t
    type_rows = np.tile(np.arange(k), n)
    cap = hstack(
        [
            csr_matrix((np.repeat(gangs, k), (type_rows, cols)), shape=(k, n * k)),
            csr_matrix((k, 1)),
        ]
    )
    cost = np.zeros(n * k + 1)
    cost[-1] = 1.0
    upper = np.where(weights.ravel() > 0, 1.0, 0.0)
    bounds = [(0.0, float(hi)) for hi in upper] + [(None, None)]
    result = linprog(
        cost,
        A_ub=vstack([fair, time, cap]).tocsr(),
        b_ub=np.concatenate([-b, np.ones(n), caps]),
        bounds=bounds,
        method="highs-ds" if n * k <= _SIMPLEX_VARIABLES else "highs-ipm",
    )
    if result.status != 0 or result.fun > -_TOLERANCE:
        return None
    return np.asarray(result.x[:-1]).reshape(n, k)


def _rows(x: np.ndarray) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in x)
