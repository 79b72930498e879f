"""The proportional-fair choice: pick at most one menu entry per app, the entries
pairwise disjoint, to maximise sum_i log v_i with v_i = 1 / rho_i.

Working in *gains* over winning nothing (``log rho_none - log rho_entry``) makes "nothing"
worth 0, so the problem is a weighted set packing with one-per-app constraints. Two exact
solvers: a depth-first branch and bound over bitmasks, which is fastest on the small
auctions that most rounds hold, and scipy's HiGHS MILP, used when branch and bound would
explore too many nodes. Both return a provably optimal objective; brute force lives in the
tests only. ``solve_all`` gives the optimum and every winner's optimum-without-it at once,
sharing the preparation between those searches.

Long searches also use an LP-dual bound (``prices``): it only ever removes subtrees that
hold no improvement, and the visiting order never changes, so every answer is the one the
plain search gives, bit for bit, found in fewer nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from themis.auction.bounded import (
    ROUNDING,
    dual_terms,
    limited_answer,
    neighbourhoods,
    reach,
    tightened,
)
from themis.auction.budget import CLOCK_EVERY, Budget, mip_affordable, resolve_units
from themis.auction.packing import MIP_COLUMNS, Candidate, Solution
from themis.auction.prices import SLACK, DualBound, Prices, descend, lp_prices

if TYPE_CHECKING:
    from themis.auction.lp_path import LocalResolver, WarmLp

#: Objective values within this distance are treated as equal (log-utility units).
TOLERANCE = 1e-9

#: Nodes a search visits with the capacity and clique bounds alone before it prices the
#: GPUs with the LP relaxation and starts again with the LP-dual bound too (one LP solve
#: costs about as much as 1,000 nodes; nearly every search finishes first).
PRICE_AFTER = 1_000

#: Added to the bounds a search remembers for a state, so that rounding never lets one cut
#: a real improvement.
MEMO_SLACK = 1e-12

#: When the full search's nodes times its winners (about the re-solves' total) exceed this,
#: every re-solve uses the LP-dual bound from its first node.
EAGER_PRICING = 3_000

#: Auctions whose branch-and-bound tables would hold more than this many cells (GPUs x
#: entries) take the certified LP path first (``_lp_first``).
LP_FIRST_WORK = 500_000

#: Re-solves of the LP path hold the entries whose reduced profit at the optimum's GPU
#: prices is at least -KEEP_REDUCED (log-utility units); any value is exact (answers are
#: certified over every entry), this one keeps proofs failing rarely on simulator-like
#: auctions while dropping most of the LP's non-zeros.
KEEP_REDUCED = 2.0

#: Auctions of the LP path with at least this many bidders re-solve each winner locally
#: first (``lp_path.LocalResolver``: a small LP around the winner's GPUs, certified over
#: every entry); smaller ones re-solve the whole warm LP, as before. Both are exact; the
#: local one pays off when a whole-model run costs milliseconds.
LOCAL_MIN_BIDDERS = 100

#: Knapsack rows at least this wide are computed in numpy (``_wide_row``): below it, the
#: per-call cost of numpy exceeds what it saves.
WIDE_ROW = 128

#: Share of what is left after an unproven x* that its large-neighbourhood search
#: (``bounded.neighbourhoods``) may take before the re-solves share the rest, under a
#: work limit (0.2-0.6 points of gap less than 0.3 at 200-1,000 held-out bidders) and
#: under a deadline alone (where the re-solves' time is scarcer; as before).
LNS_BUDGET = 0.5
LNS_DEADLINE_BUDGET = 0.3

#: How much a bidder's best entry must gain over its next for ``_uncontended`` to answer:
#: far above ``TOLERANCE``, so that no other packing lies within the searches' tolerance
#: of that answer (the search keeps the first of two answers closer than it).
UNCONTENDED_MARGIN = 1e-6

#: Share of x*'s budget the LP path's simplex may take before the interior point method
#: gets the rest (``_solve_all_lp``). The agents' menus (integral LPs) prove x* in a small
#: part of it; on hard menus the simplex would spend it all without a proof.
SIMPLEX_SHARE = 0.5

#: A re-solve of the LP path may take up to this many times its equal part of the work
#: units left (``_solve_all_lp``); its time share under a deadline stays equal.
RESOLVE_SPREAD = 16

#: An unproven x*'s bounded answer (greedy packings and local search over every bidder)
#: is charged as this many bounded re-solves (``budget.resolve_units``).
STAR_ANSWER_RESOLVES = 20

#: Share of an auction's budget its proportional-fair allocation x* may take; the rest is
#: shared by the winners' re-solves, so that they get a turn even when x* is hard.
STAR_SHARE = 0.5


def solve(
    candidates: list[list[Candidate]],
    exclude: int | None = None,
    node_limit: int = 5_000,
    incumbent: Solution | None = None,
) -> Solution:
    """Maximise total gain; ``candidates[i]`` is bidder i's entries (gain > 0 only).

    ``incumbent`` is a feasible solution known in advance (for the re-solve without
    bidder i, the optimum with i minus i's entry): starting from it lets branch and bound
    prune at once everything that cannot beat it.
    """
    groups = [c for i, c in enumerate(candidates) if c and i != exclude]
    if not groups:
        return Solution(0.0, {})
    plan = _Plan(groups)
    result = _Search(plan).run(node_limit, incumbent, plan.lp_prices)
    if result is None:
        return _milp(groups)
    return result


def solve_all(
    candidates: list[list[Candidate]],
    node_limit: int = 5_000,
    lp_first: bool = True,
    budget: Budget | None = None,
) -> tuple[Solution, dict[int, Solution]]:
    """The optimum, and for each of its winners i the optimum without bidder i.

    Same answers as ``solve(candidates)`` followed by ``solve(candidates, exclude=i,
    incumbent=<optimum minus i's entry>)`` for every winner i (a bidder that wins nothing
    has OPT_-i = OPT and needs no re-solve), but the preparation (entry lists, cliques,
    bound tables) is shared: each re-solve only rebuilds the tables of the bidders
    searched before i, and the GPU prices of the LP-dual bound (see ``prices``) are solved
    at most once per auction. Bidders are the ``Candidate.bidder`` ids, as in ``chosen``.

    Large auctions (``_lp_first``), and those branch and bound gives up on, go through one
    warm-started LP whose every answer is certified optimal (``lp_path``), falling back to
    the integer program where a proof is missing. ``lp_first=False`` keeps the previous
    paths only: the exact reference the tests compare the LP path with.

    ``budget`` (``themis.auction.budget``; None: no limit) bounds the whole auction: x*
    may take ``STAR_SHARE`` of it, each re-solve an equal part of what is left. A solve
    that runs out answers with the best packing known and a certified bound
    (``Solution.bound``; ``bounded``); a re-solve's packing is never worth less than its
    incumbent, x* minus the winner.
    """
    groups = [c for c in candidates if c]
    if not groups:
        return Solution(0.0, {}), {}
    uncontended = _uncontended(groups)
    if uncontended is not None:
        return uncontended
    if budget is None:
        budget = Budget.unlimited()
    notes = _Notes()
    # Under a deadline each level keeps a part of its time for assembling its answer
    # (``Budget.for_solves``): the whole auction's for the payments, x*'s and each
    # re-solve's for its bounded answer. Under a node limit alone these are all ``budget``.
    solving = budget.for_solves()
    star_all = solving.share(STAR_SHARE) if budget.active else budget
    star = star_all.for_solves()
    large = lp_first and _lp_first(groups)
    if large:
        fast = _solve_all_lp(groups, budget=solving, star=star, notes=notes)
        if fast is not None:
            return fast
    plan: _Plan | None = None
    full: _Search | None = None
    best: Solution | None = None
    eager = False
    if not star.expired() and not (large and budget.active):
        # (A large auction without an LP proof skips branch and bound under a budget: its
        # tables alone would cost more than the integer program's time.)
        plan = _Plan(groups)
        full = _Search(plan)
        best = full.run(node_limit, None, plan.lp_prices, budget=star)
        # Each re-solve costs about as much as the full search: when together they would
        # cost more than an LP solve, they all get the LP-dual bound from the start.
        eager = plan.priced or full.nodes * len(best.chosen if best else ()) > EAGER_PRICING
        if best is None:
            notes.found.append(full.found)
            notes.bounds.append(full.root_bound())
            if plan.priced:
                notes.prices = plan.lp_prices().y  # type: ignore[union-attr]
    if best is None and not star.expired():
        # Too large for branch and bound: the re-solves are as hard, so skip to the
        # certified LP path, else to HiGHS's integer program (under a node limit: branch
        # and bound again, with what is left; see _mip_allowed).
        if lp_first and not large:
            fast = _solve_all_lp(groups, budget=solving, star=star, notes=notes)
            if fast is not None:
                return fast
        if star.expired():
            pass
        elif _mip_allowed(budget, groups) and _mip_worth(star, groups):
            answer = _milp(groups, star if budget.active else None, _best_found(notes))
            if answer.bound is None:
                best = answer
            else:
                notes.found.append(answer)
            node_limit = 0
        elif plan is not None and full is not None:
            best = full.run(star.allowance() or 1, None, plan.lp_prices, True, budget=star)
            if best is None:
                notes.found.append(full.found)
                if plan.priced:
                    notes.prices = plan.lp_prices().y  # type: ignore[union-attr]
    if best is None:
        best = limited_answer(groups, notes.found, notes.prices, notes.bounds, budget=star_all)
        # (Its greedy orders and local search pass over every bidder several times.)
        star_all.spend(STAR_ANSWER_RESOLVES * resolve_units(len(groups)))
        if not notes.optimal_prices:
            # (The LP's optimal duals already give its bound: descent cannot lower it.)
            best, notes.prices = tightened(groups, best, notes.prices, budget=star_all)
        # An unproven x*: exact re-packing of neighbourhoods, on a part of what the
        # re-solves would get (only auctions that are limited anyway pay for it).
        lns = LNS_BUDGET if budget.nodes_left is not None else LNS_DEADLINE_BUDGET
        best = neighbourhoods(groups, best, solving.share(lns))
        node_limit = 0
    without: dict[int, Solution] = {}
    winners = list(best.chosen.items())
    mip = _mip_allowed(budget, groups)
    dual = _DualWithout(groups, notes.prices)  # x*'s dual bound, per winner left out
    reaches: dict[int, int] | None = None  # bounded.reach(groups), when first needed
    for k, (bidder, cand) in enumerate(winners):
        if len(groups) == 1:
            without[bidder] = Solution(0.0, {})
            continue
        if solving.expired():
            # Past the solves' deadline or out of work units: x* minus the winner (a view,
            # not a copy: the end of an auction that ran out must stay short), bounded by
            # x*'s bounds without it.
            value = best.objective - cand.gain
            bound = min([dual.without(bidder), *([] if best.bound is None else [best.bound])])
            without[bidder] = Solution(value, _Without(best.chosen, bidder), max(bound, value))
            continue
        rest = {b: c for b, c in best.chosen.items() if b != bidder}
        incumbent = Solution(best.objective - cand.gain, rest)
        others = [g for g in groups if g[0].bidder != bidder]
        whole = solving.share(1.0 / (len(winners) - k)) if budget.active else budget
        part = whole.for_solves()
        result = None
        found: list[Solution | None] = [incumbent]
        bounds = [] if best.bound is None else [best.bound]
        searches = node_limit or not mip
        if searches and plan is not None and full is not None and not part.expired():
            search = _Search(plan, full, bidder)
            cap = node_limit if mip else (part.allowance() or 1)
            result = search.run(
                cap, incumbent, _repriced(plan, search, cand.mask), eager, budget=part
            )
            if result is None:
                found.append(search.found)
                bounds.append(search.root_bound())
        if result is None and mip and not part.expired() and _mip_worth(part, others):
            result = _milp(others, part if budget.active else None, incumbent)
            if result.bound is not None:
                found.append(result)
                result = None
        if result is None:
            bounds.append(dual.without(bidder))
            if reaches is None:
                reaches = reach(groups)
            result = limited_answer(
                others, found, None, bounds, incumbent, cand.mask, reaches, budget=whole
            )
            whole.spend(resolve_units(len(groups)))
        without[bidder] = result
    return best, without


def _uncontended(groups: list[list[Candidate]]) -> tuple[Solution, dict[int, Solution]] | None:
    """The answer, without a search, of an auction in which nobody competes: every
    bidder's best entry, when those entries are pairwise disjoint and each beats winning
    nothing and the bidder's other entries by more than ``UNCONTENDED_MARGIN`` (entries
    that hold all its GPUs aside: they can only be swapped for it).

    No packing gains more than the sum of each bidder's best, so that packing is the
    optimum, the only one within the margin; without any winner i the others' best
    entries are still disjoint, so OPT_-i is OPT minus i's gain, and every c_i is exactly
    1 (no hidden payment). The searches reach the same packing and the same floats (a
    re-solve keeps its incumbent, OPT minus i's gain, when nothing beats it), only later:
    in simulations of a large cluster with GPUs to spare nearly every auction is of this
    kind, and one of 80 such bidders cost the search tens of milliseconds
    (docs/benchmarks.md). None when some bidders compete.
    """
    chosen: dict[int, Candidate] = {}
    used = 0
    for group in groups:
        best = group[0]  # the first of equal best gains, as ``_options`` keeps it
        for cand in group[1:]:
            if cand.gain > best.gain:
                best = cand
        floor = best.gain - UNCONTENDED_MARGIN
        if floor <= 0.0 or used & best.mask:
            return None
        for cand in group:
            # An entry near the best is a rival unless it holds all the best's GPUs: then
            # it can only be swapped for the best (``_options`` drops it).
            if cand.gain > floor and cand is not best and best.mask & ~cand.mask:
                return None
        used |= best.mask
        chosen[best.bidder] = best
    objective = 0.0
    for cand in chosen.values():
        objective += cand.gain
    without = {
        bidder: Solution(objective - cand.gain, _Without(chosen, bidder))
        for bidder, cand in chosen.items()
    }
    return Solution(objective, chosen), without


class _DualWithout:
    """The dual bound at fixed prices without one bidder, for every bidder at the cost of
    one: the prices' sum and each bidder's term, computed once (``bounded.dual_terms``),
    then the bound without i is their exactly rounded sum minus i's term (one more
    rounding, far below ``ROUNDING``)."""

    def __init__(self, groups: list[list[Candidate]], prices: Sequence[float] | None) -> None:
        self.groups = groups
        self.prices = prices
        self.parts: tuple[float, dict[int, float]] | None = None

    def without(self, bidder: int) -> float:
        if self.parts is None:
            total, terms = dual_terms(self.groups, self.prices)
            self.parts = (math.fsum([total, *terms.values()]), terms)
        bound, terms = self.parts
        return bound - terms.get(bidder, 0.0) + ROUNDING


#: Under a deadline, HiGHS's MIP is started only with at least this many seconds per
#: entry left: building its model in Python alone takes ~10 us per entry (0.08 s at
#: 8,000 entries), which a re-solve with a few milliseconds left cannot afford.
MIP_SECONDS_PER_ENTRY = 3e-5


def _mip_worth(budget: Budget | None, groups: Sequence[Sequence[Candidate]]) -> bool:
    """Whether a deadline leaves time, and a work limit units, for HiGHS's MIP to build
    its model and search: its root cannot be stopped early (``mip.mip_affordable``)."""
    if budget is None:
        return True
    entries = sum(len(g) for g in groups)
    left = budget.seconds_left()
    if left is not None and left <= MIP_SECONDS_PER_ENTRY * entries:
        return False
    return mip_affordable(budget, entries)


def _mip_allowed(budget: Budget | None, groups: Sequence[Sequence[Candidate]]) -> bool:
    """Whether HiGHS's integer program may answer within ``budget``: always without a
    node limit, and under one only on auctions of at most ``MIP_COLUMNS`` entries.

    Under a node limit the work must stay bounded, and HiGHS's MIP cannot be bounded by
    nodes: its root ignores ``simplex_iteration_limit`` (on ``heldout-200-s0``, 1,600
    entries, it spent 60 s and 41,553 iterations at the root with a limit of 3,000). On
    smaller auctions it is the fastest exact solver measured (held-out family, x* alone:
    0.01-0.06 s up to 100 bidders / 800 entries, where branch and bound takes 0.4-13 s at
    50 bidders and more than 2 minutes at 100; docs/benchmarks.md), and its answer is
    deterministic (it stops at ``mip_max_nodes``, not on a clock). Beyond that size branch
    and bound goes on with the budget left instead, or the answer is the bounded one."""
    if budget is None or budget.nodes_left is None:
        return True
    return sum(len(g) for g in groups) <= MIP_COLUMNS


class _Notes:
    """What an auction's solves learnt that an answer within budget can use: packings
    found, GPU prices (``bounded.dual_bound``) and other certified bounds on x*."""

    def __init__(self) -> None:
        self.found: list[Solution | None] = []
        self.prices: Sequence[float] | None = None
        #: Whether ``prices`` are an LP optimum's duals (the interior point converged).
        self.optimal_prices = False
        self.bounds: list[float] = []


def _best_found(notes: _Notes) -> Solution | None:
    found = [s for s in notes.found if s is not None]
    return max(found, key=lambda s: s.objective) if found else None


def _lp_first(groups: list[list[Candidate]]) -> bool:
    """Whether branch and bound's tables alone (entries x GPUs) would cost more than the
    whole LP path: such auctions go to the LP first (every bundled-trace auction, on 64
    GPUs, stays far below)."""
    width = max(c.mask.bit_length() for g in groups for c in g)
    if width * sum(len(g) for g in groups) <= LP_FIRST_WORK:
        return False
    from themis.auction.lp_path import WarmLp  # here, not at import: see _milp

    return WarmLp.available()


def _solve_all_lp(
    groups: list[list[Candidate]],
    local_resolves: bool = True,
    local_min_bidders: int | None = None,
    budget: Budget | None = None,
    star: Budget | None = None,
    notes: _Notes | None = None,
) -> tuple[Solution, dict[int, Solution]] | None:
    """``solve_all`` through the certified warm LP (``lp_path``); None when the optimum
    itself comes without a proof (the caller then takes its exact paths). A re-solve
    without a proof is answered by the integer program. As in branch and bound, a
    re-solve keeps its incumbent (the optimum minus the winner) unless the LP finds
    something better by more than TOLERANCE. Auctions of ``LOCAL_MIN_BIDDERS`` or more
    bidders (``local_min_bidders``, if given) try each re-solve locally first
    (``local_resolves=False``: never; the tests' reference).

    Within ``budget`` (x* within ``star``, a part of it), a re-solve that runs out keeps
    its incumbent and is bounded by x*'s proof without the winner; an x* without a proof
    leaves its GPU prices and an LP-guided packing in ``notes``."""

    from themis.auction.lp_path import LocalResolver, WarmLp

    if not WarmLp.available():  # pragma: no cover - depends on the installed highspy
        return None
    if budget is None:
        budget = Budget.unlimited()
    limited = budget.active
    lp = WarmLp(groups, TOLERANCE)
    # Within a work limit the simplex gets a part of x*'s: where it does not prove x* in
    # it (fractional LPs, hard menus) the interior point method gets the rest for the
    # bound. Under a deadline alone the simplex keeps all of x*'s time, as before: an
    # interrupted interior point's prices can be worse than an interrupted simplex's
    # (two trials at 1,000 held-out bidders, loaded machine: gaps of 12% and 22% against
    # 1.4% and 1.9%, though such runs vary with the load: 7-16% in later ones).
    split = star is not None and star.nodes_left is not None
    simplex = star.share(SIMPLEX_SHARE) if split and star is not None else star
    chosen = lp.solve(budget=simplex if limited else None)
    if chosen is None:
        optimal = False
        if split and star is not None and not star.expired():
            optimal = lp.interior(star)
        if notes is not None and lp.solved:
            notes.optimal_prices = optimal
            notes.prices = lp.prices.tolist()
            notes.found.append(lp.rounded())
        return None
    proof = lp.proof  # of the optimum, before any re-solve replaces it
    assert proof is not None
    reduced = lp.reduced_profits()  # at the optimum's prices
    small: WarmLp | None = None  # built when a re-solve first needs it
    least = LOCAL_MIN_BIDDERS if local_min_bidders is None else local_min_bidders
    local = LocalResolver(lp) if local_resolves and len(groups) >= least else None
    best = Solution(sum(c.gain for c in chosen), {c.bidder: c for c in chosen})
    position = {g[0].bidder: k for k, g in enumerate(groups)}
    without: dict[int, Solution] = {}
    winners = list(best.chosen.items())
    reaches: dict[int, int] | None = None  # bounded.reach(groups), when first needed
    for k, (bidder, cand) in enumerate(winners):
        if len(groups) == 1:
            without[bidder] = Solution(0.0, {})
            continue
        lp.proof = proof
        incumbent = best.objective - cand.gain
        if lp.proves_no_gain_without(position[bidder], incumbent):
            without[bidder] = Solution(incumbent, _without(best.chosen, bidder))
            continue
        # Each re-solve may take up to RESOLVE_SPREAD times its equal part of the work
        # left (what it does not use goes to the next ones): the first re-solve that has
        # to build the restricted model needs hundreds of iterations, the others a few.
        left = len(winners) - k
        spread = min(1.0, RESOLVE_SPREAD / left)
        whole = budget.share(spread, 1.0 / left) if limited else None
        part = whole.for_solves() if whole is not None else None
        small, result = _resolve_lp(
            groups, lp, local, position[bidder], bidder, incumbent, best, part, reduced, small
        )
        if result is None:
            # Out of budget: the incumbent (extended greedily), bounded by x*'s proof
            # without the winner (the same prices bound that problem).
            bound = proof[0] - float(proof[1][position[bidder]]) + ROUNDING
            if budget.expired():  # the solves' deadline or work (``solve_all``'s ``solving``)
                view = _Without(best.chosen, bidder)
                without[bidder] = Solution(incumbent, view, max(bound, incumbent))
                continue
            start = Solution(incumbent, _without(best.chosen, bidder))
            others = [g for g in groups if g[0].bidder != bidder]
            if reaches is None:
                reaches = reach(groups)
            result = limited_answer(
                others, [start], None, [bound], start, cand.mask, reaches, budget=whole
            )
            if whole is not None:
                whole.spend(resolve_units(len(groups)))
        without[bidder] = result
    return best, without


def _resolve_lp(
    groups: list[list[Candidate]],
    lp: WarmLp,
    local: LocalResolver | None,
    at: int,
    bidder: int,
    incumbent: float,
    best: Solution,
    part: Budget | None,
    reduced: Any,
    small: WarmLp | None,
) -> tuple[WarmLp | None, Solution | None]:
    """One winner's re-solve on the LP path (``_solve_all_lp``): the restricted model (as
    built so far, kept for the next re-solves) and the answer, None when ``part`` ran out
    first."""
    import numpy as np

    if part is not None and part.expired():
        return small, None
    if local is not None:
        answer = local.solve_without(at, budget=part)
        if answer is not None:
            value, changes = answer
            if value > incumbent + TOLERANCE:
                found = dict(best.chosen)
                for k, entry in changes:
                    if entry < 0:
                        del found[groups[k][0].bidder]
                    else:
                        found[groups[k][0].bidder] = lp.flat[entry]
                return small, Solution(value, found)
            return small, Solution(incumbent, _without(best.chosen, bidder))
        if part is not None and part.expired():
            return small, None
    if small is None:
        # Re-solves run on the entries priced within KEEP_REDUCED of their GPUs at the
        # optimum's prices (large bundles on contested GPUs drop out: most of the LP's
        # size); an answer they cannot prove is asked of the full model.
        small = lp.restricted(np.flatnonzero(reduced >= -KEEP_REDUCED))
    found_list = small.solve(at, budget=part)
    if found_list is None and not (part is not None and part.expired()):
        found_list = lp.solve(at, budget=part)
    if found_list is None:
        if part is not None and (
            part.expired() or not _mip_allowed(part, groups) or not _mip_worth(part, groups)
        ):
            return small, None
        others = [g for g in groups if g[0].bidder != bidder]
        start = Solution(incumbent, _without(best.chosen, bidder))
        exact = _milp(others, part, start)
        return small, (None if exact.bound is not None else exact)
    value = sum(c.gain for c in found_list)
    if value > incumbent + TOLERANCE:
        return small, Solution(value, {c.bidder: c for c in found_list})
    return small, Solution(incumbent, _without(best.chosen, bidder))


class _Without(Mapping[int, Candidate]):
    """``chosen`` without ``bidder``, read through (``chosen`` is never changed)."""

    def __init__(self, chosen: Mapping[int, Candidate], bidder: int) -> None:
        self.chosen = chosen
        self.bidder = bidder

    def __getitem__(self, key: int) -> Candidate:
        if key == self.bidder:
            raise KeyError(key)
        return self.chosen[key]

    def __iter__(self) -> Iterator[int]:
        return (b for b in self.chosen if b != self.bidder)

    def __len__(self) -> int:
        return len(self.chosen) - (self.bidder in self.chosen)


def _without(chosen: Mapping[int, Candidate], bidder: int) -> dict[int, Candidate]:
    rest = dict(chosen)
    del rest[bidder]
    return rest


def _repriced(plan: _Plan, search: _Search, freed: int) -> Callable[[], Prices | None]:
    """Prices for the search without one winner: the auction's LP prices with the winner's
    GPUs re-priced by descent (they are overpriced once their bidder is gone)."""

    def pricing() -> Prices | None:
        base = plan.lp_prices()
        if base is None:  # pragma: no cover - a bounded feasible LP always solves
            return None
        return descend(search.seq, base, [b for b in range(freed.bit_length()) if freed >> b & 1])

    return pricing


def _knapsack_row(
    base: list[float], below: list[float], options: list[_Option], capacity: int, reach: int
) -> list[float]:
    """``row[f] = max(below[f], max over options of gain + base[f - size])``: the best gain
    with at most ``f`` GPUs when this position's bidder may win one of ``options`` and
    the rest of its clique wins nothing.

    Computed up to ``reach`` only, where every bidder left fits its largest entry: beyond
    it every term is the one at ``reach`` (the rows it is built from are constant there
    too), so the row is that value repeated, the same floats. Wide rows go to numpy
    (``_wide_row``); narrow ones (most auctions: a few GPUs) are cheapest as a plain loop."""
    if reach >= WIDE_ROW:
        row = _wide_row(base, below, options, reach)
    else:
        row = below[: reach + 1]
        for gain, _, size, _ in options:
            for f in range(size, reach + 1):
                value = gain + base[f - size]
                if value > row[f]:
                    row[f] = value
    row.extend([row[reach]] * (capacity - reach))
    return row


def _wide_row(
    base: list[float], below: list[float], options: list[_Option], reach: int
) -> list[float]:
    """``_knapsack_row`` up to ``reach`` in numpy: the same IEEE additions (float64) and the
    same choices (``maximum`` of finite floats picks the larger; equal ones are equal)."""
    import numpy as np  # here, not at import: the CLI starts without numpy

    row = np.array(below[: reach + 1])
    shifted = np.array(base[: reach + 1])
    for gain, _, size, _ in options:
        if size > reach:
            continue
        np.maximum(row[size:], shifted[: reach + 1 - size] + gain, out=row[size:])
    out: list[float] = row.tolist()
    return out


#: A candidate in search form: (gain, mask, number of GPUs, the candidate).
_Option = tuple[float, int, int, Candidate]


def _options(group: list[Candidate]) -> list[_Option]:
    """A bidder's entries, best gain first, without dominated ones.

    An entry whose GPUs include all of another entry's, with no larger gain, can always be
    swapped for that other entry: dropping it changes no optimum.
    """
    out: list[_Option] = []
    for c in sorted(group, key=lambda c: -c.gain):
        mask = c.mask
        for o in out:
            if o[1] & ~mask == 0:
                break
        else:
            out.append((c.gain, mask, mask.bit_count(), c))
    return out


class _Plan:
    """What every search over (a subset of) these bidders shares.

    Every entry of a bidder contains its *core* (the GPUs common to all its entries), so
    two bidders whose cores intersect can never both win. Bidders are grouped greedily into
    *cliques* of pairwise intersecting cores: at most one bidder per clique wins, which the
    bounds use (in real auctions many bidders' smallest entries share a GPU, and counting
    them all as possible winners made the bounds far too loose). The search visits the
    cliques one after another, each clique's bidders consecutively, and jumps past the
    rest of a clique as soon as one of its bidders wins. Cliques with the widest spread
    of gains come first: deciding them early settles most of the objective.
    """

    def __init__(self, groups: list[list[Candidate]]) -> None:
        opts = [_options(g) for g in groups]
        cores = []
        for o in opts:
            core = o[0][1]
            for t in o:
                core &= t[1]
            cores.append(core)
        cliques: list[list[int]] = []
        for j in sorted(range(len(opts)), key=lambda j: -opts[j][0][0]):
            core = cores[j]
            for clique in cliques if core else ():
                if all(core & cores[k] for k in clique):
                    clique.append(j)
                    break
            else:
                cliques.append([j])
        cliques.sort(key=lambda clique: -max(opts[j][0][0] - opts[j][-1][0] for j in clique))
        self.seq = [opts[j] for clique in cliques for j in clique]
        #: per position: the GPUs of the bidder's largest entry
        self.largest = [max((t[2] for t in o), default=0) for o in self.seq]
        self.bidders = [groups[j][0].bidder for clique in cliques for j in clique]
        self.end: list[int] = []  # position just past the clique of each position
        for clique in cliques:
            self.end.extend([len(self.end) + len(clique)] * len(clique))
        pool = 0
        for o in opts:
            for t in o:
                pool |= t[1]
        self.capacity = pool.bit_count()
        self.width = pool.bit_length()
        self._prices: Prices | None = None

    @property
    def priced(self) -> bool:
        return self._prices is not None

    def lp_prices(self) -> Prices | None:
        """GPU prices over every bidder: the LP relaxation's duals, solved on first use."""
        if self._prices is None:
            y = lp_prices(self.seq, self.width)
            self._prices = None if y is None else Prices(y)
        return self._prices


