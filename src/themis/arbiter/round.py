"""One round of the Themis arbiter (docs/design.md §5): the mechanism, step by step.

1. visibility: every active app with unmet demand reports its rho with what it holds now
   (leases ending in this round included; its bid's "nothing" is what it keeps);
2. offer: the worst ``ceil((1 - f) n)`` of them (at least one) are offered the free GPUs,
   and with them the app that has waited longest for its first GPU (docs/gangs.md §6);
3. bids: each offered agent returns a menu of bundles with the rho each would give;
4. Partial Allocation picks the proportional-fair bundles and keeps hidden payments;
5. leftover allocation places every GPU still free where a job can use it;
6. leases: every new or renewed placement is granted for ``lease`` seconds.

A round changes nothing that is not up for grabs: jobs whose leases do not end in this
round keep their GPUs. The round is a pure function of the view and the arbiter's seeded
random generator, so the simulator and the runtime drive exactly the same decisions.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from themis.agent.agent import Agent
from themis.agent.app_scheduler import assign_jobs
from themis.arbiter.leftover import allocate_leftover
from themis.arbiter.offer import OfferOrder
from themis.arbiter.options import PROSPECTIVE, ArbiterOptions
from themis.arbiter.reservation import (
    Reservation,
    ReservationBook,
    choose_target,
    next_gang,
    ready_times,
)
from themis.auction.bids import Bid
from themis.auction.budget import Limits
from themis.auction.partial_allocation import AuctionOutcome, partial_allocation
from themis.fairness.ftf import (
    RHO_MAX,
    RemainingWork,
    app_ideal_time,
    capped_rho,
    made_fair_time,
    verified_rho,
)
from themis.fairness.ideal import PAPER, ideal_time
from themis.mechanism.view import Assignment, Changes, Schedule, SchedulingView
from themis.model.cluster import Cluster, SetShape
from themis.model.placement import pack_gang
from themis.model.state import AppState, GangWork, JobState


def offered_count(wanting: int, fairness_knob: float) -> int:
    """How many of the worst-off apps are offered GPUs: ceil((1 - f) n), at least one."""
    if wanting == 0:
        return 0
    return max(1, math.ceil((1.0 - fairness_knob) * wanting - 1e-9))


def offered_tenants(ranked: Sequence[AppState], fairness_knob: float) -> list[AppState]:
    """The offered apps: those of ``ranked`` (worst-off first) that come before the first
    app of the ``offered_count(n, f) + 1``-th tenant, ``n`` counting tenants, not apps.

    The knob offers a share of the contenders; counted by app, a tenant that splits its
    sweep into k apps holds k places in the count and, ranked together, k of the offers
    (the lie ``split:2``). Counted by tenant, it holds one place however many apps it
    runs, and its apps that rank inside that place all bid (their bids then share one
    weight: ``tenant_weights``). Without owners every app is its own tenant: the worst
    ``offered_count(len(ranked), f)`` apps, as in the paper."""
    count = offered_count(len({a.spec.tenant for a in ranked}), fairness_knob)
    seen: set[str] = set()
    for k, app in enumerate(ranked):
        if app.spec.tenant not in seen:
            if len(seen) == count:
                return list(ranked[:k])
            seen.add(app.spec.tenant)
    return list(ranked)


def within_share(app: AppState, view: SchedulingView, size: int) -> bool:
    """Whether ``app`` holds (ending leases included) no more than its fair share of a
    cluster of ``size`` GPUs: one of ``view.slices(app)`` equal slices (per owner when
    apps have owners). Only what the arbiter observes: the GPUs it granted."""
    return len(app.held()) * view.slices(app) <= size


def renewed_count(wanting: int, renewal_share: float) -> int:
    """How many of the worst-off apps keep their ending leases: ceil(share n)."""
    return math.ceil(renewal_share * wanting - 1e-9)


@dataclass
class RoundRecord:
    """What happened in one round, for explanations and tests."""

    now: float
    pool: Sequence[int]  # the offer, in its order
    rhos: dict[str, float]
    offered: list[str]
    bids: list[Bid]
    outcome: AuctionOutcome | None
    leftover_grants: dict[str, list[int]] = field(default_factory=dict)
    reserved: list[int] = field(default_factory=list)  # GPUs withheld for a reservation


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
        #: Owners (an app without one: the app) ever granted a GPU (``_first_gpu_wait``).
        self._started: set[str] = set()
        self.last_round: RoundRecord | None = None
        #: Each auction's node limit and deadline (``themis.auction.budget``).
        self.limits = limits
        #: Per app that ran nothing when last ranked: its version then, the time alone on
        #: the cluster of what it had made, and that work (``_verified_rho``).
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
        A round costs the apps that want GPUs and the grants that end, not every app."""
        now = view.now
        self.reservations.account(now)
        ending = view.ending_jobs()
        # Free GPUs, as a set (no order: every use of the pool sorts or tests membership).
        pool = view.free_set()
        renewable: dict[str, list[JobState]] = {}
        for job in ending:
            pool.update(job.gpus)
            renewable.setdefault(job.app.app_id, []).append(job)
        ended = {id(j) for j in ending}
        hungry = self._hungry_apps(view)
        grants: Schedule = {}
        if not pool:
            self._drop_stale_reservation(view, now)
            return grants, ending

        # 1. Visibility: rho with everything the app holds now, leases ending included, so
        # that an app whose leases just ended does not look as badly off as one that has
        # been waiting with nothing (its bid's "nothing" is still what it keeps). An app
        # that cannot run on what it holds reports its starving rho (finite, grows with
        # its wait) instead of one constant shared by every starving app.
        kept: dict[str, list[int]] = {}
        wanting = []
        for a in _in_order(view, hungry, ending):
            held = _kept(a, ended) if a.app_id in renewable else list(a.held())
            kept[a.app_id] = held
            if a.demand() > len(held):
                wanting.append(a)
        n_avg = {a.app_id: view.n_avg(a) for a in wanting}
        agents = {a.app_id: self.agent(a) for a in wanting}
        # What each app has left to do, computed once for its rho here and its bid below;
        # None for an app that runs nothing: its agent keeps that until a job of it starts.
        remaining = {a.app_id: a.remaining_by_gang(now) if a.held() else None for a in wanting}
        rhos: dict[str, float] = {}
        starving: set[str] = set()
        for a in wanting:
            rhos[a.app_id], cannot_run = agents[a.app_id].standing(
                now,
                n_avg[a.app_id],
                a.held(),
                view.slices(a),  # 1 / this: the slice a starving rho assumes
                remaining[a.app_id],
            )
            if cannot_run:
                starving.add(a.app_id)
        if starving and any(a.spec.owner is not None for a in wanting):
            # An app whose owner runs another app is not starving as a tenant: splitting a
            # sweep into apps must not buy places in the starving tier (fairness/shares.py).
            running_owners = {a.spec.tenant for a in view.apps if a.held()}
            starving = {
                a.app_id
                for a in wanting
                if a.app_id in starving
                and (a.spec.owner is None or a.spec.owner not in running_owners)
            }
        # 2. Offer, worst first, by rank (ties: arrival). Under the declared and the tiered
        # ranking, apps that cannot run at all come before the others, as with an
        # infinite rho, told apart by their starving rho.
        if self.ranking == PROSPECTIVE:
            rank = self._prospective_ranks(view, wanting, kept, len(pool), n_avg, remaining, now)
            starving = set()
        elif self.ranking != "declared":
            shape = self.cluster.shape
            if len(self._made_alone) > 2 * len(view.apps) + 64:  # forget finished apps
                active = set(view.apps)
                self._made_alone = {a: v for a, v in self._made_alone.items() if a in active}
            rank = {
                a.app_id: self._verified_rho(a, now, self._rank_n(view, a, n_avg[a.app_id]))
                for a in wanting
            }
            if any(a.spec.owner is not None for a in wanting):

                def n_of(app: AppState) -> float:
                    return self._rank_n(view, app, view.n_avg(app))

                rank_fresh_by_siblings(view, wanting, rank, now, shape, n_of, self.ideal)
                rank_by_cohort(view, wanting, rank, now, shape, self.lease, n_of, self.ideal)
            if self.ranking in ("verified", "verified-avg-n"):

                def ideal_of(app: AppState) -> float:
                    return app_ideal_time(self.ideal, app, shape, n_avg[app.app_id])

                rank_fresh_by_standing(wanting, rank, rhos, ideal_of, self.lease)
                starving = set()
        else:
            rank = rhos
        wanting.sort(key=lambda a: (a.app_id not in starving, -rank[a.app_id], a.arrival, a.app_id))
        offered = offered_tenants(wanting, self.fairness_knob)
        # Beside them, the app that has waited longest for its first GPU (docs/gangs.md §6):
        # it bids like the others, so that an app the rank has not reached yet still has a
        # chance in every auction.
        newcomer = self._first_gpu_wait(wanting[len(offered) :])
        if newcomer is not None:
            offered = [*offered, newcomer]
        # Jobs running after this round, as far as the app scheduler and the leftover step
        # (which only place jobs of apps in ``wanting``) need to know.
        planned: set[int] = {id(j) for a in wanting for j in a.running_jobs() if id(j) not in ended}
        # Renewal in place (``renewal_share``): the worst-off apps' ending grants, unless a
        # reservation needs their GPUs. The reservation is judged without them.
        # Within its share (``renew_within_share``): an app that holds no more than its
        # fair share of the cluster would get those GPUs back from any share-fair
        # allocation, so taking them away only buys a restart each way.
        keeping: list[JobState] = []
        if ending and (self.renewal_share > 0 or self.renew_within_share):
            keepers: set[str] = set()
            if self.renewal_share > 0:
                count = max(len(offered), renewed_count(len(wanting), self.renewal_share))
                keepers.update(a.app_id for a in wanting[:count])
            if self.renew_within_share:
                keepers.update(
                    a.app_id for a in wanting if within_share(a, view, self.cluster.size)
                )
            if wanting and wanting[0].app_id in keepers:
                # The worst-off app renews only what leaves room for its next gang: else
                # its reservation would take its own renewed GPUs from its running jobs
                # (a restart each way for nothing). Its ending leases go to the auction,
                # as in the paper's round, and its app scheduler chooses what runs.
                worst = wanting[0]
                waiting_gang = next_gang(worst)
                kept_back = {g for j in ending if j.app.app_id in keepers for g in j.gpus}
                if waiting_gang is not None and not self._placeable(
                    waiting_gang.gang, pool - kept_back
                ):
                    keepers.discard(worst.app_id)
            keeping = [j for j in ending if j.app.app_id in keepers]
        renewing = {g for j in keeping for g in j.gpus}

        # Reservation for the worst-off app's gang that fits nowhere (reservation.py).
        reserved, started = self._reserve(view, wanting, pool, now, grants, planned, renewing)
        reserved_jobs = set() if started is None else {id(started)}
        pool.difference_update(reserved)
        if keeping:
            taken = set(reserved) if started is None else {*reserved, *grants[started].gpus}
            renewed = self._renew_in_place(keeping, taken, pool, kept, grants, planned, now)
            if renewed:
                ended -= renewed
                renewable = {
                    app_id: [j for j in jobs if id(j) not in renewed]
                    for app_id, jobs in renewable.items()
                }
                wanting = [a for a in wanting if a.demand() > len(kept[a.app_id])]
                offered = [a for a in offered if a.demand() > len(kept[a.app_id])]
        record = RoundRecord(now, [], rhos, [a.app_id for a in offered], [], None)
        record.reserved = sorted(reserved)
        if not pool:
            self.last_round = record
            self._started.update(job.app.spec.tenant for job in grants)
            return grants, ending

        # 3. Bids. Each bidder sees the offer from its own starting point (see OrderedPacker);
        # the offer lists the most fragmented machines first, so small bundles are carved
        # from partly used machines before empty ones (best fit).
        index = self._offer_order(pool)
        offer = index.offer
        record.pool = offer
        bids = []
        for k, app in enumerate(offered):
            start = k * len(offer) // len(offered)
            rotated = index.rotated(start)
            bids.append(
                agents[app.app_id].bid(
                    now,
                    n_avg[app.app_id],
                    kept[app.app_id],
                    rotated,
                    renewable.get(app.app_id, ()),
                    remaining[app.app_id],
                    active_apps=view.slices(app),
                    offer_index=(index, start),
                )
            )
        record.bids = bids
        # 4. Partial Allocation; a tenant's bidders share one weight (``tenant_weights``).
        outcome = partial_allocation(
            bids,
            offer,
            self.rng,
            trim=lambda app_id, b, n: agents[app_id].trim(app_id, b, n),
            units=lambda app_id, b: agents[app_id].units(b),
            positions=cast("Mapping[Hashable, int]", index.position),
            limits=self.limits,
            weights=tenant_weights(offered),
        )
        record.outcome = outcome
        self.auctions += 1
        if outcome.limited:
            self.auctions_limited += 1
            self.auction_gap_max = max(self.auction_gap_max, outcome.gap)
            self.auction_resolve_gap_max = max(self.auction_resolve_gap_max, outcome.resolve_gap)
        until = self.lease_end(now)
        # The auction is generic over hashable GPU ids; the arbiter offers ints.
        leftover = set(cast("tuple[int, ...]", outcome.leftover))
        for app in offered:
            granted = cast("tuple[int, ...]", outcome.apps[app.app_id].granted)
            if not granted:
                continue
            plan, unused = assign_jobs(
                self.cluster,
                app,
                [*kept[app.app_id], *granted],
                now,
                reserved_jobs,
                {id(j) for j in renewable.get(app.app_id, ())},
            )
            leftover.update(unused)
            for job, gpus in plan.items():
                if id(job) not in planned:
                    grants[job] = Assignment(gpus, until)
                    planned.add(id(job))
        # 5. Leftover, worst-off first; the auction's winners come last, so that no
        # bidder gets its own hidden payment back.
        if leftover:
            winners = {a for a, o in outcome.apps.items() if o.choice}
            order = [a for a in wanting if a.app_id not in winners] + [
                a for a in wanting if a.app_id in winners
            ]
            placed = allocate_leftover(self.cluster, order, planned, leftover, now, (index, pool))
            for job, gpus in placed.items():
                # 6. Leases for every new or renewed placement.
                grants[job] = Assignment(gpus, until)
                record.leftover_grants.setdefault(job.app.app_id, []).extend(gpus)
        self.last_round = record
        self._started.update(job.app.spec.tenant for job in grants)
        return grants, ending

    def _rank_n(self, view: SchedulingView, app: AppState, n_avg: float) -> float:
        """The N of an app's verified rank: the larger of its ``N_avg`` so far and the
        slices the cluster is cut into now (``verified``), or ``N_avg`` alone (the other
        rankings, ``verified-avg-n`` among them: the previous default's decisions).

        An app that ran alone has ``N_avg`` near 1, so its verified rho reads about 1 (it
        ran at its speed alone, which a 1/1 share promises) however much it was given. Once
        others arrive its ideal time grows with N: by ``N_avg`` so far it looks as badly off
        as an app that got a 1/N share, and a newcomer whose whole ideal time is a few
        leases waits behind it (measured on the 16-GPU gang mix at seed 8: a long sweep alone
        for four hours ranked 0.98, a short sweep beside it 0.50; under the oracle the
        long sweep ends at 0.22). With N now the long sweep ranks 0.49. An app whose N fell
        (others finished) keeps its ``N_avg``: it was served among more. Both are observed
        by the arbiter, never declared."""
        if self.ranking not in ("verified", PROSPECTIVE):
            return n_avg
        return max(n_avg, float(view.slices(app)))

    def _prospective_ranks(
        self,
        view: SchedulingView,
        wanting: Sequence[AppState],
        kept: Mapping[str, Sequence[int]],
        free: int,
        n_avg: Mapping[str, float],
        remaining: Mapping[str, dict[int, GangWork] | None],
        now: float,
    ) -> dict[str, float]:
        """Each wanting app's rank under ``prospective``: the rho it would reach if, from
        now on, it held the GPUs it would get this round, ``min(demand, kept + free)``
        (what it keeps through the round plus every GPU up for grabs, capped by its
        demand: what the first app of a greedy division gets), until it finishes.

        The verified rank reads an app's standing with what it holds: a waiting app and
        an app that has just started both look far behind, so the worst-off by that
        standing win whatever their remaining work, and an app that would finish soon on
        a few GPUs waits behind apps that would not. Measured against PCS's Themis
        (docs/results.md, "Against PCS's Themis"), which ranks this way: 24.8 h of a
        31.0 h mean-JCT gap came from that rank. Here the rank is that rho, while the
        auction, the leases and the leftover step stay as they are.

        Observed by the arbiter: the time since arrival, the GPUs each app keeps, the free
        GPUs, the progress each app made, N (the larger of ``N_avg`` and the slices now,
        as ``verified``). Declared: the app's work (so its remaining work, declared minus
        made, and its ideal time), as under ``declared``; a uniform misstatement of work
        moves the rank only through the time already waited (docs/knowledge.md). The
        owner rules of the verified rank (siblings, cohorts) are not applied."""
        ranks: dict[str, float] = {}
        for a in wanting:
            gets = min(a.demand(), len(kept[a.app_id]) + free)
            n = self._rank_n(view, a, n_avg[a.app_id])
            ranks[a.app_id] = self.agent(a).rho_on(now, n, gets, remaining[a.app_id])
        return ranks

    def _verified_rho(self, app: AppState, now: float, n_avg: float) -> float:
        """``verified_rho`` of ``app`` on the cluster.

        What an app that runs nothing has made, and its time alone on the cluster, cannot
        change until a job of it starts, stops or finishes (its ``version``): that time is
        kept for such apps, most of the wanting apps of a round; the time since arrival
        and N are new each round. The same floats as ``verified_rho`` (``made_fair_time``
        is that time's ideal time among N)."""
        shape = self.cluster.shape
        if app.held():
            done = app.done_by_gang(now)
            return verified_rho(now, app.arrival, app.profile, done, shape, n_avg, self.ideal)
        cached = self._made_alone.get(app)
        if cached is None or cached[0] != app.version:
            made = RemainingWork(app.profile, app.done_by_gang(now))
            cached = self._made_alone[app] = (app.version, made.time_on(shape), made)
        fair = ideal_time(self.ideal, cached[1], cached[2], shape, n_avg)
        return capped_rho(now - app.arrival, fair)

    def _renew_in_place(
        self,
        keeping: Sequence[JobState],
        taken: set[int],
        pool: set[int],
        kept: dict[str, list[int]],
        grants: Schedule,
        planned: set[int],
        now: float,
    ) -> set[int]:
        """Renew ``keeping`` (the worst-off apps' ending grants) on their GPUs, except
        those on GPUs a reservation ``taken``: those GPUs leave the pool and count as kept.
        An app worse off than most gains nothing from handing its GPUs to another
        worse-off app and taking others back (a restart each way); only better-off apps'
        ending leases go up for grabs. Returns the ids of the jobs renewed."""
        until = self.lease_end(now)
        renewed: set[int] = set()
        for job in keeping:
            if taken.intersection(job.gpus):
                continue
            app_id = job.app.app_id
            grants[job] = Assignment(job.gpus, until)
            planned.add(id(job))
            pool.difference_update(job.gpus)
            kept[app_id] = [*kept[app_id], *job.gpus]
            renewed.add(id(job))
        return renewed

    def _first_gpu_wait(self, candidates: Sequence[AppState]) -> AppState | None:
        """Of ``candidates`` (apps not offered this round), the one that has waited longest
        for its first GPU: the earliest arrival among the apps this arbiter never granted
        a GPU and that hold none (after a restart of the arbiter, an app that holds GPUs
        is not new), counted per owner (an owner whose other app got GPUs is not new: a
        split buys no second slot). What a real scheduler knows: arrivals and its own
        grants."""
        started = self._started
        first: AppState | None = None
        for app in candidates:
            if (
                app.spec.tenant not in started
                and not app.held()
                and (first is None or (app.arrival, app.app_id) < (first.arrival, first.app_id))
            ):
                first = app
        return first

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

    def _drop_stale_reservation(self, view: SchedulingView, now: float) -> None:
        res = self.reservations.current
        if res is None:
            return
        app = next((a for a in view.apps if a.app_id == res.app_id), None)
        if app is None or now >= res.deadline or not _waits_for(app, res.gang):
            self.reservations.close(now, fulfilled=False)

    def _reserve(
        self,
        view: SchedulingView,
        wanting: list[AppState],
        pool: set[int],
        now: float,
        schedule: Schedule,
        planned: set[int],
        renewing: set[int] | None = None,
    ) -> tuple[set[int], JobState | None]:
        """Keep, make or fulfil the one reservation; return the GPUs of the pool it
        withholds this round, and the job a fulfilled reservation starts (in ``schedule``).
        ``renewing``: GPUs of the pool about to be renewed in place; whether the worst-off
        gang fits is judged without them, but its target may take them."""
        book = self.reservations
        if self.reservation_bound <= 0:
            return set(), None
        self._drop_stale_reservation(view, now)
        res = book.current
        if res is None and wanting:
            worst = wanting[0]
            job = next_gang(worst)
            free = pool.difference(renewing) if renewing else pool
            if job is not None and not tenant_holds_gpus(view, worst):
                fit = self._on_best_span(job.gang, free)
                if fit is not None and self._starts_at_once(worst):
                    book.at_once += 1
                    return set(), self._start(job, fit, schedule, planned, pool, now)
                if fit is None:
                    ready = ready_times(self.cluster, view.apps, pool, now)
                    target = choose_target(self.cluster, job.gang, ready, now)
                    if target:
                        res = book.current = Reservation(
                            worst.app_id, job.gang, target, now, now + self.reservation_bound
                        )
                        book.made += 1
        if res is None:
            return set(), None
        if pool.issuperset(res.target):
            app = next(a for a in view.apps if a.app_id == res.app_id)
            job = next(j for j in app.idle_jobs() if j.gang == res.gang)
            book.close(now, fulfilled=True)
            return set(), self._start(job, res.target, schedule, planned, pool, now)
        withheld = pool.intersection(res.target)
        book.withhold(withheld)
        return withheld, None

    def _start(
        self,
        job: JobState,
        gpus: tuple[int, ...],
        schedule: Schedule,
        planned: set[int],
        pool: set[int],
        now: float,
    ) -> JobState:
        """Start ``job`` on ``gpus`` of the pool outside the auction, with a normal lease."""
        schedule[job] = Assignment(gpus, self.lease_end(now))
        planned.add(id(job))
        pool.difference_update(gpus)
        return job

    def _starts_at_once(self, worst: AppState) -> bool:
        """Whether the worst-off app's gang that fits the pool starts before the auction.

        A reservation serves the worst-off app's gang that fits nowhere; a gang that fits
        went to the auction, which can give its pool away: its proportional-fair choice
        and hidden payment weigh the worst-off app's whole gang against smaller bundles
        for the others. An app whose gang needs a whole machine then waits for a
        reservation to drain one, a lease each time, while the same trials cut into
        smaller gangs start in the holes at once (the lie ``gang:0.5``: +29.5% for a
        64-GPU VGG sweep). So the worst-off app, when it holds nothing (nor does its
        tenant: the caller's check, as for reservations), starts its gang at once on free
        GPUs of its best span: the reservation made and fulfilled in one round. An app
        holding GPUs bids as before, so the rule grants no app a second gang outside the
        auction. On by default since its re-measurement (``gang_at_once``; off,
        the paper's auction for it, as in 0.2.0): docs/knowledge.md has what it
        changes."""
        return self.gang_at_once and not worst.held()

    def _placeable(self, gang: int, pool: set[int]) -> bool:
        """Whether a gang can start on its best span with the GPUs of ``pool``."""
        return self._on_best_span(gang, pool) is not None

    def _on_best_span(self, gang: int, pool: set[int]) -> tuple[int, ...] | None:
        """The GPUs of ``pool`` a gang would start on (best fit), if on its best span."""
        gpus = pack_gang(self.cluster, pool, gang)
        if gpus is None or self.cluster.span(gpus) > self.cluster.best_span(gang):
            return None
        return gpus


