"""The proportional-fair solver against brute force, on both exact paths."""

from __future__ import annotations

import math
import random

import pytest

from themis.auction.bids import Bid, MenuEntry
from themis.auction.packing import Solution
from themis.auction.partial_allocation import build_candidates
from themis.auction.solver import _milp, solve

from .oracle import brute_force, is_feasible, objective_of, random_auction

CASES = 250
SEEDS = range(CASES)


def _allocation(bids: list[Bid], sol: Solution) -> dict:
    """The solver's choice as app id -> GPUs (None for nothing), read through the menus."""
    out = {}
    for b, bid in enumerate(bids):
        cand = sol.chosen.get(b)
        out[bid.app_id] = None if cand is None else bid.menu[cand.entry].gpus
    return out


def _check_solution(bids: list[Bid], free: list, sol: Solution) -> None:
    oracle = brute_force(bids)
    alloc = _allocation(bids, sol)
    # Candidates are consistent with the menus they claim to come from.
    bit = {g: k for k, g in enumerate(free)}
    for b, cand in sol.chosen.items():
        assert cand.bidder == b
        gpus = bids[b].menu[cand.entry].gpus
        assert cand.mask == sum(1 << bit[g] for g in gpus)
        assert cand.gain > 0
    assert is_feasible(alloc), f"overlapping bundles: {alloc}"
    # Objective recomputed from the bids, independent of the solver's own number.
    achieved = objective_of(bids, alloc)
    assert achieved == pytest.approx(oracle.objective, abs=1e-9, rel=0)
    assert sol.objective == pytest.approx(oracle.objective, abs=1e-9, rel=0)
    if oracle.unique:
        # A unique optimum (in every app's gain): the choice must be it. Compare gains, not
        # bundles: an entry tied with winning nothing is as good as nothing.
        for bid in bids:
            got = objective_of([bid], {bid.app_id: alloc[bid.app_id]})
            want = objective_of([bid], {bid.app_id: oracle.allocation[bid.app_id]})
            assert got == pytest.approx(want, abs=1e-9)


@pytest.mark.pure_only
def test_branch_and_bound_matches_brute_force(milp_calls: list[int]) -> None:
    for seed in SEEDS:
        bids, free = random_auction(random.Random(seed))
        candidates = build_candidates(bids, free)
        _check_solution(bids, free, solve(candidates))
    assert milp_calls == [], "small auctions must be solved by branch and bound"


@pytest.mark.pure_only
def test_highs_fallback_matches_brute_force(milp_calls: list[int]) -> None:
    # node_limit=0: the first DFS node already exceeds the limit, so solve() falls back.
    expected_calls = 0
    for seed in SEEDS:
        bids, free = random_auction(random.Random(seed))
        candidates = build_candidates(bids, free)
        if any(candidates):
            expected_calls += 1
        _check_solution(bids, free, solve(candidates, node_limit=0))
    assert len(milp_calls) == expected_calls > 0.9 * CASES


def test_highs_directly_matches_brute_force() -> None:
    for seed in SEEDS:
        bids, free = random_auction(random.Random(seed))
        candidates = build_candidates(bids, free)
        groups = [c for c in candidates if c]
        if groups:
            _check_solution(bids, free, _milp(groups))


def test_exclude_matches_brute_force_without_that_bidder() -> None:
    for seed in range(100):
        bids, free = random_auction(random.Random(seed))
        candidates = build_candidates(bids, free)
        for i, bid in enumerate(bids):
            want = brute_force(bids, exclude=bid.app_id).objective
            for node_limit in (20_000, 0):
                sol = solve(candidates, exclude=i, node_limit=node_limit)
                assert i not in sol.chosen
                assert sol.objective == pytest.approx(want, abs=1e-9, rel=0)


@pytest.mark.pure_only
def test_both_paths_agree_on_larger_auctions(milp_calls: list[int]) -> None:
    # Too big for brute force; the two exact solvers must still reach the same optimum.
    for seed in range(15):
        bids, free = random_auction(random.Random(1000 + seed), (6, 9), (10, 16), (4, 8))
        candidates = build_candidates(bids, free)
        bnb = solve(candidates)
        highs = solve(candidates, node_limit=0)
        assert bnb.objective == pytest.approx(highs.objective, abs=1e-9, rel=0)
        for sol in (bnb, highs):
            alloc = _allocation(bids, sol)
            assert is_feasible(alloc)
            assert objective_of(bids, alloc) == pytest.approx(sol.objective, abs=1e-9, rel=0)


