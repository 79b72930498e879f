"""GPU prices for the branch and bound's LP-dual bound.

For any prices y >= 0 on the GPUs, weak LP duality bounds what a set of bidders can still
gain on the free GPUs:

    gain(packing) <= y(free GPUs) + sum over bidders of max(0, max_e gain_e - y(e))

because each chosen entry's gain is its *reduced profit* ``gain_e - y(e)`` plus the prices
of its GPUs, which are free and pairwise disjoint. The bound is exact arithmetic on any y,
so the prices only decide how tight it is, never whether it is valid. Tight prices come
from the LP relaxation (HiGHS, once per hard auction; the relaxation is nearly always
integral on real menus, making the bound at the root the optimum itself) and, for the
re-solves without one winner, from a few steps of coordinate descent on that winner's GPUs
(removing a bidder leaves its GPUs overpriced; lowering each to the second-highest
willingness to pay recovers nearly the re-solve's own LP bound at a fraction of the cost).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Added to the bound so that floating-point rounding in sums of prices never lets it cut
#: a real improvement (the search's own tolerance is 1e-9: this is far below it).
SLACK = 1e-11

#: One bidder's entries in search form: tuples whose first two fields are (gain, mask).
Entries = Sequence[tuple]


def lp_prices(seq: Sequence[Entries], width: int) -> list[float] | None:
    """Optimal duals of the GPU rows of the LP relaxation, one per bit below ``width``
    (None if HiGHS reports no optimum, which a bounded feasible LP never does)."""
    import numpy as np  # here, not at import: the CLI starts without numpy and scipy
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    gains: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    col = 0
    for r, options in enumerate(seq):
        for option in options:
            gains.append(option[0])
            rows.append(r)
            cols.append(col)
            rest = option[1]
            while rest:
                low = rest & -rest
                rows.append(len(seq) + low.bit_length() - 1)
                cols.append(col)
                rest ^= low
            col += 1
    height = len(seq) + width
    matrix = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(height, col)).tocsr()
    result = linprog(
        -np.array(gains), A_ub=matrix, b_ub=np.ones(height), bounds=(0, None), method="highs"
    )
    if result.status != 0:  # pragma: no cover - a bounded feasible LP always solves
        return None
    return [max(0.0, -float(m)) for m in result.ineqlin.marginals[len(seq) :]]


def mask_price(mask: int, y: Sequence[float]) -> float:
    price = 0.0
    while mask:
        low = mask & -mask
        price += y[low.bit_length() - 1]
        mask ^= low
    return price


class Prices:
    """GPU prices y and the price of each GPU set asked for, remembered.

    Prices derived from others by changing a few GPUs (``descend``) price a set as the
    base does plus the changes: a re-solve then costs time in the GPUs re-priced, not in
    every entry's size.
    """

    def __init__(self, y: list[float], base: Prices | None = None, changed: Iterable[int] = ()):
        self.y = y
        self._cache: dict[int, float] = {}
        self._base = base
        if base is None:
            self._delta: list[tuple[int, float]] = []
            self.total = 0.0
            for value in y:
                self.total += value
        else:
            self._delta = [(1 << b, y[b] - base.y[b]) for b in set(changed) if y[b] != base.y[b]]
            self.total = base.total
            for _, change in self._delta:
                self.total += change

    def of(self, mask: int) -> float:
        """y(mask): the sum of the prices of its GPUs."""
        price = self._cache.get(mask)
        if price is None:
            if self._base is None:
                price = mask_price(mask, self.y)
            else:
                price = self._base.of(mask)
                for flag, change in self._delta:
                    if mask & flag:
                        price += change
            self._cache[mask] = price
        return price


def descend(seq: Sequence[Entries], prices: Prices, bits: Sequence[int]) -> Prices:
    """Lower the bound by exact coordinate descent on the prices of ``bits``.

    Along one GPU g the bound is ``y_g + sum_b max(A_b, W_b - y_g)`` plus constants, with
    A_b the bidder's best reduced profit without g (at least 0) and W_b its best with g
    before paying for g: convex, and smallest at the second-largest ``W_b - A_b`` (or 0).
    """
    y = list(prices.y)
    flat = [[(o[0], o[1], prices.of(o[1])) for o in options] for options in seq]
    for bit in bits:
        flag = 1 << bit
        old = y[bit]
        first = second = 0.0
        for options in flat:
            without = 0.0
            with_g = 0.0
            for gain, mask, price in options:
                if mask & flag:
                    if gain - price + old > with_g:
                        with_g = gain - price + old
                elif gain - price > without:
                    without = gain - price
            will = with_g - without
            if will > second:
                if will > first:
                    first, second = will, first
                else:
                    second = will
        y[bit] = second
        if second != old:
            flat = [
                [(g, m, p + second - old if m & flag else p) for g, m, p in options]
                for options in flat
            ]
    return Prices(y, prices, bits)


class DualBound:
    """The bound of one search, per position: the bidders from it on with a positive
    reduced profit, each as its entries (reduced profit, mask), best first."""

    def __init__(self, seq: Sequence[Entries], prices: Prices) -> None:
        self.total = prices.total
        self.price: dict[int, float] = {}
        rows: list[list[tuple[float, int]]] = []
        for options in seq:
            row = []
            for option in options:
                gain, mask = option[0], option[1]
                price = self.price.get(mask)
                if price is None:
                    price = self.price[mask] = prices.of(mask)
                if gain - price > 0.0:
                    row.append((gain - price, mask))
            row.sort(key=lambda t: -t[0])
            rows.append(row)
        self.rows_from: list[list[list[tuple[float, int]]]] = [[] for _ in range(len(rows) + 1)]
        for i in range(len(rows) - 1, -1, -1):
            rest = self.rows_from[i + 1]
            self.rows_from[i] = [rows[i], *rest] if rows[i] else rest
