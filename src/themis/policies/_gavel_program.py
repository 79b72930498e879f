"""Gavel's allocations as they ship: finish-time fairness (``solve_ftf``; ``solve_typed`` on
several GPU types) and, kept as a second baseline, max-min fairness (``solve_gangs``).

Followed (stanford-futuredata/gavel at commit c4fa400): ``scheduler/policies/
finish_time_fairness.py`` (``FinishTimeFairnessPolicyWithPerf.get_allocation``),
``scheduler/policies/isolated.py`` (``IsolatedPolicy``), ``scheduler/policies/
max_min_fairness.py`` (``MaxMinFairnessPolicy``, ``MaxMinFairnessPolicyWithPerf``) and
``scheduler/policies/proportional.py``; the constraints are ``Policy.get_base_constraints``
in ``scheduler/policies/policy.py``.

**Finish-time fairness.** Job ``j`` (a gang of ``g_j`` GPUs) holds its gang a fraction
``x_j`` of the time. With ``e_j`` the time since it was submitted, ``R_j`` its remaining
seconds holding its gang (remaining steps / throughput), ``x_iso_j`` its isolated share and
``c_j`` its *cumulative isolated time* (Gavel's ``_cumulative_isolated_time``: at every
solve, the steps it ran since the previous solve over its isolated throughput of that
solve, summed over solves: what the work it has done would have taken on its isolated
share), Gavel minimizes the largest

    rho_j = (e_j + R_j / x_j) / (c_j + R_j / x_iso_j)
    subject to  0 <= x_j <= 1,   sum_j g_j x_j <= C.

The denominator is the fix of Gavel's commit 645a8f1 (2020-04-04, "Fix bug in
finish-time-fairness policy (#138)"); before it the denominator held ``e_j`` too, which makes
the optimum the isolated split whatever the jobs waited (that program is max-min, below).
A job that waits gets ``rho > 1`` and a growing share.

The isolated share is Gavel's ``IsolatedPolicy``: the cluster split evenly over the ``m``
jobs, ``x_iso_j = min(1, C / (m g_j))`` (not a water-filling: a job whose gang is smaller
than ``C / m`` leaves the rest of its share unused).

The optimum (``solve_ftf``): ``rho_j <= z`` needs ``x_j >= R_j / (z D_j - e_j)`` with
``D_j = c_j + R_j / x_iso_j``, and ``x_j <= 1`` caps it, so job ``j`` cannot get below
``z1_j = (e_j + R_j) / D_j`` (its rho holding its gang all the time). The min-max level is the
larger of ``max_j z1_j`` and the level where the needs fill the cluster. When a job that
waited long sets the level (``max_j z1_j``, the usual case under load) the optimum is not
unique: the other jobs may take anything between their need and 1 that fits. Gavel hands
that choice to ECOS (an interior point: somewhere inside the optimal face, and with
"optimal_inaccurate" answers on large instances). We take the **leximin** optimum, by one
water level ``L``: every job gets ``x_j(L) = min(1, R_j / (L D_j - e_j))`` (1 when
``L <= z1_j``), ``L`` the level where ``sum_j g_j x_j(L) = C`` (every job 1 when all
fit). It is a min-max optimum (the level is the min-max one or below it for every job),
minimizes the second-worst rho among those, and so on; deterministic, and each job's share
depends only on its own ``e, c, R, g`` and the level, so equal jobs tie exactly.

**Max-min fairness** (``solve_gangs``, the policy ``gavel-mmf``). ``MaxMinFairnessPolicy``
sets every throughput to 1 and weights each job by its proportional throughput (1 on one
type), so it maximizes ``min_j g_j x_j`` under the same constraints. When ``C / N`` is at
most the smallest gang the optimum is unique (every job ``C / N`` GPUs on average);
otherwise we take the water-filling optimum (each job ``min(g_j, L)`` GPUs, ``L`` filling
the cluster). It is also the optimum of the finish-time-fairness program *before* Gavel's
fix (``solve``, ``rho``: ``e_j`` in both numerator and denominator; ``rho_j <= 1`` exactly when
``x_j`` reaches the water-filling share), which is how this port first read Gavel: run
against Gavel's max-min simulator it matches job for job (tests/policies/
test_gavel_anchor.py).
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
    """The rho of Gavel's finish-time fairness *before* its fix (``e_j`` in the
    denominator too) of ``job`` holding its gang ``fraction`` of the time."""
    if fraction <= 0:
        return float("inf")
    return (job.elapsed + job.remaining / fraction) / (job.elapsed + job.remaining / isolated)


def solve(jobs: Sequence[JobLoad], capacity: float) -> GavelAllocation:
    """The min-max of the pre-fix ``rho`` over per-job time fractions: exactly the
    water-filling fractions, Gavel's max-min (see the module docstring; a test checks it
    against a numerical solve and against any other split)."""
    return solve_gangs([j.gang for j in jobs], capacity)


def solve_gangs(gangs: Sequence[int], capacity: float) -> GavelAllocation:
    """Gavel's max-min allocation on one GPU type for jobs with these gangs (``solve``'s
    answer): the water-filling split, which depends on the gangs alone (not on waits or
    remaining work), so a caller with many jobs need not build a ``JobLoad`` for each."""
    if capacity <= 0:
        raise ValueError("the cluster needs at least one GPU")
    if not gangs:
        return GavelAllocation((), (), None)
    iso = tuple(isolated_fractions(gangs, capacity).tolist())  # Python floats
    return GavelAllocation(iso, iso, None if sum(gangs) <= capacity else 1.0)


# -- finish-time fairness as Gavel ships it (one GPU type) -----------------------------------


@dataclass(frozen=True)
class FtfJob:
    """What Gavel's finish-time-fairness program knows about one job, in seconds."""

    elapsed: float  # since the job was submitted (Gavel's ``times_since_start``)
    isolated_done: float  # cumulative isolated time of the work done (``c_j``)
    remaining: float  # seconds to finish holding its gang all the time
    gang: int

    def __post_init__(self) -> None:
        if not (self.remaining > 0 and self.gang > 0):
            raise ValueError(f"a job in Gavel's program needs work and a gang: {self}")
        if not (self.elapsed >= 0 and self.isolated_done >= 0):
            raise ValueError(f"a job's times in Gavel's program are >= 0: {self}")


