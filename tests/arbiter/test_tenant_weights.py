"""A tenant's bidders share one weight in the auction (against the ``split:K`` lie): a
sweep split into apps that bid together no longer holds two factors of the Nash product."""

from __future__ import annotations

from unittest import mock

import pytest

import themis.arbiter.bidding as auction_step
from themis.arbiter.round import tenant_weights
from themis.experiments import truthfulness as lies
from themis.experiments.runner import RunRequest, run_many
from themis.model.profiles import ModelProfile
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)


def app(app_id: str, owner: str | None = None) -> AppState:
    spec = AppSpec(app_id, 0.0, "toy", (JobSpec(f"{app_id}-0", 1, 1000.0),), owner=owner)
    return AppState(spec, TOY, 1000.0)


def test_a_tenants_bidders_share_one_weight() -> None:
    x1, x2, x3, y, z = app("X1", "t"), app("X2", "t"), app("X3", "t"), app("Y"), app("Z", "u")
    assert tenant_weights([x1, y, x2]) == [0.5, 1.0, 0.5]
    assert tenant_weights([x1, x2, x3, z]) == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1.0])


def test_every_tenant_bidding_once_leaves_the_auction_unweighted() -> None:
    """None, so that PA runs unweighted, bit for bit: every auction of a workload without
    owners, and every one where an owner has a single bidder."""
    assert tenant_weights([app("X1", "t"), app("Y"), app("Z", "u")]) is None
    assert tenant_weights([]) is None


#: A (four 2,000 s trials) holds the 4 GPUs when B (four 500 s trials) arrives at 300 s;
#: every app bids in every auction (f = 0) and leases last 100 s.
A_THEN_B = Workload(
    (
        AppSpec("A", 0.0, "toy", tuple(JobSpec(f"A{i}", 1, 2000.0) for i in range(4))),
        AppSpec("B", 300.0, "toy", tuple(JobSpec(f"B{i}", 1, 500.0) for i in range(4))),
    ),
    {"toy": TOY},
    "hand",
)


def split_completions(gang_at_once: bool = False) -> tuple[dict[str, float], dict[str, float]]:
    # (the tiered ranking, which this case was computed under: B's parts, fresh, rank
    # first; and without --gang-at-once, which starts a part holding nothing at once)
    options = PolicyOptions(
        lease=100.0, fairness_knob=0.0, ranking="verified-tiered", gang_at_once=gang_at_once
    )
    base = RunRequest("honest", "themis", A_THEN_B, "1x1x4", options)
    case = lies.LieCase("split:2", ("B",))
    [honest] = run_many([base], workers=1)
    [lying] = run_many([lies.lie_request(base, case, 3, "lying")], workers=1)
    return lies.completions(honest), lies.completions(lying, ["B"])


@pytest.mark.pure_only
def test_splitting_into_two_bidders_no_longer_buys_a_second_share() -> None:
    """Honest, A completes in 2,700 s and B in 1,100 s. B split into B~1 and B~2, three
    bidders share the product: unweighted, B's parts win a third each and B completes in
    1,000 s (gains 1/11), A in 2,800 s; weighted 1/2 each, B is one bidder again and the
    split costs it 100 s (1,200 s; A 2,700 s as honest)."""
    honest, lying = split_completions()
    assert honest == {"A": 2700.0, "B": 1100.0}
    assert lying == {"A": 2700.0, "B": 1200.0}
    with mock.patch.object(auction_step, "tenant_weights", lambda *_: None):
        honest, lying = split_completions()
    assert honest == {"A": 2700.0, "B": 1100.0}  # the control: unweighted, the split paid
    assert lying == {"A": 2800.0, "B": 1000.0}
    # under the default --gang-at-once the split does not pay either
    honest, lying = split_completions(gang_at_once=True)
    assert lying["B"] >= honest["B"]
