"""What one Themis round knows as it goes: the state its steps read and fill in turn.

The round (``round.py``) is a sequence of steps, each a function of this state, the way a
kube-scheduler cycle hands its ``CycleState`` from one extension point to the next: a
step reads what earlier steps left and writes what later ones need, so each step can be
read, tested and timed alone. What outlives the round (the standing reservation, the
offer's order, which owners were ever served) is each step's own book, passed beside the
state; the arbiter's knobs are read through :class:`Knobs`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from themis.agent.agent import Agent
from themis.auction.bids import Bid
from themis.auction.budget import Limits
from themis.auction.partial_allocation import AuctionOutcome
from themis.mechanism.view import Schedule, SchedulingView
from themis.model.cluster import Cluster
from themis.model.placement import OfferIndex
from themis.model.state import AppState, GangWork, JobState


class Knobs(Protocol):
    """What the steps read from the arbiter: its knobs (read-only here, whether the
    arbiter keeps them as attributes or derives them), its agents and its lease rule."""

    @property
    def cluster(self) -> Cluster: ...
    @property
    def fairness_knob(self) -> float: ...
    @property
    def lease(self) -> float: ...
    @property
    def rng(self) -> random.Random: ...
    @property
    def reservation_bound(self) -> float: ...
    @property
    def ranking(self) -> str: ...
    @property
    def renewal_share(self) -> float: ...
    @property
    def renew_within_share(self) -> bool: ...
    @property
    def gang_at_once(self) -> bool: ...
    @property
    def ideal(self) -> str: ...
    @property
    def limits(self) -> Limits | None: ...

    def agent(self, app: AppState) -> Agent: ...
    def lease_end(self, now: float) -> float: ...


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


@dataclass
class RoundState:
    """One round's state. The fields are grouped by the step that first writes them;
    ``begin`` fills the first group from the view."""

    knobs: Knobs
    view: SchedulingView
    now: float
    #: Running jobs whose grants end now (those not granted again stop).
    ending: list[JobState]
    #: GPUs up for grabs: the free ones and those of the ending grants. Steps that give
    #: GPUs away take them out.
    pool: set[int]
    #: Each app's ending jobs, which its bid may renew.
    renewable: dict[str, list[JobState]]
    #: Ids of the ending jobs (renewed ones leave it).
    ended: set[int]
    #: The active apps whose demand exceeds what they hold (None: look at every app).
    hungry: set[AppState] | None
    #: This round's new and renewed grants.
    grants: Schedule = field(default_factory=dict)

    # visibility
    #: The GPUs each app that may want more keeps through the round.
    kept: dict[str, list[int]] = field(default_factory=dict)
    #: The apps that want more than they keep; ranked worst-off first by ``ranking``.
    wanting: list[AppState] = field(default_factory=list)
    n_avg: dict[str, float] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    #: What each wanting app has left to do (None: it runs nothing).
    remaining: dict[str, dict[int, GangWork] | None] = field(default_factory=dict)
    #: The rho each wanting app reports.
    rhos: dict[str, float] = field(default_factory=dict)
    #: Apps that cannot run on what they hold (ranked first by some rankings).
    starving: set[str] = field(default_factory=set)

    # ranking
    rank: dict[str, float] = field(default_factory=dict)

    # offer
    #: The apps offered the pool, in rank order (and the longest-waiting newcomer).
    offered: list[AppState] = field(default_factory=list)
    #: Ids of the jobs running after this round, as far as the app scheduler and the
    #: leftover step (which only place jobs of wanting apps) need to know.
    planned: set[int] = field(default_factory=set)

    # renewal
    #: Ending grants to renew in place, and their GPUs.
    keeping: list[JobState] = field(default_factory=list)
    renewing: set[int] = field(default_factory=set)

    # reservation
    #: GPUs of the pool withheld for the reservation.
    reserved: set[int] = field(default_factory=set)
    #: The job a reservation started outside the auction, if any.
    started: JobState | None = None

    # auction
    record: RoundRecord | None = None
    #: The offer, indexed for the bidders.
    index: OfferIndex | None = None
    #: When this round's grants end.
    until: float = 0.0
    outcome: AuctionOutcome | None = None
    #: GPUs no bid took or no winner could use: for the leftover step.
    leftover: set[int] = field(default_factory=set)

    @classmethod
    def begin(cls, knobs: Knobs, view: SchedulingView, hungry: set[AppState] | None) -> RoundState:
        """The state at the start of a round: the ending grants' GPUs join the free pool
        (a set: every use of the pool sorts or tests membership)."""
        ending = view.ending_jobs()
        pool = view.free_set()
        renewable: dict[str, list[JobState]] = {}
        for job in ending:
            pool.update(job.gpus)
            renewable.setdefault(job.app.app_id, []).append(job)
        ended = {id(j) for j in ending}
        return cls(knobs, view, view.now, ending, pool, renewable, ended, hungry)
