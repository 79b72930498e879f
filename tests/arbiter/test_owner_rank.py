"""A new app of an owner that runs another app ranks as that owner's worst-off running
app, not first (so splitting a sweep into several apps, the ``split:K`` lie, gains
nothing); apps without owners rank as before."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

import themis.arbiter.offer as offer_step
import themis.arbiter.ranking as ranking_step
from tests.arbiter import owned_apps
from tests.arbiter.owned_apps import SHAPE
from themis.arbiter.round import rank_fresh_by_siblings
from themis.experiments import truthfulness as lies
from themis.experiments.runner import RunRequest, run_many
from themis.fairness.ftf import RHO_MAX
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions

TOY = owned_apps.TOY


def app(app_id: str, arrival: float, done: float, owner: str | None = None) -> AppState:
    return owned_apps.app(app_id, arrival, done, owner, work=1000.0)


def view(apps: list[AppState], shares: float = 2.0) -> Any:
    return owned_apps.view(apps, shares)


def test_a_fresh_app_of_a_running_owner_ranks_as_its_worst_off_sibling() -> None:
    """At t=200, tenant t's X1 (since 0) made 100 iterations and X3 (since 0) 50: their
    verified rho are 200 / (100 x 2) = 1.0 and 200 / (50 x 2) = 2.0. X2, new with nothing
    made, ranks 2.0 (the worse sibling) instead of RHO_MAX; Y, fresh and its own owner,
    stays RHO_MAX."""
    x1, x3 = app("X1", 0.0, 100.0, "t"), app("X3", 0.0, 50.0, "t")
    x2, y = app("X2", 150.0, 0.0, "t"), app("Y", 150.0, 0.0)
    rank = {"X1": 1.0, "X2": RHO_MAX, "X3": 2.0, "Y": RHO_MAX}
    rank_fresh_by_siblings(view([x1, x2, x3, y]), [x1, x2, x3, y], rank, 200.0, SHAPE)
    assert rank == {"X1": 1.0, "X2": pytest.approx(2.0), "X3": 2.0, "Y": RHO_MAX}


def test_a_fresh_app_whose_siblings_made_nothing_stays_first() -> None:
    x1, x2 = app("X1", 0.0, 0.0, "t"), app("X2", 0.0, 0.0, "t")
    rank = {"X1": RHO_MAX, "X2": RHO_MAX}
    rank_fresh_by_siblings(view([x1, x2]), [x1, x2], rank, 100.0, SHAPE)
    assert rank == {"X1": RHO_MAX, "X2": RHO_MAX}


LONG_AND_SWEEP = Workload(
    (
        AppSpec("A", 0.0, "toy", (JobSpec("A0", 1, 2000.0),)),
        AppSpec("B", 100.0, "toy", tuple(JobSpec(f"B{k}", 1, 300.0) for k in range(3))),
    ),
    {"toy": TOY},
    "hand",
)


def split_b(gang_at_once: bool = False) -> tuple[float, float]:
    """B's completion honest and split into B~1 (B0, B2) and B~2 (B1), on 2 GPUs."""
    # (the tiered ranking, which this case was computed under: a fresh part ranks first;
    # and without --gang-at-once, whose start of the part holding nothing closes it too)
    options = PolicyOptions(lease=100.0, ranking="verified-tiered", gang_at_once=gang_at_once)
    base = RunRequest("honest", "themis", LONG_AND_SWEEP, "1x1x2", options)
    case = lies.LieCase("split:2", ("B",))
    [honest] = run_many([base], workers=1)
    [lying] = run_many([lies.lie_request(base, case, 2, "lying")], workers=1)
    outcome = lies.outcome("themis", None, case, honest, lying)
    return outcome.liar_honest_s, outcome.liar_lying_s


@pytest.mark.pure_only
def test_a_split_sweeps_waiting_part_no_longer_jumps_the_queue() -> None:
    """A's long trial and B's three short ones on 2 GPUs: B honest completes in 700 s,
    and split with its waiting part ranked first and the offer counted by app (the
    control) in 700 s too. With the waiting part ranked as its running sibling, the split
    B completes in 800 s: the part no longer takes the first offer for having made
    nothing. (Counting the offer by tenant, ``offered_tenants``, closes this case too:
    the control turns both off.)"""
    assert split_b() == (700.0, 800.0)
    with mock.patch.object(offer_step, "offered_tenants", per_app_offer):
        assert split_b() == (700.0, 800.0)
        with mock.patch.object(ranking_step, "rank_fresh_by_siblings", lambda *_: None):
            assert split_b() == (700.0, 700.0)  # the control: per app, the part went first
            # with both rules off, --gang-at-once (the default) alone closes the case
            honest, lying = split_b(gang_at_once=True)
            assert lying >= honest


def per_app_offer(ranked: list[AppState], fairness_knob: float) -> list[AppState]:
    """The paper's offer: the worst ``offered_count`` apps, a tenant's apps counted apart."""
    return ranked[: offer_step.offered_count(len(ranked), fairness_knob)]
