"""The DistributedDataParallel example across the two nodes of a local Ray cluster (one
logical GPU each, gloo on CPU): each trial's gang spans both nodes, runs as two ranks
that rendezvous through the variables the runtime sets, and stops collectively at lease
ends. Skipped without torch (``pip install 'themis-scheduler[torch]'``)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.raytest import FAST, app_state, drive, lineage, make_service, submit
from themis.runtime.loop.commands import Command
from themis.runtime.state.store import Store

pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch_ddp" / "app.yaml"


@pytest.fixture(scope="module")
def two_single_gpu_nodes():
    os.environ["RAY_AUTH_MODE"] = "disabled"
    from themis.runtime.workers import ray_cluster

    local = ray_cluster.start_local(gpus=2, machines=2, racks=1)
    try:
        yield local
    finally:
        local.shutdown()
        shutil.rmtree(local.temp_root, ignore_errors=True)


@pytest.mark.timeout(300)
def test_ddp_example_trains_two_ranks_across_nodes_and_survives_lease_ends(
    two_single_gpu_nodes, tmp_path: Path
) -> None:
    store = Store(tmp_path / "state", init=True)
    service = make_service(
        store, tmp_path, replace(FAST, knobs=replace(FAST.knobs, lease=6.0), grace=4.0)
    )
    submit(service, EXAMPLE)
    # Once a gang has checkpointed, its lease is ended: both ranks must stop after the
    # same step (a rank left in an all-reduce would hang until killed) and the gang
    # resumes from the checkpoint later.
    drive(service, lambda: max(t.steps_done for t in store.trials("torch-ddp")) >= 40, 120)
    (busy,) = [t.trial_id for t in store.trials("torch-ddp") if t.state == "running"]
    release = service.commands.put(Command("release", "torch-ddp", {"trial": busy}))
    drive(service, lambda: app_state(store, "torch-ddp") != "running", 240)
    assert release.result == f"released the lease of {busy}"
    assert store.app("torch-ddp").state == "finished", store.app("torch-ddp").reason
    messages = [e.message for _, e in store.events("torch-ddp")]
    assert any(m.startswith("DDP over 2 ranks from step 0") for m in messages)
    resumed = [
        m for m in messages if m.startswith("DDP over 2 ranks from step") and "step 0" not in m
    ]
    for trial in store.trials("torch-ddp"):
        assert trial.steps_done == 120
        assert lineage(tmp_path, "torch-ddp", trial.trial_id)["world"] == 2
    starts = [t.starts for t in store.trials("torch-ddp")]
    print(f"\nresumed gangs: {len(resumed)}; starts per trial: {starts}")
    service.shutdown()
