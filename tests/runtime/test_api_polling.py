"""One tenant's polling does not slow everyone: with 2,000 apps in the state, 40 threads
polling ``/v1/cluster`` and ``/v1/status`` with the submit token (from another process,
as an attacker would) leave another tenant's requests fast and the scheduling loop
ticking; the flood is answered 429 past the token's rate, counted in ``/metrics``, and
answers are pages that do not grow with the history.

A real arbiter loop on loopback (jobs faked, no Ray) over a state of 1,990 ended apps
and 10 live ones."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour
from tests.runtime.test_api import Arbiter, call, submitted, themis
from themis.runtime.api.ratelimit import RateLimiter
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store

APPS = 2000
LIVE = 10
FLOOD_S = 15.0
THREADS = 40

POLLER = r"""
import http.client, json, sys, threading, time
host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seconds, threads = float(sys.argv[4]), int(sys.argv[5])
counts = {}
lock = threading.Lock()
def poll(k):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    end = time.time() + seconds
    paths = ["/v1/cluster", "/v1/status"]
    n = 0
    while time.time() < end:
        try:
            conn.request("GET", paths[(n + k) % 2], headers={"Authorization": "Bearer " + token})
            r = conn.getresponse(); r.read(); code = r.status
        except Exception as exc:
            code = type(exc).__name__
            conn.close(); conn = http.client.HTTPConnection(host, port, timeout=30)
        n += 1
        with lock:
            counts[str(code)] = counts.get(str(code), 0) + 1
ts = [threading.Thread(target=poll, args=(k,)) for k in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps(counts))
"""


def fill(state: Path, tmp: Path) -> None:
    """A state of APPS - LIVE ended apps of four trials each (each with a reason) and
    LIVE submitted ones, written in one go."""
    store = Store(state, init=True)
    store.db.execute("PRAGMA synchronous=OFF")  # a test's bulk load: durability is moot
    template = load_app_file(app_yaml(tmp, "template", trials=4, steps=100))
    for i in range(APPS - LIVE):
        name = f"old{i:04d}"
        store.add_app(replace(template, name=name), f"hash-{i}", "x")
        store.update_app(name, state="finished", finish=time.time(), rho=1.0,
                         reason="4 of 4 trials ran their whole budget")  # fmt: skip
    store.close()


@pytest.fixture
def crowded(tmp_path: Path):
    state = tmp_path / "state"
    fill(state, tmp_path)
    a = Arbiter(state, {"legit": Behaviour(step_time=0.2)})
    try:
        for i in range(LIVE - 1):
            themis("submit", app_yaml(tmp_path, f"live{i}", trials=2, steps=10**5),
                   server=a.url, token=a.submitter)  # fmt: skip
        a.legit = submitted(
            themis(
                "submit",
                app_yaml(tmp_path, "legit", trials=2, steps=10**5),
                server=a.url,
                token=a.submitter,
            )  # fmt: skip
        )
        yield a
    finally:
        a.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.timeout(240)
def test_forty_pollers_of_one_token_slow_no_one_and_never_the_loop(crowded) -> None:
    a = crowded
    host, port = a.url.removeprefix("http://").split(":")
    # Answers are a page, not the history: the submit token's view of 2,000 apps.
    status, body = call(a.url, "GET", "/v1/status", a.submitter)
    view = json.loads(body)
    assert status == 200 and view["apps_total"] == APPS and len(view["apps"]) == 200
    assert [r["app_id"] for r in view["apps"][:LIVE]] == [*(f"live{i}" for i in range(9)),
                                                           "legit"]  # fmt: skip
    assert len(body) < 100_000 and view["next"] == 200
    assert len(call(a.url, "GET", "/v1/cluster", a.submitter)[1]) < 150_000

    flood = subprocess.Popen(
        [sys.executable, "-c", POLLER, host, port, a.submitter, str(FLOOD_S), str(THREADS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    latencies: list[float] = []
    codes: list[int] = []
    oldest_tick = 0.0
    stop = threading.Event()

    def watch_the_loop() -> None:
        nonlocal oldest_tick
        while not stop.is_set():
            oldest_tick = max(oldest_tick, time.time() - a.snapshot()["heartbeat"])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_the_loop, daemon=True)
    watcher.start()
    try:
        time.sleep(1.0)  # the flood is on
        end = time.monotonic() + FLOOD_S - 2.0
        k = 0
        while time.monotonic() < end:
            path = ("/v1/status", "/v1/cluster")[k % 2]
            t0 = time.monotonic()
            status, _ = call(a.url, "GET", path, a.legit)
            latencies.append(time.monotonic() - t0)
            codes.append(status)
            k += 1
            time.sleep(0.2)
        out, _ = flood.communicate(timeout=60)
    finally:
        stop.set()
        watcher.join(5)
        if flood.poll() is None:
            flood.kill()
            flood.wait()
    counts = json.loads(out)
    p99 = percentile(latencies, 0.99)
    print(f"flood {counts}; legit p50 {percentile(latencies, 0.5):.3f}s p99 {p99:.3f}s "
          f"({len(latencies)} requests); oldest tick {oldest_tick:.2f}s")  # fmt: skip
    assert set(codes) == {200}, codes
    assert p99 < 1.5, latencies
    assert oldest_tick < 3.0
    assert counts.get("429", 0) > counts.get("200", 0) > 0, counts  # limited, not starved
    assert set(counts) <= {"200", "429"}, counts
    metrics = call(a.url, "GET", "/metrics", a.admin)[1].decode()
    limited = [
        line for line in metrics.splitlines()
        if line.startswith('themis_api_rate_limited_total{role="submit"}')
    ]  # fmt: skip
    assert limited and float(limited[0].split()[-1]) >= counts["429"]


def test_a_bucket_lets_a_burst_then_a_steady_rate_and_keys_are_bounded() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=3.0, max_callers=2, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert limiter.take("a") == 0.0 and limiter.take("a") > 0
    assert limiter.take("b") == 0.0  # another caller's bucket is its own
    limiter.take("c")  # a third caller: the least recent ("a") is forgotten
    assert len(limiter._buckets) == 2


def test_pages_cover_every_app_once_and_bad_pages_are_one_line(crowded) -> None:
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        status, body = call(a_url := crowded.url, "GET", f"/v1/status?offset={offset}&limit=1000",
                            crowded.admin)  # fmt: skip
        assert status == 200
        page = json.loads(body)
        seen += [r["app_id"] for r in page["apps"]]
        offset = page["next"]
    assert len(seen) == len(set(seen)) == APPS
    for query in ("limit=0", "limit=1001", "offset=-1", "limit=x"):
        status, body = call(a_url, "GET", f"/v1/status?{query}", crowded.admin)
        assert status == 400 and "\n" not in json.loads(body)["detail"], (query, body)
    out = themis("status", server=crowded.url, token=crowded.admin)
    assert out.returncode == 0 and "1800 more apps that ended earlier" in out.stdout
    out = themis("status", "--all", "--json", server=crowded.url, token=crowded.admin)
    assert len(json.loads(out.stdout)["apps"]) == APPS
