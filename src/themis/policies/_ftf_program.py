"""Gavel's finish-time-fairness program with Themis's rho: min-max rho over time shares.

An app's *time share* ``x`` is the number of GPUs it holds on average from now on (a real
number: 2.5 means 2 GPUs half of the time and 3 the other half). Its projected rho with
share ``x`` is Themis's own (``themis.fairness.ftf``), every job at its best placement as in
``T_cluster``:

    rho(x) = (elapsed + max(work / min(x, cap), longest)) / (T_cluster * N_avg)

``work`` is the app's remaining GPU-seconds, ``longest`` its longest job's remaining time
on its gang, ``cap`` the GPUs it can use at once. The program, over all active apps and a
cluster of ``C`` GPUs, is

    minimize max_a rho_a(x_a)   subject to   0 <= x_a <= cap_a,   sum_a x_a <= C

and, among its optima, the lexicographic one (minimize the worst rho, then the next worst,
and so on: max-min water-filling applied to rho).

Stage 1 solves it exactly. ``rho_a`` is decreasing and convex in ``x_a`` up to the app's
*saturation* ``min(cap, work / longest)``, where its rho reaches its *floor*: more GPUs
cannot shorten its longest job. Reaching ``rho <= t`` needs ``need_a(t) = work_a /
(t * ideal_a - elapsed_a)`` GPUs (its saturation when ``t`` is below its floor), and
``sum_a need_a(t)`` is continuous and non-increasing in ``t``: the optimum is the water
level ``t*`` where that sum meets ``C``, found by Brent's method to machine precision.
Apps whose floor is above ``t*`` saturate; every other app sits at exactly ``t*``. The
constraint ``x * (t * ideal - elapsed) >= work`` is not linear in ``(x, t)``, so an LP can
only approximate this stage (a piecewise-linear epigraph); the root is exact and cheaper.

Stage 2 is a linear program solved with HiGHS (``scipy.optimize.linprog``): with every
app's rho held at its stage-1 level (``x_a >= x*_a``), give the GPUs still unclaimed to
apps that can run more jobs at once (``x_a <= cap_a``) so that no GPU idles in the plan,
the worst rho first. It has work to do only when every app is saturated (the cluster can
give everybody all it needs to finish as early as possible) and the apps' caps do not all
fit; otherwise its optimum is forced (stage 1's shares when they already fill the cluster,
every cap when all caps fit) and is returned without calling the solver.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from themis.model.cluster import SetShape
from themis.model.profiles import ModelProfile
from themis.model.state import GangWork

#: Shares this close (GPUs) count as equal: below any gang, far above float noise.
SHARE_TOL = 1e-9


@dataclass(frozen=True)
class AppLoad:
    """What the program knows about one app, in seconds and GPUs.

    ``ideal`` is ``T_id``, the denominator of rho (``T_cluster * N_avg``, or the private
    slice's time: ``--ideal-time``, ``fairness/ideal.py``). ``work`` is
    remaining GPU-seconds and ``longest`` the longest job's remaining seconds on its gang,
    both with every job at its best placement on the cluster (placement-unaware, as Gavel's
    throughput model and Themis's ``T_cluster``).
    """

    elapsed: float
    ideal: float
    work: float
    longest: float
    cap: float

    def __post_init__(self) -> None:
        if not (self.work > 0 and self.longest > 0 and self.cap > 0 and self.ideal > 0):
            raise ValueError(f"an app in the program needs work, a gang and T_id > 0: {self}")

    def remaining_time(self, share: float) -> float:
        """Seconds to finish holding ``share`` GPUs on average (inf with none)."""
        if share <= 0:
            return math.inf
        return max(self.work / min(share, self.cap), self.longest)

    def rho(self, share: float) -> float:
        return (self.elapsed + self.remaining_time(share)) / self.ideal

    @property
    def saturation(self) -> float:
        """The smallest share at which the app's rho reaches its floor."""
        return min(self.cap, self.work / self.longest)

    @property
    def floor(self) -> float:
        """The lowest rho any share can give it."""
        return self.rho(self.saturation)

    def need(self, level: float) -> float:
        """The smallest share that keeps its rho <= ``level``; its saturation when no share
        can (``level`` below its floor)."""
        budget = level * self.ideal - self.elapsed  # seconds left to finish at that rho
        if budget <= 0:
            return self.saturation
        return min(self.saturation, self.work / budget)


def app_load(
    profile: ModelProfile,
    remaining: dict[int, GangWork],
    cluster_shape: SetShape,
    elapsed: float,
    ideal: float,
) -> AppLoad | None:
    """The program's view of an app (None when nothing is left to run).

    The same sums as ``estimate_time`` on the whole cluster, kept apart: at ``x = cap``,
    ``AppLoad.remaining_time`` is exactly ``estimate_time(profile, remaining, cluster_shape)``.
    """
    tpi = profile.time_per_iteration
    work = 0.0
    longest = 0.0
    demand = 0
    for gang, (total, most, jobs) in remaining.items():
        if total <= 0:
            continue
        factor = profile.best_factor_on(gang, cluster_shape)
        if factor == 0.0:
            raise ValueError(f"a gang of {gang} does not fit a cluster of {cluster_shape}")
        demand += gang * jobs
        work += total * tpi / factor
        longest = max(longest, most * tpi / (gang * factor))
    if work <= 0:
        return None
    return AppLoad(elapsed, ideal, work, longest, float(min(demand, cluster_shape.count)))


@dataclass(frozen=True)
class FtfAllocation:
    """The program's answer: each app's share (GPUs) and projected rho, in input order.

    ``water_level`` is stage 1's ``t*`` (None when every app saturated within capacity);
    ``max_rho`` is the optimum of the min-max program.
    """

    shares: tuple[float, ...]
    rhos: tuple[float, ...]
    water_level: float | None

    @property
    def max_rho(self) -> float:
        return max(self.rhos, default=0.0)


def solve(loads: Sequence[AppLoad], capacity: float) -> FtfAllocation:
    """Both stages: the lexicographic min-max rho shares, then the unclaimed GPUs."""
    if capacity <= 0:
        raise ValueError("the cluster needs at least one GPU")
    if not loads:
        return FtfAllocation((), (), None)
    level = water_level(loads, capacity)
    if level is None:
        shares = [load.saturation for load in loads]
    else:
        shares = [load.need(level) for load in loads]
        total = sum(shares)
        if total > capacity:  # the root is exact to ~1e-15: never hand out more than C
            shares = [s * capacity / total for s in shares]
    shares = spread_unclaimed(loads, shares, capacity)
    return FtfAllocation(
        tuple(shares), tuple(ld.rho(s) for ld, s in zip(loads, shares, strict=True)), level
    )


def water_level(loads: Sequence[AppLoad], capacity: float) -> float | None:
    """Stage 1: the rho ``t*`` at which the apps' needs fill ``capacity`` exactly, or None
    when every app can have its saturation at once (then each sits at its floor).

    Vectorized over apps: a simulation solves this thousands of times.
    """
    import numpy as np  # here, not at import: the CLI starts without numpy and scipy
    from scipy.optimize import brentq

    work = np.array([ld.work for ld in loads])
    ideal = np.array([ld.ideal for ld in loads])
    elapsed = np.array([ld.elapsed for ld in loads])
    saturation = np.array([ld.saturation for ld in loads])
    if saturation.sum() <= capacity:
        return None
    # rho at saturation: work / saturation = max(work / cap, longest).
    floors = (elapsed + work / saturation) / ideal
    lo = float(floors.min())  # every need is its saturation here: the sum exceeds capacity
    # At hi every need is <= capacity / n, so the sum is <= capacity.
    hi = max(float(((elapsed + len(loads) * work / capacity) / ideal).max()), lo)

    def excess(level: float) -> float:
        budget = level * ideal - elapsed
        positive = budget > 0
        need = saturation.copy()
        need[positive] = np.minimum(saturation[positive], work[positive] / budget[positive])
        return float(need.sum()) - capacity

    if excess(hi) >= 0:  # only when hi == lo up to rounding: the level is that floor
        return hi
    return float(brentq(excess, lo, hi, xtol=1e-14 * max(1.0, hi), rtol=4 * np.finfo(float).eps))


def spread_unclaimed(
    loads: Sequence[AppLoad], shares: Sequence[float], capacity: float
) -> list[float]:
    """Stage 2 (HiGHS): raise shares toward each app's cap with the GPUs stage 1 left
    unclaimed, worst rho first, never lowering a share (so no rho gets worse).

    maximize sum_a w_a x_a  s.t.  shares_a <= x_a <= cap_a,  sum_a x_a <= capacity,

    with weights ``1 < w_a < 2`` strictly decreasing in the apps' stage-1 rho order (ties:
    input order, i.e. arrival): every weight is positive, so the optimum uses
    ``min(capacity, sum cap)`` GPUs, and the order makes the worst-off app's jobs the ones
    that run alongside when there is more room than anybody needs.
    """
    import numpy as np
    from scipy.optimize import linprog

    base = [float(s) for s in shares]
    unclaimed = capacity - sum(base)
    room = [ld.cap - s for ld, s in zip(loads, base, strict=True)]
    if unclaimed <= SHARE_TOL or max(room, default=0.0) <= SHARE_TOL:
        return base
    if sum(room) <= unclaimed:  # room for every cap: the LP's only optimum, no solve needed
        return [max(s, ld.cap) for ld, s in zip(loads, base, strict=True)]
    n = len(loads)
    order = sorted(range(n), key=lambda i: (-loads[i].rho(base[i]), i))
    weights = np.empty(n)
    for rank, i in enumerate(order):
        weights[i] = 1.0 + (n - rank) / (n + 1)
    result = linprog(
        -weights,
        A_ub=np.ones((1, n)),
        b_ub=[capacity],
        bounds=[(s, max(s, ld.cap)) for ld, s in zip(loads, base, strict=True)],
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"HiGHS failed on a feasible allocation LP: {result.message}")
    # Clip solver noise back into the bounds the LP was given.
    return [
        min(max(float(x), s), max(s, ld.cap))
        for x, s, ld in zip(result.x, base, loads, strict=True)
    ]
