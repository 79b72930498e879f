"""Each step of the round, called alone on a hand-made round state, does its one job."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.policies.hand import hold, make_app, view
from themis.agent.agent import Agent
from themis.arbiter.bidding import auction
from themis.arbiter.leftover import leftover
from themis.arbiter.offer import OfferOrder, offer
from themis.arbiter.ranking import ranking
from themis.arbiter.renewal import choose_renewals, renewal
from themis.arbiter.reservation import ReservationBook, reservation
from themis.arbiter.round_state import RoundRecord, RoundState
from themis.arbiter.visibility import visibility
from themis.auction.budget import Limits
from themis.fairness.ideal import PAPER
from themis.model.cluster import Cluster
from themis.model.state import AppState


@dataclass
class Knobs:
    """The knobs the steps read (``round_state.Knobs``), without an arbiter."""

    cluster: Cluster
    fairness_knob: float = 0.8
    lease: float = 100.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    reservation_bound: float = 100.0
    ranking: str = "verified"
    renewal_share: float = 0.0
    renew_within_share: bool = False
    gang_at_once: bool = True
    ideal: str = PAPER
    limits: Limits | None = None

    def agent(self, app: AppState) -> Agent:
        return Agent(app, self.cluster, 32, "paper", self.ideal)

    def lease_end(self, now: float) -> float:
        return now + self.lease


def arbiter(cluster: Cluster, **knobs: Any) -> Knobs:
    return Knobs(cluster, **knobs)


def waiting(n: int) -> list[AppState]:
    """``n`` apps, each wanting one GPU for 100 iterations, arrived a second apart."""
    return [make_app(f"a{k}", float(k), [(1, 100.0)]) for k in range(n)]


@pytest.mark.parametrize(("knob", "offered"), [(0.8, 2), (0.5, 5), (0.0, 10), (0.99, 1)])
def test_the_offer_step_offers_the_worst_ceil_1_minus_f_n(knob: float, offered: int) -> None:
    cluster = Cluster.from_spec("1x1x8")
    apps = waiting(10)
    state = RoundState.begin(arbiter(cluster, fairness_knob=knob), view(cluster, apps, 10.0), None)
    state.wanting = list(reversed(apps))  # as ranked: a9 worst off
    every_owner_served = {a.spec.tenant for a in apps}  # no newcomer's slot
    offer(state, every_owner_served)
    assert [a.app_id for a in state.offered] == [f"a{9 - k}" for k in range(offered)]
    # beside them, the app that has waited longest for its first GPU: a0
    offer(state, set())
    assert [a.app_id for a in state.offered][-1] == "a0"


def test_visibility_finds_the_apps_that_want_more_than_they_keep() -> None:
    """R holds GPUs 0-1 on a grant ending now and wants 4; D holds 2 of its 2 until
    later; W holds nothing and wants 1. R keeps nothing through the round."""
    cluster = Cluster.from_spec("1x1x8")
    r = make_app("R", 0.0, [(2, 1000.0), (2, 1000.0)])
    d = make_app("D", 0.0, [(2, 1000.0)])
    w = make_app("W", 5.0, [(1, 100.0)])
    hold(r.jobs[0], (0, 1), 0.0, 10.0)
    hold(d.jobs[0], (2, 3), 0.0, 500.0)
    state = RoundState.begin(arbiter(cluster), view(cluster, [r, d, w], 10.0), None)
    assert state.pool == {0, 1, 4, 5, 6, 7}  # free GPUs and the ending grant's
    visibility(state)
    assert [a.app_id for a in state.wanting] == ["R", "W"]
    assert state.kept == {"R": [], "D": [2, 3], "W": []}
    assert set(state.rhos) == {"R", "W"} and "W" in state.starving  # W holds nothing


def test_the_declared_ranking_sorts_the_wanting_apps_worst_off_first() -> None:
    cluster = Cluster.from_spec("1x1x8")
    apps = waiting(3)
    state = RoundState.begin(arbiter(cluster, ranking="declared"), view(cluster, apps, 10.0), None)
    state.wanting = list(apps)
    state.rhos = {"a0": 1.0, "a1": 3.0, "a2": 2.0}
    ranking(state, {})
    assert [a.app_id for a in state.wanting] == ["a1", "a2", "a0"]


def test_the_reservation_step_withholds_free_gpus_for_a_gang_that_fits_nowhere() -> None:
    """G wants an 8-GPU gang on a machine where H holds 4 GPUs until 50: the four free
    GPUs are reserved for G and leave the pool; the book counts one reservation."""
    cluster = Cluster.from_spec("1x1x8")
    g = make_app("G", 0.0, [(8, 800.0)])
    h = make_app("H", 0.0, [(4, 4000.0)])
    hold(h.jobs[0], (0, 1, 2, 3), 0.0, 50.0)
    state = RoundState.begin(arbiter(cluster), view(cluster, [g, h], 10.0), None)
    state.wanting = [g]
    book = ReservationBook()
    reservation(state, book)
    assert state.reserved == {4, 5, 6, 7} and state.pool == set() and state.started is None
    assert book.made == 1 and book.current is not None and book.current.app_id == "G"


def test_renewal_renews_the_worst_off_apps_ending_grants_in_place() -> None:
    """With renewal for every wanting app, R's ending grant on GPUs 0-1 is renewed until
    the round's lease end and its GPUs leave the pool; R then keeps them."""
    cluster = Cluster.from_spec("1x1x8")
    r = make_app("R", 0.0, [(2, 1000.0), (2, 1000.0)])
    hold(r.jobs[0], (0, 1), 0.0, 10.0)
    state = RoundState.begin(arbiter(cluster, renewal_share=1.0), view(cluster, [r], 10.0), None)
    visibility(state)
    choose_renewals(state)
    assert state.renewing == {0, 1}
    renewal(state)
    assert state.grants[r.jobs[0]].gpus == (0, 1) and state.grants[r.jobs[0]].until == 110.0
    assert state.kept["R"] == [0, 1] and state.pool == {2, 3, 4, 5, 6, 7}


def test_the_auction_and_leftover_steps_grant_the_offered_apps_jobs() -> None:
    """Two apps that want two 1-GPU jobs each, offered four free GPUs: the auction and
    the leftover step between them start all four jobs, each until the lease end."""
    cluster = Cluster.from_spec("1x1x4")
    apps = [make_app(name, 0.0, [(1, 100.0), (1, 100.0)]) for name in "AB"]
    knobs = arbiter(cluster, fairness_knob=0.0)
    state = RoundState.begin(knobs, view(cluster, apps, 10.0), None)
    visibility(state)
    ranking(state, {})
    offer(state, set())
    state.record = RoundRecord(state.now, [], state.rhos, [], [], None)
    auction(state, OfferOrder(cluster))
    assert state.outcome is not None and len(state.record.bids) == 2
    leftover(state)
    assert sorted(j.job_id for j in state.grants) == ["A0", "A1", "B0", "B1"]
    assert sorted(g for a in state.grants.values() for g in a.gpus) == [0, 1, 2, 3]
    assert {a.until for a in state.grants.values()} == {110.0}
