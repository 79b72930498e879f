"""Helpers of the tests that run a real local Ray cluster: start it once per module, drive
the arbiter service tick by tick, read results back from the store."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from themis.model.workload import Workload
from themis.policies import make_policy
from themis.reports import app_rows
from themis.runtime.loop.app_model import app_profile, app_spec
from themis.runtime.loop.commands import submit_command
from themis.runtime.loop.options import RUNTIME_KNOBS
from themis.runtime.loop.service import ArbiterService, ServiceOptions
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store
from themis.runtime.workers import checkpoint
from themis.simulator import simulate

#: Short leases and grace so that a test sees several of each in seconds.
FAST = ServiceOptions(
    knobs=replace(RUNTIME_KNOBS, lease=8.0),
    batch_window=1.0,
    grace=4.0,
    tick=0.1,
    inventory_every=0.5,
    status_every=0.5,
)


def local_cluster() -> Iterator[object]:
    """A module's cluster: head (machine 0, rack r0) + one more node, 2 GPUs each."""
    os.environ["RAY_AUTH_MODE"] = "disabled"  # no token files under ~/.ray in tests
    from themis.runtime.workers import ray_cluster

    local = ray_cluster.start_local(gpus=4, machines=2, racks=1)
    try:
        yield local
    finally:
        local.shutdown()
        shutil.rmtree(local.temp_root, ignore_errors=True)


def make_service(store: Store, tmp: Path, options: ServiceOptions = FAST) -> ArbiterService:
    import ray

    return ArbiterService(store, tmp / "checkpoints", options, ray.nodes)


def submit(service: ArbiterService, path: Path) -> str:
    """Submit as the API does (a command the loop answers at its next tick); the token."""
    command, token = submit_command(load_app_file(path), str(path))
    service.commands.put(command)
    service.tick()
    command.wait(5.0)
    return token


def drive(
    service: ArbiterService,
    until: Callable[[], bool],
    timeout: float,
    each: Callable[[], None] | None = None,
) -> float:
    """Tick the service until ``until()`` holds; fail after ``timeout`` seconds."""
    start = time.monotonic()
    while not until():
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout}s")
        service.tick()
        if each is not None:
            each()
        time.sleep(service.options.tick)
    return time.monotonic() - start


def app_state(store: Store, app_id: str) -> str:
    row = store.app(app_id)
    assert row is not None
    return row.state


def lineage(tmp: Path, app_id: str, trial_id: str) -> dict:
    """The paced trainer's checkpointed state: steps run and the pids that ran them."""
    found = checkpoint.inspect(tmp / "checkpoints" / app_id / trial_id / "checkpoint.themis")
    assert found is not None
    return found["state"]


def events(store: Store, app_id: str) -> list[tuple[float, str | None, str]]:
    return [(e.t or 0.0, e.trial_id, e.message) for _, e in store.events(app_id)]


def simulated_rho(store: Store, service: ArbiterService) -> dict[str, float]:
    """What the simulator predicts for the same apps, arrivals and cluster under the
    same policy options: the post-hoc rho of each app."""
    rows = [r for r in store.apps() if r.arrival is not None]
    apps = tuple(app_spec(r.spec, r.arrival) for r in rows)
    profiles = {r.app_id: app_profile(r.spec) for r in rows}
    workload = Workload(apps, profiles, "runtime")
    options = service.options
    assert service.cluster is not None
    result = simulate(
        workload,
        service.cluster,
        make_policy(options.policy, options.knobs),
        batch_window=options.batch_window,
    )
    return {row.app_id: row.rho for row in app_rows(result)}


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RayHead:
    """A ``ray start --head`` on loopback with its own temp dir, as an operator runs one.

    Stopped by pid, never with ``ray stop`` (which kills every Ray process of the machine
    by name, other users' and other tests' included): every process whose command line
    names this head's temp dir is killed (GCS, raylet, workers, monitors)."""

    def __init__(self, root: Path, gpus: int, port: int | None = None, cpus: int = 1) -> None:
        self.root = Path(root)
        self.gpus = gpus
        self.cpus = cpus
        self.port = port or free_port()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("THEMIS_")}
        env.update(
            RAY_TMPDIR=str(self.root),
            RAY_AUTH_MODE="disabled",
            RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        )
        return env

    def start(self) -> None:
        import subprocess
        import sys

        ray = str(Path(sys.executable).parent / "ray")
        args = [
            ray, "start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1",
            f"--num-gpus={self.gpus}", f"--num-cpus={self.cpus}", f"--temp-dir={self.root / 'ray'}",
            "--include-dashboard=false", f"--dashboard-port={free_port()}",
            "--disable-usage-stats",
        ]  # fmt: skip
        out = subprocess.run(args, env=self.env(), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr

    def pids(self) -> list[int]:
        mine = str(self.root)
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if mine in cmdline:
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        import signal

        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        raise AssertionError(f"Ray processes of {self.root} survive: {self.pids()}")
