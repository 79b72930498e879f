"""What a connection may hold of the API's server before it has sent a request.

uvicorn times out only idle kept-alive connections (``timeout_keep_alive``, reset by
every byte) and counts half-open connections against ``limit_concurrency``: 260 clients
that sent partial headers a byte every 2 s, no token needed, held every slot, every
legitimate request answered 503, and none was ever closed. ASGI middleware cannot help
(it runs once the headers are complete), so the guard sits in uvicorn's HTTP protocol
(``guarded_protocol``, a subclass of its h11 one; the same fix as other uvicorn servers):

- **a deadline per request receipt**: a request's line and headers must be complete
  ``HEADER_TIMEOUT`` seconds after its first byte (or after the connection opened, for
  one that sends nothing), and its body ``BODY_TIMEOUT`` seconds after the headers; past
  it the connection is closed (``themis_api_connections_closed_total{why=
  "header_timeout"|"body_timeout"}``). Headers are at most h11's 16 KiB anyway;
- **a connection limit that sheds the slowest first**: past ``MAX_CONNECTIONS`` open
  connections, a new one closes the oldest connection still sending its headers (or is
  itself closed when none is): ``{why="over_limit"}``. ``themis_api_connections`` and
  ``themis_api_connections_max`` show it;
- **requests, not connections, are what ``MAX_REQUESTS`` bounds** (:class:`RequestLimit`,
  503 past it, ``themis_api_requests_refused_total``): a half-open connection takes no
  request slot.

A sweep every ``SWEEP_EVERY`` seconds on the server's event loop enforces the
deadlines: O(open connections), nothing per byte.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from themis.runtime.api.metrics import ApiMetrics

#: Seconds a request's line and headers may take, from its first byte.
HEADER_TIMEOUT = 10.0
#: Seconds a request's body may take once its headers are in (an app file is 64 KiB).
BODY_TIMEOUT = 60.0
#: Open connections at once; past it the slowest sender of headers is shed.
MAX_CONNECTIONS = 1024
#: Requests served at once; past it 503.
MAX_REQUESTS = 256
#: How often the deadlines are checked.
SWEEP_EVERY = 1.0


class ConnectionGuard:
    """The open connections of one server, with what each is receiving since when."""

    def __init__(self, metrics: ApiMetrics) -> None:
        self.metrics = metrics
        self.max_connections = MAX_CONNECTIONS
        self.timeouts = {"headers": HEADER_TIMEOUT, "body": BODY_TIMEOUT}
        max_connections = self.max_connections
        # Insertion order is opening order: the first "headers" one is the oldest.
        self.open: dict[Any, None] = {}
        self.sweeping = False
        metrics.connections_max.set(max_connections)

    def opened(self, conn: Any) -> None:
        self.open[conn] = None
        if len(self.open) > self.max_connections:
            victim = next((c for c in self.open if c.phase == "headers" and c is not conn), conn)
            self.close(victim, "over_limit")
        self.metrics.connections.set(len(self.open))
        if not self.sweeping:
            self.sweeping = True
            asyncio.get_running_loop().call_later(SWEEP_EVERY, self.sweep)

    def closed(self, conn: Any) -> None:
        self.open.pop(conn, None)
        self.metrics.connections.set(len(self.open))

    def close(self, conn: Any, why: str) -> None:
        self.metrics.closed.labels(why).inc()
        conn.phase = None
        self.open.pop(conn, None)
        conn.transport.close()

    def sweep(self) -> None:
        now = time.monotonic()
        for conn in list(self.open):
            limit = self.timeouts.get(conn.phase or "")
            if limit is not None and now - conn.since > limit:
                self.close(conn, f"{conn.phase.replace('headers', 'header')}_timeout")
        self.metrics.connections.set(len(self.open))
        if self.open:
            asyncio.get_running_loop().call_later(SWEEP_EVERY, self.sweep)
        else:
            self.sweeping = False


def guarded_protocol(guard: ConnectionGuard) -> type[H11Protocol]:
    """uvicorn's h11 protocol class, with ``guard`` watching each connection."""

    class GuardedH11Protocol(H11Protocol):
        phase: str | None = "headers"  # what it is receiving: headers, body or nothing
        since: float = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.phase, self.since = "headers", time.monotonic()
            guard.opened(self)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.closed(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.phase is None and self.conn.their_state is h11.IDLE:
                # A new request on a kept-alive connection: its headers' clock starts.
                self.phase, self.since = "headers", time.monotonic()
            super().data_received(data)
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()

        def _track(self) -> None:
            state = self.conn.their_state
            if state is h11.SEND_BODY and self.phase == "headers":
                self.phase, self.since = "body", time.monotonic()
            elif state is h11.IDLE and self.phase == "headers":
                pass  # still (or again) waiting for this request's headers
            elif state is not h11.SEND_BODY:
                self.phase = None  # received whole (or closing): uvicorn's keep-alive rules

    return GuardedH11Protocol


class RequestLimit:
    """ASGI middleware: at most ``limit`` requests in flight, 503 (one line) past it."""

    def __init__(self, app: Any, metrics: ApiMetrics, limit: int = MAX_REQUESTS) -> None:
        self.app = app
        self.metrics = metrics
        self.limit = limit
        self.active = 0
        metrics.requests_max.set(limit)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            self.metrics.refused.inc()
            body = b'{"detail":"the arbiter serves too many requests at once; retry"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", b"1"),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
