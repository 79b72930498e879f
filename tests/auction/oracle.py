"""Brute-force test oracle for the Partial Allocation auction (tests only, never src/).

Everything here enumerates every allocation (one menu entry or nothing per bidder) and
works directly on ``Bid`` objects and products of utilities ``v = 1 / rho``, so it shares
no code with the solver or with ``partial_allocation`` and can disagree with them.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from themis.auction.bids import Bid, MenuEntry
from themis.fairness.ftf import RHO_MAX

#: An allocation: app id -> the chosen menu entry's GPUs, or None for "nothing".
Allocation = dict[str, tuple[Hashable, ...] | None]


@dataclass(frozen=True)
class BruteResult:
    objective: float  # max of sum_i log(rho_none_i) - log(rho_i(x_i))
    allocation: Allocation  # one maximiser
    unique: bool  # every allocation within 1e-7 of the optimum gives each app the same gain


def rho_of(bid: Bid, bundle: tuple[Hashable, ...] | None) -> float:
    """The rho ``bid`` reports for exactly ``bundle`` (best rho if listed twice)."""
    if bundle is None:
        return bid.rho_none
    key = frozenset(bundle)
    rhos = [e.rho for e in bid.menu if frozenset(e.gpus) == key]
    if not rhos:
        raise KeyError(f"{bundle} is not on {bid.app_id}'s menu")
    return min(rhos)


def objective_of(bids: Sequence[Bid], allocation: Allocation) -> float:
    """sum_i log(rho_none_i) - log(rho_i(x_i)) over the bidders in ``bids``."""
    return sum(math.log(b.rho_none) - math.log(rho_of(b, allocation.get(b.app_id))) for b in bids)


def is_feasible(allocation: Allocation) -> bool:
    used: set[Hashable] = set()
    for bundle in allocation.values():
        if bundle is None:
            continue
        if len(set(bundle)) != len(bundle) or used & set(bundle):
            return False
        used |= set(bundle)
    return True


def brute_force(bids: Sequence[Bid], exclude: str | None = None) -> BruteResult:
    """The proportional-fair optimum by enumerating every allocation."""
    active = [b for b in bids if b.app_id != exclude]
    options = [[None, *(e.gpus for e in b.menu)] for b in active]
    best = -math.inf
    best_alloc: Allocation = {}
    seen: list[tuple[float, tuple[float, ...]]] = []
    for combo in itertools.product(*options):
        alloc = {b.app_id: x for b, x in zip(active, combo, strict=True)}
        if not is_feasible(alloc):
            continue
        gains = tuple(objective_of([b], alloc) for b in active)
        seen.append((sum(gains), gains))
        if sum(gains) > best:
            best, best_alloc = sum(gains), alloc
    # Whether the maximiser is unique enough for a test to compare allocations (per-app
    # gains), not just objectives: all near-optimal allocations agree on every app's gain.
    near = [g for v, g in seen if v >= best - 1e-7]
    unique = all(
        math.isclose(x, y, abs_tol=1e-7) for g in near for x, y in zip(g, near[0], strict=True)
    )
    return BruteResult(best, best_alloc, unique)


def product_v(bids: Sequence[Bid], allocation: Allocation, skip: str) -> float:
    """prod_{j != skip} v_j(x_j) with v = 1 / rho (nothing: 1 / rho_none)."""
    out = 1.0
    for b in bids:
        if b.app_id != skip:
            out *= 1.0 / rho_of(b, allocation.get(b.app_id))
    return out


def brute_c(bids: Sequence[Bid], allocation: Allocation, app_id: str) -> float:
    """docs/design.md §5 step 4:
    c_i = prod_{j != i} v_j(x*_j) / prod_{j != i} v_j(x^-i_j), where x* is
    ``allocation`` and x^-i is the brute-force optimum without i."""
    without = brute_force(bids, exclude=app_id).allocation
    return product_v(bids, allocation, app_id) / product_v(bids, without, app_id)


def true_value(bid: Bid, bundle: Sequence[Hashable]) -> float:
    """The bidder's true utility v = 1 / rho for receiving ``bundle``.

    Free disposal: owning more GPUs never hurts, so the value of any GPU set is the best of
    winning nothing and every true menu entry it contains. On the bidder's own menu entries
    this is 1 / rho of the entry whenever that entry is worth taking at all, and it also
    gives a value to bundles a misreport invents.
    """
    have = set(bundle)
    best = 1.0 / bid.rho_none
    for e in bid.menu:
        if set(e.gpus) <= have:
            best = max(best, 1.0 / e.rho)
    return best


def random_auction(
    rng: random.Random,
    bidders: tuple[int, int] = (2, 4),
    gpus: tuple[int, int] = (3, 8),
    entries: tuple[int, int] = (1, 5),
) -> tuple[list[Bid], list[Hashable]]:
    """A random small auction: distinct non-empty bundles per menu, rho log-uniform in
    [0.1, 10], rho_none sometimes RHO_MAX (a new app), sometimes worse than some entries
    and better than others, sometimes tied with an entry."""
    n_gpus = rng.randint(*gpus)
    # GPU ids of mixed hashable types: the auction must not assume ints.
    free: list[Hashable] = [f"g{k}" if k % 2 else k for k in range(n_gpus)]
    bids = []
    for a in range(rng.randint(*bidders)):
        n_entries = rng.randint(*entries)
        bundles: set[frozenset[int]] = set()
        while len(bundles) < n_entries:
            size = rng.randint(1, n_gpus)
            bundles.add(frozenset(rng.sample(range(n_gpus), size)))
        menu = []
        for bundle in sorted(bundles, key=sorted):
            order = list(bundle)
            rng.shuffle(order)  # preference order is arbitrary
            rho = math.exp(rng.uniform(math.log(0.1), math.log(10.0)))
            menu.append(MenuEntry(tuple(free[k] for k in order), rho))
        kind = rng.random()
        if kind < 0.25:
            rho_none = RHO_MAX
        elif kind < 0.35:
            rho_none = rng.choice(menu).rho  # a tie: that entry gains nothing
        else:
            rho_none = math.exp(rng.uniform(math.log(0.2), math.log(20.0)))
        bids.append(Bid(f"app{a}", rho_none, tuple(menu)))
    return bids, free
