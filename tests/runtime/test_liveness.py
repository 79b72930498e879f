"""Liveness: ``themis serve`` outlives the Ray cluster it drives.

An operator's Ray head (``ray start --head``, logical GPUs, its own temp dir) with
``themis serve --address`` attached and an app running; then the head is stopped (every
one of its processes killed) for longer than the ~60 s after which serve used to die.
Before that, the arbiter's own Ray driver process is killed: a new one must take over in
seconds. Throughout the outage, serve must stay up and answer the API, say that Ray is
unreachable (status and the ``themis_ray_up`` metric), hold no lease; once a head is
started again at the same address, it resumes the trials from their checkpoints, and the
app finishes with every step of each trial run exactly once in its checkpointed lineage.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.raytest import RayHead, lineage
from tests.runtime.test_api import themis
from themis.runtime.state.store import Store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
STEPS = 150
#: How long Ray stays down: past the ~60 s after which serve used to exit.
OUTAGE = 75.0


def get(url: str, path: str, token: str) -> bytes:
    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=20) as response:
        return response.read()


def status(url: str, token: str) -> dict:
    return json.loads(get(url, "/v1/status", token))


def drivers(pid: int) -> list[psutil.Process]:
    """Serve's Ray driver child (a multiprocessing spawn child)."""
    return [c for c in psutil.Process(pid).children() if "spawn_main" in " ".join(c.cmdline())]


def metric(url: str, token: str, name: str) -> float | None:
    for line in get(url, "/metrics", token).decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


@pytest.mark.timeout(420)
def test_serve_outlives_ray_reports_it_and_resumes_when_ray_is_back(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="thl-"))  # short: Ray puts sockets there
    head = RayHead(root, gpus=2)
    state = tmp_path / "state"
    url_file = tmp_path / "url"
    serve = None
    try:
        head.start()
        args = [
            sys.executable, "-m", "themis", "serve", "--init",
            "--address", head.address, "--state-dir", str(state),
            "--storage", str(tmp_path / "checkpoints"), "--listen", "127.0.0.1:0",
            "--url-file", str(url_file), "--lease", "8", "--batch-window", "1",
            "--grace", "4",
        ]  # fmt: skip
        log = open(tmp_path / "serve.log", "w")  # noqa: SIM115  (closed with the test)
        serve = subprocess.Popen(args, env=head.env(), stderr=log, stdout=log)
        deadline = time.monotonic() + 90
        while not url_file.exists() or not url_file.read_text().strip():
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.2)
        url = url_file.read_text().strip()
        admin = (state / "admin.token").read_text().strip()
        submitter = (state / "submit.token").read_text().strip()
        space = {"quality": [1.0], "step_time": [0.1]}
        path = app_yaml(tmp_path, "sweep", trials=2, steps=STEPS, search_space=space)
        out = themis("submit", path, server=url, token=submitter)
        assert out.returncode == 0, out.stderr

        deadline = time.monotonic() + 90
        while True:
            answer = status(url, admin)
            row = answer["apps"][0]
            if row["steps_done"] >= 2 * 10 and row["gpus"] == 2:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.5)
        assert answer["arbiter"]["state"] == "alive"
        assert metric(url, admin, "themis_ray_up") == 1.0

        # The arbiter's own Ray driver (a child process) killed while Ray is up: a new
        # one joins, the lost leases are granted again, and nothing else changes.
        (driver,) = drivers(serve.pid)
        driver.kill()
        killed = time.monotonic()
        deadline = killed + 60
        while True:
            answer = status(url, admin)
            lost = metric(url, admin, "themis_ray_lost_total")
            if (
                lost == 1.0
                and answer["apps"][0]["gpus"] == 2
                and answer["arbiter"]["state"] == "alive"
            ):
                break
            assert time.monotonic() < deadline, (answer, lost)
            time.sleep(0.2)
        driver_back = time.monotonic() - killed
        assert [d.pid for d in drivers(serve.pid)] not in ([], [driver.pid])

        head.stop()
        lost = time.monotonic()
        seen_unreachable = None
        while time.monotonic() - lost < OUTAGE:
            alive = serve.poll() is None
            assert alive, (
                f"serve exited ({serve.returncode}) {time.monotonic() - lost:.0f}s after Ray "
                f"was lost:\n{(tmp_path / 'serve.log').read_text()[-3000:]}"
            )
            answer = status(url, admin)
            if answer["arbiter"]["state"] == "ray-unreachable" and seen_unreachable is None:
                seen_unreachable = time.monotonic() - lost
            time.sleep(1.0)
        assert seen_unreachable is not None and seen_unreachable < 25, seen_unreachable
        answer = status(url, admin)
        assert answer["arbiter"]["state"] == "ray-unreachable", answer["arbiter"]
        assert answer["arbiter"]["gpus"] == 0
        row = answer["apps"][0]
        assert row["state"] == "running" and row["gpus"] == 0 and row["leases"] == 0, row
        assert "Ray" in (row["why"] or ""), row
        assert metric(url, admin, "themis_ray_up") == 0.0
        out = themis("status", server=url, token=admin)
        assert out.returncode == 3 and "RAY UNREACHABLE" in out.stdout, out
        steps_during = row["steps_done"]

        head.start()  # the same address, a new cluster
        back = time.monotonic()
        resumed = None
        deadline = back + 200
        while True:
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            answer = status(url, admin)
            row = answer["apps"][0]
            if resumed is None and row["gpus"] > 0 and answer["arbiter"]["state"] == "alive":
                resumed = time.monotonic() - back
            if row["state"] != "running":
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.5)
        assert row["state"] == "finished", row
        assert resumed is not None
        assert metric(url, admin, "themis_ray_up") == 1.0
        print(
            f"\ndriver killed: GPUs back after {driver_back:.1f}s; head stopped: "
            f"unreachable seen after {seen_unreachable:.1f}s; resumed {resumed:.1f}s after "
            "the head was back"
        )
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0, (tmp_path / "serve.log").read_text()[-3000:]
    finally:
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait(10)
        head.stop()
        shutil.rmtree(root, ignore_errors=True)

    store = Store(state)
    messages = [e.message for _, e in store.events("sweep")]
    assert any("Ray unreachable" in m for m in messages), messages
    for trial in store.trials("sweep"):
        assert trial.steps_done == STEPS >= steps_during // 2
        record = lineage(tmp_path, "sweep", trial.trial_id)
        # Every step exactly once across the outage: the jobs died with the cluster and
        # resumed from their checkpoints on the new one.
        assert record["steps_run"] == list(range(STEPS)), trial.trial_id
        assert len(record["pids"]) >= 2
    store.close()
    assert os.path.isdir(state)
