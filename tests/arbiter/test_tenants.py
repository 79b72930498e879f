"""A tenant that runs several apps is ranked and weighted as one (issue 19's split lie):
its apps share the tenant's verified rank, and its bidders share one weight."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest

import themis.arbiter.round as arbiter_round
from themis.arbiter.round import tenant_ranks, tenant_weights
from themis.experiments import truthfulness as lies
from themis.experiments.runner import RunRequest, run_many
from themis.fairness.ftf import RHO_MAX
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)
SHAPE = Cluster.from_spec("1x1x4").shape


def app(app_id: str, arrival: float, done: float, owner: str | None = None) -> AppState:
    spec = AppSpec(app_id, arrival, "toy", (JobSpec(f"{app_id}-0", 1, 1000.0),), owner=owner)
    state = AppState(spec, TOY, 1000.0)
    state.jobs[0].done = done
    return state


def view(apps: list[AppState], shares: dict[str, float]) -> Any:
    return SimpleNamespace(apps=apps, n_avg=lambda a: shares[a.app_id])


def test_a_tenants_apps_share_its_rank_by_what_all_of_them_made() -> None:
    """At t=200: X1 (tenant t, since 0) made 100 iterations, X2 (tenant t, since 100)
    nothing, Y (its own tenant) 100. Two tenants, so X1 and X2 count 4 shares each, Y 2.
    Tenant t: 200 s over (100 s x 4 / 2 + 0) = 1.0, as Y's own 200 / (100 x 2); alone, X2
    would rank RHO_MAX and take the first offer."""
    x1, x2, y = app("X1", 0.0, 100.0, "t"), app("X2", 100.0, 0.0, "t"), app("Y", 0.0, 100.0)
    ranks = tenant_ranks(view([x1, x2, y], {"X1": 4.0, "X2": 4.0, "Y": 2.0}), [x2, y], 200.0, SHAPE)
    assert ranks == {"t": pytest.approx(1.0)}


def test_ranks_are_each_apps_own_when_no_tenant_runs_two() -> None:
    x1, y = app("X1", 0.0, 100.0, "t"), app("Y", 0.0, 100.0)
    assert tenant_ranks(view([x1, y], {"X1": 2.0, "Y": 2.0}), [x1, y], 200.0, SHAPE) is None


def test_a_tenants_bidders_share_one_weight() -> None:
    x1, x2, y = app("X1", 0.0, 0.0, "t"), app("X2", 0.0, 0.0, "t"), app("Y", 0.0, 0.0)
    assert tenant_weights([x1, x2, y]) == [0.5, 0.5, 1.0]
    assert tenant_weights([x1, y]) is None  # PA unweighted, bit for bit
    assert tenant_ranks(view([x1, x2], {"X1": 2.0, "X2": 2.0}), [x1], 0.0, SHAPE) == {"t": RHO_MAX}


LONG_SHORT = Workload(
    (
        AppSpec("A", 0.0, "toy", (JobSpec("A0", 1, 1000.0), JobSpec("A1", 1, 1000.0))),
        AppSpec("B", 50.0, "toy", (JobSpec("B0", 1, 200.0), JobSpec("B1", 1, 200.0))),
    ),
    {"toy": TOY},
    "hand",
)


def split_gain() -> float:
    base = RunRequest("honest", "themis", LONG_SHORT, "1x1x3", PolicyOptions(lease=100.0))
    case = lies.LieCase("split:2", ("B",))
    [honest] = run_many([base], workers=1)
    [lying] = run_many([lies.lie_request(base, case, 3, "lying")], workers=1)
    return lies.outcome("themis", None, case, honest, lying).gain


def test_splitting_into_two_apps_does_not_pay_where_per_app_rules_paid_it() -> None:
    """B (two short trials, arriving after A's long ones on 3 GPUs) split into B~1 and
    B~2: ranked and weighted per app, the part that has made nothing yet ranks worst-off
    and B completes 12.5% sooner; as one tenant it gains nothing."""
    assert split_gain() <= 1e-9
    with (
        mock.patch.object(arbiter_round, "tenant_ranks", lambda *_: None),
        mock.patch.object(arbiter_round, "tenant_weights", lambda *_: None),
    ):
        assert split_gain() == pytest.approx(0.125)  # the control: per app, it paid
