"""End to end on a real local Ray cluster of two nodes, as a platform team runs it:

``themis serve --listen 127.0.0.1:0`` on a state directory; two apps submitted from
another working directory through ``--server``; serve killed with SIGKILL mid-run and
started again; a second serve on the same state refused; every app finishing with each
trial's steps recorded exactly once; ``/metrics`` scraped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.raytest import lineage, local_cluster
from tests.runtime.test_api import one_line_error, themis
from themis.runtime.state.store import Store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
STEPS = 150


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster()


def get(url: str, path: str, token: str) -> bytes:
    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def start_serve(cluster, state: Path, tmp: Path, init: bool) -> tuple[subprocess.Popen, str]:
    url_file = tmp / "url"
    url_file.unlink(missing_ok=True)
    args = [
        sys.executable, "-m", "themis", "serve",
        "--address", cluster.address,
        "--state-dir", str(state),
        "--storage", str(tmp / "checkpoints"),
        "--listen", "127.0.0.1:0",
        "--url-file", str(url_file),
        "--lease", "8", "--batch-window", "1", "--grace", "4",
    ]  # fmt: skip
    if init:
        args.append("--init")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not url_file.exists() or not url_file.read_text().strip():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "serve did not start"
        time.sleep(0.2)
    return proc, url_file.read_text().strip()


def apps_status(url: str, token: str) -> dict[str, dict]:
    answer = json.loads(get(url, "/v1/status", token))
    assert answer["arbiter"]["state"] == "alive", answer["arbiter"]
    return {row["app_id"]: row for row in answer["apps"]}


@pytest.mark.timeout(300)
def test_platform_run_survives_sigkill_refuses_a_second_arbiter_and_counts_steps_once(
    cluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    users = tmp_path / "users"
    users.mkdir()
    space = {"quality": [1.0], "step_time": [0.1]}
    files = [
        app_yaml(users, name, trials=2, steps=STEPS, step_time=0.1, search_space=space)
        for name in ("alpha", "beta")
    ]
    first, url = start_serve(cluster, state, tmp_path, init=True)
    admin = (state / "admin.token").read_text().strip()
    submitter = (state / "submit.token").read_text().strip()
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    try:
        tokens = {}
        for path in files:
            out = themis("submit", path, server=url, token=submitter, cwd=elsewhere)
            assert out.returncode == 0, out.stderr
            tokens[path.stem] = out.stdout.splitlines()[1].removeprefix("token: ")
        assert list(elsewhere.iterdir()) == []
        deadline = time.monotonic() + 90
        while True:
            rows = apps_status(url, admin)
            if all(rows[a]["steps_done"] >= 2 * 20 for a in ("alpha", "beta")):
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.5)
        metrics = get(url, "/metrics", admin).decode()
        assert (
            'themis_app_gpus{app="alpha"}' in metrics and "themis_leases_granted_total" in metrics
        )
        before = {a: rows[a]["steps_done"] for a in rows}
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    one_line_error(themis("status", server=url, token=admin), f"no arbiter answers at {url}")

    second, url = start_serve(cluster, state, tmp_path, init=False)
    try:
        third = themis("serve", "--state-dir", state, "--listen", "127.0.0.1:0")
        one_line_error(third, f"another arbiter (pid {second.pid}) already serves")
        deadline = time.monotonic() + 150
        while True:
            rows = apps_status(url, admin)
            if all(rows[a]["state"] == "finished" for a in ("alpha", "beta")):
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.5)
        metrics = get(url, "/metrics", admin).decode()
        assert "themis_round_seconds_count" in metrics
        own = json.loads(get(url, "/v1/status", tokens["beta"]))["apps"]
        assert [r["app_id"] for r in own] == ["beta"]
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0, second.stderr.read()
    finally:
        if second.poll() is None:
            second.kill()

    store = Store(state)
    for app in ("alpha", "beta"):
        row = store.app(app)
        assert row.state == "finished" and row.reason.startswith("2 of 2 trials")
        messages = [e.message for _, e in store.events(app)]
        assert any("arbiter restarted" in m for m in messages)
        for trial in store.trials(app):
            assert trial.steps_done == STEPS >= before[app] // 2
            record = lineage(tmp_path, app, trial.trial_id)
            # Each step is in the trial's checkpointed lineage exactly once, across the
            # kill of the arbiter (its jobs died with it and resumed from checkpoints).
            assert record["steps_run"] == list(range(STEPS)), (app, trial.trial_id)
            assert len(record["pids"]) >= 2
