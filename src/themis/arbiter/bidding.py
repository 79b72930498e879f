"""The round's auction step (docs/design.md §5 steps 3-4): bids, Partial Allocation, and
each winner's GPUs mapped to its jobs.

Each offered agent returns a menu of bundles with the rho each would give; Partial
Allocation picks the proportional-fair bundles and keeps hidden payments. Each bidder sees
the offer from its own starting point (see ``OrderedPacker``); the offer lists the most
fragmented machines first, so small bundles are carved from partly used machines before
empty ones (best fit). What no bid took, and what a winner's app scheduler cannot use,
is left over for the leftover step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import cast

from themis.agent.app_scheduler import assign_jobs
from themis.arbiter.round_state import RoundState
from themis.auction.partial_allocation import partial_allocation
from themis.mechanism.view import Assignment
from themis.model.placement import OfferIndex
from themis.model.state import AppState


def auction(state: RoundState, offer_order: Callable[[set[int]], OfferIndex]) -> None:
    """Run the auction on the pool: fill ``index``, ``until``, ``outcome`` and
    ``leftover``, grant the winners' jobs (``grants``, ``planned``) and record the offer,
    the bids and the outcome. ``offer_order``: the arbiter's ``OfferOrder``, kept from
    round to round."""
    knobs, now, offered, agents = state.knobs, state.now, state.offered, state.agents
    record = state.record
    assert record is not None  # made before the auction, for rounds that end earlier too
    index = state.index = offer_order(state.pool)
    offer = index.offer
    record.pool = offer
    bids = []
    for k, app in enumerate(offered):
        start = k * len(offer) // len(offered)
        rotated = index.rotated(start)
        bids.append(
            agents[app.app_id].bid(
                now,
                state.n_avg[app.app_id],
                state.kept[app.app_id],
                rotated,
                state.renewable.get(app.app_id, ()),
                state.remaining[app.app_id],
                active_apps=state.view.slices(app),
                offer_index=(index, start),
            )
        )
    record.bids = bids
    # A tenant's bidders share one weight (``tenant_weights``).
    outcome = state.outcome = partial_allocation(
        bids,
        offer,
        knobs.rng,
        trim=lambda app_id, b, n: agents[app_id].trim(app_id, b, n),
        units=lambda app_id, b: agents[app_id].units(b),
        positions=cast("Mapping[Hashable, int]", index.position),
        limits=knobs.limits,
        weights=tenant_weights(offered),
    )
    record.outcome = outcome
    until = state.until = knobs.lease_end(now)
    # The auction is generic over hashable GPU ids; the arbiter offers ints.
    leftover = state.leftover = set(cast("tuple[int, ...]", outcome.leftover))
    reserved_jobs = set() if state.started is None else {id(state.started)}
    grants, planned = state.grants, state.planned
    for app in offered:
        granted = cast("tuple[int, ...]", outcome.apps[app.app_id].granted)
        if not granted:
            continue
        plan, unused = assign_jobs(
            knobs.cluster,
            app,
            [*state.kept[app.app_id], *granted],
            now,
            reserved_jobs,
            {id(j) for j in state.renewable.get(app.app_id, ())},
        )
        leftover.update(unused)
        for job, gpus in plan.items():
            if id(job) not in planned:
                grants[job] = Assignment(gpus, until)
                planned.add(id(job))


def tenant_weights(bidders: Sequence[AppState]) -> list[float] | None:
    """Each bidder's weight in the auction: 1 / (its tenant's bidders in this auction).

    Proportional fairness counts bidders: a tenant whose sweep is split into k apps that
    bid together holds k factors of the product where one app holds one, and the auction
    leans its way (the lie ``split:2``). Weighted, a tenant's bidders count as one;
    weighted PA keeps truthful bidding dominant (``auction/partial_allocation.py``,
    tested against brute force). None, PA unweighted bit for bit, when every tenant bids
    once: every auction of a workload without owners."""
    if len({a.spec.tenant for a in bidders}) == len(bidders):
        return None  # checked with a set first: ``Counter`` is Python even when compiled
    counts = Counter(a.spec.tenant for a in bidders)
    return [1.0 / counts[a.spec.tenant] for a in bidders]
