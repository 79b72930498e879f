"""The report's scenario end to end: ``themis serve`` on a real local Ray cluster of two
nodes (4 GPUs), a hog of 4 x 1 GPU holding every GPU on a long lease, a waiter of
2 x 1 GPU, the hog cancelled with ``themis cancel``. The hog's jobs checkpoint and stop;
their GPUs must go to the waiter within the batch window of coming free, not when
something unrelated next sets off a round (a minute and more in the report)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.raytest import local_cluster
from tests.runtime.test_api import themis
from tests.runtime.test_end_to_end import get

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
#: A lease far longer than the test: no lease end can hand the GPUs out by chance.
LEASE = "120"
BATCH_WINDOW = 2.0
GRACE = 10.0


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster()


def start_serve(cluster, state: Path, tmp: Path) -> tuple[subprocess.Popen, str]:
    url_file = tmp / "url"
    args = [
        sys.executable, "-m", "themis", "serve",
        "--address", cluster.address,
        "--state-dir", str(state),
        "--storage", str(tmp / "checkpoints"),
        "--listen", "127.0.0.1:0",
        "--url-file", str(url_file),
        "--lease", LEASE, "--batch-window", str(BATCH_WINDOW), "--grace", str(GRACE),
        "--init",
    ]  # fmt: skip
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not url_file.exists() or not url_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"serve did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.2)
    return proc, url_file.read_text().strip()


def status(url: str, admin: str) -> tuple[dict, dict[str, dict]]:
    answer = json.loads(get(url, "/v1/status", admin))
    return answer["arbiter"], {row["app_id"]: row for row in answer["apps"]}


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} not within {timeout}s"
        time.sleep(0.25)


@pytest.mark.timeout(240)
def test_cancelling_a_hog_hands_its_gpus_to_the_waiter_at_once(cluster, tmp_path: Path) -> None:
    state = tmp_path / "state"
    space = {"quality": [1.0], "step_time": [0.2]}
    hog = app_yaml(tmp_path, "hog", trials=4, steps=100_000, step_time=0.2, search_space=space)
    waiter = app_yaml(tmp_path, "waiter", trials=2, steps=100_000, step_time=0.2)
    serve, url = start_serve(cluster, state, tmp_path)
    try:
        admin = (state / "admin.token").read_text().strip()
        submitter = (state / "submit.token").read_text().strip()
        assert themis("submit", hog, server=url, token=submitter).returncode == 0
        wait_for(lambda: status(url, admin)[1]["hog"]["gpus"] == 4, 90, "the hog on 4 GPUs")
        assert themis("submit", waiter, server=url, token=submitter).returncode == 0
        wait_for(lambda: "waiter" in status(url, admin)[1], 30, "the waiter admitted")
        time.sleep(2 * BATCH_WINDOW)  # rounds pass: the waiter holds nothing
        assert status(url, admin)[1]["waiter"]["gpus"] == 0

        out = themis("cancel", "hog", server=url, token=admin)
        assert out.returncode == 0, out.stderr
        cancelled = time.monotonic()
        # The hog's jobs stop at their next step (0.2 s) and checkpoint; their end, seen
        # at the next poll, sets a round off at once. Bounded by the grace (a job that
        # ignored its stop would be killed then) plus the batch window and slack for a
        # busy machine; in the report the waiter waited 65 to 110 s.
        bound = GRACE + BATCH_WINDOW + 8.0
        wait_for(
            lambda: status(url, admin)[1]["waiter"]["gpus"] == 2,
            bound,
            "the waiter on the hog's GPUs",
        )
        waited = time.monotonic() - cancelled
        arbiter, rows = status(url, admin)
        assert rows["hog"]["state"] == "cancelled"
        assert arbiter["state"] == "alive"
        print(f"waiter granted {waited:.1f}s after the cancel")
    finally:
        serve.terminate()
        try:
            serve.wait(60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait(10)
