"""``themis replay`` of a state directory a real runtime session wrote: a local Ray
cluster (2 nodes x 2 logical GPUs), the arbiter driven tick by tick, two small apps.

The replayed workload must be what ran: the same apps and gangs, arrivals as far apart
as the arbiter admitted them, each trial's work the steps it checkpointed, at the
GPU-seconds per step it was measured to take; and the simulator must run it under two
policies on the cluster the arbiter recorded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli.conftest import cli  # noqa: F401 (fixture)
from tests.runtime.raytest import FAST, app_state, drive, local_cluster, make_service, submit
from tests.runtime.test_ray_runtime import paced_app
from themis.runtime.state.replay import convert, read_state
from themis.runtime.state.store import Store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster()


@pytest.mark.timeout(180)
def test_a_real_session_replays_as_it_ran(cluster, cli, capsys, tmp_path: Path) -> None:  # noqa: F811
    state = tmp_path / "state"
    store = Store(state, init=True)
    service = make_service(store, tmp_path, FAST)
    submit(service, paced_app(tmp_path, "a", trials=2, steps=30, step_time=0.1))
    pause = time.monotonic() + 2.0
    drive(service, lambda: time.monotonic() > pause, 10)
    submit(service, paced_app(tmp_path, "b", trials=1, steps=20, step_time=0.1, gpus_per_trial=2))
    drive(service, lambda: app_state(store, "a") == app_state(store, "b") == "finished", 120)
    service.shutdown()
    rows = {row.app_id: row for row in store.apps()}
    trials = {t.trial_id: t for t in store.trials("a")} | {
        "b/" + t.trial_id: t for t in store.trials("b")
    }
    store.close()

    recorded = read_state(state)
    assert recorded.cluster is not None and recorded.cluster["spec"] == "1x2x2"
    assert recorded.serve is not None and recorded.serve["knobs"]["lease"] == FAST.lease
    workload = convert(recorded).workload
    assert [a.app_id for a in workload.apps] == ["a", "b"]
    arrival_a, arrival_b = rows["a"].arrival, rows["b"].arrival
    assert arrival_a is not None and arrival_b is not None
    assert [a.arrival for a in workload.apps] == [0.0, arrival_b - arrival_a]
    assert workload.apps[1].arrival > 1.5  # submitted after a 2 s pause
    jobs = {j.job_id: (j.gang, j.work) for a in workload.apps for j in a.jobs}
    assert jobs == {"a/t000": (1, 30.0), "a/t001": (1, 30.0), "b/t000": (2, 20.0)}
    # Measured speed: GPU-seconds held per checkpointed step, at least the paced 0.1 s
    # a step times the gang (start-up and checkpoints cost more, never less).
    held_a = trials["t000"].attained + trials["t001"].attained
    assert workload.profiles["a"].time_per_iteration == pytest.approx(held_a / 60)
    assert workload.profiles["a"].time_per_iteration >= 0.1
    assert workload.profiles["b"].time_per_iteration >= 0.2
    measured = {name: p.time_per_iteration for name, p in workload.profiles.items()}
    with capsys.disabled():
        print(f"\nmeasured GPU-seconds per step {measured} (paced: a 0.1, b 0.2)")

    for policy in ("themis", "gavel"):
        out = tmp_path / policy
        result = cli("replay", state, "--policy", policy, "--lease", "8", "--out", out, "-q")
        assert result.code == 0, result.err
        assert "2 apps, 3 jobs" in result.out and "4 GPUs (1x2x2)" in result.out
        assert "the arbiter ran themis (--lease 8, --batch-window 1" in result.out, result.out
        summary = json.loads((out / "summary.json").read_text())
        assert (summary["policy"], summary["apps"], summary["jobs"]) == (policy, 2, 3)
        allocated = (out / "allocations.csv").read_text().splitlines()[1:]
        assert {line.split(",")[3] for line in allocated} == set(jobs)
