"""``--ideal-time`` reaches every decision that divides by an ideal time: Themis's
standings and bids (``Agent``), its verified ranking (``Arbiter``), ftf-oracle's program;
and the command line records it. Hand cases on 64 GPUs (``1x8x8``) among ``N = 10`` or
``N = 2`` apps, where a 1-GPU app's slice ideal is its own work and the paper's ``N``
times that (docs/metrics.md, "Two ideal times"). The command line:
``tests/cli/test_ideal_time.py``."""

from __future__ import annotations

import random

import pytest

from tests.policies.hand import hold, make_app
from themis.agent.agent import Agent
from themis.arbiter.options import ArbiterOptions
from themis.arbiter.round import Arbiter
from themis.fairness.ftf import t_cluster
from themis.model.cluster import Cluster
from themis.model.state import AppState
from themis.policies import PolicyOptions, SchedulingView, make_policy
from themis.policies.ftf_oracle import FtfOraclePolicy

C64 = Cluster.from_spec("1x8x8")


def arrived(app_id: str, jobs: list[tuple[int, float]]) -> AppState:
    app = make_app(app_id, 0.0, jobs)
    app.t_cluster = t_cluster(app.profile, app.remaining_by_gang(0.0), C64.shape)
    return app


@pytest.mark.parametrize(("ideal", "expected"), [("paper", 0.1), ("slice", 1.0)])
def test_the_agent_divides_by_the_chosen_ideal_time(ideal: str, expected: float) -> None:
    # One 1-GPU job of 100 s, at its arrival, among 10: on one GPU it ends in 100 s. The
    # paper's T_id is 1,000 s, the slice's 100 s. Holding nothing it is starving: on its
    # share of 6.4 GPUs it uses one, 100 s again. A bundle of one GPU is worth the same.
    app = arrived("s", [(1, 100.0)])
    agent = Agent(app, C64, ideal=ideal)
    assert agent.rho_with(0.0, 10.0, (0,)) == pytest.approx(expected)
    standing, starving = agent.standing(0.0, 10.0, (), active_apps=10)
    assert starving and standing == pytest.approx(expected)
    bid = agent.bid(0.0, 10.0, (), list(range(64)), active_apps=10)
    assert [e.rho for e in bid.menu] == [pytest.approx(expected)]


def _progressed(app_id: str, jobs: int, made: float) -> AppState:
    """``jobs`` 1-GPU jobs of 1,000 s, each of which made ``made`` iterations from 0 on
    one GPU and stopped: the app holds nothing now."""
    app = arrived(app_id, [(1, 1000.0)] * jobs)
    for job in app.jobs:
        hold(job, (0,), 0.0, None)
        job.stop(made, True)
    return app


@pytest.mark.parametrize(("ideal", "worst"), [("paper", "big"), ("slice", "small")])
def test_the_verified_ranking_follows_the_ideal_time(ideal: str, worst: str) -> None:
    # At t = 1,000 among N = 2: "small" (one 1-GPU job) made 500 s of work; "big" (64
    # 1-GPU jobs) made 64 x 333.3 s. The paper's fair time of what each made: small 500
    # x 2 = 1,000 (rho 1.0), big 333.3 x 2 (rho 1.5): big is worse off. On a slice of 32
    # GPUs small would have run at its demand, 500 s (rho 2.0), and big on 32 GPUs,
    # 64 x 333.3 / 32 = 666.7 s (rho 1.5, as it can fill the cluster): small is worse
    # off, and is offered first.
    small = _progressed("small", 1, 500.0)
    big = _progressed("big", 64, 1000.0 / 3)
    arbiter = Arbiter(
        C64, ArbiterOptions(fairness_knob=0.8, lease=600.0, ideal=ideal), random.Random(0)
    )
    arbiter.plan(SchedulingView(1000.0, C64, [small, big], lambda _app: 2.0))
    assert arbiter.last_round is not None
    assert arbiter.last_round.offered[0] == worst


@pytest.mark.parametrize(("ideal", "small_share"), [("paper", 0.1 / 0.1015625), ("slice", 1.0)])
def test_ftf_oracle_solves_its_program_with_the_chosen_ideal_time(
    ideal: str, small_share: float
) -> None:
    # At arrival among N = 10: "small" one 1-GPU job of 100 s, "big" 64 of 100 s; 65 GPUs
    # wanted of 64. Paper: T_id 1,000 for both; the water level t where 100 / (1,000 t)
    # + 6,400 / (1,000 t) = 64 is 0.1015625: small gets 0.1 / t = 0.985 GPUs. Slice:
    # small's T_id is 100, its floor rho 1 is above any level the cluster allows, so it
    # saturates at its one GPU; big (T_id 6,400 / 6.4 = 1,000) gets the other 63.
    small = arrived("small", [(1, 100.0)])
    big = arrived("big", [(1, 100.0)] * 64)
    policy = make_policy("ftf-oracle", PolicyOptions(ideal_time=ideal))
    assert isinstance(policy, FtfOraclePolicy)
    policy.schedule(SchedulingView(0.0, C64, [small, big], lambda _app: 10.0))
    assert policy.last_shares["small"] == pytest.approx(small_share, rel=1e-9)
    assert policy.last_shares["big"] == pytest.approx(64.0 - small_share, rel=1e-9)
