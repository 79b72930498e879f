"""``themis serve``: one arbiter process owning one state directory, its scheduling loop
on the main thread and its HTTP API on another.

Start-up order matters: the state lock first (a second arbiter is refused before it
touches anything), then the store (refused if missing or corrupt unless ``--init``),
then the operator tokens, then Ray, then the loop, and the API last, so that a client
that can connect is served by a complete arbiter. The listen address is loopback unless
``--listen`` says otherwise; port 0 picks a free one, printed and written to
``<state>/server.url``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis.errors import ThemisError

#: Environment the Ray workers must not inherit from the arbiter: credentials and where
#: the state is (training code reaches the arbiter through its API only).
PRIVATE_ENV = ("THEMIS_TOKEN", "THEMIS_STATE_DIR", "THEMIS_SERVER", "THEMIS_CA_FILE")
URL_FILE = "server.url"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ThemisError(f"expected HOST:PORT, got {text!r}", field="--listen") from None
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class ApiServer:
    """uvicorn on a socket bound here (so port 0 is known before it serves)."""

    server: Any
    thread: threading.Thread
    url: str

    @staticmethod
    def bind(host: str, port: int) -> socket.socket:
        """The listening socket, bound now: ``serve`` binds it before it starts Ray, so
        that a port in use is one line at once, not after Ray was started and stopped.

        ``IPPROTO_TCP``, not 0: asyncio sets ``TCP_NODELAY`` on accepted connections only
        when the listening socket says TCP, and without it every request after the first
        on a kept-alive connection waited ~40 ms (Nagle against delayed ACKs)."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            message = f"cannot listen on {host}:{port}: {exc.strerror}"
            raise ThemisError(message, field="--listen") from None
        return sock

    @classmethod
    def start(
        cls,
        app: Any,
        host: str,
        port: int,
        certfile: str | None,
        keyfile: str | None,
        sock: socket.socket | None = None,
        metrics: Any = None,
    ) -> ApiServer:
        """Serve ``app`` on ``sock`` (bound by :meth:`bind`), or on a socket bound now;
        ``metrics`` (``ApiMetrics``) counts connections (None: counted nowhere).

        Connections are guarded by ``api.connections``: a deadline for each request's
        headers and body, a connection limit that sheds the slowest sender of headers,
        and a limit on requests (not connections) in flight. uvicorn's own
        ``limit_concurrency`` is off: it counted half-open connections as requests."""
        import uvicorn
        from prometheus_client import CollectorRegistry

        from themis.runtime.api.connections import ConnectionGuard, RequestLimit, guarded_protocol
        from themis.runtime.api.metrics import ApiMetrics

        if sock is None:
            sock = cls.bind(host, port)
        if metrics is None:
            metrics = ApiMetrics(CollectorRegistry())
        bound = sock.getsockname()[1]
        config = uvicorn.Config(
            RequestLimit(app, metrics),
            http=guarded_protocol(ConnectionGuard(metrics)),
            log_level="warning",
            access_log=False,
            lifespan="off",
            limit_concurrency=None,
            timeout_keep_alive=5,
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="themis-api", daemon=True
        )
        thread.start()
        scheme = "https" if certfile else "http"
        shown = f"[{host}]" if ":" in host else host
        return cls(server, thread, f"{scheme}://{shown}:{bound}")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def write_url(state_dir: Path, url: str, extra: str | None) -> None:
    paths: list[str | Path] = [state_dir / URL_FILE]
    if extra:
        paths.append(extra)
    for path in paths:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(url + "\n")


def forget_private_env() -> None:
    for name in PRIVATE_ENV:
        os.environ.pop(name, None)
