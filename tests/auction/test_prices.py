"""The LP-dual bound: valid for any GPU prices, tight with the LP's, and never changing
what the branch and bound answers (only how many nodes it needs)."""

from __future__ import annotations

import math
import random

import pytest

from themis.auction import solver
from themis.auction.bids import Bid, MenuEntry
from themis.auction.partial_allocation import build_candidates
from themis.auction.prices import DualBound, Prices, descend, lp_prices, mask_price
from themis.auction.solver import _Plan, _Search, solve_all

from .oracle import brute_force, random_auction
from .test_solver_speed_cases import _chain_auction


def _root_bound(seq: list, y: list[float]) -> float:
    """The bound at the root: y(all GPUs) plus every bidder's best reduced profit."""
    duals = DualBound(seq, Prices(list(y)))
    return duals.total + sum(row[0][0] for row in duals.rows_from[0])


def _plan(bids: list[Bid], free: list) -> _Plan:
    return _Plan([c for c in build_candidates(bids, free) if c])


def test_mask_price_sums_the_prices_of_its_bits() -> None:
    assert mask_price(0b1011, [1.0, 2.0, 4.0, 8.0]) == 11.0
    assert mask_price(0, [1.0]) == 0.0
    prices = Prices([1.0, 2.0, 4.0])
    changed = Prices([1.0, 0.5, 4.0], prices, [1])
    assert (changed.of(0b011), changed.of(0b101), changed.total) == (1.5, 5.0, 5.5)


def test_hand_case_bound_and_descent() -> None:
    # One GPU, two bidders worth 3 and 2 on it. At y = 0 the bound counts both (5); the
    # descent prices the GPU at the second-highest willingness (2): bound 2 + (3 - 2) = 3,
    # the optimum. With the LP's prices the bound is the optimum too.
    bids = [
        Bid("a", math.exp(3.0), (MenuEntry((0,), 1.0),)),
        Bid("b", math.exp(2.0), (MenuEntry((0,), 1.0),)),
    ]
    plan = _plan(bids, [0])
    assert _root_bound(plan.seq, [0.0]) == pytest.approx(5.0)
    y = descend(plan.seq, Prices([0.0]), [0]).y
    assert y == [pytest.approx(2.0)]
    assert _root_bound(plan.seq, y) == pytest.approx(3.0)
    lp = lp_prices(plan.seq, plan.width)
    assert lp is not None and _root_bound(plan.seq, lp) == pytest.approx(3.0)


def test_bound_is_valid_for_any_prices() -> None:
    # Weak duality: whatever the prices, the root bound is at least the optimum.
    rng = random.Random(5)
    for seed in range(120):
        bids, free = random_auction(random.Random(seed))
        if not any(build_candidates(bids, free)):
            continue
        plan = _plan(bids, free)
        opt = brute_force(bids).objective
        for _ in range(4):
            y = [rng.choice([0.0, rng.uniform(0, 3)]) for _ in range(plan.width)]
            assert _root_bound(plan.seq, y) >= opt - 1e-9
        lp = lp_prices(plan.seq, plan.width)
        assert lp is not None
        assert _root_bound(plan.seq, lp) >= opt - 1e-9
        # Descent never raises the bound it starts from.
        start = [rng.uniform(0, 3) for _ in range(plan.width)]
        lowered = descend(plan.seq, Prices(start), range(plan.width))
        assert _root_bound(plan.seq, lowered.y) <= _root_bound(plan.seq, start) + 1e-9
        # A derived price list prices sets as a fresh one would.
        fresh = Prices(lowered.y)
        for options in plan.seq:
            for option in options:
                assert lowered.of(option[1]) == pytest.approx(fresh.of(option[1]), abs=1e-12)
        assert lowered.total == pytest.approx(fresh.total, abs=1e-12)


def _outcome(best: solver.Solution, without: dict) -> tuple:
    """Everything solve_all answers, as exact floats and candidate ids."""
    return (
        best.objective,
        sorted((b, c.entry) for b, c in best.chosen.items()),
        sorted((b, s.objective) for b, s in without.items()),
    )


@pytest.mark.parametrize("make", [random_auction, _chain_auction], ids=["random", "chains"])
def test_pricing_changes_no_answer_bit_for_bit(monkeypatch: pytest.MonkeyPatch, make) -> None:
    """Every search priced from its first node against the plain search: same floats."""
    for seed in range(150):
        bids, free = make(random.Random(seed))
        candidates = build_candidates(bids, free)
        monkeypatch.setattr(solver, "PRICE_AFTER", 10**9)  # never priced
        plain = _outcome(*solve_all(candidates, node_limit=10**6))
        monkeypatch.setattr(solver, "PRICE_AFTER", 0)  # priced from the start
        monkeypatch.setattr(solver, "EAGER_PRICING", -1)
        priced = _outcome(*solve_all(candidates, node_limit=10**6))
        assert priced == plain


def _rotated_chains(rng: random.Random, bidders: int, gpus: int) -> tuple[list[Bid], list[int]]:
    """Menus as the agents build them: each bidder's chain starts at its own point of the
    offer, bundles of 1, 2, 4, 8 and all GPUs, rho falling with each size."""
    bids = []
    for a in range(bidders):
        start = a * gpus // bidders
        order = list(range(start, gpus)) + list(range(start))
        rho = 1.0
        menu = []
        for size in (1, 2, 4, 8, gpus):
            rho *= math.exp(-rng.uniform(0.1, 0.5))
            menu.append(MenuEntry(tuple(order[:size]), rho))
        bids.append(Bid(f"a{a}", 1.0, tuple(menu)))
    return bids, list(range(gpus))


def test_pricing_visits_fewer_nodes_on_hard_auctions() -> None:
    plain_nodes = priced_nodes = 0
    for seed in range(8):
        bids, free = _rotated_chains(random.Random(seed), 14, 12)
        plan = _plan(bids, free)
        plain = _Search(plan)
        plain_answer = plain.run(10**6, None)
        priced = _Search(plan)
        assert priced.run(10**6, None, plan.lp_prices, eager=True) == plain_answer
        assert priced.nodes <= plain.nodes
        plain_nodes += plain.nodes
        priced_nodes += priced.nodes
    # these take 178-669 nodes each unpriced (3,155 in all), about a third of that priced
    assert priced_nodes * 2 < plain_nodes


def test_remembered_states_change_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that forgets what it proved about states (no memo) answers the same."""
    from themis.auction import solver as module

    class Forgetful(dict):
        def get(self, key, default=None):  # never recalls a state
            return default

    for seed in range(60):
        rng = random.Random(seed)
        bids, free = _rotated_chains(rng, rng.randint(2, 12), 10)
        plan = _plan(bids, free)
        remembering = _Search(plan)
        answer = remembering.run(10**6, None)
        monkeypatch.setattr(module, "_Memo", Forgetful)
        forgetful = _Search(plan)
        assert forgetful.run(10**6, None) == answer
        assert remembering.nodes <= forgetful.nodes
        monkeypatch.undo()
