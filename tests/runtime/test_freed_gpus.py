"""GPUs that come free are handed out at once: a round follows whatever freed them.

The report: a hog (4 x 1 GPU, long leases) and a waiter (2 x 1 GPU); the hog cancelled.
Its jobs drain, their GPUs come free, and the waiter sat "waiting for the next round
(4 GPUs free)" for a minute, until an unrelated submit set off a round: the end of a
retired app's jobs was forgotten without asking for one. Against the Ray-free launcher
of ``fakes.py``, so it takes seconds.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour, FakeLauncher, nodes
from themis.runtime.loop.commands import Command, submit_command
from themis.runtime.loop.options import RUNTIME_KNOBS
from themis.runtime.loop.service import ArbiterService, ServiceOptions
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store

#: Leases far longer than the test: no lease end can set a round off by chance.
OPTIONS = ServiceOptions(
    knobs=replace(RUNTIME_KNOBS, lease=120.0),
    batch_window=0.5,
    grace=5.0,
    tick=0.05,
    inventory_every=0.5,
    status_every=0.2,
)


def service_for(tmp_path: Path, behaviours: dict[str, Behaviour]):
    store = Store(tmp_path / "state", init=True)
    launcher = FakeLauncher(OPTIONS.grace, behaviours)
    service = ArbiterService(store, tmp_path / "ck", OPTIONS, lambda: nodes(), launcher=launcher)
    return service, store, launcher


def submit(service: ArbiterService, path: Path) -> None:
    command, _ = submit_command(load_app_file(path), str(path))
    service.commands.put(command)
    service.tick()
    assert command.wait(1.0) is not None


def tick_until(service: ArbiterService, until, timeout: float, each=None) -> float:
    start = time.monotonic()
    while not until():
        assert time.monotonic() - start < timeout, f"condition not met within {timeout}s"
        service.tick()
        if each is not None:
            each()
        time.sleep(service.options.tick)
    return time.monotonic() - start


def granted(service: ArbiterService, app_id: str) -> int:
    return sum(1 for key in service.running if key[0] == app_id)


def started(service: ArbiterService, app_id: str) -> int:
    return sum(1 for key, rj in service.running.items() if key[0] == app_id and rj.started)


@pytest.mark.timeout(60)
def test_a_cancelled_apps_gpus_go_to_the_waiter_within_the_batch_window(tmp_path: Path) -> None:
    # Steps of 0.4 s: a stop is honoured at the end of the step under way, so the hog's
    # jobs drain for a while after the cancel, the round of the cancel itself finds
    # their GPUs still reserved, and only their end can hand them to the waiter.
    service, store, launcher = service_for(
        tmp_path, {"hog": Behaviour(step_time=0.4, start_delay=0.1)}
    )
    submit(service, app_yaml(tmp_path, "hog", trials=4, steps=100_000))
    tick_until(service, lambda: started(service, "hog") == 4, 10)
    submit(service, app_yaml(tmp_path, "waiter", trials=2, steps=100_000))
    for _ in range(10):  # the waiter waits: every GPU is the hog's for a long lease
        service.tick()
        time.sleep(OPTIONS.tick)
    assert granted(service, "waiter") == 0

    cancel = Command("cancel", "hog")
    service.commands.put(cancel)
    service.tick()
    assert cancel.wait(1.0) == "cancelled app 'hog'"
    assert service.jobs.draining, "the hog's jobs drain after the cancel"
    assert granted(service, "waiter") == 0
    rounds = service.rounds.count
    freed_at: list[float] = []

    def note_drained() -> None:
        hog = [f for f in launcher.history if f.spec.app_id == "hog"]
        if not freed_at and all(f.ended is not None for f in hog):
            freed_at.append(time.monotonic())

    tick_until(service, lambda: bool(freed_at), 10, note_drained)
    # Granted within the batch window and a few ticks of the GPUs coming free; before
    # the fix, never (no round at all until something else asked for one).
    tick_until(service, lambda: granted(service, "waiter") == 2, OPTIONS.batch_window + 1.0)
    assert service.rounds.count > rounds
    assert time.monotonic() - freed_at[0] <= OPTIONS.batch_window + 1.0
    row = store.app("waiter")
    assert row.state == "running"


@pytest.mark.timeout(60)
def test_every_job_end_of_a_retired_app_asks_for_a_round(tmp_path: Path) -> None:
    """The rule in one place: JobControl says GPUs came free whenever a job that held
    some is forgotten, whether its app is live or not."""
    service, _, _ = service_for(tmp_path, {"hog": Behaviour(step_time=0.4, start_delay=0.1)})
    submit(service, app_yaml(tmp_path, "hog", trials=2, steps=100_000))
    tick_until(service, lambda: started(service, "hog") == 2, 10)
    service.jobs.take_freed()
    cancel = Command("cancel", "hog")
    service.commands.put(cancel)
    service.tick()
    assert "hog" not in service.apps and service.jobs.draining
    (rj, *_) = service.jobs.draining.values()
    service.jobs.forget(rj)
    assert service.jobs.take_freed() is True
    assert service.jobs.take_freed() is False
