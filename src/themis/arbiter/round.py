"""One round of the Themis arbiter (docs/design.md §5): the mechanism, step by step.

1. visibility: every active app with unmet demand reports its rho with what it holds now
   (leases ending in this round included; its bid's "nothing" is what it keeps)
   (``visibility.py``), and the apps are ranked worst-off first (``ranking.py``);
2. offer: the worst ``ceil((1 - f) n)`` of them (at least one) are offered the free GPUs,
   and with them the app that has waited longest for its first GPU (docs/gangs.md §6)
   (``offer.py``);
3. renewal: optionally, the worst-off apps' ending grants are renewed in place
   (``renewal.py``), around the reservation for the worst-off app's gang that fits
   nowhere (``reservation.py``);
4. auction: each offered agent bids a menu of bundles with the rho each would give, and
   Partial Allocation picks the proportional-fair bundles and keeps hidden payments
   (``bidding.py``);
5. leftover allocation places every GPU still free where a job can use it (``leftover.py``);
6. leases: every new or renewed placement is granted for ``lease`` seconds.

Each step is a function of the round's state (``round_state.py``), which it reads and
fills for the steps after it. A round changes nothing that is not up for grabs: jobs whose
leases do not end in this round keep their GPUs. The round is a pure function of the view
and the arbiter's seeded random generator, so the simulator and the runtime drive exactly
the same decisions.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from themis.agent.agent import Agent
from themis.arbiter.bidding import auction, tenant_weights
from themis.arbiter.leftover import leftover
from themis.arbiter.offer import OfferOrder, offer, offered_count, offered_tenants
from themis.arbiter.options import ArbiterOptions
from themis.arbiter.ranking import (
    rank_by_cohort,
    rank_fresh_by_siblings,
    rank_fresh_by_standing,
    ranking,
)
from themis.arbiter.renewal import choose_renewals, renewal, renewed_count, within_share
from themis.arbiter.reservation import (
    ReservationBook,
    drop_stale_reservation,
    reservation,
    tenant_holds_gpus,
)
from themis.arbiter.round_state import RoundRecord, RoundState
from themis.arbiter.visibility import visibility
from themis.auction.budget import Limits
from themis.auction.partial_allocation import AuctionOutcome
from themis.fairness.ftf import RemainingWork
from themis.mechanism.view import Assignment, Changes, Schedule, SchedulingView
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState

#: The round's rules, importable from here as before they had modules of their own.
__all__ = [
    "Arbiter",
    "RoundRecord",
    "offered_count",
    "offered_tenants",
    "rank_by_cohort",
    "rank_fresh_by_siblings",
    "rank_fresh_by_standing",
    "renewed_count",
    "tenant_holds_gpus",
    "tenant_weights",
    "within_share",
]


class Arbiter:
    """The mechanism of DESIGN §5 plus the gang rules of docs/gangs.md: starving apps rank
    and bid by a finite rho that grows with their wait, the worst-off app's unplaceable
    gang gets a bounded reservation, small bundles are carved from the most fragmented
    machines first, and lease ends can be aligned to a grid."""

    def __init__(
        self,
        cluster: Cluster,
        options: ArbiterOptions,
        rng: random.Random,
        limits: Limits | None = None,
    ) -> None:
        # The knobs are ``PolicyOptions``'s, checked once when those are made
        # (``policies/knobs.py``); the Themis policy turns them into ``options``.
        self.cluster = cluster
        self.options = options
        self.rng = rng
        self.reservations = ReservationBook()
        self._agents: dict[str, Agent] = {}
        #: The offer's order, kept from round to round (``offer.py``).
        self._offer_order = OfferOrder(cluster)
        #: Active apps whose demand exceeds what they hold (see ``_hungry_apps``).
        self._hungry: set[AppState] | None = None
        #: Owners (an app without one: the app) ever granted a GPU (``offer.first_gpu_wait``).
        self._started: set[str] = set()
        self.last_round: RoundRecord | None = None
        #: Each auction's node limit and deadline (``themis.auction.budget``).
        self.limits = limits
        #: Per app that ran nothing when last ranked: its version then, the time alone on
        #: the cluster of what it had made, and that work (``ranking.verified_rank``).
        self._made_alone: dict[AppState, tuple[int, float, RemainingWork]] = {}
        #: Auctions run, those that stopped on their limits, and the largest certified
        #: gaps of x* and of the re-solves x^-i among them (docs/auction.md).
        self.auctions = 0
        self.auctions_limited = 0
        self.auction_gap_max = 0.0
        self.auction_resolve_gap_max = 0.0

    # The round reads its knobs by name off the arbiter; each is its options' value.

    @property
    def fairness_knob(self) -> float:
        return self.options.fairness_knob

    @property
    def lease(self) -> float:
        return self.options.lease

    @property
    def max_menu(self) -> int:
        return self.options.max_menu

    @property
    def reservation_bound(self) -> float:
        """How long a reservation may hold GPUs back (None in the options: one lease,
        within which every lease on its target ends; 0: reservations off)."""
        bound = self.options.reservation_bound
        return self.options.lease if bound is None else bound

    @property
    def lease_align(self) -> float:
        return self.options.lease_align

    @property
    def ranking(self) -> str:
        return self.options.ranking

    @property
    def renewal_share(self) -> float:
        """The worst-off share of wanting apps whose ending leases are renewed in place."""
        return self.options.renewal_share

    @property
    def renew_within_share(self) -> bool:
        """Whether an app holding no more than its fair share keeps its ending leases."""
        return self.options.renew_within_share

    @property
    def gang_at_once(self) -> bool:
        """Whether the worst-off app holding nothing starts a fitting gang before the
        auction (``_starts_at_once``)."""
        return self.options.gang_at_once

    @property
    def valuation(self) -> str:
        """How bids value bundles ("paper" or "remaining": ``Agent``)."""
        return self.options.valuation

    @property
    def ideal(self) -> str:
        """The definition of every rho's ideal time: the standings, the bids, the ranks
        (``fairness/ideal.py``)."""
        return self.options.ideal

    def agent(self, app: AppState) -> Agent:
        agent = self._agents.get(app.app_id)
        if agent is None or agent.app is not app:
            agent = self._agents[app.app_id] = Agent(
                app, self.cluster, self.max_menu, self.valuation, self.ideal
            )
        return agent

    def lease_end(self, now: float) -> float:
        """When a grant made now ends: ``now + lease``, or with alignment the grid point
        (multiple of ``lease_align``) nearest to it, so that leases granted at different
        times end together and free whole machines at once (never at or before ``now``)."""
        end = now + self.lease
        if self.lease_align <= 0:
            return end
        aligned = round(end / self.lease_align) * self.lease_align
        while aligned <= now:
            aligned += self.lease_align
        return aligned

    def run_round(self, view: SchedulingView) -> Schedule:
        """The round as the full schedule: every job that runs after it."""
        grants, ending = self.plan(view)
        ended = {id(j) for j in ending}
        schedule: Schedule = {
            job: Assignment(job.gpus, job.until)
            for app in view.apps
            for job in app.running_jobs()
            if id(job) not in ended
        }
        schedule.update(grants)
        return schedule

    def run_changes(self, view: SchedulingView) -> Changes:
        """The round as what changes (``Policy.changes``): the jobs whose grants end now
        and are not renewed stop; new and renewed grants start."""
        grants, ending = self.plan(view)
        return Changes([j for j in ending if j not in grants], grants)

    def plan(self, view: SchedulingView) -> tuple[Schedule, list[JobState]]:
        """This round's new and renewed grants, and the running jobs whose grants end now
        (those not granted again stop; every other running job keeps its GPUs and grant).
        A round costs the apps that want GPUs and the grants that end, not every app: the
        steps (the module's docstring) read and fill one ``RoundState`` in turn."""
        self.reservations.account(view.now)
        state = RoundState.begin(self, view, self._hungry_apps(view))
        if not state.pool:
            drop_stale_reservation(view, state.now, self.reservations)
            return state.grants, state.ending
        visibility(state)
        ranking(state, self._made_alone)
        offer(state, self._started)
        choose_renewals(state)
        reservation(state, self.reservations)
        renewal(state)
        record = state.record = RoundRecord(
            state.now, [], state.rhos, [a.app_id for a in state.offered], [], None
        )
        record.reserved = sorted(state.reserved)
        if state.pool:
            auction(state, self._offer_order)
            self._count_auction(state.outcome)
            leftover(state)
        self.last_round = record
        self._started.update(job.app.spec.tenant for job in state.grants)
        return state.grants, state.ending

    def _count_auction(self, outcome: AuctionOutcome | None) -> None:
        """Count an auction, and the certified gaps of one its limits stopped."""
        assert outcome is not None
        self.auctions += 1
        if outcome.limited:
            self.auctions_limited += 1
            self.auction_gap_max = max(self.auction_gap_max, outcome.gap)
            self.auction_resolve_gap_max = max(self.auction_resolve_gap_max, outcome.resolve_gap)

    def _hungry_apps(self, view: SchedulingView) -> set[AppState] | None:
        """The active apps whose demand exceeds what they hold, kept across rounds from
        the apps the mechanism says changed since the last round (``view.changed``); None
        when it keeps no such book (every app is then looked at)."""
        changed = view.changed
        if changed is None or self._hungry is None:
            self._hungry = None if changed is None else set()
            look_at: Iterable[AppState] = view.apps
        else:
            look_at = changed
        hungry = self._hungry
        if hungry is None:
            return None
        for app in look_at:
            if app.finish is None and app.demand() > len(app.held()):
                hungry.add(app)
            else:
                hungry.discard(app)
        return hungry
