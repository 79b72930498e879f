"""Weighted Partial Allocation (one tenant's bidders share one weight): the optimum and
c_i against brute force, truthfulness under weights, and weights of 1 as PA itself."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.auction.bids import Bid
from themis.auction.partial_allocation import AuctionOutcome, partial_allocation

from .oracle import is_feasible, objective_of, random_auction, true_value
from .test_partial_allocation import _auction_and_lie, _misreports


def _run(bids: list[Bid], free: list, weights: list[float] | None, seed: int = 0) -> AuctionOutcome:
    return partial_allocation(bids, free, random.Random(seed), weights=weights)


def _weighted_best(bids: list[Bid], weights: list[float], skip: int | None = None) -> float:
    """max over feasible allocations of sum_j w_j log(rho_none_j / rho_j), bidder ``skip``
    left out, by enumeration."""
    active = [(b, w) for k, (b, w) in enumerate(zip(bids, weights, strict=True)) if k != skip]
    options = [[None, *(e.gpus for e in b.menu)] for b, _ in active]
    best = -math.inf
    for combo in itertools.product(*options):
        alloc = {b.app_id: x for (b, _), x in zip(active, combo, strict=True)}
        if is_feasible(alloc):
            value = sum(w * objective_of([b], alloc) for b, w in active)
            best = max(best, value)
    return best


def _weights(rng: random.Random, n: int) -> list[float]:
    return [rng.choice([1.0, 0.5, 1 / 3]) for _ in range(n)]


def test_weighted_optimum_and_payments_match_brute_force() -> None:
    for seed in range(150):
        rng = random.Random(seed)
        bids, free = random_auction(rng)
        weights = _weights(rng, len(bids))
        outcome = _run(bids, free, weights)
        best = _weighted_best(bids, weights)
        assert outcome.objective == pytest.approx(best, abs=1e-9, rel=0), seed
        chosen = {b: o.choice or None for b, o in outcome.apps.items()}
        for k, (bid, w) in enumerate(zip(bids, weights, strict=True)):
            got = outcome.apps[bid.app_id]
            if not got.choice:
                assert got.c == 1.0
                continue
            others = sum(
                wj * objective_of([bj], chosen)
                for j, (bj, wj) in enumerate(zip(bids, weights, strict=True))
                if j != k
            )
            want = math.exp((others - _weighted_best(bids, weights, skip=k)) / w)
            assert got.c == pytest.approx(min(1.0, want), rel=1e-9, abs=1e-300), (seed, k)


def test_weights_of_one_are_partial_allocation_bit_for_bit() -> None:
    for seed in range(100):
        bids, free = random_auction(random.Random(seed))
        assert _run(bids, free, [1.0] * len(bids)) == _run(bids, free, None)


def test_a_weight_must_be_in_zero_one_and_one_per_bid() -> None:
    bids, free = random_auction(random.Random(1))
    with pytest.raises(ValueError, match="one weight per bid"):
        _run(bids, free, [1.0] * (len(bids) + 1))
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        _run(bids, free, [0.0] * len(bids))


def _utility(outcome: AuctionOutcome, true_bid: Bid) -> float:
    got = outcome.apps[true_bid.app_id]
    return got.c * true_value(true_bid, got.choice)


def test_truthful_bidding_stays_dominant_under_weights() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        bids, free = random_auction(rng, bidders=(2, 3), gpus=(3, 6), entries=(1, 4))
        weights = _weights(rng, len(bids))
        for i, bid in enumerate(bids):
            truth = _utility(_run(bids, free, weights), bid)
            for lie in _misreports(bid, free, rng):
                lied = _run(bids[:i] + [lie] + bids[i + 1 :], free, weights)
                assert _utility(lied, bid) <= truth * (1 + 1e-9), (seed, bid, lie)


@settings(max_examples=120, deadline=None, database=None)
@given(_auction_and_lie(), st.lists(st.sampled_from([1.0, 0.5, 0.25]), min_size=3, max_size=3))
def test_no_arbitrary_misreport_beats_the_truth_under_weights(case, pool) -> None:
    bids, free, i, lie = case
    weights = pool[: len(bids)]
    truth = _utility(_run(bids, free, weights), bids[i])
    lied = _run(bids[:i] + [lie] + bids[i + 1 :], free, weights)
    assert _utility(lied, bids[i]) <= truth * (1 + 1e-9)
