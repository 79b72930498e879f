"""Partial Allocation with hidden payments, and the whole-GPU rule.

PA (Cole, Gkatzelis, Goel 2013) picks the proportional-fair allocation x*, then gives
each bidder i only a fraction

    c_i = prod_{j != i} v_j(x*_j) / prod_{j != i} v_j(x^-i_j)

of its bundle, where x^-i is the proportional-fair allocation without i. Bidder i's
received utility c_i * v_i(x*_i) equals prod_j v_j(x*) / prod_{j != i} v_j(x^-i): the
denominator does not depend on i's bid and x* maximises the numerator for i's true values,
so bidding the truth is a dominant strategy.

**Weights (one tenant, several bidders).** Proportional fairness counts bidders, so a
tenant that splits its sweep into k apps gets k shares of the objective. With weights
w_i (the arbiter gives each of a tenant's k bidders 1/k) x* maximises the weighted
product prod_j v_j^w_j and

    c_i = (prod_{j != i} v_j(x*_j)^w_j / prod_{j != i} v_j(x^-i_j)^w_j) ^ (1 / w_i),

so that i's utility c_i v_i(x*_i) is (prod_j v_j(x*)^w_j / D_i)^(1/w_i), D_i independent of
i's bid: still maximised by the truth (the weighted PA mechanism of the same paper's
argument). All weights 1 is PA itself, float for float.

**Whole-GPU rule (our choice; the paper is silent).** A c_i fraction of a bundle of n GPUs
is c_i * n GPUs, which is rarely whole, and a bidder can only use some counts of GPUs out
of its bundle (its *units*: with gangs of 8, only multiples of 8). We round *randomly and
without bias to a usable count*: with lo <= c_i n <= hi the nearest usable counts, keep hi
GPUs with probability (c_i n - lo) / (hi - lo), else lo, drawn from the round's seeded
generator. So the expected number of GPUs granted is exactly c_i * n, never more than the
next usable count, and a small bundle is not systematically lost to rounding down: with
single GPUs as units (the default) a 1-GPU win with c_i < 1 is kept with probability c_i,
and a one-gang bundle of 8 is kept whole with probability c_i (rounding GPUs first and
then dropping the partial gang would turn every such win with c_i < 1 into nothing, which
starves gang apps). Which GPUs are kept is the bidder's choice (``trim``: by default the
first ones in its menu entry's order; the Themis agent keeps whole gangs). What is not
granted is the hidden payment and goes to the arbiter's leftover allocation.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import filterfalse
from typing import NamedTuple

from themis.auction.bids import Bid
from themis.auction.budget import Budget, Limits
from themis.auction.packing import Candidate, Solution
from themis.auction.solver import gain, solve_all
from themis.errors import ThemisError

#: (app_id, bundle in preference order, how many GPUs it may keep) -> the GPUs it keeps
Trim = Callable[[str, tuple[Hashable, ...], int], tuple[Hashable, ...]]
#: (app_id, bundle) -> the GPU counts the bidder can use out of it, ascending, from 0 to
#: len(bundle) (e.g. its gang boundaries); None: every count
Units = Callable[[str, tuple[Hashable, ...]], "Sequence[int] | None"]


class AppOutcome(NamedTuple):
    choice: tuple[Hashable, ...]  # x*_i, the proportional-fair bundle
    c: float  # the fraction PA grants
    granted: tuple[Hashable, ...]  # what the app actually receives


@dataclass(frozen=True)
class AuctionOutcome:
    """The auction's answer: per bidder its proportional-fair bundle x*_i, the fraction c_i
    PA grants and the GPUs it receives; the offered GPUs no bidder receives (the hidden
    payments and unsold GPUs, for the leftover allocation); and how close to proven the
    solves are (docs/auction.md)."""

    apps: dict[str, AppOutcome]
    leftover: tuple[Hashable, ...]  # offered GPUs granted to no bidder
    objective: float  # sum of log-utility gains of x* over winning nothing
    #: Whether a solve (x* or a winner's x^-i) stopped on the auction's budget unproven.
    limited: bool = False
    #: How far the optimum may lie above ``objective`` (certified; 0 when x* is proven).
    gap: float = 0.0
    #: The largest such gap of the winners' re-solves x^-i.
    resolve_gap: float = 0.0


def keep_prefix(app_id: str, bundle: tuple[Hashable, ...], count: int) -> tuple[Hashable, ...]:
    return bundle[:count]


def round_share(c: float, size: int, rng: random.Random, units: Sequence[int] | None = None) -> int:
    """Unbiased rounding of ``c * size`` GPUs to one of ``units`` (usable counts, ascending,
    0 and ``size`` included; None: every whole count)."""
    exact = c * size
    if units is None:
        lo = min(math.floor(exact + 1e-12), size)
        hi = min(lo + 1, size)
    else:
        lo = max((u for u in units if u <= exact + 1e-12), default=0)
        hi = min((u for u in units if u > lo), default=lo)
    if hi <= lo:
        return lo
    fraction = (exact - lo) / (hi - lo)
    if fraction > 1e-12 and rng.random() < fraction:
        return hi
    return lo


def build_candidates(
    bids: Sequence[Bid],
    free: Sequence[Hashable],
    source: str = "auction",
    positions: Mapping[Hashable, int] | None = None,
    weights: Sequence[float] | None = None,
) -> list[list[Candidate]]:
    """Validate bids against the offered GPUs and turn them into solver candidates.

    Only entries strictly better than winning nothing can be part of an optimum; a bundle
    listed twice keeps its best rho. ``positions``: each offered GPU's index in ``free``
    when the caller has it (the arbiter's offer index). ``weights``: each bid's weight in
    the objective (see the module doc), in the order of ``bids``; None: all 1.
    """
    if weights is not None:
        if len(weights) != len(bids):
            raise ValueError("one weight per bid")
        for w in weights:
            if not (math.isfinite(w) and 0.0 < w <= 1.0):
                raise ValueError(f"a weight must be in (0, 1], got {w}")
    bit = {g: i for i, g in enumerate(free)} if positions is None else positions
    seen_apps: set[str] = set()
    out: list[list[Candidate]] = []
    for b, bid in enumerate(bids):
        if bid.app_id in seen_apps:
            raise ThemisError(f"app '{bid.app_id}' bids twice", source=source, field="bids")
        seen_apps.add(bid.app_id)
        _check_rho(bid.rho_none, source, f"bids.{bid.app_id}.none")
        best: dict[int, Candidate] = {}
        prefix: tuple[Hashable, ...] = ()
        prefix_mask = 0
        for e, entry in enumerate(bid.menu):
            gpus = entry.gpus
            if not (isinstance(entry.rho, float) and 0.0 < entry.rho < math.inf):
                _check_rho(entry.rho, source, f"bids.{bid.app_id}.menu[{e}].rho")
            if not gpus:
                raise ThemisError(
                    "a menu entry needs at least one GPU",
                    source=source,
                    field=f"bids.{bid.app_id}.menu[{e}].gpus",
                )
            # Menus are usually nested prefixes of one chain: an entry that extends the
            # previous one only needs its new GPUs checked (any error would be in them).
            if prefix and len(gpus) > len(prefix) and gpus[: len(prefix)] == prefix:
                mask, start = prefix_mask, len(prefix)
            else:
                mask, start = 0, 0
            for g in gpus[start:]:
                position = bit.get(g)
                if position is None:
                    raise ThemisError(
                        f"GPU '{g}' is not offered",
                        source=source,
                        field=f"bids.{bid.app_id}.menu[{e}].gpus",
                    )
                if mask >> position & 1:
                    raise ThemisError(
                        f"GPU '{g}' listed twice",
                        source=source,
                        field=f"bids.{bid.app_id}.menu[{e}].gpus",
                    )
                mask |= 1 << position
            prefix, prefix_mask = gpus, mask
            value = gain(bid.rho_none, entry.rho)
            if value <= 0:
                continue
            if weights is not None:
                value *= weights[b]
            if mask not in best or best[mask].gain < value:
                # ``tuple.__new__``: the named tuple without its Python ``__new__`` (an
                # auction makes hundreds of thousands; ``simulator/engine.py``'s ``_stop``)
                best[mask] = tuple.__new__(Candidate, (b, e, value, mask))
        out.append(list(best.values()))
    return out


def _check_rho(value: object, source: str, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ThemisError("rho must be a number", source=source, field=field)
    if not math.isfinite(value) or value <= 0:
        raise ThemisError(f"rho must be finite and > 0, got {value}", source=source, field=field)


def partial_allocation(
    bids: Sequence[Bid],
    free: Sequence[Hashable],
    rng: random.Random,
    trim: Trim = keep_prefix,
    source: str = "auction",
    units: Units | None = None,
    positions: Mapping[Hashable, int] | None = None,
    limits: Limits | None = None,
    budget: Budget | None = None,
    weights: Sequence[float] | None = None,
) -> AuctionOutcome:
    """``positions``: each GPU's index in ``free``, when the caller has it. ``limits``: the
    auction's node limit and deadline (``themis.auction.budget``; None: no limit), counted
    from this call on: checking the bids and building the program are inside the
    deadline. ``budget``: a budget already started (e.g. by a caller that counts its own
    preparation in it, or a test's clock), instead of ``limits``. ``weights``: each bid's
    weight (the module doc, "Weights"); None: PA unweighted."""
    if budget is None and limits is not None:
        budget = Budget(limits)  # the clock starts before the bids are checked
    candidates = build_candidates(bids, free, source, positions, weights)
    if budget is not None and budget.deadline is not None:
        budget.assembly = budget.clock() - budget.started  # type: ignore[operator]
    best, without = solve_all(candidates, budget=budget)
    apps: dict[str, AppOutcome] = {}
    granted_all: set[Hashable] = set()
    for b, bid in enumerate(bids):
        cand = best.chosen.get(b)
        if cand is None:
            apps[bid.app_id] = AppOutcome((), 1.0, ())
            continue
        bundle = bid.menu[cand.entry].gpus
        c = payment_fraction(best, without, b, 1.0 if weights is None else weights[b])
        usable = units(bid.app_id, bundle) if units is not None else None
        keep = round_share(c, len(bundle), rng, usable)
        granted = tuple(trim(bid.app_id, bundle, keep)) if keep else ()
        if len(granted) > keep or not set(granted) <= set(bundle):
            raise AssertionError("trim must keep a subset of the bundle, no larger than allowed")
        granted_all.update(granted)
        apps[bid.app_id] = AppOutcome(bundle, c, granted)
    leftover = tuple(filterfalse(granted_all.__contains__, free))  # in C: per auction
    resolve_gap = max((s.gap for s in without.values()), default=0.0)
    limited = best.bound is not None or any(s.bound is not None for s in without.values())
    return AuctionOutcome(apps, leftover, best.objective, limited, best.gap, resolve_gap)


#: The smallest c_i: a positive float, so that a limited answer never grants a share of 0
#: by underflow (c_i lies in (0, 1]).
C_MIN = 5e-324


def payment_fraction(
    best: Solution, without: dict[int, Solution], bidder: int, weight: float = 1.0
) -> float:
    """c_i = exp(((OPT - gain_i) - OPT_without_i) / w_i), gains weighted (the module doc);
    1 when i wins nothing.

    When a solve stopped on its budget, OPT and OPT_without_i are the values of the
    packings found (x* and x^-i, not proven optimal; docs/auction.md): x^-i is never worth
    less than x* minus i, so the exponent is <= 0; c_i is clamped to (0, 1] all the same.
    """
    cand = best.chosen.get(bidder)
    if cand is None:
        return 1.0
    others_with_i = best.objective - cand.gain
    exponent = others_with_i - without[bidder].objective
    if weight != 1.0:
        exponent /= weight
    return max(C_MIN, min(1.0, math.exp(exponent)))