def rank_fresh_by_standing(
    wanting: Sequence[AppState],
    rank: dict[str, float],
    standing: dict[str, float],
    ideal_of: Callable[[AppState], float],
    lease: float,
) -> None:
    """An app that has made nothing yet ranks, in place of ``RHO_MAX``, by its standing
    one lease later: the rho it reaches if it is passed over for one more lease and then
    holds a 1/N slice (its starving rho, the wait counted, plus ``lease / T_id``). With
    it every app is in one order, none ahead for holding nothing.

    Measured: ranked first, every new app jumped the running apps, however little it was
    owed. Under 3x contention small sweeps finished at rho 0.02-0.3 while the large ones
    all ended near 0.62 (the oracle: 0.52). A small sweep's slice-rho is low (its ideal
    time is N times its time alone, far more than it needs), so it now waits its turn; an
    app whose ideal time is short (a few minutes, few apps) loses much by one more lease
    of waiting, and the added lease puts it ahead of running apps that lose little. An
    app that holds nothing after making progress rises by its verified rho as it waits.
    Only apps that have made nothing are ranked from declared work, as the starving
    tier's order was; at arrival a uniform misstatement of work does not move the
    slice-rho (``T_sh`` and ``T_id`` scale alike), the wait term does. ``ideal_of``: an
    app's ideal time ``T_id`` (``app_ideal_time``)."""
    for a in wanting:
        if rank[a.app_id] >= RHO_MAX:
            ideal = ideal_of(a)
            rank[a.app_id] = standing[a.app_id] + (lease / ideal if ideal > 0 else 0.0)


