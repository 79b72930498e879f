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
from themis.auction.packing import Solution
from themis.auction.partial_allocation import build_candidates, partial_allocation
from themis.auction.solver import _solve_all_lp, solve_all

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


def _same_as_reference(answer: tuple | None, reference: tuple) -> bool:
    """Assert a path's answer (if it gave one) is the reference's: the same allocation
    (random real-valued rhos: the optimum is unique), the same OPT_-i and c_i for every
    winner, and each OPT_-i a real packing worth what it says. Whether it answered."""
    if answer is None:
        return False  # no proof: the caller takes the exact paths
    best, without = answer
    ref_best, ref_without = reference
    assert best.objective == pytest.approx(ref_best.objective, abs=TOL, rel=0)
    assert {b: c.entry for b, c in best.chosen.items()} == {
        b: c.entry for b, c in ref_best.chosen.items()
    }
    assert set(without) == set(ref_without)
    for b in without:
        assert without[b].objective == pytest.approx(ref_without[b].objective, abs=TOL, rel=0)
        assert _c(best, without, b) == pytest.approx(_c(ref_best, ref_without, b), rel=1e-9)
        chosen = without[b].chosen
        assert b not in chosen
        masks = [c.mask for c in chosen.values()]
        assert sum(m.bit_count() for m in masks) == _union_bits(masks)
        assert math.fsum(c.gain for c in chosen.values()) == pytest.approx(
            without[b].objective, abs=1e-12
        )
    return True


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_lp_paths_match_the_previous_solver_on_ring_auctions(seed: int) -> None:
    """The certified LP path, with its re-solves global and local first, against the exact
    reference (``solve_all(lp_first=False)``), computed once per auction for both."""
    bids, free = _ring_auction(random.Random(seed))
    candidates = build_candidates(bids, free)
    groups = [g for g in candidates if g]
    global_ = _solve_all_lp(groups)
    local = _solve_all_lp(groups, local_resolves=True, local_min_bidders=1)
    if global_ is None and local is None:
        return
    reference = solve_all(candidates, lp_first=False)
    _same_as_reference(global_, reference)
    _same_as_reference(local, reference)


def test_ring_auctions_are_answered_by_the_lp_path() -> None:
    """The guard above is not vacuous: simulator-shaped auctions do get proofs."""
    answered = sum(
        _solve_all_lp([g for g in build_candidates(*_ring_auction(random.Random(s))) if g])
        is not None
        for s in range(100)
    )
    assert answered >= 90


@pytest.mark.parametrize("local_min_bidders", [solver.LOCAL_MIN_BIDDERS, 1])
def test_partial_allocation_is_the_same_through_either_path(
    monkeypatch: pytest.MonkeyPatch, local_min_bidders: int
) -> None:
    """End to end, with the same seed: same choice, c and granted GPUs for every app
    (re-solves global, or local first)."""
    monkeypatch.setattr(solver, "LOCAL_MIN_BIDDERS", local_min_bidders)
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


# -- local re-solves (``lp_path.LocalResolver``) ---------------------------------------------


def _local_answers(groups: list) -> tuple[int, int]:
    """(winners whose re-solve the local path answered, winners re-solved)."""
    from themis.auction.lp_path import LocalResolver, WarmLp

    lp = WarmLp(groups, solver.TOLERANCE)
    if lp.solve() is None:
        return 0, 0
    local = LocalResolver(lp)
    answered = sum(
        local.solve_without(int(lp.bidder_of[k])) is not None for k in lp.picked.tolist()
    )
    return answered, len(lp.picked)


def _union_bits(masks: list[int]) -> int:
    union = 0
    for m in masks:
        union |= m
    return union.bit_count()


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_local_resolves_match_brute_force_on_small_auctions(seed: int) -> None:
    bids, free = random_auction(random.Random(seed), bidders=(2, 5), entries=(1, 4))
    candidates = build_candidates(bids, free)
    groups = [g for g in candidates if g]
    if not groups:
        return
    answer = _solve_all_lp(groups, local_resolves=True, local_min_bidders=1)
    if answer is None:
        return
    best, without = answer
    for b, cand in best.chosen.items():
        rest = [bid for j, bid in enumerate(bids) if j != b]
        assert without[b].objective == pytest.approx(brute_force(rest).objective, abs=TOL, rel=0), (
            b,
            cand,
        )


def test_ring_auctions_are_answered_by_local_resolves() -> None:
    """The guards above are not vacuous: most re-solves of simulator-shaped auctions are
    answered locally (the rest by the global model)."""
    answered = total = 0
    for s in range(100):
        groups = [g for g in build_candidates(*_ring_auction(random.Random(s))) if g]
        a, t = _local_answers(groups)
        answered += a
        total += t
    assert total > 300
    assert answered >= 0.8 * total


def test_a_local_proof_rejects_a_worse_choice() -> None:
    """The local proof is a proof: the certified choice without a winner, with one of its
    changed choices dropped (worth less by that entry's gain), is not proven."""
    from themis.auction.lp_path import LocalResolver, WarmLp

    checked = 0
    for s in range(40):
        groups = [g for g in build_candidates(*_ring_auction(random.Random(s))) if g]
        lp = WarmLp(groups, solver.TOLERANCE)
        if lp.solve() is None:
            continue
        local = LocalResolver(lp)
        for k in lp.picked.tolist():
            position = int(lp.bidder_of[k])
            captured: list = []
            original = local._proves

            def spy(choice, chosen, prices, position, original=original, captured=captured):
                captured.append((choice.copy(), chosen.copy(), prices.copy()))
                return original(choice, chosen, prices, position)

            local._proves = spy  # type: ignore[method-assign]
            answer = local.solve_without(position)
            local._proves = original  # type: ignore[method-assign]
            if answer is None or not captured:
                continue
            choice, chosen, prices = captured[-1]
            assert original(choice, chosen, prices, position) is not None
            for drop in chosen.tolist():
                if lp.gains[drop] <= 10 * solver.TOLERANCE:
                    continue
                worse = choice.copy()
                worse[lp.bidder_of[drop]] = -1
                assert original(worse, chosen[chosen != drop], prices, position) is None
                checked += 1
    assert checked > 50
