"""The proportional-fair choice: pick at most one menu entry per app, the entries
pairwise disjoint, to maximise sum_i log v_i with v_i = 1 / rho_i.

Working in *gains* over winning nothing (``log rho_none - log rho_entry``) makes "nothing"
worth 0, so the problem is a weighted set packing with one-per-app constraints. Two exact
solvers: a depth-first branch and bound over bitmasks, which is fastest on the small
auctions that most rounds hold, and scipy's HiGHS MILP, used when branch and bound would
explore too many nodes. Both return a provably optimal objective; brute force lives in the
tests only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

#: Objective values within this distance are treated as equal (log-utility units).
TOLERANCE = 1e-9

#: HiGHS stops at solutions within about 1e-6 of the optimum in its own objective units
#: (its absolute MIP tolerances; ``mip_rel_gap=0`` does not remove this), so unscaled it can
#: return a choice up to ~1e-6 log-utility short of the optimum on near-ties. Scaling the
#: gains by 1e4 shrinks that to ~1e-10 < TOLERANCE; gains are at most a few tens, so the
#: scaled costs stay far from any magnitude HiGHS would have trouble with.
_HIGHS_COST_SCALE = 1e4


@dataclass(frozen=True)
class Candidate:
    """One usable menu entry of one bidder, in solver form."""

    bidder: int
    entry: int  # index into the bidder's menu
    gain: float
    mask: int  # bitmask of GPUs


@dataclass(frozen=True)
class Solution:
    objective: float
    chosen: dict[int, Candidate]  # bidder -> candidate


def solve(
    candidates: list[list[Candidate]],
    exclude: int | None = None,
    node_limit: int = 20_000,
    incumbent: Solution | None = None,
) -> Solution:
    """Maximise total gain; ``candidates[i]`` is bidder i's entries (gain > 0 only).

    ``incumbent`` is a feasible solution known in advance (for the re-solve without
    bidder i, the optimum with i minus i's entry): starting from it lets branch and bound
    prune at once everything that cannot beat it.
    """
    bidders = [i for i, c in enumerate(candidates) if c and i != exclude]
    if not bidders:
        return Solution(0.0, {})
    result = _branch_and_bound([candidates[i] for i in bidders], node_limit, incumbent)
    if result is None:
        return _milp([candidates[i] for i in bidders])
    return result


def _branch_and_bound(
    groups: list[list[Candidate]], node_limit: int, incumbent: Solution | None = None
) -> Solution | None:
    """Depth-first over bidders, best entries first, pruned by a capacity bound.

    The bound relaxes "disjoint GPUs" to "at most C GPUs in total" (C = GPUs in the pool):
    ``cap[i][c]``, the best gain bidders i.. can reach with c GPUs, is a small knapsack
    table computed once. Bidders mostly compete for the same pool, so counting GPUs is
    what makes most branches hopeless early.
    """
    groups = sorted(
        (sorted(g, key=lambda c: -c.gain) for g in groups),
        key=lambda g: -g[0].gain,
    )
    n = len(groups)
    pool = 0
    for g in groups:
        for c in g:
            pool |= c.mask
    capacity = pool.bit_count()
    sizes = [[c.mask.bit_count() for c in g] for g in groups]
    cap = [np.zeros(capacity + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row = cap[i + 1].copy()
        nxt = cap[i + 1]
        for c, size in zip(groups[i], sizes[i], strict=True):
            np.maximum(row[size:], c.gain + nxt[: capacity + 1 - size], out=row[size:])
        cap[i] = row
    bound = [row.tolist() for row in cap]
    best_value = -1.0
    best_pick: list[Candidate] = []
    if incumbent is not None:
        best_value = incumbent.objective
        best_pick = list(incumbent.chosen.values())
    pick: list[Candidate] = []
    nodes = 0

    def dfs(i: int, used: int, free: int, value: float) -> bool:
        nonlocal best_value, best_pick, nodes
        nodes += 1
        if nodes > node_limit:
            return False
        if value > best_value + TOLERANCE:
            best_value = value
            best_pick = list(pick)
        if i == n or value + bound[i][free] <= best_value + TOLERANCE:
            return True
        after = bound[i + 1]
        # Most promising first: an entry's gain plus the best the others can still add
        # with the GPUs it leaves. A good incumbent early is what makes the bound bite.
        options = sorted(
            (
                (cand.gain + after[free - size], cand, size)
                for cand, size in zip(groups[i], sizes[i], strict=True)
                if size <= free and not cand.mask & used
            ),
            key=lambda o: -o[0],
        )
        for promise, cand, size in options:
            if value + promise <= best_value + TOLERANCE:
                break
            pick.append(cand)
            ok = dfs(i + 1, used | cand.mask, free - size, value + cand.gain)
            pick.pop()
            if not ok:
                return False
        return dfs(i + 1, used, free, value)

    if not dfs(0, 0, capacity, 0.0):
        return None
    return Solution(max(best_value, 0.0), {c.bidder: c for c in best_pick})


def _milp(groups: list[list[Candidate]]) -> Solution:
    flat = [c for g in groups for c in g]
    gains = np.array([c.gain for c in flat])
    rows: list[int] = []  # one-entry-per-bidder rows, then one row per GPU
    cols: list[int] = []
    index = 0
    for r, g in enumerate(groups):
        for _ in g:
            rows.append(r)
            cols.append(index)
            index += 1
    row = len(groups)
    gpu_rows: dict[int, int] = {}
    for col, c in enumerate(flat):
        mask = c.mask
        while mask:
            low = mask & -mask
            bit = low.bit_length() - 1
            mask ^= low
            if bit not in gpu_rows:
                gpu_rows[bit] = row
                row += 1
            rows.append(gpu_rows[bit])
            cols.append(col)
    matrix = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(row, len(flat))).tocsr()
    result = milp(
        c=-gains * _HIGHS_COST_SCALE,
        integrality=np.ones(len(flat)),
        bounds=Bounds(0, 1),
        constraints=LinearConstraint(matrix, -np.inf, 1),
        options={"mip_rel_gap": 0.0},
    )
    if not result.success:  # pragma: no cover - HiGHS always solves a bounded 0/1 program
        raise RuntimeError(f"HiGHS failed on the proportional-fair program: {result.message}")
    chosen = {flat[k].bidder: flat[k] for k in np.flatnonzero(result.x > 0.5)}
    return Solution(sum(c.gain for c in chosen.values()), chosen)


def gain(rho_none: float, rho: float) -> float:
    return math.log(rho_none) - math.log(rho)
