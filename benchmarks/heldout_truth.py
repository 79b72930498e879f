"""Misreports on held-out auctions that hit their limits: what can a liar gain?

    nice .venv/bin/python benchmarks/heldout_truth.py [--bidders 100] [--seeds 0,1,2]
                                                      [--winners 10] [--node-limit N]
                                                      [--deadline S]

Partial Allocation is truthful when x* and every x^-i are optimal. Under a budget they may
not be (docs/auction.md, "Payments and truthfulness"): a bidder's received log-utility can
then rise by a misreport, by at most gap(x*) of the truthful auction plus the re-solve gap
of the misreported one. For each of the first ``--winners`` winners of each auction this
tries four misreports (every rho halved, every rho doubled, "none" doubled, the won
entry dropped from the menu), reruns the auction under the same limits, and compares the
utility the bidder receives, ``c_i / rho_true(bundle)``, with the truthful one.
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import replace

from heldout import auction_payload

from themis.auction import Bid, MenuEntry, partial_allocation
from themis.auction.budget import DEFAULT_NODE_LIMIT, Limits


def _bids(payload: dict) -> tuple[list[Bid], list[str]]:
    bids = [
        Bid(app, b["none"], tuple(MenuEntry(tuple(e["gpus"]), e["rho"]) for e in b["menu"]))
        for app, b in payload["bids"].items()
    ]
    return bids, list(payload["gpus"])


def _received(bid: Bid, choice: tuple, c: float) -> float:
    """log of the utility the bidder truly receives: c / rho_true(choice) (nothing: 1 /
    rho_none)."""
    if not choice:
        return -math.log(bid.rho_none)
    rho = min(e.rho for e in bid.menu if set(e.gpus) == set(choice))
    return math.log(c) - math.log(rho)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bidders", type=int, default=100)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--winners", type=int, default=10)
    parser.add_argument("--node-limit", type=int, default=DEFAULT_NODE_LIMIT, help="0: none")
    parser.add_argument("--deadline", type=float, default=None, help="seconds (wall clock)")
    args = parser.parse_args(argv)
    limits = Limits(args.node_limit or None, args.deadline)
    tried = gained = within = 0
    worst = 0.0
    for seed in [int(s) for s in args.seeds.split(",")]:
        bids, gpus = _bids(auction_payload(args.bidders, seed))
        truth = partial_allocation(bids, gpus, random.Random(0), limits=limits)
        winners = [b for b in bids if truth.apps[b.app_id].choice][: args.winners]
        for bid in winners:
            mine = truth.apps[bid.app_id]
            honest = _received(bid, mine.choice, mine.c)
            lies = [
                replace(bid, menu=tuple(replace(e, rho=e.rho / 2) for e in bid.menu)),
                replace(bid, menu=tuple(replace(e, rho=e.rho * 2) for e in bid.menu)),
                replace(bid, rho_none=bid.rho_none * 2),
                replace(bid, menu=tuple(e for e in bid.menu if set(e.gpus) != set(mine.choice))),
            ]
            for lie in lies:
                if not lie.menu:
                    continue
                told = [lie if b.app_id == bid.app_id else b for b in bids]
                out = partial_allocation(told, gpus, random.Random(0), limits=limits)
                got = out.apps[bid.app_id]
                gain = _received(bid, got.choice, got.c) - honest
                tried += 1
                if gain > 1e-9:
                    gained += 1
                    worst = max(worst, gain)
                    within += gain <= truth.gap + out.resolve_gap + 1e-9
        print(
            f"seed {seed}: limited {truth.limited}, gap {truth.gap:.3f}, "
            f"re-solve gap {truth.resolve_gap:.3f}",
            flush=True,
        )
    print(
        f"{tried} misreports: {gained} raised the liar's received utility "
        f"(largest gain {worst:.4f} log-utility, a factor {math.exp(worst):.3f}); "
        f"{within} of them within gap(x*) + the misreported re-solve gap"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
