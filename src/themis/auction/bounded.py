"""Answers of an auction whose budget ran out: a feasible packing and a certified bound.

When a solve stops on its budget (``themis.auction.budget``) the solver still answers:

- with the best feasible packing it knows: the best one its searches found, or a greedy
  packing (``greedy``), whichever is worth more, improved by a short local search
  (``improve``). Every packing here is built from disjoint
  entries, at most one per bidder: never infeasible;
- with an upper bound on the optimum, the smallest of the bounds it has: the
  weak-duality bound of the LP relaxation at any GPU prices ``y >= 0``
  (``dual_bound``: ``y(GPUs) + sum_j max(0, max_e gain_e - y(e))``, valid for every y, so
  prices from an unfinished LP are still safe, only looser), and the branch and bound's
  capacity and clique bounds. Each is computed here in Python (exactly rounded sums) plus
  ``TOLERANCE``, so the claimed gap is never smaller than the true one.

Under a deadline (``budget``) the packing's work (greedy orders, local-search moves,
subgradient steps) stops when the clock runs out, with the feasible packing and the valid
bound it has at that point: a packing only ever grows by disjoint entries or strict
improvements, and every bound is valid at any prices. Under a node limit alone they do
their whole deterministic work, as before.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from themis.auction.packing import MIP_COLUMNS, Candidate, Solution

if TYPE_CHECKING:
    from themis.auction.budget import Budget

#: Loops that assemble a bounded answer look at the clock once per this many steps.
CLOCK_STEPS = 64


def _late(budget: Budget | None) -> bool:
    """Whether ``budget``'s deadline has passed (never under a node limit alone)."""
    return budget is not None and budget.out_of_time()


#: Added to every computed bound for rounding (far above the sums' rounding error:
#: thousands of terms of size <= ~100, each exactly rounded).
ROUNDING = 1e-9


