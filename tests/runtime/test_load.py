"""200 app submissions through the API of a real ``themis serve`` (local Ray cluster of
two nodes), one after another in a bounded loop: every one accepted, latency and the
arbiter's memory measured (the figures in docs/runtime.md come from this test's output).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.runtime.conftest import app_yaml
from themis.runtime.api.client import Client

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
SUBMISSIONS = 200


def driver_rss(pid: int) -> int:
    """Resident memory of serve's Ray driver (its multiprocessing child)."""
    return sum(
        c.memory_info().rss
        for c in psutil.Process(pid).children()
        if "spawn_main" in " ".join(c.cmdline())
    )


@pytest.mark.timeout(400)
def test_two_hundred_submissions_through_the_api(tmp_path: Path) -> None:
    state = tmp_path / "state"
    url_file = tmp_path / "url"
    args = [
        sys.executable, "-m", "themis", "serve", "--init",
        "--state-dir", str(state), "--listen", "127.0.0.1:0", "--url-file", str(url_file),
        "--gpus", "4", "--machines", "2", "--lease", "8", "--grace", "4",
    ]  # fmt: skip
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    serve = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not url_file.exists() or not url_file.read_text().strip():
            assert serve.poll() is None, serve.stderr.read()
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.2)
        url = url_file.read_text().strip()
        client = Client(url, (state / "submit.token").read_text().strip())
        rss_before = psutil.Process(serve.pid).memory_info().rss
        driver_before = driver_rss(serve.pid)
        paths = [
            app_yaml(tmp_path, f"load{k:03d}", trials=2, steps=5, step_time=0.05)
            for k in range(SUBMISSIONS)
        ]
        latencies = []
        for path in paths:  # bounded: one submission per file
            started = time.perf_counter()
            answer = client.submit(path)
            latencies.append(time.perf_counter() - started)
            assert answer["trials"] == 2
        rss_after = psutil.Process(serve.pid).memory_info().rss
        driver_after = driver_rss(serve.pid)
        started = time.perf_counter()
        rows = client.status()["apps"]
        status_latency = time.perf_counter() - started
        assert len(rows) == SUBMISSIONS
        latencies.sort()
        p50 = statistics.median(latencies)
        p99 = latencies[int(0.99 * len(latencies)) - 1]
        print(
            f"\n{SUBMISSIONS} submissions: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
            f"max {latencies[-1] * 1000:.0f} ms; status of {SUBMISSIONS} apps "
            f"{status_latency * 1000:.0f} ms; serve RSS {rss_before / 2**20:.0f} MiB before, "
            f"{rss_after / 2**20:.0f} MiB after; its Ray driver process "
            f"{driver_before / 2**20:.0f} MiB before, {driver_after / 2**20:.0f} MiB after"
        )
        # Generous bounds for a shared 2-core machine: a submission waits for one tick of
        # a loop that also runs rounds over up to 200 apps.
        assert p50 < 2.0 and p99 < 10.0
        assert rss_after - rss_before < 300 * 2**20
        assert driver_after - driver_before < 300 * 2**20
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(90)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait(10)
