"""The uncontended shortcut of ``solve_all`` (no search when nobody competes) gives the
search's answer, bit for bit, and brute force's; it declines whenever bidders compete."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.auction import solver
from themis.auction.bids import Bid, MenuEntry
from themis.auction.partial_allocation import build_candidates, partial_allocation, payment_fraction
from themis.auction.solver import _uncontended, solve_all

from .oracle import brute_c, brute_force


@st.composite
def mostly_apart(draw: st.DrawFn) -> tuple[list[Bid], list[int]]:
    """Bidders on mostly separate machines: nested menus (the agents' shape) over their own
    GPUs, sometimes a bundle on a neighbour's GPUs (contention), sometimes equal rhos
    (a larger bundle no better, or two bundles tied), sometimes rhos a hair apart."""
    n = draw(st.integers(1, 6))
    width = draw(st.integers(1, 4))
    free = list(range(n * width))
    rhos = st.sampled_from([0.5, 1.0, 2.0, 2.0 + 1e-8, 3.0, 7.5])
    bids = []
    for b in range(n):
        own = free[b * width : (b + 1) * width]
        menu = [MenuEntry(tuple(own[:k]), draw(rhos)) for k in range(1, width + 1)]
        if draw(st.booleans()):  # a bundle elsewhere: on its own GPUs or a neighbour's
            other = own if n == 1 else free[((b + 1) % n) * width :][:width]
            k = draw(st.integers(1, len(other)))
            menu.append(MenuEntry(tuple(reversed(other))[:k], draw(rhos)))
        bids.append(Bid(f"a{b}", draw(st.sampled_from([4.0, 8.0, 2.0 + 1e-8])), tuple(menu)))
    return bids, free


@contextmanager
def shortcut_off() -> Iterator[None]:
    """``solve_all`` without the shortcut: the searches answer every auction. (A context
    manager, not pytest's ``monkeypatch``: hypothesis runs many examples per test call.)"""
    saved = solver._uncontended
    solver._uncontended = lambda groups: None
    try:
        yield
    finally:
        solver._uncontended = saved


@settings(max_examples=400, deadline=None)
@given(mostly_apart())
def test_shortcut_answers_as_the_search_does(auction: tuple[list[Bid], list[int]]) -> None:
    bids, free = auction
    candidates = build_candidates(bids, free)
    groups = [g for g in candidates if g]
    shortcut = _uncontended(groups)
    if shortcut is None:
        return
    with shortcut_off():
        best, without = solve_all(candidates, node_limit=10**6, lp_first=False)
    fast_best, fast_without = shortcut
    assert dict(fast_best.chosen) == dict(best.chosen)
    assert math.isclose(fast_best.objective, best.objective, abs_tol=1e-12)
    assert set(fast_without) == set(without)
    for b in fast_without:
        assert dict(fast_without[b].chosen) == dict(without[b].chosen)
        # The hidden payments: none, exactly, both ways.
        assert payment_fraction(fast_best, fast_without, b) == 1.0
        assert payment_fraction(best, without, b) == 1.0
    # And brute force (which shares no code with either) agrees that nobody pays.
    oracle = brute_force(bids)
    assert math.isclose(fast_best.objective, oracle.objective, abs_tol=1e-9)
    for b in fast_best.chosen:
        assert math.isclose(brute_c(bids, oracle.allocation, bids[b].app_id), 1.0, rel_tol=1e-9)


@pytest.mark.pure_only
@settings(max_examples=200, deadline=None)
@given(mostly_apart(), st.integers(0, 2**32 - 1))
def test_auction_outcome_is_the_same_with_and_without_it(
    auction: tuple[list[Bid], list[int]], seed: int
) -> None:
    """The whole auction (grants, leftover, the rounding's random draws) does not change."""
    bids, free = auction
    fast = partial_allocation(bids, free, random.Random(seed))
    with shortcut_off():
        slow = partial_allocation(bids, free, random.Random(seed))
    assert {a: (o.choice, o.granted) for a, o in fast.apps.items()} == {
        a: (o.choice, o.granted) for a, o in slow.apps.items()
    }
    assert fast.leftover == slow.leftover
    assert not fast.limited


def test_it_answers_when_bidders_are_apart() -> None:
    bids = [
        Bid("a", 4.0, (MenuEntry((0,), 2.0), MenuEntry((0, 1), 1.0), MenuEntry((0, 1, 2), 1.0))),
        Bid("b", 3.0, (MenuEntry((3,), 1.0),)),
    ]
    groups = [g for g in build_candidates(bids, [0, 1, 2, 3]) if g]
    answer = _uncontended(groups)
    assert answer is not None
    best, without = answer
    # a's (0, 1, 2) is no better than (0, 1) and holds all its GPUs: (0, 1) wins.
    assert [bids[b].menu[c.entry].gpus for b, c in sorted(best.chosen.items())] == [(0, 1), (3,)]
    assert all(payment_fraction(best, without, b) == 1.0 for b in best.chosen)


def test_it_declines_when_bidders_compete() -> None:
    overlap = [Bid("a", 4.0, (MenuEntry((0, 1), 1.0),)), Bid("b", 4.0, (MenuEntry((1,), 1.0),))]
    assert _uncontended([g for g in build_candidates(overlap, [0, 1]) if g]) is None
    # Two equally good bundles on different GPUs: which one the search takes is its own
    # tie-breaking, so the shortcut leaves it to the search.
    tied = [Bid("a", 4.0, (MenuEntry((0,), 1.0), MenuEntry((1,), 1.0)))]
    assert _uncontended([g for g in build_candidates(tied, [0, 1]) if g]) is None
    # A rival entry within the margin of the best, on other GPUs: likewise.
    near = [Bid("a", 4.0, (MenuEntry((0,), 1.0), MenuEntry((1,), 1.0 + 1e-9)))]
    assert _uncontended([g for g in build_candidates(near, [0, 1]) if g]) is None
