"""Starts that another tenant (or the app itself) makes hang or fail, on a real local Ray
cluster (2 nodes x 2 logical GPUs): a module that sleeps at import, files planted in the
storage, an older checkpoint of a trial put back. None may hold GPUs for ever, fail an
app for good, or make the arbiter count a step that is not in the trial's checkpoint."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.raytest import (
    FAST,
    app_state,
    drive,
    events,
    lineage,
    local_cluster,
    make_service,
    submit,
)
from themis.runtime.state.store import Store
from themis.runtime.workers import checkpoint

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HANG = """
import time

time.sleep(3600)  # never returns: the job never reaches train


def train(trial):
    raise AssertionError("unreachable")
"""


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster()


def paced_app(tmp: Path, name: str, trials: int, steps: int, step_time: float, **extra):
    space = {"quality": [1.0], "step_time": [step_time]}
    return app_yaml(
        tmp, name, trials=trials, steps=steps, step_time=step_time, search_space=space, **extra
    )


@pytest.mark.timeout(240)
def test_a_module_hanging_at_import_gives_its_gpus_back(cluster, tmp_path):
    """The attack: hog's entrypoint module sleeps at import (4 trials x 1 GPU, all the
    GPUs); waiter submitted once hog holds them. hog's GPUs come back within the start
    deadline plus the grace (and a margin for a busy machine), waiter runs and finishes,
    and hog's trials fail after three timeouts each instead of retrying for ever."""
    store = Store(tmp_path / "state", init=True)
    options = replace(FAST, start_timeout=10.0)
    service = make_service(store, tmp_path, options)
    code = tmp_path / "hogcode"
    code.mkdir()
    (code / "hang.py").write_text(HANG)
    hog = app_yaml(tmp_path, "hog", trials=4, steps=20, entrypoint="hang:train", workdir=str(code))
    submit(service, hog)
    drive(service, lambda: len(service.running) == 4, 30)
    launched = min(rj.started_wall for rj in service.running.values())
    submit(service, paced_app(tmp_path, "waiter", trials=2, steps=10, step_time=0.1))
    waiter_runs = lambda: any(k[0] == "waiter" for k in service.running)  # noqa: E731
    drive(service, waiter_runs, options.start_deadline + options.grace + 30)
    back_after = time.time() - launched
    assert back_after < options.start_deadline + options.grace + 30
    drive(
        service,
        lambda: app_state(store, "waiter") == "finished" and app_state(store, "hog") == "failed",
        180,
    )
    print(f"\nwaiter got GPUs {back_after:.1f}s after hog's launch")
    hog_events = [m for _, _, m in events(store, "hog")]
    timeouts = [m for m in hog_events if "did not reach its training function within 10s" in m]
    assert len(timeouts) >= 4 * 3, timeouts  # every trial, three times
    assert any("killed after grace" in m for m in hog_events)
    assert all(t.state == "failed" for t in store.trials("hog"))
    assert "did not reach its training function" in (store.app("hog").reason or "")
    assert service.metrics.start_timeouts._value.get() >= 12
    assert all(t.steps_done == 10 for t in store.trials("waiter"))
    drive(service, lambda: not service.running and not service.draining, options.grace + 20)
    service.shutdown()


@pytest.mark.timeout(150)
def test_files_planted_in_the_storage_cost_at_most_a_fresh_start(cluster, tmp_path):
    """A regular file at ``<storage>/<app>`` and at ``<storage>/<app>/<trial>`` (every
    trial failed with NotADirectoryError), a FIFO at a trial's checkpoint (its restore
    blocked and parked its GPU) and a symlink at another: every app finishes."""
    store = Store(tmp_path / "state", init=True)
    service = make_service(store, tmp_path, replace(FAST, start_timeout=30.0))
    storage = tmp_path / "checkpoints"
    storage.mkdir()
    (storage / "filed").write_text("planted by another app")
    (storage / "trialfiled").mkdir()
    (storage / "trialfiled" / "t000").write_text("planted by another app")
    (storage / "piped" / "t000").mkdir(parents=True)
    os.mkfifo(storage / "piped" / "t000" / "checkpoint.themis")
    (storage / "piped" / "t001").mkdir(parents=True)
    (storage / "piped" / "t001" / "checkpoint.themis").symlink_to("/dev/zero")
    apps = ("filed", "trialfiled", "piped")
    for name in apps:
        trials = 2 if name == "piped" else 1
        submit(service, paced_app(tmp_path, name, trials=trials, steps=10, step_time=0.05))
    drive(service, lambda: all(app_state(store, a) != "running" for a in apps), 120)
    for app in apps:
        assert app_state(store, app) == "finished", (app, store.app(app).reason)
        for trial in store.trials(app):
            assert trial.steps_done == 10
            assert lineage(tmp_path, app, trial.trial_id)["steps_run"] == list(range(10))
    assert any("was a file, not a directory" in m for _, _, m in events(store, "filed"))
    assert any("was a file, not a directory" in m for _, _, m in events(store, "trialfiled"))
    piped = [m for _, _, m in events(store, "piped") if m.startswith("checkpoint refused")]
    assert len(piped) == 2 and any("a FIFO" in m for m in piped), piped
    assert service.metrics.start_timeouts._value.get() == 0  # no start hung
    service.shutdown()


@pytest.mark.timeout(150)
def test_an_older_checkpoint_put_back_is_refused_and_the_count_reset(cluster, tmp_path):
    """The replay: a copy of the trial's checkpoint at step >= 10 is put back after the
    trial checkpointed more, and its job is killed so that the next one restores. The
    stale file is refused (counted), the trial restarts from step 0 and the arbiter's
    count of steps done is reset to 0 (logged): it finishes with every step run once
    in its final lineage, and the durable count never claimed a step not in a checkpoint."""
    import ray

    store = Store(tmp_path / "state", init=True)
    service = make_service(
        store, tmp_path, replace(FAST, knobs=replace(FAST.knobs, lease=30.0), grace=4.0)
    )
    submit(service, paced_app(tmp_path, "rep", trials=1, steps=100, step_time=0.1))
    path = tmp_path / "checkpoints" / "rep" / "t000" / "checkpoint.themis"
    drive(service, lambda: store.trials("rep")[0].steps_done >= 10, 60)
    shutil.copy(path, tmp_path / "old")
    old_step = checkpoint.inspect(tmp_path / "old")["step"]
    drive(service, lambda: store.trials("rep")[0].steps_done >= old_step + 10, 60)
    job = service.running[("rep", "t000")]
    pid = ray.get(job.actors[0].pid.remote())
    os.kill(pid, signal.SIGKILL)  # dead before the copy: it writes no newer checkpoint
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    counted = store.trials("rep")[0].steps_done
    shutil.copy(tmp_path / "old", path)
    drive(service, lambda: app_state(store, "rep") == "finished", 120)

    messages = [m for _, _, m in events(store, "rep")]
    stale = [m for m in messages if m.startswith("checkpoint refused") and "older" in m]
    assert len(stale) == 1, messages
    found = re.search(r"holds step (\d+) and the arbiter counts (\d+)", stale[0])
    assert found and int(found[1]) == old_step and int(found[2]) >= counted > old_step
    assert any(m.startswith(f"resumed from step 0, not {found[2]}") for m in messages)
    assert service.metrics.checkpoints_refused.labels("stale")._value.get() == 1
    assert service.metrics.trial_resets._value.get() == 1
    assert lineage(tmp_path, "rep", "t000")["steps_run"] == list(range(100))
    assert store.trials("rep")[0].steps_done == 100
    service.shutdown()
