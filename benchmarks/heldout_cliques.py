"""How much clique cuts would tighten the LP bound on the held-out family (a measurement,
not solver code).

    nice .venv/bin/python benchmarks/heldout_cliques.py DIR [--bidders 200,400] [--seeds 0]
                                                            [--rounds 6]

For each ``heldout-N-sS.json`` in DIR (``benchmarks/heldout.py write``) it solves the LP
relaxation of x* (HiGHS's interior point), then for ``--rounds`` rounds adds every clique
inequality it finds violated by the LP's values (entries that pairwise share a GPU or a
bidder, whose values sum above 1: at most one of them can win) and solves again, printing
the LP's value (HiGHS's, not certified) and how far below the plain LP bound it lies.
Separation is a greedy pass in Python over the LP's support (slow: seconds at 400
bidders); it shows what a certified clique bound could gain, which the solver does not do.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--bidders", default="200,400")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)

    import highspy
    import numpy as np

    from themis.auction.lp_path import COST_SCALE, WarmLp
    from themis.auction.partial_allocation import build_candidates
    from themis.auction.solver import TOLERANCE
    from themis.cli.auction_file import read_auction_file

    for bidders in [int(b) for b in args.bidders.split(",")]:
        for seed in [int(s) for s in args.seeds.split(",")]:
            path = args.dir / f"heldout-{bidders}-s{seed}.json"
            data = read_auction_file(str(path))
            groups = [g for g in build_candidates(data.bids, data.gpus) if g]
            start = time.process_time()
            lp = WarmLp(groups, TOLERANCE)
            highs = lp.highs
            highs.setOptionValue("solver", "ipm")
            highs.run()
            flat = lp.flat
            plain = -highs.getInfo().objective_function_value / COST_SCALE
            print(f"{path.name}: LP {plain:.2f}", flush=True)
            seen: set[frozenset[int]] = set()
            for number in range(args.rounds):
                x = np.asarray(highs.getSolution().col_value)
                support = sorted(np.flatnonzero(x > 1e-6).tolist(), key=lambda k: -x[k])
                cuts = []
                for first in support:
                    clique = [first]
                    for other in support:
                        c = flat[other]
                        if other != first and all(
                            c.mask & flat[k].mask or c.bidder == flat[k].bidder for k in clique
                        ):
                            clique.append(other)
                    key = frozenset(clique)
                    if sum(x[k] for k in clique) > 1.0 + 1e-4 and key not in seen:
                        seen.add(key)
                        cuts.append(sorted(clique))
                if not cuts:
                    break
                starts, index = [], []
                for clique in cuts:
                    starts.append(len(index))
                    index.extend(clique)
                highs.addRows(
                    len(cuts),
                    np.full(len(cuts), -highspy.kHighsInf),
                    np.ones(len(cuts)),
                    len(index),
                    np.array(starts, dtype=np.int32),
                    np.array(index, dtype=np.int32),
                    np.ones(len(index)),
                )
                highs.run()
                value = -highs.getInfo().objective_function_value / COST_SCALE
                print(
                    f"  round {number}: +{len(cuts)} cuts, LP {value:.2f} "
                    f"({100 * (plain - value) / plain:.2f}% below), "
                    f"{time.process_time() - start:.2f} s CPU",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
