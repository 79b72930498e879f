"""Slowloris: hundreds of connections that send partial headers a byte every 2 s, no
token, must not make legitimate requests fail; the server closes them once their
headers are late, sheds the slowest first when it has too many connections, and reports
both in ``/metrics``. A real arbiter API (uvicorn) on loopback, its loop faked."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.runtime.test_api import Arbiter, call
from themis.runtime.api import connections

SLOW = 300


class Slowloris:
    """``count`` connections, each sending a request line and headers one byte every
    ``every`` seconds, never finishing them."""

    def __init__(self, port: int, count: int, every: float = 2.0) -> None:
        self.socks: list[socket.socket] = []
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            self.socks.append(s)
        self.every = every
        self.closed_by_server = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        while not self.stop.wait(self.every):
            for s in list(self.socks):
                try:
                    s.sendall(b"a")
                except OSError:  # the server closed it
                    self.socks.remove(s)
                    self.closed_by_server += 1
                    s.close()

    def open_ones(self) -> int:
        """Connections the server has not closed (a closed one reads EOF at once)."""
        alive = 0
        for s in self.socks:
            s.setblocking(False)
            try:
                alive += s.recv(1) != b""
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
        return alive

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for s in self.socks:
            s.close()


@pytest.fixture
def arbiter(tmp_path: Path):
    a = Arbiter(tmp_path / "state", {})
    try:
        yield a
    finally:
        a.close()


def metric(a: Arbiter, name: str) -> float:
    text = call(a.url, "GET", "/metrics", a.admin)[1].decode()
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name)]
    assert values, name
    return sum(values)


def timed_status(a: Arbiter) -> tuple[int, float]:
    t0 = time.monotonic()
    status, body = call(a.url, "GET", "/v1/status", a.admin)
    return status, time.monotonic() - t0


@pytest.mark.timeout(120)
def test_three_hundred_half_open_connections_neither_block_nor_stay(arbiter) -> None:
    port = int(arbiter.url.rsplit(":", 1)[1])
    slow = Slowloris(port, SLOW)
    try:
        time.sleep(3.0)  # each has trickled a byte or so: all half-open
        assert slow.open_ones() == SLOW
        answers = [timed_status(arbiter) for _ in range(5)]
        assert all(status == 200 and took < 3.0 for status, took in answers), answers
        assert metric(arbiter, "themis_api_connections ") >= SLOW
        assert metric(arbiter, "themis_api_connections_max ") == connections.MAX_CONNECTIONS
        # Their headers are late after HEADER_TIMEOUT (and the next sweep): all closed,
        # though each went on sending.
        deadline = time.monotonic() + connections.HEADER_TIMEOUT + 10
        while slow.open_ones() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert slow.open_ones() == 0
        closed = metric(arbiter, 'themis_api_connections_closed_total{why="header_timeout"}')
        assert closed >= SLOW
        assert timed_status(arbiter)[0] == 200
    finally:
        slow.close()


@pytest.mark.timeout(120)
def test_past_the_connection_limit_the_slowest_senders_are_shed(arbiter, monkeypatch):
    """With a limit of 50 connections, 80 slow ones: each new connection past 50 closes
    the oldest still sending headers, so a legitimate request is served."""
    arbiter.api.stop()
    monkeypatch.setattr(connections, "MAX_CONNECTIONS", 50)
    arbiter.api = type(arbiter.api).start(
        arbiter.api.server.config.app.app, "127.0.0.1", 0, None, None,
        metrics=arbiter.api.server.config.app.metrics,
    )  # fmt: skip
    arbiter.url = arbiter.api.url
    port = int(arbiter.url.rsplit(":", 1)[1])
    slow = Slowloris(port, 80)
    try:
        time.sleep(1.0)
        status, took = timed_status(arbiter)
        assert status == 200 and took < 3.0
        assert metric(arbiter, 'themis_api_connections_closed_total{why="over_limit"}') >= 30
        assert slow.open_ones() <= 50
    finally:
        slow.close()


@pytest.mark.timeout(60)
def test_a_kept_alive_connection_and_a_slow_but_steady_client_are_served(arbiter) -> None:
    """The deadline is per request: a kept-alive connection used for many requests over
    longer than HEADER_TIMEOUT is not cut, nor a client whose headers take 2 s."""
    import http.client

    host, port = arbiter.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    auth = {"Authorization": f"Bearer {arbiter.admin}"}
    for _ in range(int(connections.HEADER_TIMEOUT) + 2):  # longer than one deadline
        conn.request("GET", "/v1/status", headers=auth)
        response = conn.getresponse()
        assert response.status == 200
        response.read()
        time.sleep(1.0)
    s = socket.create_connection((host, int(port)), timeout=10)
    request = f"GET /v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {arbiter.admin}\r\n\r\n"
    for k in range(0, len(request), len(request) // 4 + 1):
        s.sendall(request[k : k + len(request) // 4 + 1].encode())
        time.sleep(0.5)
    head = s.recv(65536).decode()
    assert head.startswith("HTTP/1.1 200"), head[:200]
    s.close()
    assert json.loads(call(arbiter.url, "GET", "/v1/status", arbiter.admin)[1])["apps"] == []
