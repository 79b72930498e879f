"""Regression guard of the certified LP path (``auction/lp_path.py``): on random auctions
it gives the same allocation and the same ``c_i`` as the exact reference (brute force on
small auctions; the previous solver, ``solve_all(lp_first=False)``, on simulator-shaped
ones), or declines to answer (no proof), never a different answer."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from themis.auction import solver
from themis.auction.bids import Bid, MenuEntry
from themis.auction.partial_allocation import build_candidates, partial_allocation
from themis.auction.solver import Solution, _solve_all_lp, solve_all

from .oracle import Allocation, brute_c, brute_force, random_auction

TOL = 1e-9


def _c(best: Solution, without: dict[int, Solution], bidder: int) -> float:
    cand = best.chosen[bidder]
    return min(1.0, math.exp(best.objective - cand.gain - without[bidder].objective))


def _ring_auction(rng: random.Random) -> tuple[list[Bid], list[int]]:
    """Shaped like the arbiter's: GPUs on a ring of 8-GPU machines, each bidder packing
    gangs of one size from its own rotated start, rho better with more GPUs and worse when
    the bundle spans machines."""
    n_gpus = 8 * rng.randint(2, 12)
    bidders = rng.randint(2, 30)
    bids = []
    for k in range(bidders):
        gang = rng.choice((1, 1, 1, 2, 4, 8))
        start = (k * n_gpus // bidders) // gang * gang
        order = [(start + i) % n_gpus for i in range(n_gpus)]
        work, elapsed = rng.uniform(1e3, 1e5), rng.uniform(0, 1e4)
        menu = []
        for count in (1, 2, 3, 4, 6, 8):
            gpus = order[: count * gang]
            if len(gpus) > n_gpus // 2:
                break
            machines = len({g // 8 for g in gpus})
            factor = 1.0 if machines == 1 else rng.choice((0.7, 0.98))
            menu.append(MenuEntry(tuple(gpus), (elapsed + work / (len(gpus) * factor)) / 1e4))
        rho_none = 1e6 if rng.random() < 0.5 else (elapsed + work * 2) / 1e4
        bids.append(Bid(f"app{k}", rho_none, tuple(menu)))
    return bids, list(range(n_gpus))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_lp_path_matches_brute_force_on_small_auctions(seed: int) -> None:
    bids, free = random_auction(random.Random(seed), bidders=(2, 5), entries=(1, 4))
    candidates = build_candidates(bids, free)
    groups = [g for g in candidates if g]
    if not groups:
        return
    answer = _solve_all_lp(groups)
    if answer is None:
        return  # no proof (a fractional LP): the caller takes the exact paths
    best, without = answer
    oracle = brute_force(bids)
    assert best.objective == pytest.approx(oracle.objective, abs=TOL, rel=0)
    if oracle.unique:
        for b, bid in enumerate(bids):
            cand = best.chosen.get(b)
            want = oracle.allocation[bid.app_id]
            got_gain = cand.gain if cand else 0.0
            want_gain = (
                math.log(bid.rho_none) - math.log(next(e.rho for e in bid.menu if e.gpus == want))
                if want is not None
                else 0.0
            )
            assert got_gain == pytest.approx(max(want_gain, 0.0), abs=TOL)
            if cand is not None and oracle.allocation[bid.app_id] is not None:
                alloc: Allocation = {
                    bids[j].app_id: bids[j].menu[c.entry].gpus for j, c in best.chosen.items()
                }
                assert _c(best, without, b) == pytest.approx(
                    brute_c(bids, alloc, bid.app_id), rel=1e-9
                )


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_lp_path_matches_the_previous_solver_on_ring_auctions(seed: int) -> None:
    bids, free = _ring_auction(random.Random(seed))
    candidates = build_candidates(bids, free)
    groups = [g for g in candidates if g]
    answer = _solve_all_lp(groups)
    if answer is None:
        return
    best, without = answer
    ref_best, ref_without = solve_all(candidates, lp_first=False)
    assert best.objective == pytest.approx(ref_best.objective, abs=TOL, rel=0)
    # Random real-valued rhos: the optimum is unique, so the allocation must be the same.
    assert {b: c.entry for b, c in best.chosen.items()} == {
        b: c.entry for b, c in ref_best.chosen.items()
    }
    assert set(without) == set(ref_without)
    for b in without:
        assert without[b].objective == pytest.approx(ref_without[b].objective, abs=TOL, rel=0)
        assert _c(best, without, b) == pytest.approx(_c(ref_best, ref_without, b), rel=1e-9)


def test_ring_auctions_are_answered_by_the_lp_path() -> None:
    """The guard above is not vacuous: simulator-shaped auctions do get proofs."""
    answered = sum(
        _solve_all_lp([g for g in build_candidates(*_ring_auction(random.Random(s))) if g])
        is not None
        for s in range(100)
    )
    assert answered >= 90


def test_partial_allocation_is_the_same_through_either_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end, with the same seed: same choice, c and granted GPUs for every app."""
    for seed in range(60):
        bids, free = _ring_auction(random.Random(seed))
        monkeypatch.setattr(solver, "LP_FIRST_WORK", 0)
        fast = partial_allocation(bids, free, random.Random(seed))
        monkeypatch.setattr(solver, "LP_FIRST_WORK", 10**18)
        reference = partial_allocation(bids, free, random.Random(seed))
        assert fast.leftover == reference.leftover
        for app_id, outcome in fast.apps.items():
            ref = reference.apps[app_id]
            assert (outcome.choice, outcome.granted) == (ref.choice, ref.granted)
            assert outcome.c == pytest.approx(ref.c, rel=1e-9)


def test_an_answer_without_a_proof_is_declined() -> None:
    """Three bidders each wanting two of three GPUs: the LP's optimum is fractional (each
    at one half), so the LP path must decline rather than round it."""
    bids = [
        Bid("a", 10.0, (MenuEntry((0, 1), 1.0),)),
        Bid("b", 10.0, (MenuEntry((1, 2), 1.0),)),
        Bid("c", 10.0, (MenuEntry((0, 2), 1.0),)),
    ]
    groups = [g for g in build_candidates(bids, [0, 1, 2]) if g]
    assert _solve_all_lp(groups) is None
    best, _ = solve_all(build_candidates(bids, [0, 1, 2]))
    assert len(best.chosen) == 1
