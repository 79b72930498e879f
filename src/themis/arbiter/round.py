"""One round of the Themis arbiter (docs/design.md §5): the mechanism, step by step.

1. visibility: every active app with unmet demand reports its rho with what it holds now
   (leases ending in this round included; its bid's "nothing" is what it keeps);
2. offer: the worst ``ceil((1 - f) n)`` of them (at least one) are offered the free GPUs;
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
from dataclasses import dataclass, field
from typing import cast

from themis.agent.agent import Agent
from themis.agent.app_scheduler import assign_jobs
from themis.arbiter.leftover import allocate_leftover
from themis.auction.bids import Bid
from themis.auction.partial_allocation import AuctionOutcome, partial_allocation
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies.base import Assignment, Schedule, SchedulingView


def offered_count(wanting: int, fairness_knob: float) -> int:
    """How many of the worst-off apps are offered GPUs: ceil((1 - f) n), at least one."""
    if wanting == 0:
        return 0
    return max(1, math.ceil((1.0 - fairness_knob) * wanting - 1e-9))


@dataclass
class RoundRecord:
    """What happened in one round, for explanations and tests."""

    now: float
    pool: list[int]
    rhos: dict[str, float]
    offered: list[str]
    bids: list[Bid]
    outcome: AuctionOutcome | None
    leftover_grants: dict[str, list[int]] = field(default_factory=dict)


class Arbiter:
    def __init__(
        self,
        cluster: Cluster,
        fairness_knob: float,
        lease: float,
        rng: random.Random,
        max_menu: int = 32,
    ) -> None:
        if not 0.0 <= fairness_knob < 1.0:
            raise ValueError("the fairness knob f must satisfy 0 <= f < 1")
        if lease <= 0:
            raise ValueError("the lease must be > 0 seconds")
        self.cluster = cluster
        self.fairness_knob = fairness_knob
        self.lease = lease
        self.rng = rng
        self.max_menu = max_menu
        self._agents: dict[str, Agent] = {}
        self.last_round: RoundRecord | None = None

    def agent(self, app: AppState) -> Agent:
        agent = self._agents.get(app.app_id)
        if agent is None or agent.app is not app:
            agent = self._agents[app.app_id] = Agent(app, self.cluster, self.max_menu)
        return agent

    def run_round(self, view: SchedulingView) -> Schedule:
        now = view.now
        schedule: Schedule = {}
        kept: dict[str, list[int]] = {}
        renewable: dict[str, list[JobState]] = {}
        pool = set(view.free_gpus())
        for app in view.apps:
            kept[app.app_id] = []
            renewable[app.app_id] = []
            for job in app.running_jobs():
                if view.ending(job):
                    pool.update(job.gpus)
                    renewable[app.app_id].append(job)
                else:
                    schedule[job] = Assignment(job.gpus, job.until)
                    kept[app.app_id].extend(job.gpus)
        if not pool:
            return schedule

        # 1. Visibility: rho with everything the app holds now, leases ending included, so
        # that an app whose leases just ended does not look as badly off as one that has
        # been waiting with nothing (its bid's "nothing" is still what it keeps).
        wanting = [a for a in view.apps if a.demand() > len(kept[a.app_id])]
        n_avg = {a.app_id: view.n_avg(a) for a in wanting}
        agents = {a.app_id: self.agent(a) for a in wanting}
        # What each app has left to do, computed once for its rho here and its bid below.
        remaining = {a.app_id: a.remaining_by_gang(now) for a in wanting}
        rhos = {
            a.app_id: agents[a.app_id].rho_with(now, n_avg[a.app_id], a.held(), remaining[a.app_id])
            for a in wanting
        }
        # 2. Offer, worst rho first (ties: earlier arrival).
        wanting.sort(key=lambda a: (-rhos[a.app_id], a.arrival, a.app_id))
        offered = wanting[: offered_count(len(wanting), self.fairness_knob)]
        # 3. Bids. Each bidder sees the offer from its own starting point (see OrderedPacker).
        offer = sorted(pool, key=self.cluster.topology_rank.__getitem__)
        bids = []
        for k, app in enumerate(offered):
            start = k * len(offer) // len(offered)
            rotated = offer[start:] + offer[:start]
            bids.append(
                agents[app.app_id].bid(
                    now,
                    n_avg[app.app_id],
                    kept[app.app_id],
                    rotated,
                    renewable[app.app_id],
                    remaining[app.app_id],
                )
            )
        # 4. Partial Allocation.
        outcome = partial_allocation(
            bids,
            offer,
            self.rng,
            trim=lambda app_id, b, n: agents[app_id].trim(app_id, b, n),
            units=lambda app_id, b: agents[app_id].units(b),
        )
        # The auction is generic over hashable GPU ids; the arbiter offers ints.
        leftover = set(cast("tuple[int, ...]", outcome.leftover))
        planned: set[int] = {id(j) for j in schedule}
        for app in offered:
            granted = cast("tuple[int, ...]", outcome.apps[app.app_id].granted)
            if not granted:
                continue
            plan, unused = assign_jobs(self.cluster, app, [*kept[app.app_id], *granted], now)
            leftover.update(unused)
            for job, gpus in plan.items():
                if job not in schedule:
                    schedule[job] = Assignment(gpus, now + self.lease)
                    planned.add(id(job))
        # 5. Leftover: apps not offered first, then everyone still wanting.
        record = RoundRecord(now, offer, rhos, [a.app_id for a in offered], bids, outcome)
        if leftover:
            offered_ids = {a.app_id for a in offered}
            order = [a for a in wanting if a.app_id not in offered_ids] + offered
            placed = allocate_leftover(self.cluster, order, planned, leftover, now)
            for job, gpus in placed.items():
                # 6. Leases for every new or renewed placement.
                schedule[job] = Assignment(gpus, now + self.lease)
                record.leftover_grants.setdefault(job.app.app_id, []).extend(gpus)
        self.last_round = record
        return schedule
