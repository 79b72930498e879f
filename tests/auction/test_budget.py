"""Auctions within a budget (``themis.auction.budget``): whatever the limit, the answer is
a feasible packing and its claimed bound is never below the true optimum (so the gap it
reports is never smaller than the true one), checked against brute force."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.auction import solver
from themis.auction.bids import Bid, MenuEntry
from themis.auction.bounded import dual_bound
from themis.auction.budget import Budget, Limits
from themis.auction.packing import Solution
from themis.auction.partial_allocation import build_candidates, partial_allocation
from themis.auction.solver import solve_all

from .oracle import brute_force, random_auction


def _check(candidates: list, sol: Solution, want: float, exclude: int | None = None) -> None:
    """Feasible (entries of the candidates, one per bidder, disjoint), its objective the
    sum of its gains, never above the optimum, and proven or bounded from above."""
    used = 0
    known = {(c.bidder, c.entry): c for g in candidates for c in g}
    for bidder, c in sol.chosen.items():
        assert c.bidder == bidder != exclude
        assert known[(c.bidder, c.entry)] == c
        assert not c.mask & used
        used |= c.mask
    assert sol.objective == pytest.approx(sum(c.gain for c in sol.chosen.values()), abs=1e-9)
    assert sol.objective <= want + 1e-9
    if sol.bound is None:
        assert sol.objective == pytest.approx(want, abs=1e-9, rel=0)
    else:
        assert sol.bound >= want  # the claimed gap is at least the true one
        assert sol.gap >= want - sol.objective


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    nodes=st.integers(1, 60),
    lp=st.booleans(),
)
def test_limited_answers_are_feasible_and_bounds_hold(seed: int, nodes: int, lp: bool) -> None:
    bids, free = random_auction(random.Random(seed), bidders=(2, 6), gpus=(3, 9))
    candidates = build_candidates(bids, free)
    saved = solver.LP_FIRST_WORK
    solver.LP_FIRST_WORK = 0 if lp else saved  # lp: take the LP path first
    try:
        best, without = solve_all(candidates, budget=Budget(Limits(nodes=nodes)))
    finally:
        solver.LP_FIRST_WORK = saved
    _check(candidates, best, brute_force(bids).objective)
    for b, sol in without.items():
        assert b in best.chosen
        _check(candidates, sol, brute_force(bids, exclude=bids[b].app_id).objective, b)
        # x^-i is never worth less than x* minus i: c_i <= 1 without clamping
        assert sol.objective >= best.objective - best.chosen[b].gain - 1e-12


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), nodes=st.integers(1, 40))
def test_limited_payments_stay_in_zero_one(seed: int, nodes: int) -> None:
    bids, free = random_auction(random.Random(seed), bidders=(2, 6), gpus=(3, 9))
    outcome = partial_allocation(bids, free, random.Random(0), limits=Limits(nodes=nodes))
    granted: set = set()
    for o in outcome.apps.values():
        assert 0.0 < o.c <= 1.0
        assert set(o.granted) <= set(o.choice)
        assert not granted & set(o.granted)
        granted |= set(o.granted)
    assert outcome.gap >= 0.0 and outcome.resolve_gap >= 0.0
    if not outcome.limited:
        assert outcome.gap == 0.0


def test_a_tiny_limit_is_reported_and_a_large_one_changes_nothing() -> None:
    """One node cannot prove a contested auction: the answer says so; the default limit
    gives what the unlimited solver gives, bit for bit."""
    limited_seen = 0
    for seed in range(40):
        bids, free = random_auction(random.Random(seed), bidders=(4, 6), gpus=(6, 9))
        candidates = build_candidates(bids, free)
        free_best, free_without = solve_all(candidates)
        best, without = solve_all(candidates, budget=Budget(Limits(nodes=200_000)))
        assert (best, without) == (free_best, free_without)
        tiny, _ = solve_all(candidates, budget=Budget(Limits(nodes=1)))
        limited_seen += tiny.bound is not None
    assert limited_seen > 0


def test_a_deadline_in_the_past_still_answers() -> None:
    bids, free = random_auction(random.Random(3), bidders=(5, 6), gpus=(8, 9))
    candidates = build_candidates(bids, free)
    ticks = iter([0.0] + [10.0] * 10_000)  # the deadline has passed at the first look
    budget = Budget(Limits(seconds=1.0), clock=lambda: next(ticks))
    best, without = solve_all(candidates, budget=budget)
    _check(candidates, best, brute_force(bids).objective)
    assert best.bound is not None and math.isfinite(best.bound)


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        Limits(nodes=0)
    with pytest.raises(ValueError):
        Limits(seconds=0.0)


class _Ticks:
    """A clock that moves ``step`` seconds each time it is read: a deadline of 1 s then
    passes at the ``1 / step``-th reading, wherever in the auction that falls (checking
    the bids, a solve, or assembling the answer)."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _heldout_like(rng: random.Random, bidders: int, machines: int) -> tuple[list[Bid], list]:
    """A small auction of the held-out family's shape (benchmarks/heldout.py): 8 GPUs per
    machine, each bidder 4 entries of 1/2/4 random GPUs on one machine or split over
    two, rho = base / (size x factor): overlapping bundles, exact ties, a fractional LP."""
    free = [f"m{m}g{g}" for m in range(machines) for g in range(8)]
    bids = []
    for k in range(bidders):
        base = rng.uniform(1.0, 30.0)
        menu = []
        for _ in range(4):
            size = rng.choice((1, 2, 4))
            if size == 1 or rng.random() < 0.7:
                m = rng.randrange(machines)
                gpus = [f"m{m}g{g}" for g in rng.sample(range(8), size)]
                factor = 1.0
            else:
                m1, m2 = rng.sample(range(machines), 2)
                gpus = [f"m{m1}g{g}" for g in rng.sample(range(8), size // 2)]
                gpus += [f"m{m2}g{g}" for g in rng.sample(range(8), size // 2)]
                factor = 0.8
            menu.append(MenuEntry(tuple(gpus), base / (size * factor)))
        bids.append(Bid(f"app{k}", 2.0 * base, tuple(menu)))
    return bids, free


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 10**6), readings=st.integers(1, 400), lp=st.booleans())
def test_a_deadline_anywhere_in_the_call_answers_feasibly_with_true_bounds(
    seed: int, readings: int, lp: bool
) -> None:
    """The deadline passes after a hypothesis-chosen number of clock readings: before the
    bids are checked, during the solves, or while the answer is assembled. Whatever the
    point, x* and every x^-i are feasible and never claim a bound below the optimum."""
    bids, free = random_auction(random.Random(seed), bidders=(2, 6), gpus=(3, 9))
    candidates = build_candidates(bids, free)
    budget = Budget(Limits(seconds=1.0), clock=_Ticks(1.0 / readings))
    saved = solver.LP_FIRST_WORK
    solver.LP_FIRST_WORK = 0 if lp else saved
    try:
        best, without = solve_all(candidates, budget=budget)
    finally:
        solver.LP_FIRST_WORK = saved
    _check(candidates, best, brute_force(bids).objective)
    for b, sol in without.items():
        _check(candidates, sol, brute_force(bids, exclude=bids[b].app_id).objective, b)
        assert sol.objective >= best.objective - best.chosen[b].gain - 1e-12


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    bidders=st.integers(6, 14),
    readings=st.integers(1, 2_000),
)
def test_heldout_shaped_auctions_cut_anywhere_keep_their_promises(
    seed: int, bidders: int, readings: int
) -> None:
    """Held-out-shaped auctions (too large for brute force; the exact solver is the
    reference) cut by the deadline at any point of ``partial_allocation``, bid checking
    and answer assembly included: the allocation is feasible, x*'s claimed gap is at
    least its true one, and every c_i stays in (0, 1]."""
    rng = random.Random(seed)
    bids, free = _heldout_like(rng, bidders, machines=rng.randint(2, 4))
    exact, _ = solve_all(build_candidates(bids, free))
    budget = Budget(Limits(seconds=1.0), clock=_Ticks(1.0 / readings))
    outcome = partial_allocation(bids, free, random.Random(0), budget=budget)
    used: set = set()
    value = 0.0
    by_id = {b.app_id: b for b in bids}
    for app_id, o in outcome.apps.items():
        assert 0.0 < o.c <= 1.0
        assert set(o.granted) <= set(o.choice)
        assert not used & set(o.choice)
        used |= set(o.choice)
        if o.choice:
            rho = min(e.rho for e in by_id[app_id].menu if e.gpus == o.choice)
            value += math.log(by_id[app_id].rho_none) - math.log(rho)
    assert outcome.objective == pytest.approx(value, abs=1e-9)
    assert outcome.objective <= exact.objective + 1e-9
    assert outcome.objective + outcome.gap >= exact.objective - 1e-9
    if not outcome.limited:
        assert outcome.objective == pytest.approx(exact.objective, abs=1e-9)


def _heldout_like(rng: random.Random, bidders: int, machines: int) -> tuple[list[Bid], list]:
    """Menus of ``benchmarks/heldout.py``'s family, small: entries of 1, 2 or 4 GPUs on one
    machine or split over two, with many exact ties; their LP relaxation is fractional,
    so a limited auction takes the LP path's interior point and bounded answers."""
    free = [f"m{m}g{g}" for m in range(machines) for g in range(4)]
    bids = []
    for b in range(bidders):
        base = rng.uniform(1.0, 30.0)
        menu = []
        for _ in range(5):
            size = rng.choice((1, 2, 4))
            if size == 1 or rng.random() < 0.6:
                m = rng.randrange(machines)
                gpus = [f"m{m}g{g}" for g in rng.sample(range(4), size)]
                factor = 1.0
            else:
                m1, m2 = rng.sample(range(machines), 2)
                gpus = [f"m{m1}g{g}" for g in rng.sample(range(4), size // 2)]
                gpus += [f"m{m2}g{g}" for g in rng.sample(range(4), size // 2)]
                factor = 0.8
            menu.append(MenuEntry(tuple(gpus), base / (size * factor)))
        bids.append(Bid(f"app{b}", 2.0 * base, tuple(menu)))
    return bids, free


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    nodes=st.sampled_from([1, 20, 300, 3_000, 30_000]),
)
def test_limited_lp_path_answers_are_feasible_with_certified_gaps(seed: int, nodes: int) -> None:
    """Under any work limit, on fractional LPs (the interior point, the bounded answers,
    the neighbourhood search, re-solves answered without a search once the units run
    out): x* and every x^-i are feasible packings, never worth more than the exact
    optimum, and their certified bound is never below it."""
    bids, free = _heldout_like(random.Random(seed), bidders=14, machines=5)
    candidates = build_candidates(bids, free)
    saved = solver.LP_FIRST_WORK
    solver.LP_FIRST_WORK = 0  # the LP path first, as for large auctions
    try:
        best, without = solve_all(candidates, budget=Budget(Limits(nodes=nodes)))
    finally:
        solver.LP_FIRST_WORK = saved
    exact = solver.solve(candidates)
    _check(candidates, best, exact.objective)
    for b, sol in without.items():
        assert b in best.chosen
        _check(candidates, sol, solver.solve(candidates, exclude=b).objective, b)
        assert sol.objective >= best.objective - best.chosen[b].gain - 1e-12


def test_the_interior_point_gives_the_lp_bound_within_the_work_limit() -> None:
    """The interior point method (what an LP the simplex cannot finish in its share gets
    next) gives the LP's bound (optimal duals, no vertex), certified in Python, and
    spends its iterations' work units."""
    bids, free = _heldout_like(random.Random(7), bidders=40, machines=10)
    candidates = [g for g in build_candidates(bids, free) if g]
    from themis.auction.lp_path import WarmLp

    lp = WarmLp(candidates, solver.TOLERANCE)
    budget = Budget(Limits(nodes=10**9))
    assert lp.interior(budget) is True  # converged
    assert budget.nodes_left is not None and budget.nodes_left < 10**9
    exact = solver.solve(candidates)
    bound = dual_bound(candidates, lp.prices.tolist())
    assert bound >= exact.objective  # certified: never below the optimum
    full = WarmLp(candidates, solver.TOLERANCE)
    full.solve()  # the simplex's optimal duals: the same LP bound
    assert bound == pytest.approx(dual_bound(candidates, full.prices.tolist()), abs=1e-6)


def test_a_mip_is_not_started_on_units_that_cannot_pay_its_setup() -> None:
    """HiGHS's root node ignores its limits: under a work limit the MIP starts only when
    the units left cover its set-up, so a nearly spent budget cannot be overrun by it."""
    from themis.auction.budget import MIP_UNITS_PER_COLUMN, mip_affordable

    bids, free = _heldout_like(random.Random(3), bidders=10, machines=4)
    candidates = [g for g in build_candidates(bids, free) if g]
    entries = sum(len(g) for g in candidates)
    enough = Budget(Limits(nodes=MIP_UNITS_PER_COLUMN * entries))
    short = Budget(Limits(nodes=MIP_UNITS_PER_COLUMN * entries - 1))
    assert mip_affordable(enough, entries) and solver._mip_worth(enough, candidates)
    assert not mip_affordable(short, entries) and not solver._mip_worth(short, candidates)
    assert solver._mip_worth(Budget.unlimited(), candidates)


def test_work_units_weigh_highs_iterations_by_model_size() -> None:
    """A HiGHS iteration on a large model costs more units than a search node, within a
    cap; a re-solve's bounded answer is charged by the auction's bidders."""
    from themis.auction.budget import (
        MAX_IPM_UNITS,
        MAX_ITERATION_UNITS,
        highs_units,
        ipm_units,
        resolve_units,
    )

    assert highs_units(10) == 1 and ipm_units(5) == 1
    assert 1 < highs_units(5_000) < highs_units(7_000) <= MAX_ITERATION_UNITS
    assert highs_units(10**7) == MAX_ITERATION_UNITS and ipm_units(10**7) == MAX_IPM_UNITS
    assert resolve_units(1_000) > resolve_units(100) > 1
    budget = Budget(Limits(nodes=100))
    assert budget.afford(16) == 6 and budget.afford(1_000) == 1
    assert Budget.unlimited().afford(16) is None
