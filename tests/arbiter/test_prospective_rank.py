"""``--ranking prospective``: apps wanting GPUs are ordered by the rho each would reach
holding the GPUs it would get this round (its demand capped by what it keeps plus the
free GPUs), as PCS's Themis ranks, not by their standing with what they hold now."""

from __future__ import annotations

import random

import pytest

from tests.policies.hand import hold, make_app, view
from themis.arbiter.options import PROSPECTIVE, ArbiterOptions
from themis.arbiter.ranking import prospective_ranks
from themis.arbiter.round import Arbiter
from themis.fairness.ftf import t_cluster
from themis.model.cluster import Cluster
from themis.model.state import AppState
from themis.policies import PolicyOptions
from themis.policies.knobs import BadOption


def _running_and_fresh() -> tuple[Cluster, AppState, AppState]:
    """1x1x8 at t = 1,000 (as in test_fresh_rank.py). R arrived at 0 with four 2-GPU
    trials of 8,000 iterations (1 s each on one GPU: T_cluster 4,000 s on 8 GPUs); one
    trial has run on GPUs 0-1 since 900 (200 iterations made; lease ends at 1,500, so R
    keeps both GPUs). S arrived at 990 with one 1-GPU trial of 100 iterations, holds
    nothing. Six GPUs are free; N for both is 2 (two apps share the cluster now)."""
    cluster = Cluster.from_spec("1x1x8")
    r = make_app("R", 0.0, [(2, 8000.0)] * 4)
    r.t_cluster = t_cluster(r.profile, r.remaining_by_gang(0.0), cluster.shape)
    hold(r.jobs[0], (0, 1), 900.0, 1500.0)
    s = make_app("S", 990.0, [(1, 100.0)])
    s.t_cluster = t_cluster(s.profile, s.remaining_by_gang(990.0), cluster.shape)
    return cluster, r, s


@pytest.mark.parametrize(
    ("ideal", "r_rank", "s_rank"),
    [
        # R would get min(8, 2 kept + 6 free) = 8 GPUs: its 31,800 GPU-s left over 8 GPUs
        # is 3,975 s, its longest trial 8,000 / 2 = 4,000 s; (1,000 + 4,000) / (4,000 x 2)
        # = 0.625. S would get 1 GPU: (10 + 100) / (100 x 2) = 0.55. R is worse off.
        ("paper", 0.625, 0.55),
        # The slice ideal: R's 32,000 GPU-s on min(8, 8 / 2) = 4 GPUs is 8,000 s, as the
        # paper's; S's 100 s on min(1, 4) = 1 GPU is 100 s: (10 + 100) / 100 = 1.1.
        ("slice", 0.625, 1.1),
    ],
)
def test_the_prospective_rank_is_the_rho_with_the_gpus_the_app_would_get(
    ideal: str, r_rank: float, s_rank: float
) -> None:
    cluster, r, s = _running_and_fresh()
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(fairness_knob=0.8, lease=600.0, ranking=PROSPECTIVE, ideal=ideal),
        random.Random(0),
    )
    v = view(cluster, [r, s], 1000.0)
    ranks = prospective_ranks(
        arbiter,
        v,
        [r, s],
        {"R": [0, 1], "S": []},
        6,
        {"R": 1.0, "S": 1.0},
        {"R": None, "S": None},
        1000.0,
    )
    assert ranks == {"R": pytest.approx(r_rank), "S": pytest.approx(s_rank)}


@pytest.mark.parametrize(
    ("ranking", "offered"),
    [
        # the verified rank: R's 200 iterations over 1,000 s read 1,000 / (100 x 2) = 5,
        # S's standing one lease later 7.1; S is worst off and takes the one offer
        ("verified", ["S"]),
        # prospective: R 0.625 before S 0.55 (above); R takes the one offer and S bids
        # beside it in the slot of the app that has waited longest for its first GPU
        (PROSPECTIVE, ["R", "S"]),
    ],
)
def test_the_two_rankings_order_the_same_two_apps_differently(
    ranking: str, offered: list[str]
) -> None:
    cluster, r, s = _running_and_fresh()
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(fairness_knob=0.8, lease=600.0, reservation_bound=0.0, ranking=ranking),
        random.Random(0),
    )
    arbiter.run_round(view(cluster, [r, s], 1000.0))
    assert arbiter.last_round is not None
    assert arbiter.last_round.offered == offered


def test_what_an_app_would_get_is_capped_by_the_free_gpus() -> None:
    # With one GPU free R would get 2 kept + 1 = 3: its work left on 3 GPUs (31,800 / 3
    # = 10,600 s) makes (1,000 + 10,600) / 8,000 = 1.45, worse off than with 8 GPUs.
    cluster, r, s = _running_and_fresh()
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(fairness_knob=0.8, lease=600.0, ranking=PROSPECTIVE),
        random.Random(0),
    )
    v = view(cluster, [r, s], 1000.0)
    ranks = prospective_ranks(arbiter, v, [r], {"R": [0, 1]}, 1, {"R": 1.0}, {"R": None}, 1000.0)
    assert ranks["R"] == pytest.approx(1.45)


def test_an_unknown_ranking_is_refused_naming_the_flag() -> None:
    with pytest.raises(BadOption) as made:
        PolicyOptions(ranking="prospektive")
    assert made.value.field == "--ranking"
    assert "prospective" in made.value.message and "'prospektive'" in made.value.message
    assert PolicyOptions(ranking=PROSPECTIVE).ranking == PROSPECTIVE
