"""The log flood of a hostile tenant, on a real ``themis serve`` and local Ray cluster.

One app's 4 trials each write 200 lines of 4,000 characters every step. The state
database must grow at most 20 MB in 30 s of it, the scheduling loop's heartbeat must
never be older than 3 s, a cancel must be answered within 10 s, and what was dropped
must be counted (``/metrics``) and said in the app's log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.raytest import local_cluster
from tests.runtime.test_api import themis
from tests.runtime.test_state_serving import damage

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
FLOOD_S = 30.0


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster()


def call(url: str, path: str, token: str, method: str = "GET") -> bytes:
    request = urllib.request.Request(
        url + path, method=method, headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def start_serve(cluster, state: Path, tmp: Path) -> tuple[subprocess.Popen, str]:
    url_file = tmp / "url"
    args = [
        sys.executable, "-m", "themis", "serve", "--init",
        "--address", cluster.address,
        "--state-dir", str(state),
        "--storage", str(tmp / "checkpoints"),
        "--listen", "127.0.0.1:0",
        "--url-file", str(url_file),
        "--lease", "20", "--grace", "10", "--batch-window", "2",
    ]  # fmt: skip
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    log = open(tmp / "serve.log", "w")  # noqa: SIM115  (closed with the process)
    proc = subprocess.Popen(args, env=env, stderr=log, stdout=log)
    deadline = time.monotonic() + 90
    while not url_file.exists() or not url_file.read_text().strip():
        assert proc.poll() is None, (tmp / "serve.log").read_text()
        assert time.monotonic() < deadline, "serve did not start"
        time.sleep(0.2)
    return proc, url_file.read_text().strip()


def state_bytes(state: Path) -> int:
    return sum(
        p.stat().st_size for p in (state / "themis.db", state / "themis.db-wal") if p.exists()
    )


@pytest.mark.timeout(400)
def test_a_log_flood_neither_grows_the_state_nor_stalls_the_loop(cluster, tmp_path: Path) -> None:
    state = tmp_path / "state"
    space = {"lines": [200], "width": [4000], "step_time": [0.5]}
    path = app_yaml(
        tmp_path, "flood", entrypoint="trainers:flood", trials=4, steps=100000,
        step_time=0.5, checkpoint_every=1000, search_space=space,
    )  # fmt: skip
    serve, url = start_serve(cluster, state, tmp_path)
    try:
        admin = (state / "admin.token").read_text().strip()
        submitter = (state / "submit.token").read_text().strip()
        out = themis("submit", path, server=url, token=submitter)
        assert out.returncode == 0, out.stderr
        deadline = time.monotonic() + 120
        while True:  # the flood is on once all 4 trials hold a lease and write
            rows = json.loads(call(url, "/v1/status", admin))["apps"]
            logs = json.loads(call(url, "/v1/apps/flood/logs", admin))["lines"]
            if rows[0]["leases"] == 4 and sum(" xxxx" in line for line in logs) > 4:
                break
            assert time.monotonic() < deadline, (rows, logs[-5:])
            time.sleep(0.5)
        before = state_bytes(state)
        started = time.monotonic()
        oldest = 0.0
        while time.monotonic() - started < FLOOD_S:
            arbiter = json.loads(call(url, "/v1/status", admin))["arbiter"]
            oldest = max(oldest, arbiter["age"])
            assert arbiter["age"] <= 3.0, arbiter
            time.sleep(0.5)
        grown = state_bytes(state) - before
        assert grown <= 20 * 2**20, f"the state grew {grown / 2**20:.1f} MB in {FLOOD_S:g}s"
        asked = time.monotonic()
        reply = json.loads(call(url, "/v1/apps/flood/cancel?wait=10", admin, "POST"))
        assert time.monotonic() - asked <= 10.0
        assert reply["reply"] == "cancelled app 'flood'"
        metrics = call(url, "/metrics", admin).decode()
        limited = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith('themis_log_lines_limited_total{app="flood",why="rate"}')
        ]
        assert limited and limited[0] > 0, metrics
        logs = json.loads(call(url, "/v1/apps/flood/logs", admin))["lines"]
        assert any("lines dropped (rate limit" in line for line in logs)
        print(f"flood: state grew {grown / 2**20:.1f} MB in {FLOOD_S:g}s; oldest tick "
              f"{oldest:.2f}s; {limited[0]:.0f} lines dropped")  # fmt: skip
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait(10)


def answer(url: str, method: str, path: str, token: str, body: bytes | None = None):
    """(status, JSON) of one request; (None, None) once nothing listens any more."""
    request = urllib.request.Request(
        url + path, data=body, method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())  # every error is JSON, never plain text
    except (urllib.error.URLError, ConnectionError):
        return None, None


@pytest.mark.timeout(300)
def test_a_database_damaged_under_a_live_serve_stops_it_with_one_line(
    cluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    path = app_yaml(tmp_path, "steady", trials=2, steps=100000, step_time=0.1)
    serve, url = start_serve(cluster, state, tmp_path)
    try:
        admin = (state / "admin.token").read_text().strip()
        submitter = (state / "submit.token").read_text().strip()
        assert themis("submit", path, server=url, token=submitter).returncode == 0
        deadline = time.monotonic() + 120
        while json.loads(call(url, "/v1/status", admin))["apps"][0]["leases"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        damage(state / "themis.db", range(1, 6))
        text = app_yaml(tmp_path, "late", trials=1, steps=10).read_text()
        body = json.dumps({"text": text, "source": "late.yaml", "base_dir": "/"}).encode()
        seen: list[int | None] = []
        deadline = time.monotonic() + 60
        while serve.poll() is None:
            assert time.monotonic() < deadline, f"serve still up; answers {seen}"
            status, data = answer(url, "GET", "/v1/status", admin)
            seen.append(status)
            assert status in (200, 503, None), (status, data)
            if status == 503:
                assert "the state database is damaged" in data["detail"]
                assert "\n" not in data["detail"]
                health, _ = answer(url, "GET", "/healthz", admin)
                assert health in (503, None)
                accepted, _ = answer(url, "POST", "/v1/apps", submitter, body)
                assert accepted != 201  # nothing more is written into the damaged file
            time.sleep(0.2)
        assert serve.returncode != 0
        lines = [x for x in (tmp_path / "serve.log").read_text().splitlines() if x.strip()]
        assert "the state database is damaged" in lines[-1], lines[-5:]
        assert "Traceback" not in (tmp_path / "serve.log").read_text()
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
