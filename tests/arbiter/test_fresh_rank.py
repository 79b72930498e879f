"""The verified ranking puts every app in one order: an app that has made nothing ranks by
its standing (its starving rho), not first for holding nothing (ranked first, each new
small sweep jumped every running app under ``--contention 3``)."""

from __future__ import annotations

import random

import pytest

from tests.policies.hand import hold, make_app, view
from themis.arbiter.options import ArbiterOptions
from themis.arbiter.ranking import rank_n
from themis.arbiter.round import Arbiter, rank_fresh_by_standing
from themis.fairness.ftf import RHO_MAX, t_cluster
from themis.model.cluster import Cluster
from themis.model.state import AppState


def test_only_apps_that_made_nothing_take_their_standing_one_lease_later() -> None:
    """b made nothing: its slice-rho 1.1 plus one lease of waiting over its ideal time
    (T_cluster 100 s x N 2): 1.1 + 50 / 200 = 1.35. a and c keep their verified rho."""
    apps = [make_app(name, 0.0, [(1, 100.0)]) for name in "abc"]
    for a in apps:
        a.t_cluster = 100.0
    rank = {"a": 2.0, "b": RHO_MAX, "c": 0.5}
    ideal = {"a": 200.0, "b": 200.0, "c": 200.0}
    rank_fresh_by_standing(
        apps, rank, {"a": 7.0, "b": 1.1, "c": 9.0}, lambda a: ideal[a.app_id], 50.0
    )
    assert rank == {"a": 2.0, "b": pytest.approx(1.35), "c": 0.5}


def _running_and_fresh() -> tuple[Cluster, AppState, AppState]:
    """1x1x8 at t = 1,000, every app's N_eff 1. R arrived at 0 and wants four 2-GPU
    trials; one has run on GPUs 0-1 since 900 at 2 it/s (200 iterations made, the lease
    ends at 1,500). Its verified rho: the fair time of 200 iterations of a 2-GPU trial
    alone is 100 s, so 1,000 / 100 = 10. S arrived at 990 with one 1-GPU trial of 100
    iterations and holds nothing: it cannot run, and its standing (starving rho) is
    (10 s waited + 100 s on its share, capped by its demand of one GPU) / (100 s x 1)
    = 1.1; one lease (600 s) later it would be 7.1, still below R's 10."""
    cluster = Cluster.from_spec("1x1x8")
    r = make_app("R", 0.0, [(2, 8000.0)] * 4)
    r.t_cluster = t_cluster(r.profile, r.remaining_by_gang(0.0), cluster.shape)
    hold(r.jobs[0], (0, 1), 900.0, 1500.0)
    s = make_app("S", 990.0, [(1, 100.0)])
    s.t_cluster = t_cluster(s.profile, s.remaining_by_gang(990.0), cluster.shape)
    return cluster, r, s


@pytest.mark.parametrize(
    ("ranking", "offered"),
    [
        # one order by N_avg: R (10) before S (7.1); S bids too, in the slot of the app
        # that has waited longest for its first GPU
        ("verified-avg-n", ["R", "S"]),
        # one order by the larger of N_avg and N now: two apps share the cluster now, so
        # R's verified rho is 1,000 / (100 x 2) = 5, below S's 7.1; S takes the one offer
        ("verified", ["S"]),
        # the tiered ranking: S cannot run on what it holds, so it comes first and takes
        # the one offer (ceil(0.2 x 2) = 1); R, which holds GPUs, has no slot
        ("verified-tiered", ["S"]),
    ],
)
def test_a_worse_off_running_app_is_offered_before_a_fresh_one(
    ranking: str, offered: list[str]
) -> None:
    cluster, r, s = _running_and_fresh()
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(fairness_knob=0.8, lease=600.0, reservation_bound=0.0, ranking=ranking),
        random.Random(0),
    )
    arbiter.run_round(view(cluster, [r, s], 1000.0))
    record = arbiter.last_round
    assert record is not None
    assert record.offered == offered
    assert record.rhos["S"] == pytest.approx(1.1)


@pytest.mark.parametrize(
    ("ranking", "n_avg", "expected"),
    [
        # two apps share the cluster now: an app that ran alone (N_avg 1) ranks by 2
        ("verified", 1.0, 2.0),
        # an app whose N fell (it shared with three) keeps its N_avg
        ("verified", 3.0, 3.0),
        # the earlier rank, and the tiered one, divide by N_avg alone
        ("verified-avg-n", 1.0, 1.0),
        ("verified-tiered", 1.0, 1.0),
    ],
)
def test_the_verified_rank_takes_the_larger_of_n_avg_and_n_now(
    ranking: str, n_avg: float, expected: float
) -> None:
    cluster, r, s = _running_and_fresh()
    arbiter = Arbiter(
        cluster, ArbiterOptions(fairness_knob=0.8, lease=600.0, ranking=ranking), random.Random(0)
    )
    assert rank_n(arbiter.ranking, view(cluster, [r, s], 1000.0), r, n_avg) == expected