def rank_fresh_by_siblings(
    view: SchedulingView,
    wanting: Sequence[AppState],
    rank: dict[str, float],
    now: float,
    shape: SetShape,
    n_of: Callable[[AppState], float] | None = None,
    ideal: str = PAPER,
) -> None:
    """An app that has made nothing yet ranks ``RHO_MAX`` (first in the offer and the
    leftover), unless its owner runs another app that has made progress: it then ranks
    as the worst-off of those siblings (their verified rho), in place in ``rank``.

    Measured: a sweep split into two apps arriving together has one part running and the
    other, having made nothing, ranked first beside it at every round until it gets a
    GPU; over eight contexts ``split:2`` paid some liars +8% to +17% in every context. An
    honest owner's new app keeps its own claim through its owner's slice (``N_eff``) and
    the auction; only its newcomer's rank is the owner's. Apps without owners are their
    own tenants and rank as before, bit for bit. ``n_of``: the N of a verified rank
    (``Arbiter._rank_n``; default the app's ``N_avg``); ``ideal``: the definition of
    the ideal time (``fairness/ideal.py``)."""
    n_of = view.n_avg if n_of is None else n_of
    fresh = [a for a in wanting if rank[a.app_id] >= RHO_MAX and a.spec.owner is not None]
    active = owners_apps(view, fresh)
    for app in fresh:
        made = [
            value
            for other in active[app.spec.tenant]
            if other is not app
            for value in (
                verified_rho(
                    now,
                    other.arrival,
                    other.profile,
                    other.done_by_gang(now),
                    shape,
                    n_of(other),
                    ideal,
                ),
            )
            if value < RHO_MAX
        ]
        if made:
            rank[app.app_id] = max(made)


