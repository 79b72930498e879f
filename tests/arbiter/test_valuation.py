"""Bids valued by remaining time (``--valuation remaining``): declaring F times the work
(every job alike) leaves what each bundle is worth in the auction unchanged, where the
paper's rho ratio (elapsed time included) grows steeper (the ``work:F`` lie)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.hand import make_app
from themis.agent.agent import Agent
from themis.auction.bids import Bid
from themis.fairness.ftf import t_cluster
from themis.model.cluster import Cluster
from themis.model.state import AppState
from themis.policies import PolicyOptions

CLUSTER = Cluster.from_spec("1x2x8")


def _app(jobs: list[tuple[int, float]], arrival: float, factor: float = 1.0) -> AppState:
    """An app that declares ``factor`` times the work of ``jobs``, none started yet."""
    app = make_app("a", arrival, [(g, w * factor) for g, w in jobs])
    app.t_cluster = t_cluster(app.profile, app.remaining_by_gang(arrival), CLUSTER.shape)
    return app


def _values(bid: Bid) -> list[tuple[tuple[object, ...], float]]:
    """What each bundle is worth to the auction: rho with nothing over rho with it."""
    return [(entry.gpus, bid.rho_none / entry.rho) for entry in bid.menu]


def _bid(app: AppState, valuation: str, now: float, kept: tuple[int, ...] = ()) -> Bid:
    agent = Agent(app, CLUSTER, valuation=valuation)
    offer = [g for g in range(CLUSTER.size) if g not in kept]
    return agent.bid(now, 2.0, kept, offer, active_apps=3)


jobs_strategy = st.lists(
    st.tuples(st.sampled_from([1, 2, 4, 8]), st.floats(100.0, 50_000.0)), min_size=1, max_size=6
)


@settings(max_examples=60, deadline=None)
@given(
    jobs=jobs_strategy,
    factor=st.floats(0.25, 4.0),
    elapsed=st.floats(0.0, 200_000.0),
)
def test_declaring_f_times_the_work_moves_no_remaining_time_valuation(
    jobs: list[tuple[int, float]], factor: float, elapsed: float
) -> None:
    # The app has made nothing yet, so its declared remaining work is F times the truth
    # on every job: each bundle's remaining time and the fair time scale by F alike.
    honest = _bid(_app(jobs, 0.0), "remaining", elapsed)
    lying = _bid(_app(jobs, 0.0, factor), "remaining", elapsed)
    got, want = _values(lying), _values(honest)
    assert [g for g, _ in got] == [g for g, _ in want]
    for (_, v), (_, w) in zip(got, want, strict=True):
        assert v == pytest.approx(w, rel=1e-9)


def test_the_papers_valuation_is_steeper_for_an_app_that_overstates() -> None:
    # The same app after 10,000 s of waiting: with the elapsed time in rho, declaring
    # twice the work makes every bundle worth more to the auction (what the work:2 lie
    # gained), and with remaining times it does not.
    jobs = [(2, 4000.0), (2, 4000.0), (1, 3000.0)]
    for valuation, steeper in (("paper", True), ("remaining", False)):
        honest = dict(_values(_bid(_app(jobs, 0.0), valuation, 10_000.0, kept=(0, 1))))
        lying = dict(_values(_bid(_app(jobs, 0.0, 2.0), valuation, 10_000.0, kept=(0, 1))))
        assert honest.keys() == lying.keys()
        for bundle, value in honest.items():
            if steeper:
                assert lying[bundle] > value * 1.01
            else:
                assert lying[bundle] == pytest.approx(value, rel=1e-9)


def test_a_starving_app_values_nothing_by_remaining_time_too() -> None:
    # Nothing kept: the app cannot run, "nothing" is NOTHING_FACTOR times worse than the
    # worse of its fair-share remaining time and its worst bundle, and scales with F too.
    jobs = [(4, 8000.0), (4, 8000.0)]
    honest = _bid(_app(jobs, 0.0), "remaining", 50_000.0)
    lying = _bid(_app(jobs, 0.0, 3.0), "remaining", 50_000.0)
    assert honest.menu and honest.rho_none > max(e.rho for e in honest.menu)
    for (_, v), (_, w) in zip(_values(lying), _values(honest), strict=True):
        assert v == pytest.approx(w, rel=1e-9)


def test_an_unknown_valuation_is_refused() -> None:
    with pytest.raises(ValueError, match="'--valuation': must be one of paper, remaining"):
        PolicyOptions(valuation="bogus")
