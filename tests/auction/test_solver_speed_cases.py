"""The solver on auctions shaped like the simulator's, and ``solve_all`` against brute force.

Real auctions hold many bidders whose menus are nested chains of GPUs (1, 2, 4, ...), all
with nearly the same gain: the optimum is decided by how many bidders can win at all and
then by small increments, which is where the clique and compatibility bounds matter.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence

import pytest

from themis.auction.bids import Bid, MenuEntry
from themis.auction.packing import Solution
from themis.auction.partial_allocation import build_candidates
from themis.auction.solver import solve, solve_all

from .oracle import brute_force, random_auction


def _chain_auction(rng: random.Random) -> tuple[list[Bid], list[int]]:
    n_gpus = rng.randint(3, 8)
    bids = []
    for a in range(rng.randint(2, 6)):
        order = rng.sample(range(n_gpus), n_gpus)
        if rng.random() < 0.5:  # bidders often share their first GPU
            first = rng.randrange(min(2, n_gpus))
            order.remove(first)
            order.insert(0, first)
        sizes = sorted({min(n_gpus, 2**k) for k in range(rng.randint(1, 4))})
        rho = 1.0
        menu = []
        for size in sizes:
            rho *= math.exp(-rng.uniform(0.0, 0.6))
            menu.append(MenuEntry(tuple(order[:size]), rho * 1e-6))
        bids.append(Bid(f"app{a}", 1.0, tuple(menu)))
    return bids, list(range(n_gpus))


def _assert_feasible(sol: Solution, excluded: int | None = None) -> None:
    used = 0
    for b, cand in sol.chosen.items():
        assert cand.bidder == b != excluded
        assert not used & cand.mask
        used |= cand.mask
    assert sol.objective == pytest.approx(sum(c.gain for c in sol.chosen.values()), abs=1e-9)


def _check_all(bids: list[Bid], free: Sequence[Hashable]) -> None:
    candidates = build_candidates(bids, free)
    best, without = solve_all(candidates)
    _assert_feasible(best)
    assert best.objective == pytest.approx(brute_force(bids).objective, abs=1e-9, rel=0)
    assert set(without) == set(best.chosen)
    for b, sol in without.items():
        _assert_feasible(sol, b)
        want = brute_force(bids, exclude=bids[b].app_id).objective
        assert sol.objective == pytest.approx(want, abs=1e-9, rel=0)
        again = solve(candidates, exclude=b)
        assert again.objective == pytest.approx(want, abs=1e-9, rel=0)


def test_solve_all_matches_brute_force_on_random_auctions() -> None:
    for seed in range(150):
        _check_all(*random_auction(random.Random(seed)))


def test_solve_all_matches_brute_force_on_chain_auctions() -> None:
    for seed in range(300):
        _check_all(*_chain_auction(random.Random(seed)))


@pytest.mark.pure_only
def test_solve_all_falls_back_to_highs(milp_calls: list[int]) -> None:
    calls = milp_calls
    for seed in range(40):
        bids, free = _chain_auction(random.Random(seed))
        candidates = build_candidates(bids, free)
        best, without = solve_all(candidates, node_limit=0, lp_first=False)
        exact, exact_without = solve_all(candidates)
        assert best.objective == pytest.approx(exact.objective, abs=1e-9, rel=0)
        for b, sol in without.items():
            _assert_feasible(sol, b)
            want = brute_force(bids, exclude=bids[b].app_id).objective
            assert sol.objective == pytest.approx(want, abs=1e-9, rel=0)
    assert calls


def test_solve_all_with_nobody_or_one_bidder() -> None:
    assert solve_all([]) == (Solution(0.0, {}), {})
    assert solve_all([[], []]) == (Solution(0.0, {}), {})
    candidates = build_candidates([Bid("a", 2.0, (MenuEntry((0,), 1.0),))], [0])
    best, without = solve_all(candidates)
    assert set(best.chosen) == {0}
    assert without == {0: Solution(0.0, {})}


def test_dominated_entries_are_never_needed() -> None:
    # a's {0, 1} is no better than its {0}: the optimum must still be found (a on {0}).
    bids = [
        Bid("a", 10.0, (MenuEntry((0, 1), 5.0), MenuEntry((0,), 4.0))),
        Bid("b", 10.0, (MenuEntry((1,), 5.0),)),
    ]
    candidates = build_candidates(bids, [0, 1])
    for sol in (solve(candidates), solve_all(candidates)[0]):
        assert {b: c.entry for b, c in sol.chosen.items()} == {0: 1, 1: 0}
        assert sol.objective == pytest.approx(math.log(2.5) + math.log(2.0))
