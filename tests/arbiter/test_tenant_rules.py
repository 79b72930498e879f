"""A tenant that runs several apps holds one place in the offer, the apps it submitted
together rank as one, and it gets no reservation while it holds GPUs (so a sweep
submitted as several apps, the ``split:K`` lie, gains nothing); apps without owners are
untouched."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

import themis.arbiter.ranking as ranking_step
from tests.arbiter.owned_apps import SHAPE, app, view
from themis.arbiter.round import (
    offered_count,
    offered_tenants,
    rank_by_cohort,
    tenant_holds_gpus,
)
from themis.experiments import truthfulness as lies
from themis.experiments.runner import RunRequest, run_many
from themis.experiments.workloads import Variants, generated_workload
from themis.fairness.ftf import RHO_MAX
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.policies import PolicyOptions


def test_a_tenant_holds_one_place_in_the_offer() -> None:
    """Ranked X1, X2 (tenant t), Y, Z: three tenants, f = 0.5 offers ceil(1.5) = 2 of them,
    t and Y, so X1, X2 and Y bid; counted by app, ceil(2) = 2 places: X1 and X2 alone."""
    x1, x2, y, z = app("X1", owner="t"), app("X2", owner="t"), app("Y"), app("Z")
    assert offered_tenants([x1, x2, y, z], 0.5) == [x1, x2, y]
    assert offered_tenants([x1, y, x2, z], 0.5) == [x1, y, x2]
    # A tenant's app ranked after the last offered tenant's first app is not offered.
    assert offered_tenants([x1, y, z, x2], 0.5) == [x1, y]


@given(st.integers(min_value=0, max_value=40), st.floats(min_value=0.0, max_value=0.99))
def test_without_owners_the_offer_is_the_papers(n: int, f: float) -> None:
    ranked = [app(f"A{k}") for k in range(n)]
    assert offered_tenants(ranked, f) == ranked[: offered_count(n, f)]


def test_a_part_that_made_least_ranks_as_its_cohort() -> None:
    """At t=200, X1 and X2 (tenant t, both since 0, 4 shares each) made 100 and 10
    iterations: alone X2 ranks 200 / (10 x 4) = 5.0, X1 0.5; pooled, 400 / (110 x 4) =
    0.909. X2 takes the pooled rank; X1 keeps its lower own rank; Y, no owner, its own."""
    x1, x2, y = app("X1", 0.0, 100.0, "t"), app("X2", 0.0, 10.0, "t"), app("Y", 0.0, 10.0)
    rank = {"X1": 0.5, "X2": 5.0, "Y": 5.0}
    rank_by_cohort(view([x1, x2, y], 4.0), [x1, x2, y], rank, 200.0, SHAPE, 100.0)
    assert rank == {"X1": 0.5, "X2": pytest.approx(400 / 440), "Y": 5.0}


def test_an_older_sibling_is_not_in_a_later_apps_cohort() -> None:
    """X0 arrived at -1,000, more than one lease (100 s) before X1, and made a lot: X1 is
    not ranked by X0's progress (an honest owner's new app keeps its own claim), while X0's
    cohort holds X1 and pools them (never above X0's own rank)."""
    x0, x1 = app("X0", -1000.0, 1000.0, "t"), app("X1", 0.0, 10.0, "t")
    rank = {"X0": 0.3, "X1": 5.0}
    rank_by_cohort(view([x0, x1], 4.0), [x0, x1], rank, 200.0, SHAPE, 100.0)
    assert rank == {"X0": 0.3, "X1": 5.0}
    rank = {"X0": 0.3, "X1": RHO_MAX}
    x1.jobs[0].done = 0.0
    rank_by_cohort(view([x0, x1], 4.0), [x1], rank, 200.0, SHAPE, 100.0)
    assert rank["X1"] == RHO_MAX  # nothing made in its cohort: the fresh-app rule's case


def test_an_owner_holding_gpus_gets_no_reservation() -> None:
    """X1 and X2 (tenant t): while either holds a GPU, neither is reserved a gang; Y, with
    no owner, keeps its reservations whatever it holds."""
    x1, x2, y = app("X1", owner="t"), app("X2", owner="t"), app("Y")
    apps = [x1, x2, y]
    assert not tenant_holds_gpus(view(apps, 4.0), x1)
    x2.jobs[0].start((0,), 1.0, 0.0)
    assert tenant_holds_gpus(view(apps, 4.0), x1)
    assert tenant_holds_gpus(view(apps, 4.0), x2)
    y.jobs[0].start((1,), 1.0, 0.0)
    assert not tenant_holds_gpus(view(apps, 4.0), y)


def app2_split_gain(gang_at_once: bool = False, ranking: str = "verified-avg-n") -> float:
    """``app2`` of the 16-GPU gang mix at seed 101 (three 8-GPU trials) split in two: the
    traced case of ``rank_by_cohort``, traced without ``--gang-at-once`` and with the
    verified rank's N the app's ``N_avg`` (the default then)."""
    cluster = Cluster.from_spec("1x2x8")
    workload = generated_workload("generate:jobs=600,load=1.5", cluster, load_profiles(), 101)
    workload = Variants(True, ("vgg", 0.5)).apply(workload, cluster, 101)
    base = RunRequest(
        "honest",
        "themis",
        workload,
        "1x2x8",
        PolicyOptions(seed=101, gang_at_once=gang_at_once, ranking=ranking),
    )
    case = lies.LieCase("split:2", ("app2",))
    [honest] = run_many([base], workers=1)
    [lying] = run_many([lies.lie_request(base, case, 3, "lying")], workers=1)
    return lies.outcome("themis", None, case, honest, lying).gain


@pytest.mark.pure_only
def test_the_traced_split_no_longer_pays() -> None:
    """The part that had made 130 s of a trial ranked worst-off, outranked app0 and took
    its machine: app2 completed 10.4% sooner split. Ranked with its cohort, it gains
    nothing."""
    assert app2_split_gain() <= 1e-9
    assert app2_split_gain(gang_at_once=True) <= 1e-9  # it closes the case too
    # The defaults now (--gang-at-once, N now in the verified rank): the split loses 7%.
    assert app2_split_gain(gang_at_once=True, ranking="verified") <= 1e-9
    with mock.patch.object(ranking_step, "rank_by_cohort", lambda *_: None):
        assert app2_split_gain() == pytest.approx(0.104, abs=1e-3)  # the control