def rank_by_cohort(
    view: SchedulingView,
    wanting: Sequence[AppState],
    rank: dict[str, float],
    now: float,
    shape: SetShape,
    window: float,
    n_of: Callable[[AppState], float] | None = None,
    ideal: str = PAPER,
) -> None:
    """An owner's app ranks no worse than its cohort: itself and the owner's active apps
    that arrived no earlier than ``window`` seconds (one lease) before it, ranked as one
    app by their pooled verified rho (the sum of their times since arrival over the sum
    of the fair times of what they made). Lowers ``rank`` in place; never raises it.

    Measured: the parts of a split sweep progress unevenly (the arbiter serves one, then
    the other), and the part that has made least ranks worst-off by its own verified rho,
    outranks other tenants and takes their GPUs (``split:2`` at seed 101: +10.4% in all
    eight contexts). Pooled, the parts rank as the sweep would. The cohort looks forward
    only: an honest owner's app that arrives later is not ranked by an older app's
    progress (pooling every app of an owner cost honest owners a max rho of 1.6-1.9 on
    generated workloads); parts submitted apart (``stagger:S``) stay one cohort while S is
    at most a lease. Apps without owners rank as before, bit for bit. ``n_of`` and
    ``ideal``: as in ``rank_fresh_by_siblings``."""
    n_of = view.n_avg if n_of is None else n_of
    active = owners_apps(view, wanting)
    for app in wanting:
        siblings = active.get(app.spec.tenant, ())
        cohort = [o for o in siblings if o.arrival >= app.arrival - window]
        if len(cohort) < 2:
            continue
        elapsed = sum(now - o.arrival for o in cohort)
        fair = sum(
            made_fair_time(o.profile, o.done_by_gang(now), shape, n_of(o), ideal) for o in cohort
        )
        pooled = capped_rho(elapsed, fair)
        if pooled < rank[app.app_id]:
            rank[app.app_id] = pooled