@functools.lru_cache(maxsize=1 << 16)
def _bits(mask: int) -> tuple[int, ...]:
    """The GPU bits of a mask, ascending (remembered: an auction's limited re-solves ask
    for the same entries' bits once per winner)."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return tuple(out)


def greedy(
    groups: Sequence[Sequence[Candidate]],
    start: Solution | None = None,
    prices: Sequence[float] | None = None,
    budget: Budget | None = None,
) -> Solution:
    """A feasible packing: ``start``'s choices (if any) plus, for the other bidders, entries
    taken greedily if disjoint from what is taken, in two orders (gain, and gain per GPU,
    largest first), and a third with ``prices`` (reduced profit: gain minus the prices of
    its GPUs); the best of them. Past ``budget``'s deadline no further order is tried
    (the first always is: it is what a packing extending ``start`` needs at least)."""

    base: dict[int, Candidate] = dict(start.chosen) if start is not None else {}
    used0 = 0
    for c in base.values():
        used0 |= c.mask
    flat = [c for g in groups for c in g if c.bidder not in base]
    best: Solution | None = None
    keys: list[Callable[[Candidate], tuple[float, int, int]]] = [
        lambda c: (-c.gain, c.bidder, c.entry),
        lambda c: (-c.gain / c.mask.bit_count(), c.bidder, c.entry),
    ]
    if prices is not None:
        y = list(prices)

        def reduced(c: Candidate) -> tuple[float, int, int]:
            price = math.fsum(y[b] for b in _bits(c.mask) if b < len(y))
            return (-(c.gain - price), c.bidder, c.entry)

        keys.append(reduced)
    for number, key in enumerate(keys):
        if number and _late(budget):
            break
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


#: Passes of the local search (``improve``) over every bidder.
PASSES = 3


def improve(
    groups: Sequence[Sequence[Candidate]],
    start: Solution,
    movers: Sequence[Sequence[Candidate]] | None = None,
    budget: Budget | None = None,
) -> Solution:
    """``start`` improved by a local search of at most ``PASSES`` passes: each bidder in
    turn moves to the entry that raises the total most, where an entry may take GPUs from
    at most one other winner, who then moves to its best entry on the GPUs left (or wins
    nothing). Only strict improvements are made, so the packing stays feasible and never
    loses value; the work is bounded (passes x entries x their GPUs), deterministic.
    ``movers``: the bidders that try to move (default: all of ``groups``). Past
    ``budget``'s deadline it stops after the move it is making: the packing it has is
    feasible and worth at least ``start``."""

    chosen: dict[int, Candidate] = dict(start.chosen)
    order = [g for g in (groups if movers is None else movers) if g]
    # Conflicts are looked up only on the GPUs the movers' entries can touch.
    region = 0
    for g in order:
        for c in g:
            region |= c.mask
    owner: dict[int, int] = {}
    used = 0
    for b, c in chosen.items():
        used |= c.mask
        if c.mask & region:
            for bit in _bits(c.mask):
                owner[bit] = b
    by_bidder = {g[0].bidder: g for g in groups if g}

    def bits_of(c: Candidate) -> tuple[int, ...]:
        return _bits(c.mask)

    def place(b: int, c: Candidate | None) -> None:
        nonlocal used
        old = chosen.pop(b, None)
        if old is not None:
            used &= ~old.mask
            for bit in bits_of(old):
                owner.pop(bit, None)
        if c is not None:
            chosen[b] = c
            used |= c.mask
            for bit in bits_of(c):
                owner[bit] = b

    late = False
    steps = 0
    for _ in range(PASSES):
        moved = False
        for g in order:
            steps += 1
            if steps % CLOCK_STEPS == 0 and _late(budget):
                late = True
                break
            b = g[0].bidder
            mine = chosen.get(b)
            have = mine.gain if mine is not None else 0.0
            free = used & ~mine.mask if mine is not None else used
            best_delta = 1e-12
            best_move: tuple[Candidate, int | None, Candidate | None] | None = None
            move: tuple[Candidate, int | None, Candidate | None]
            for c in g:
                others = {owner[bit] for bit in bits_of(c) if bit in owner} - {b}
                if not others:
                    delta, move = c.gain - have, (c, None, None)
                elif len(others) == 1:
                    (w,) = others
                    lost = chosen[w]
                    left = (free & ~lost.mask) | c.mask
                    alt = None
                    for e in by_bidder[w]:
                        if not e.mask & left and (alt is None or e.gain > alt.gain):
                            alt = e
                    delta = c.gain - have - lost.gain + (alt.gain if alt is not None else 0.0)
                    move = (c, w, alt)
                else:
                    continue
                if delta > best_delta:
                    best_delta, best_move = delta, move
            if best_move is not None:
                c, loser, alt = best_move
                if loser is not None:
                    place(loser, None)
                place(b, c)
                if loser is not None and alt is not None:
                    place(loser, alt)
                moved = True
        if not moved or late:
            break
    value = math.fsum(c.gain for c in chosen.values())
    if value <= start.objective:
        return start
    return Solution(value, chosen)


def reach(groups: Sequence[Sequence[Candidate]]) -> dict[int, int]:
    """Per bidder, the GPUs of all its entries (a mask)."""
    out: dict[int, int] = {}
    for g in groups:
        mask = 0
        for c in g:
            mask |= c.mask
        if g:
            out[g[0].bidder] = mask
    return out


#: Auctions with at least this many entries compute ``dual_terms`` in numpy (a Python
#: loop of exactly rounded sums costs ~0.2 s at 8,000 entries, a fifth of a 1 s deadline).
NUMPY_TERMS = 2_000


def dual_terms(
    groups: Sequence[Sequence[Candidate]], prices: Sequence[float] | None
) -> tuple[float, dict[int, float]]:
    """The weak-duality bound at GPU ``prices`` (per GPU bit; None: all 0) as its parts:
    the prices of the GPUs any entry uses, and per bidder its best reduced profit (>= 0).
    Negative prices are taken as 0 (any y >= 0 gives a valid bound). Large auctions
    compute the terms in numpy, each rounded up by more than numpy's rounding can have
    taken off (``_numpy_terms``), so the bound stays certified."""
    pool = 0
    for g in groups:
        for c in g:
            pool |= c.mask

    def price(bit: int) -> float:
        if prices is None or bit >= len(prices):
            return 0.0
        return max(0.0, float(prices[bit]))

    total = math.fsum(price(b) for b in _bits(pool))
    if prices is not None and sum(len(g) for g in groups) >= NUMPY_TERMS:
        return total, _numpy_terms(groups, prices)
    terms: dict[int, float] = {}
    for g in groups:
        best = 0.0
        for c in g:
            reduced = c.gain - math.fsum(price(b) for b in _bits(c.mask))
            best = max(best, reduced)
        if g:
            terms[g[0].bidder] = best
    return total, terms


def _numpy_terms(
    groups: Sequence[Sequence[Candidate]], prices: Sequence[float]
) -> dict[int, float]:
    """``dual_terms``' per-bidder terms in numpy. A sum of k floats has an error of at most
    (k - 1) eps times the sum of their magnitudes, and the subtraction from the gain one
    more eps of the result; each entry's reduced profit is raised by (k + 2) eps (gain +
    price) before the maximum, which covers both: every term is at least the exact one."""
    import numpy as np  # here, not at import: the CLI starts without numpy

    flat = [c for g in groups for c in g]
    sizes = np.array([c.mask.bit_count() for c in flat], dtype=np.int64)
    gpus = np.array([b for c in flat for b in _bits(c.mask)], dtype=np.int64)
    ptr = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    y = np.zeros(int(gpus.max()) + 1)
    given = np.maximum(0.0, np.asarray(prices, dtype=float)[: len(y)])
    y[: len(given)] = given
    gains = np.array([c.gain for c in flat])
    paid = np.add.reduceat(y[gpus], ptr)
    slack = (sizes + 2) * np.finfo(float).eps * (np.abs(gains) + paid)
    reduced = gains - paid + slack
    starts = np.cumsum([0] + [len(g) for g in groups if g])[:-1]
    best = np.maximum(np.maximum.reduceat(reduced, starts), 0.0).tolist()
    return {g[0].bidder: t for g, t in zip([g for g in groups if g], best, strict=True)}


def dual_bound(
    groups: Sequence[Sequence[Candidate]],
    prices: Sequence[float] | None,
    without: int | None = None,
) -> float:
    """The certified weak-duality bound on the auction's optimum (without bidder
    ``without``) at these prices, plus ``ROUNDING``."""
    total, terms = dual_terms(groups, prices)
    return math.fsum([total, *(t for b, t in terms.items() if b != without)]) + ROUNDING


def tightened(
    groups: Sequence[Sequence[Candidate]],
    answer: Solution,
    prices: Sequence[float] | None,
    budget: Budget | None = None,
) -> tuple[Solution, Sequence[float] | None]:
    """``answer`` (from ``limited_answer``) with its bound tightened by subgradient
    descent on the prices (``subgradient_prices``) from ``prices``, and its packing
    compared with a greedy one by reduced profit at the new prices (then improved); and
    the prices that give the better bound (for the re-solves' bounds). Past ``budget``'s
    deadline it stops where it is (``answer`` as it was, if nothing was tried)."""
    best, best_prices = answer, prices
    # From the prices given (an LP's, maybe unfinished) and from 0: an unfinished LP's
    # duals can be a worse start than none.
    for begin in (prices, None) if prices is not None else (None,):
        if _late(budget):
            break
        y = subgradient_prices(groups, begin, best.objective, budget=budget)
        bounds = [] if best.bound is None else [best.bound]
        again = limited_answer(groups, [best], y, bounds, budget=budget)
        if again.bound != best.bound:
            best_prices = y
        best = again
    return best, best_prices


def limited_answer(
    groups: Sequence[Sequence[Candidate]],
    found: Iterable[Solution | None],
    prices: Sequence[float] | None,
    bounds: Iterable[float] = (),
    start: Solution | None = None,
    focus: int | None = None,
    reaches: Mapping[int, int] | None = None,
    budget: Budget | None = None,
) -> Solution:
    """The best of ``found`` and a greedy packing (extending ``start``), improved by
    ``improve``, with the smallest of ``bounds`` and the dual bound at ``prices`` (when
    given, or when there is no other bound) as its certified bound. ``focus``: GPUs (a
    mask) outside which ``start`` is taken as settled: only bidders with an entry on
    them are tried (a re-solve: the winner's GPUs), which keeps a re-solve's work local;
    ``reaches``: ``reach(groups)``, when the caller has it. ``budget``: past its deadline
    the greedy packing and the local search stop early (see the module docstring)."""

    options = [s for s in found if s is not None]
    movers: Sequence[Sequence[Candidate]] | None = None
    if not options or not _late(budget):
        if focus is None:
            movers = groups
        else:
            known = reach(groups) if reaches is None else reaches
            movers = [g for g in groups if g and known[g[0].bidder] & focus]
        options.append(greedy(movers, start, prices, budget))
    best = options[0]
    for s in options[1:]:
        if s.objective > best.objective:
            best = s
    if movers is not None and not _late(budget):
        best = improve(groups, best, movers, budget)
    given = list(bounds)
    if prices is not None or not given:
        given.append(dual_bound(groups, prices))
    bound = min(given)
    return Solution(best.objective, dict(best.chosen), max(bound, best.objective))


#: Rounds of the large-neighbourhood search on an unproven x* (``neighbourhoods``).
LNS_ROUNDS = 16
#: GPU positions per block of a neighbourhood: a machine of 8 GPUs, in offers sorted by
#: rack and machine (the arbiter's and the held-out files' order).
LNS_BLOCK = 8
#: Share of the blocks a neighbourhood frees.
LNS_SHARE = 0.375
#: Under a work limit, a round's sub-program has at most this many entries (else the next
#: round frees half as many blocks).
LNS_COLUMNS = 300


def neighbourhoods(
    groups: Sequence[Sequence[Candidate]],
    start: Solution,
    budget: Budget | None = None,
    rounds: int = LNS_ROUNDS,
) -> Solution:
    """``start`` improved by a large-neighbourhood search: each round frees a random
    ``LNS_SHARE`` of the GPU blocks (seeded: the same rounds on any machine), and HiGHS's
    MIP re-packs exactly the bidders that hold GPUs there or win nothing, on the freed GPUs
    and their own, the other winners fixed. A round's answer replaces the old choices only
    if it is worth more, and it is feasible by construction (entries inside the freed GPUs
    and the movers' own, which no fixed winner holds, at most one per bidder;
    ``solve_mip`` re-checks HiGHS's answer), so the packing stays feasible and never loses
    value. Measured on the held-out family
    (docs/benchmarks.md): local search alone stops ~5% (200 bidders) and ~9% (400) below
    the LP bound; exact re-packing of larger regions finds what single moves cannot.

    ``budget``: each round takes an equal part of it (HiGHS's nodes and time); a round
    whose sub-program has more than ``solver.MIP_COLUMNS`` entries frees half as many
    blocks next time."""
    from themis.auction.budget import mip_affordable
    from themis.auction.mip import solve_mip

    width = max((c.mask.bit_length() for g in groups for c in g), default=0)
    blocks = -(-width // LNS_BLOCK)
    if blocks < 4 or not groups:
        return start
    rng = random.Random(0)
    # Under a work limit the sub-programs stay small: HiGHS's root node (cuts, heuristics)
    # ignores its iteration limit, and its cost grows fast with the sub-program's size.
    limited = budget is not None and budget.nodes_left is not None
    columns = LNS_COLUMNS if limited else MIP_COLUMNS
    chosen: dict[int, Candidate] = dict(start.chosen)
    by_bidder = {g[0].bidder: g for g in groups if g}
    share = LNS_SHARE
    full = (1 << LNS_BLOCK) - 1
    for r in range(rounds):
        if budget is not None and budget.expired():
            break
        region = 0
        for b in rng.sample(range(blocks), max(1, int(blocks * share))):
            region |= full << (b * LNS_BLOCK)
        movers = {b for b, c in chosen.items() if c.mask & region}
        fixed = 0
        for b, c in chosen.items():
            if b in movers:
                region |= c.mask
            else:
                fixed |= c.mask
        region &= ~fixed
        sub = []
        for b, g in by_bidder.items():
            if b in chosen and b not in movers:
                continue
            fits = [c for c in g if not c.mask & ~region]
            if fits:
                sub.append(fits)
        if sum(len(g) for g in sub) > columns:
            share /= 2.0
            continue
        before = math.fsum(chosen[b].gain for b in movers)
        part = budget.share(1.0 / (rounds - r)) if budget is not None else None
        if part is not None and not mip_affordable(part, sum(len(g) for g in sub)):
            continue  # (the next rounds' parts are larger: what this one left goes on)
        found = solve_mip(sub, part)
        if found.objective > before + 1e-9:
            for b in movers:
                del chosen[b]
            chosen.update(found.chosen)
    value = math.fsum(c.gain for c in chosen.values())
    if value <= start.objective:
        return start
    return Solution(value, chosen, start.bound)


#: Steps of the subgradient descent on the GPU prices (``subgradient_prices``).
SUBGRADIENT_STEPS = 300
#: Steps without a better bound after which the step size is halved.
STALE = 10


def subgradient_prices(
    groups: Sequence[Sequence[Candidate]],
    start: Sequence[float] | None,
    lower: float,
    steps: int = SUBGRADIENT_STEPS,
    budget: Budget | None = None,
) -> list[float]:
    """GPU prices (per GPU bit) that lower the weak-duality bound, by ``steps`` of
    projected subgradient descent from ``start`` (None: 0) with Polyak steps towards
    ``lower`` (the value of a known packing). The bound is convex in the prices and any
    prices >= 0 give a valid one, so this only ever tightens what ``dual_bound`` then
    certifies; it needs no LP, so it also helps when the LP did not finish in time.
    Deterministic: a fixed number of numpy steps (fewer past ``budget``'s deadline)."""
    import numpy as np  # here, not at import: the CLI starts without numpy

    flat = [c for g in groups for c in g]
    if not flat:
        return []
    gains = np.array([c.gain for c in flat])
    sizes = [c.mask.bit_count() for c in flat]
    ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    gpus = np.array([b for c in flat for b in _bits(c.mask)], dtype=np.int64)
    width = int(gpus.max()) + 1
    bidder_starts = np.cumsum([0] + [len(g) for g in groups])[:-1]
    owner = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    pool = np.zeros(width, dtype=bool)
    pool[gpus] = True
    y = np.zeros(width)
    if start is not None:
        given = np.asarray(start, dtype=float)[:width]
        y[: len(given)] = np.maximum(0.0, given)
    y[~pool] = 0.0
    best_y, best_bound = y.copy(), math.inf
    index = np.arange(len(flat))
    scale, stale = 1.0, 0  # Polyak's factor, halved after STALE steps without progress
    for step in range(steps):
        if step % 8 == 7 and _late(budget):
            break
        reduced = gains - np.add.reduceat(y[gpus], ptr[:-1])
        top = np.maximum.reduceat(reduced, bidder_starts)
        bound = float(y.sum() + np.maximum(top, 0.0).sum())
        if bound < best_bound - 1e-9:
            best_bound, best_y, stale = bound, y.copy(), 0
        else:
            stale += 1
            if stale >= STALE:
                scale, stale = scale / 2.0, 0
        # each bidder's first best entry, if its reduced profit is positive
        is_top = (reduced == top[owner]) & (top[owner] > 0.0)
        first = np.full(len(groups), len(flat))
        np.minimum.at(first, owner[is_top], index[is_top])
        chosen = first[first < len(flat)]
        covered = np.zeros(width)
        if len(chosen):
            first_pos, counts = ptr[chosen], ptr[chosen + 1] - ptr[chosen]
            offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            np.add.at(covered, gpus[np.repeat(first_pos, counts) + offsets], 1.0)
        sub = np.where(pool, 1.0 - covered, 0.0)
        # at y = 0 a GPU nobody covers has no further descent
        sub[(y <= 0.0) & (sub > 0.0)] = 0.0
        norm = float(sub @ sub)
        if norm == 0.0 or bound - lower <= 1e-12:
            break
        y = np.maximum(0.0, y - scale * (bound - lower) / norm * sub)
    out: list[float] = best_y.tolist()
    return out
