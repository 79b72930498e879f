"""The proportional-fair program as a 0/1 integer program, solved by HiGHS (``highspy``).

One binary per menu entry, one row per bidder (at most one entry) and per GPU (at most one
holder). Costs are scaled (``COST_SCALE``) so that HiGHS's own absolute tolerances cannot
return a near-tie that is 1e-7 short of the optimum. Within a budget
(``themis.auction.budget``) HiGHS stops at the node limit or the deadline; it then returns
its incumbent (checked feasible here) without a proof, and the caller bounds the gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from themis.auction.budget import MIP_UNITS_PER_COLUMN, highs_units
from themis.auction.packing import Candidate, Solution

if TYPE_CHECKING:
    from themis.auction.budget import Budget

#: HiGHS stops at solutions within about 1e-6 of the optimum in its own objective units
#: (its absolute MIP tolerances; ``mip_rel_gap=0`` does not remove this), so unscaled it
#: can return a choice up to ~1e-6 log-utility short of the optimum on near-ties. Scaling
#: the gains by 1e4 shrinks that to ~1e-10 < TOLERANCE; gains are at most a few tens, so
#: the scaled costs stay far from any magnitude HiGHS would have trouble with.
COST_SCALE = 1e4

#: HiGHS's time limit is never set below this (seconds): a zero limit is not a limit.
MIN_SECONDS = 1e-3


def solve_mip(
    groups: Sequence[Sequence[Candidate]],
    budget: Budget | None = None,
    incumbent: Solution | None = None,
) -> Solution:
    """The optimum; within ``budget``, the best packing HiGHS found when it stopped, with
    ``bound=math.inf`` (not proven; the caller computes a certified bound), or
    ``incumbent`` (a feasible packing) if that is worth more. (``incumbent`` is not handed
    to HiGHS: with ``setSolution`` HiGHS 1.16 returned it as "optimal" on auctions where
    it is not, tests/auction/test_solver_speed_cases.py.)"""
    import math

    import highspy
    import numpy as np

    flat = [c for g in groups for c in g]
    n = len(flat)
    gpu_rows: dict[int, int] = {}
    starts = [0]
    index: list[int] = []
    for r, g in enumerate(groups):
        for c in g:
            index.append(r)
            mask = c.mask
            while mask:
                low = mask & -mask
                bit = low.bit_length() - 1
                mask ^= low
                row = gpu_rows.get(bit)
                if row is None:
                    row = gpu_rows[bit] = len(groups) + len(gpu_rows)
                index.append(row)
            starts.append(len(index))
    height = len(groups) + len(gpu_rows)
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = height
    lp.col_cost_ = -np.array([c.gain for c in flat]) * COST_SCALE
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.ones(n)
    lp.row_lower_ = np.full(height, -highspy.kHighsInf)
    lp.row_upper_ = np.ones(height)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.ones(len(index))
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    highs = highspy._Highs()  # type: ignore[attr-defined]  # see lp_path._load_highs on why not highspy.Highs
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("mip_rel_gap", 0.0)
    limited = budget is not None and budget.active
    # A MIP node and each of its LP iterations cost more on a larger model (``budget``),
    # and the root's presolve, cuts and heuristics more with more columns.
    weight = highs_units(len(index))
    setup = MIP_UNITS_PER_COLUMN * n
    if budget is not None:
        nodes = budget.afford(weight)
        if nodes is not None:
            highs.setOptionValue("mip_max_nodes", nodes)
        seconds = budget.seconds_left()
        if seconds is not None:
            highs.setOptionValue("time_limit", max(MIN_SECONDS, seconds))
    highs.passModel(lp)
    highs.run()
    info = highs.getInfo()
    if budget is not None:
        work = int(info.mip_node_count) + max(0, int(info.simplex_iteration_count))
        budget.spend(work * weight + setup)
    status = highs.getModelStatus()
    proven = status == highspy.HighsModelStatus.kOptimal
    if not proven and not limited:  # pragma: no cover - a bounded 0/1 program solves
        raise RuntimeError(f"HiGHS failed on the proportional-fair program: {status}")
    chosen: dict[int, Candidate] = {}
    if info.primal_solution_status == highspy.kSolutionStatusFeasible:
        x = np.asarray(highs.getSolution().col_value)
        used = 0
        for k in np.flatnonzero(x > 0.5).tolist():
            c = flat[k]
            if c.bidder in chosen or c.mask & used:  # pragma: no cover - HiGHS's tolerances
                chosen = {}
                break
            chosen[c.bidder] = c
            used |= c.mask
    value = sum(c.gain for c in chosen.values())  # as every exact path sums
    if not proven and incumbent is not None and incumbent.objective > value:
        return Solution(incumbent.objective, dict(incumbent.chosen), math.inf)
    return Solution(value, chosen, None if proven else math.inf)