def gavel_isolated(gangs: Sequence[int], capacity: float) -> np.ndarray:
    """Gavel's ``IsolatedPolicy`` on one type: ``min(1, C / (m g_j))`` for each of the ``m``
    jobs (``C / m`` GPUs each, capped at the job's gang)."""
    import numpy as np

    g = np.asarray(gangs, dtype=float)
    if g.size == 0:
        return g
    return np.minimum(1.0, capacity / (g.size * g))


def ftf_rho(job: FtfJob, fraction: float, isolated: float) -> float:
    """Gavel's finish-time fairness of ``job`` holding its gang ``fraction`` of the time,
    against its isolated share ``isolated``."""
    if fraction <= 0:
        return float("inf")
    return (job.elapsed + job.remaining / fraction) / (job.isolated_done + job.remaining / isolated)


def solve_ftf(jobs: Sequence[FtfJob], capacity: float) -> GavelAllocation:
    """The leximin optimum of Gavel's finish-time-fairness min-max on one GPU type (see the
    module docstring): one water level ``L``, each job ``min(1, R_j / (L D_j - e_j))``,
    ``L`` found by bisection to the last float where the shares fit the cluster."""
    import numpy as np

    if capacity <= 0:
        raise ValueError("the cluster needs at least one GPU")
    if not jobs:
        return GavelAllocation((), (), None)
    g = np.array([j.gang for j in jobs], dtype=float)
    iso = gavel_isolated([j.gang for j in jobs], capacity)
    e = np.array([j.elapsed for j in jobs])
    r = np.array([j.remaining for j in jobs])
    d = np.array([j.isolated_done for j in jobs]) + r / iso
    alone = (e + r) / d  # each job's rho holding its gang all the time
    isolated = tuple(iso.tolist())
    if g.sum() <= capacity:
        return GavelAllocation(tuple(np.ones_like(g).tolist()), isolated, float(alone.max()))

    def shares(level: float) -> np.ndarray:
        with np.errstate(divide="ignore"):
            x = r / (level * d - e)
        return np.where(level > alone, np.minimum(x, 1.0), 1.0)

    lo = float(alone.min())  # every job at 1: does not fit
    hi = float(alone.max()) * 2.0 + 1.0
    while float(g @ shares(hi)) > capacity:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if not lo < mid < hi:
            break
        if float(g @ shares(mid)) > capacity:
            lo = mid
        else:
            hi = mid
    x = shares(hi)
    return GavelAllocation(tuple(x.tolist()), isolated, max(hi, float(alone.max())))


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
    isolated_done: float = 0.0  # cumulative isolated time of the work done (seconds)

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