#: What a search proved about states (used GPUs, position): a bound on the rest.
_Memo = dict


class _Search:
    """Depth-first branch and bound over the plan's bidders (optionally without one).

    Upper bounds on what the bidders from position i on can still add, each ignoring part
    of the packing constraints:

    - capacity: ``table[i][f]``, the best gain with at most one winner per clique and at
      most f GPUs in total (a small knapsack table, computed once per search);
    - compatibility: per remaining clique, the best entry still disjoint from the GPUs
      taken (an entry disjoint from them always fits in the free ones: all lie in the
      pool);
    - LP duality, in long searches only: see ``themis.auction.prices``.
    """

    table: list[list[float]]  # per position: best gain of the bidders from it on, by GPUs
    merged: list[list[_Option]]  # per position: entries of the rest of its clique
    nodes: int = 0  # nodes the last run visited
    found: Solution | None = None  # the best solution of the last run that stopped early

    def __init__(self, plan: _Plan, full: _Search | None = None, skip: int | None = None):
        capacity = plan.capacity
        if full is None or skip is None:
            seq, end = plan.seq, plan.end
            n = q = len(seq)
            table: list[list[float]] = [[]] * n + [[0.0] * (capacity + 1)]
            merged: list[list[_Option]] = [[]] * n
        else:
            # Without the bidder at position q: everything after it is unchanged, so its
            # tables are reused and only positions before q are recomputed.
            q = plan.bidders.index(skip)
            seq = plan.seq[:q] + plan.seq[q + 1 :]
            end = [e - 1 if e > q else e for e in plan.end[:q]] + [e - 1 for e in plan.end[q + 1 :]]
            n = len(seq)
            table = [[]] * q + full.table[q + 1 :]
            merged = [[]] * q + full.merged[q + 1 :]
        # GPUs beyond which each row stops changing: every bidder left wins its largest.
        largest = plan.largest if q == n else plan.largest[:q] + plan.largest[q + 1 :]
        reach = [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            reach[i] = min(capacity, max(reach[i + 1], largest[i] + reach[end[i]]))
        for i in range(q - 1, -1, -1):
            table[i] = _knapsack_row(table[end[i]], table[i + 1], seq[i], capacity, reach[i])
            if end[i] == i + 1:
                merged[i] = seq[i]
            else:  # the rest of the clique from i on, as one bidder
                merged[i] = sorted(seq[i] + merged[i + 1], key=lambda t: -t[0])
        self.seq, self.end, self.table, self.merged = seq, end, table, merged
        self.capacity = capacity
        # per position: the merged entry lists of the cliques left
        groups: list[list[list[_Option]]] = [[]] * (n + 1)
        for i in range(n - 1, -1, -1):
            groups[i] = [merged[i], *groups[end[i]]]
        self.groups = groups[:n]

    def run(
        self,
        node_limit: int,
        incumbent: Solution | None,
        pricing: Callable[[], Prices | None] | None = None,
        eager: bool = False,
        budget: Budget | None = None,
    ) -> Solution | None:
        """The best solution better than ``incumbent``, or None after ``node_limit`` nodes.

        With ``pricing``, the search adds the LP-dual bound: from the start when ``eager``,
        else once it has been open for ``PRICE_AFTER`` nodes (it then starts again). Any
        extra valid bound only cuts subtrees that hold no improvement, and the visiting
        order is unchanged, so the search meets the same improvements in the same order:
        the same answer, bit for bit, from a subset of the nodes (so never a fallback to
        HiGHS where the plain search would have finished).

        ``budget``: the auction's work left (``themis.auction.budget``); the search also
        stops when it runs out (``budget.expired()`` then tells so), keeping the best
        solution it found in ``found``.
        """
        if pricing is not None and not eager and node_limit > PRICE_AFTER:
            result = self._run(PRICE_AFTER, incumbent, None, budget)
            if result is not None or (budget is not None and budget.expired()):
                return result
            eager = True
        if pricing is None or not eager:
            return self._run(node_limit, incumbent, None, budget)
        prices = pricing()
        return self._run(
            node_limit, incumbent, None if prices is None else DualBound(self.seq, prices), budget
        )

    def root_bound(self) -> float:
        """A bound on everything this search's bidders can gain (the capacity table's and
        the one-entry-per-clique bound at the root), plus TOLERANCE for rounding."""
        reach = math.fsum(max((t[0] for t in entries), default=0.0) for entries in self.groups[0])
        table = self.table[0][self.capacity] if self.seq else 0.0
        return min(reach, table) + TOLERANCE if self.seq else 0.0

    def _run(
        self,
        node_limit: int,
        incumbent: Solution | None,
        duals: DualBound | None,
        budget: Budget | None = None,
    ) -> Solution | None:
        seq, end, table, groups = self.seq, self.end, self.table, self.groups
        n, capacity = len(seq), self.capacity
        best_value = -1.0
        best_pick: list[Candidate] = []
        if incumbent is not None:
            best_value = incumbent.objective
            best_pick = list(incumbent.chosen.values())
        pick: list[Candidate] = []
        nodes = 0
        # Stop after ``stop`` nodes (the search's own limit or the budget's, the smaller);
        # with a deadline, look at the clock at each ``checkpoint`` on the way.
        stop = node_limit if budget is None else budget.allowance(node_limit)
        assert stop is not None
        timed = budget is not None and budget.deadline is not None
        checkpoint = min(stop, CLOCK_EVERY) if timed else stop
        memo: dict[int, float] = _Memo()
        width = n + 1
        priced = duals is not None
        rows_from = duals.rows_from if duals is not None else []
        price = duals.price if duals is not None else {}

        def dfs(i: int, used: int, value: float, yfree: float) -> bool:
            nonlocal best_value, best_pick, nodes, checkpoint
            if value > best_value + TOLERANCE:
                best_value = value
                best_pick = list(pick)
            # Different picks can leave the same GPUs used at the same position: what an
            # earlier visit proved about the rest bounds this one too.
            key = used * width + i
            settled = memo.get(key)
            if settled is not None and settled <= best_value + TOLERANCE - value:
                return True
            while i < n:  # each pass is one node; moving on to i + 1 is "i wins nothing"
                nodes += 1
                if nodes > checkpoint:
                    if checkpoint >= stop or budget is None or budget.expired():
                        return False
                    checkpoint = min(stop, nodes + CLOCK_EVERY)
                free = capacity - used.bit_count()
                need = best_value + TOLERANCE - value
                if table[i][free] <= need:
                    break
                if priced:
                    bound = yfree + SLACK
                    for row in rows_from[i]:
                        for profit, mask in row:
                            if not mask & used:
                                bound += profit
                                break
                        if bound > need:
                            break
                    else:
                        if bound <= need:
                            break
                # Sums stop as soon as they exceed ``need``: they can no longer prune.
                reach = 0.0
                for entries in groups[i]:
                    for gain, mask, _, _ in entries:
                        if not mask & used:
                            reach += gain
                            break
                    if reach > need:
                        break
                else:
                    if reach <= need:
                        break
                # Most promising first: an entry's gain plus the best the others can still
                # add with the GPUs it leaves. A good incumbent early makes the bounds bite.
                # Ties keep the entries' order (k).
                after = table[end[i]]
                options = sorted(
                    [
                        (-(gain + after[free - size]), k, mask, gain, cand)
                        for k, (gain, mask, size, cand) in enumerate(seq[i])
                        if not mask & used
                    ]
                )
                for promise, _, mask, gain, cand in options:
                    if -promise <= best_value + TOLERANCE - value:
                        break
                    pick.append(cand)
                    ok = dfs(
                        end[i], used | mask, value + gain, yfree - price[mask] if priced else yfree
                    )
                    pick.pop()
                    if not ok:
                        return False
                i += 1
            # Nothing from the entry state on beats best + TOLERANCE (every part was searched
            # or bounded): remember that bound on it, rounding-safe.
            settled = best_value + TOLERANCE - value + MEMO_SLACK
            known = memo.get(key)
            if known is None or settled < known:
                memo[key] = settled
            return True

        ok = dfs(0, 0, 0.0, duals.total if duals is not None else 0.0)
        self.nodes = nodes
        if budget is not None:
            budget.spend(nodes)
        if not ok:
            self.found = Solution(max(best_value, 0.0), {c.bidder: c for c in best_pick})
            return None
        return Solution(max(best_value, 0.0), {c.bidder: c for c in best_pick})


def _milp(
    groups: list[list[Candidate]],
    budget: Budget | None = None,
    incumbent: Solution | None = None,
) -> Solution:
    """HiGHS's integer program (``mip.solve_mip``): the optimum, or within ``budget`` the
    best packing it found, unproven (``bound=inf``)."""
    from themis.auction.mip import solve_mip  # here, not at import: see lp_path

    return solve_mip(groups, budget, incumbent)


def gain(rho_none: float, rho: float) -> float:
    return math.log(rho_none) - math.log(rho)