def owners_apps(view: SchedulingView, apps: Sequence[AppState]) -> dict[str, list[AppState]]:
    """Every active app of each owner among ``apps`` (apps without an owner left out), in
    the view's order: one pass over the view for the owner rules of a round."""
    active: dict[str, list[AppState]] = {
        a.spec.tenant: [] for a in apps if a.spec.owner is not None
    }
    if active:
        for other in view.apps:
            if other.spec.tenant in active:
                active[other.spec.tenant].append(other)
    return active


def tenant_holds_gpus(view: SchedulingView, app: AppState) -> bool:
    """Whether ``app`` has an owner that holds GPUs through any of its apps, ``app``
    included: such an app gets no reservation.

    A reservation holds GPUs idle for the worst-off app's gang, whatever that app holds.
    Measured: a sweep split into two apps a second apart has its first part alone when the
    second part's arrival triggers a round, so the first part, holding its machine, is the
    worst-off app that wants GPUs and is reserved the other machine (``split:2`` with
    staggered parts: +10.4% and +8.4% for two liars over eight contexts). An owner that
    holds GPUs is not gang-starved as a tenant: its gangs wait for the auction and the
    leftover like everyone's. Reserving only for apps below their fair share, for
    everyone, closes it too but raised Themis's max rho on four of eight generated
    workloads; for owners only, this costs honest owners 0-7% of max rho
    (docs/knowledge.md). False for an app without an owner: its reservations are as
    before, bit for bit."""
    if app.spec.owner is None:
        return False
    tenant = app.spec.tenant
    return any(other.spec.tenant == tenant and other.held() for other in view.apps)


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


def _kept(app: AppState, ended: set[int]) -> list[int]:
    """The GPUs ``app`` keeps through this round: those of its running jobs whose grants
    do not end now (``ended``: their ids), in submission order."""
    return [g for j in app.running_jobs() if id(j) not in ended for g in j.gpus]


def _in_order(
    view: SchedulingView, hungry: set[AppState] | None, ending: Sequence[JobState]
) -> list[AppState]:
    """The apps that may want GPUs this round, in the order of ``view.apps``: with the
    book of hungry apps, those and the apps whose grants end (the only ones whose
    demand can exceed what they keep); without it, every active app."""
    if hungry is None or view.order is None:
        return list(view.apps)
    apps = set(hungry)
    apps.update(j.app for j in ending)
    rank = view.order
    return sorted(apps, key=rank.__getitem__)


def _waits_for(app: AppState, gang: int) -> bool:
    return any(j.gang == gang for j in app.idle_jobs())