@pytest.mark.pure_only
def test_branch_and_bound_node_limit_triggers_fallback(milp_calls: list[int]) -> None:
    bids, free = random_auction(random.Random(7), (8, 8), (14, 14), (8, 8))
    candidates = build_candidates(bids, free)
    solve(candidates, node_limit=3)
    assert len(milp_calls) == 1
    solve(candidates, node_limit=10**9)
    assert len(milp_calls) == 1


def test_nobody_to_solve_for_is_worth_nothing() -> None:
    assert solve([]) == Solution(0.0, {})
    assert solve([[], []]) == Solution(0.0, {})
    bids = [Bid("a", 2.0, (MenuEntry((0,), 1.0),))]
    candidates = build_candidates(bids, [0])
    assert solve(candidates, exclude=0) == Solution(0.0, {})
    only = solve(candidates)
    assert only.objective == pytest.approx(math.log(2.0))
    assert set(only.chosen) == {0}


def test_entries_no_better_than_nothing_are_never_chosen() -> None:
    # rho >= rho_none gains nothing (or loses): winning it cannot raise the objective.
    bids = [
        Bid("a", 1.0, (MenuEntry((0, 1), 1.0), MenuEntry((0,), 3.0))),
        Bid("b", 5.0, (MenuEntry((1,), 2.5),)),
    ]
    candidates = build_candidates(bids, [0, 1])
    assert candidates[0] == []
    for node_limit in (20_000, 0):
        sol = solve(candidates, node_limit=node_limit)
        assert set(sol.chosen) == {1}
        assert sol.objective == pytest.approx(math.log(2.0))


def test_pf_prefers_two_moderate_wins_over_one_big_win() -> None:
    # a alone on {0,1}: gain log 10. a on {0} and b on {1}: log 3 + log 4 = log 12 > log 10.
    bids = [
        Bid("a", 10.0, (MenuEntry((0, 1), 1.0), MenuEntry((0,), 10 / 3))),
        Bid("b", 8.0, (MenuEntry((1,), 2.0),)),
    ]
    candidates = build_candidates(bids, [0, 1])
    for node_limit in (20_000, 0):
        sol = solve(candidates, node_limit=node_limit)
        assert {b: c.entry for b, c in sol.chosen.items()} == {0: 1, 1: 0}
        assert sol.objective == pytest.approx(math.log(12.0))


def _near_tie_auction(rng: random.Random) -> tuple[list[Bid], list[int]]:
    """Many packings within ~1e-6 of each other: every bundle's gain is 0.3 per GPU plus a
    perturbation of a few 1e-7, so the optimum is only separated by tiny margins."""
    n_gpus = rng.randint(4, 8)
    bids = []
    for a in range(rng.randint(2, 4)):
        n_entries = rng.randint(2, 5)
        bundles: set[frozenset[int]] = set()
        while len(bundles) < n_entries:
            bundles.add(frozenset(rng.sample(range(n_gpus), rng.randint(1, n_gpus))))
        menu = tuple(
            MenuEntry(tuple(sorted(b)), math.exp(-0.3 * len(b) + rng.uniform(-3e-7, 3e-7)))
            for b in sorted(bundles, key=sorted)
        )
        bids.append(Bid(f"app{a}", rng.choice([1.0, 1e6]), menu))
    return bids, list(range(n_gpus))


@pytest.mark.pure_only
def test_both_paths_are_exact_on_near_ties(milp_calls: list[int]) -> None:
    # Regression: HiGHS's absolute tolerances (~1e-6 in objective units) used to make the
    # fallback return packings up to ~7e-7 short of the optimum here.
    for seed in range(200):
        bids, free = _near_tie_auction(random.Random(seed))
        candidates = build_candidates(bids, free)
        for node_limit in (20_000, 0):
            _check_solution(bids, free, solve(candidates, node_limit=node_limit))
    assert len(milp_calls) == 200