def gavel_isolated_typed(
    gangs: Sequence[int], capacities: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Gavel's ``IsolatedPolicy`` on several types: ``X[j, t] = C_t / (m g_j)``, each row
    divided by its sum when that is above 1, i.e. ``min(1, C / (m g_j)) * C_t / C``."""
    import numpy as np

    caps = np.asarray(capacities, dtype=float)
    total = float(caps.sum())
    iso = gavel_isolated(gangs, total)
    return np.outer(iso, caps / total) if iso.size else np.zeros((0, caps.size))


def isolated_typed(gangs: Sequence[int], capacities: Sequence[float] | np.ndarray) -> np.ndarray:
    """Gavel's max-min allocation on several types (``gavel-mmf``): ``MaxMinFairnessPolicy``
    sets every throughput to 1, so it is each job's max-min fraction of the whole cluster
    (``isolated_fractions`` over all GPUs), and indifferent to the split across types; we
    spread it over the types in proportion to their sizes, i.e. an equal ``1/N`` share of
    every type (while ``C / N`` is at most every gang): the symmetric optimum (the centre an
    interior-point solver such as ECOS lands on), feasible since each type's GPUs are used
    at most in proportion to its size."""
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
    return (job.elapsed + job.remaining / speed) / (job.isolated_done + job.remaining / alone)


def solve_typed(jobs: Sequence[TypedJobLoad], capacities: Sequence[float]) -> TypedAllocation:
    """Gavel's heterogeneity-aware finish-time fairness (``FinishTimeFairnessPolicyWithPerf``
    with a throughput matrix): time fractions ``X[j, t]`` with ``sum_t X[j, t] <= 1`` and
    ``sum_j g_j X[j, t] <= C_t`` minimizing ``max_j rho_j``,

        rho_j = (e_j + r_j / s_j(X)) / (c_j + r_j / s_j(X_iso)),  s_j(X) = sum_t X[j, t] v[j, t]

    (``v`` iterations per second on the job's gang on each type, ``c_j`` its cumulative
    isolated time, ``X_iso`` Gavel's isolated split, ``gavel_isolated_typed``). Normalizing
    each job by its isolated speed, ``u_j = s_j(X) / s_j(X_iso)`` and ``rho_j = a_j + b_j /
    u_j`` with ``a_j = e_j / (c_j + R_j)``, ``b_j = R_j / (c_j + R_j)``, ``R_j`` the job's
    remaining seconds at its isolated speed: ``rho_j = (a_j u_j + b_j) / u_j``, a ratio of
    two affine functions of ``X``. The program is a generalized linear-fractional min-max, solved
    exactly (to the LP's tolerance) by the Dinkelbach-type method of Crouzeix, Ferland and
    Schaible (1985): from ``X_0 = X_iso`` (every ``rho_j = 1``), with ``z_k`` the level of
    ``X_k``, one LP per step

        minimize t  s.t.  a_j u_j(X) + b_j - z_k u_j(X) <= t u_j(X_k)  for every j,  X feasible

    gives ``X_{k+1}``; ``z`` decreases strictly and the optimum is reached when ``t = 0``
    (``X_0`` has level ``max_j (a_j + b_j)``: 1 only when no job has waited more than its
    work done would have taken on its isolated share).
    It takes a handful of LPs (HiGHS, ``scipy.optimize.linprog``) where a bisection on
    ``z`` with a feasibility LP per step takes ~30 for the same precision, and it needs no
    bracket. A test checks it against such a bisection and against a fine grid.

    Two types (the common case, e.g. V100 + K80) need no LP: ``_two_types`` bisects on
    ``z`` with an exact O(n) feasibility test (a fractional knapsack), 100x faster at
    thousands of jobs. Among the optima it takes the one-level leximin of ``solve_ftf``:
    every job at the level, or at its best speed (``u_j = max_t w_j,t``) when even that
    leaves it above the level. Tests check it against the LP method, the bisection and the
    grid.

    One type: ``solve_ftf``, spread over nothing."""
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
    iso = gavel_isolated_typed([j.gang for j in jobs], caps)
    speeds = np.array([j.speeds for j in jobs], dtype=float)
    iso[speeds <= 0] = 0.0  # time on a type the gang cannot use buys nothing
    isolated = _rows(iso)
    if caps.size == 1:
        loads = [
            FtfJob(j.elapsed, j.isolated_done, j.remaining / j.speeds[0], j.gang) for j in jobs
        ]
        one = solve_ftf(loads, caps[0])
        level = 1.0 if one.level is None else one.level
        return TypedAllocation(tuple((x,) for x in one.fractions), isolated, level)
    alone = (iso * speeds).sum(axis=1)
    weights = speeds / alone[:, None]  # u_j(X) = sum_t X[j, t] weights[j, t]
    elapsed = np.array([j.elapsed for j in jobs])
    done = np.array([j.isolated_done for j in jobs])
    seconds = np.array([j.remaining for j in jobs]) / alone
    a = elapsed / (done + seconds)
    b = seconds / (done + seconds)
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
    level = float(np.max(a + b))  # every u_j = 1 at the isolated split
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
    (empty when ``n_j > max(w1, w2)``; a job that cannot reach the level at all is given
    its best, ``n_j = max(w1, w2)``, the leximin choice). Along it, each unit of type-0
    GPU-time saves ``rho_j = w1 / w2`` units of type-1 GPU-time, so the least type-1 use
    under the type-0 capacity is a fractional knapsack: every job at ``lo_j``, then the
    type-0 GPUs left to the jobs of highest ``rho_j`` first, up to ``hi_j``. The level is
    feasible if and only if the type-1 GPUs that leaves suffice. The answer puts every job
    exactly at the level (or at its best).
    None when the numbers do not allow it (the LP method then runs)."""
    import numpy as np

    w1, w2 = weights[:, 0], weights[:, 1]
    ratio = np.where(w2 > 0, w1 / np.where(w2 > 0, w2, 1.0), np.inf)
    order = np.argsort(-ratio, kind="stable")  # highest gain from type 0 first
    finite = np.isfinite(ratio)

    best = np.maximum(w1, w2)

    def allocate(z: float) -> tuple[bool, np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(z > a, np.minimum(b / (z - a), best), best)
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
        # bool(): a comparison with numpy's caps is a numpy bool, which the compiled core
        # refuses where the annotation says bool; its truth is the same.
        ok = (
            ok
            and bool(budget >= -1e-12 * caps[0])
            and bool(float(gangs @ x2) <= caps[1] * (1 + 1e-12))
        )
        return ok, np.stack([x1, x2], axis=1)

    hi = float(np.max(a + b))  # the isolated split's level: every u_j = 1 is feasible
    feasible, x = allocate(hi)
    if not feasible:
        return None
    lo = float(np.min(a))
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
