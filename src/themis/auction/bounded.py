"""Answers of an auction whose budget ran out: a feasible packing and a certified bound.

When a solve stops on its budget (``themis.auction.budget``) the solver still answers:

- with the best feasible packing it knows: the best one its searches found, or a greedy
  packing (``greedy``), whichever is worth more. Every packing here is built from disjoint
  entries, at most one per bidder: never infeasible;
- with an upper bound on the optimum, the smallest of the bounds it has: the
  weak-duality bound of the LP relaxation at any GPU prices ``y >= 0``
  (``dual_bound``: ``y(GPUs) + sum_j max(0, max_e gain_e - y(e))``, valid for every y, so
  prices from an unfinished LP are still safe, only looser), and the branch and bound's
  capacity and clique bounds. Each is computed here in Python (exactly rounded sums) plus
  ``TOLERANCE``, so the claimed gap is never smaller than the true one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from themis.auction.solver import Candidate, Solution

#: Added to every computed bound for rounding (far above the sums' rounding error:
#: thousands of terms of size <= ~100, each exactly rounded).
ROUNDING = 1e-9


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def greedy(groups: Sequence[Sequence[Candidate]], start: Solution | None = None) -> Solution:
    """A feasible packing: ``start``'s choices (if any) plus, for the other bidders, entries
    taken greedily if disjoint from what is taken, in two orders (gain, and gain per GPU,
    largest first); the better of the two."""
    from themis.auction.solver import Solution

    base: dict[int, Candidate] = dict(start.chosen) if start is not None else {}
    used0 = 0
    for c in base.values():
        used0 |= c.mask
    flat = [c for g in groups for c in g if c.bidder not in base]
    best: Solution | None = None
    for key in (
        lambda c: (-c.gain, c.bidder, c.entry),
        lambda c: (-c.gain / c.mask.bit_count(), c.bidder, c.entry),
    ):
        chosen = dict(base)
        used = used0
        for c in sorted(flat, key=key):
            if c.bidder not in chosen and not c.mask & used:
                chosen[c.bidder] = c
                used |= c.mask
        value = math.fsum(c.gain for c in chosen.values())
        if best is None or value > best.objective:
            best = Solution(value, chosen)
    assert best is not None
    return best


def dual_terms(
    groups: Sequence[Sequence[Candidate]], prices: Sequence[float] | None
) -> tuple[float, dict[int, float]]:
    """The weak-duality bound at GPU ``prices`` (per GPU bit; None: all 0) as its parts:
    the prices of the GPUs any entry uses, and per bidder its best reduced profit (>= 0).
    Negative prices are taken as 0 (any y >= 0 gives a valid bound)."""
    pool = 0
    for g in groups:
        for c in g:
            pool |= c.mask

    def price(bit: int) -> float:
        if prices is None or bit >= len(prices):
            return 0.0
        return max(0.0, float(prices[bit]))

    total = math.fsum(price(b) for b in _bits(pool))
    terms: dict[int, float] = {}
    for g in groups:
        best = 0.0
        for c in g:
            reduced = c.gain - math.fsum(price(b) for b in _bits(c.mask))
            best = max(best, reduced)
        if g:
            terms[g[0].bidder] = best
    return total, terms


def dual_bound(
    groups: Sequence[Sequence[Candidate]],
    prices: Sequence[float] | None,
    without: int | None = None,
) -> float:
    """The certified weak-duality bound on the auction's optimum (without bidder
    ``without``) at these prices, plus ``ROUNDING``."""
    total, terms = dual_terms(groups, prices)
    return math.fsum([total, *(t for b, t in terms.items() if b != without)]) + ROUNDING


def limited_answer(
    groups: Sequence[Sequence[Candidate]],
    found: Iterable[Solution | None],
    prices: Sequence[float] | None,
    bounds: Iterable[float] = (),
    start: Solution | None = None,
) -> Solution:
    """The best of ``found`` and a greedy packing (extending ``start``), with the smallest
    of ``bounds`` and the dual bound at ``prices`` as its certified bound."""
    from themis.auction.solver import Solution

    options = [s for s in found if s is not None]
    options.append(greedy(groups, start))
    best = options[0]
    for s in options[1:]:
        if s.objective > best.objective:
            best = s
    bound = min([dual_bound(groups, prices), *bounds])
    return Solution(best.objective, dict(best.chosen), max(bound, best.objective))
