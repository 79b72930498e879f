"""The runtime measures what a restart costs and tells the policy, as the simulator tells
it its ``restart_cost``: Themis then renews the ending leases of apps within their fair
share (a restart each way bought for nothing otherwise). Against the Ray-free launcher
of ``fakes.py``, whose jobs take a known ``start_delay`` to start."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour, FakeLauncher, nodes
from themis.errors import ThemisError
from themis.runtime.loop.commands import submit_command
from themis.runtime.loop.options import RUNTIME_KNOBS
from themis.runtime.loop.restart_cost import PER_APP, TOLERANCE, RestartCosts
from themis.runtime.loop.service import ArbiterService, ServiceOptions
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store

OPTIONS = ServiceOptions(
    knobs=replace(RUNTIME_KNOBS, lease=2.0),
    batch_window=0.2,
    grace=1.5,
    tick=0.05,
    inventory_every=0.5,
    status_every=0.2,
)


def service_for(tmp_path: Path, behaviours: dict[str, Behaviour], options=OPTIONS):
    store = Store(tmp_path / "state", init=True)
    launcher = FakeLauncher(options.grace, behaviours)
    service = ArbiterService(store, tmp_path / "ck", options, lambda: nodes(), launcher=launcher)
    return service, store, launcher


def spy(service: ArbiterService) -> list[float]:
    """Every restart cost the service tells its policy."""
    told: list[float] = []
    tell = service.policy.set_restart_cost

    def recording(cost: float) -> None:
        told.append(cost)
        tell(cost)

    service.policy.set_restart_cost = recording  # type: ignore[method-assign]
    return told


def submit(service: ArbiterService, path: Path) -> None:
    command, _ = submit_command(load_app_file(path), str(path))
    service.commands.put(command)
    service.tick()
    command.wait(1.0)


def run_for(service: ArbiterService, seconds: float, each=None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        service.tick()
        if each is not None:
            each()
        time.sleep(service.options.tick)


# -- the estimate -------------------------------------------------------------------------


def test_an_apps_cost_is_the_median_start_up_plus_the_median_stop() -> None:
    costs = RestartCosts(default=7.0, cap=100.0)
    assert costs.estimate() == 7.0  # nothing seen: the operator's default
    for seconds in (2.0, 2.5, 60.0):  # one slow start does not swing it
        costs.started("a", seconds)
    assert costs.of_app("a") == 2.5
    costs.stopped("a", 1.0)
    assert costs.of_app("a") == 3.5
    for _ in range(PER_APP):  # only the last few count
        costs.started("a", 4.0)
    assert costs.of_app("a") == 5.0


def test_one_app_cannot_set_the_clusters_cost_alone() -> None:
    costs = RestartCosts(default=0.0, cap=600.0)
    for app in ("a", "b"):
        costs.started(app, 3.0)
    costs.started("slowpoke", 1e9)  # clamped to the cap, and outvoted by the median
    assert costs.of_app("slowpoke") == 600.0
    assert costs.estimate() == 3.0
    costs.started("nan", float("nan"))
    assert costs.of_app("nan") is None


def test_the_policy_is_told_again_only_when_the_cost_moved() -> None:
    costs = RestartCosts(default=0.0, cap=600.0, interval=60.0)
    assert costs.to_tell(0.0) == 0.0
    costs.tell(0.0, 0.0)
    assert costs.to_tell(1.0) is None
    costs.started("a", 10.0)
    assert costs.to_tell(2.0) == 10.0  # from free to costly: told at once
    costs.tell(10.0, 2.0)
    costs.started("a", 10.0 + 10.0 * TOLERANCE)  # median 11.25: within the tolerance
    assert costs.to_tell(100.0) is None
    costs.started("a", 40.0)
    costs.started("a", 40.0)
    assert costs.to_tell(30.0) is None  # moved, but told less than an interval ago
    assert costs.to_tell(62.0) == 26.25  # the median of 10, 12.5, 40, 40


def test_a_negative_default_is_refused_naming_the_flag() -> None:
    with pytest.raises(ThemisError, match="--restart-cost"):
        ServiceOptions(restart_cost=-1.0)
    # A cost the policy refuses is refused before anything starts.
    with pytest.raises(ThemisError, match="gandiva: a restart cost of 90 s"):
        ServiceOptions(
            policy="gandiva", knobs=replace(RUNTIME_KNOBS, lease=100.0), restart_cost=90.0
        )


@pytest.mark.timeout(60)
def test_a_measured_cost_the_policy_refuses_is_counted_and_the_loop_goes_on(
    tmp_path: Path,
) -> None:
    options = replace(OPTIONS, policy="gandiva", knobs=replace(OPTIONS.knobs, gandiva_slice=0.5))
    slow = Behaviour(start_delay=1.0)
    service, _, _ = service_for(tmp_path, {"a": slow, "b": slow}, options)
    submit(service, app_yaml(tmp_path, "a", trials=4, steps=100_000))
    submit(service, app_yaml(tmp_path, "b", trials=4, steps=100_000))
    run_for(service, 3.0)
    faults = service.metrics.faults.labels("restart_cost")._value.get()
    assert faults == 1  # refused once, not at every round
    assert service.restart_costs.told is not None and service.restart_costs.told >= 1.0
    assert service.metrics.restart_cost._value.get() == 0.0  # the cost it keeps
    assert sum(1 for key in service.running if key[0] in ("a", "b")) > 0


# -- the service --------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_the_policy_sees_a_restart_cost_close_to_the_jobs_start_delay(tmp_path: Path) -> None:
    delay = 1.0
    slow = Behaviour(step_time=0.05, start_delay=delay)
    service, _, _ = service_for(tmp_path, {"slow": slow, "rival": slow})
    told = spy(service)
    submit(service, app_yaml(tmp_path, "slow", trials=2, steps=100_000))
    deadline = time.monotonic() + 10
    while not told or told[-1] == 0.0:  # told before the round that follows the start
        assert time.monotonic() < deadline, f"the policy was told {told}"
        run_for(service, OPTIONS.tick)
    # Start-up seen at the first poll after it (a tick), nothing else on top yet.
    assert delay <= told[-1] <= delay + 4 * OPTIONS.tick
    assert service.restart_costs.of_app("slow") == pytest.approx(told[-1])
    assert "themis_restart_cost_seconds" in service.metrics.render().decode()
    # Stops come in once leases end and the jobs checkpoint (a step of 0.05 s).
    submit(service, app_yaml(tmp_path, "rival", trials=4, steps=100_000))
    run_for(service, 3 * OPTIONS.lease)
    assert service.restart_costs._stops, "no stop observed"
    assert delay <= service.restart_costs.estimate() <= delay + 0.5
    assert delay <= service.metrics.restart_cost._value.get() <= delay + 0.5


@pytest.mark.timeout(60)
def test_a_fixed_restart_cost_is_told_once_and_never_measured(tmp_path: Path) -> None:
    options = replace(OPTIONS, restart_cost=12.0, measure_restart_cost=False)
    service, _, _ = service_for(tmp_path, {"a": Behaviour(start_delay=0.2)}, options)
    told = spy(service)
    submit(service, app_yaml(tmp_path, "a", trials=2, steps=100_000))
    run_for(service, 1.0)
    assert told == []  # told at construction, before the spy, and never again
    assert service.policy.renews_within_share is True  # type: ignore[attr-defined]
    assert service.restart_costs.observed == 0


#: Themis with its rule for the worst-off app's gang off (no reservation, no start at
#: once), which may take any GPU: what is left to decide an ending lease is the auction,
#: or the renewal within the fair share.
RENEWAL = replace(OPTIONS, knobs=replace(OPTIONS.knobs, gang_at_once=False, reservation_bound=0.0))


def _renewal_run(tmp_path: Path, options: ServiceOptions) -> tuple[int, int]:
    """Three apps on 4 GPUs (a fair share of 4/3): ``small`` runs one 1-GPU trial, within
    its share; two wide apps want 4 each. Jobs take 0.6 s to start. Returns how many of
    small's leases were renewed and how many jobs its trial ran as (1: never restarted)."""
    slow = Behaviour(step_time=0.05, start_delay=0.6)
    store = Store(tmp_path / "state", init=True)
    launcher = FakeLauncher(options.grace, {"small": slow, "wide1": slow, "wide2": slow})
    service = ArbiterService(store, tmp_path / "ck", options, lambda: nodes(), launcher=launcher)
    submit(service, app_yaml(tmp_path, "small", trials=1, steps=100_000))
    submit(service, app_yaml(tmp_path, "wide1", trials=4, steps=100_000))
    submit(service, app_yaml(tmp_path, "wide2", trials=4, steps=100_000))
    run_for(service, 6 * options.lease)
    renewed = sum(
        1
        for _, e in store.events("small")
        if e.message.startswith("lease renewed") and e.t is not None and e.t > 1.0
    )
    jobs = sum(1 for f in launcher.history if f.spec.app_id == "small")
    return renewed, jobs


@pytest.mark.timeout(90)
def test_themis_under_serve_renews_within_the_fair_share_when_restarts_are_costly(
    tmp_path: Path,
) -> None:
    renewed, jobs = _renewal_run(tmp_path, RENEWAL)
    assert jobs == 1, "small's trial, within its fair share, was restarted"
    assert renewed >= 3


@pytest.mark.timeout(90)
def test_without_a_restart_cost_the_same_leases_are_auctioned(tmp_path: Path) -> None:
    # The control: the runtime as it was (no cost told), so the test above can fail.
    _, jobs = _renewal_run(tmp_path, replace(RENEWAL, measure_restart_cost=False))
    assert jobs >= 2, "small kept its GPU without the renewal: the test above shows nothing"
