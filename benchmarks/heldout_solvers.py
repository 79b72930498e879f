"""Which solver for x* on hard menus: the held-out family, measured.

    nice .venv/bin/python benchmarks/heldout_solvers.py DIR [--bidders 100,200,400,1000]
                                                           [--seeds 0,1,2] [--seconds 0.5,1,5]

For each ``heldout-N-sS.json`` in DIR (``benchmarks/heldout.py write``) it solves the
proportional-fair allocation x* alone (no re-solves) and prints, per method, the CPU
seconds, the packing's value and its gap to the certified LP bound (relative to the bound):

- ``lp``: the LP relaxation (HiGHS through ``highspy``, no limit): its value is the
  certified bound every method is compared with (``bounded.dual_bound`` at its duals);
- ``bnb``: branch and bound under the simulator's default node limit (200,000 nodes),
  then the bounded answer (``bounded.limited_answer`` and ``tightened``), as the solver
  does today under a node limit;
- ``mip T``: HiGHS's MIP with a time limit of T s, its incumbent and its own (uncertified)
  dual bound after cuts;
- ``round``: a packing from the LP's values (``WarmLp.rounded``) improved by the local
  search (``bounded.improve``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path


def _mip(groups, seconds: float):  # noqa: ANN001, ANN202 - a benchmark
    import highspy
    import numpy as np

    from themis.auction.mip import COST_SCALE

    flat = [c for g in groups for c in g]
    rows: dict[int, int] = {}
    starts, index = [0], []
    for r, g in enumerate(groups):
        for c in g:
            index.append(r)
            mask = c.mask
            while mask:
                low = mask & -mask
                bit = low.bit_length() - 1
                mask ^= low
                index.append(rows.setdefault(bit, len(groups) + len(rows)))
            starts.append(len(index))
    n, height = len(flat), len(groups) + len(rows)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, height
    lp.col_cost_ = -np.array([c.gain for c in flat]) * COST_SCALE
    lp.col_lower_, lp.col_upper_ = np.zeros(n), np.ones(n)
    lp.row_lower_, lp.row_upper_ = np.full(height, -highspy.kHighsInf), np.ones(height)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.ones(len(index))
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h = highspy._Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", seconds)
    h.passModel(lp)
    h.run()
    info = h.getInfo()
    x = np.asarray(h.getSolution().col_value)
    value = math.fsum(flat[k].gain for k in np.flatnonzero(x > 0.5).tolist())
    return value, -info.mip_dual_bound / COST_SCALE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--bidders", default="100,200,400,1000")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--seconds", default="1,5")
    args = parser.parse_args(argv)

    from themis.auction.bounded import dual_bound, improve, limited_answer, tightened
    from themis.auction.budget import DEFAULT_NODE_LIMIT, Budget, Limits
    from themis.auction.lp_path import WarmLp
    from themis.auction.partial_allocation import build_candidates
    from themis.auction.solver import TOLERANCE, _Plan, _Search
    from themis.cli.auction_file import read_auction_file

    def line(name: str, cpu: float, value: float, bound: float, extra: str = "") -> None:
        gap = max(0.0, bound - value)
        print(
            f"  {name:<10} {cpu:7.2f} s  value {value:9.3f}  gap {gap:8.3f} "
            f"({100 * gap / bound:5.2f}%) {extra}",
            flush=True,
        )

    for bidders in [int(b) for b in args.bidders.split(",")]:
        for seed in [int(s) for s in args.seeds.split(",")]:
            path = args.dir / f"heldout-{bidders}-s{seed}.json"
            data = read_auction_file(str(path))
            groups = [g for g in build_candidates(data.bids, data.gpus) if g]
            print(f"{path.name}", flush=True)
            t = time.process_time()
            lp = WarmLp(groups, TOLERANCE)
            exact = lp.solve()
            if exact is not None:
                bound = math.fsum(c.gain for c in exact) + 1e-9
            else:
                bound = dual_bound(groups, lp.prices.tolist())
            line("lp", time.process_time() - t, bound, bound, "(the bound)")
            t = time.process_time()
            rounded = improve(groups, lp.rounded())
            line("round", time.process_time() - t, rounded.objective, bound, "(+ lp's time)")
            t = time.process_time()
            plan = _Plan(groups)
            search = _Search(plan)
            budget = Budget(Limits(DEFAULT_NODE_LIMIT, None))
            found = search.run(DEFAULT_NODE_LIMIT, None, plan.lp_prices, budget=budget)
            if found is None:
                answer = limited_answer(groups, [search.found], None, [search.root_bound()])
                found, _ = tightened(groups, answer, None)
            line("bnb", time.process_time() - t, found.objective, bound)
            for seconds in [float(s) for s in args.seconds.split(",")]:
                t = time.process_time()
                value, own = _mip(groups, seconds)
                line(
                    f"mip {seconds:g}",
                    time.process_time() - t,
                    value,
                    bound,
                    f"HiGHS's own bound {own:.3f} ({100 * max(0, own - value) / own:.2f}%)",
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
