"""The API against hostile and careless clients: out-of-range parameters are 400 with one
line, a body over the limit is 413 even without ``Expect: 100-continue``, kept-alive
connections are not slowed by Nagle, and a port in use is refused before Ray starts."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from tests.runtime.test_api import Arbiter, call


@pytest.fixture
def arbiter(tmp_path: Path):
    a = Arbiter(tmp_path / "state", {})
    try:
        yield a
    finally:
        a.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "path",
    [
        "/v1/apps/a/logs?after=9223372036854775808",
        "/v1/apps/a/logs?after=-1",
        "/v1/apps/a/logs?after=1e3",
        "/v1/apps/a/cancel?wait=nan",
        "/v1/apps/a/cancel?wait=1e999",
    ],
)
def test_out_of_range_parameters_are_400_in_one_line(arbiter, tmp_path: Path, path: str) -> None:
    """``logs?after=9223372036854775808`` (past a 64-bit integer) is not a 500 with a
    traceback."""
    from tests.runtime.conftest import app_yaml
    from themis.runtime.state.appfile import read_app_text

    text = read_app_text(app_yaml(tmp_path, "a", steps=100000))
    body = json.dumps({"text": text, "source": "a.yaml", "base_dir": str(tmp_path)}).encode()
    assert call(arbiter.url, "POST", "/v1/apps", arbiter.submitter, body)[0] == 201
    method = "POST" if "cancel" in path else "GET"
    status, reply = call(arbiter.url, method, path, arbiter.admin)
    assert status == 400, (status, reply)
    detail = json.loads(reply)["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    assert ("after" in detail) or ("wait" in detail), detail


def _raw_post(url: str, token: str, size: int) -> bytes:
    """POST ``size`` bytes as a plain client does: headers and body at once, no
    ``Expect: 100-continue``; returns what the server answered."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        head = (
            f"POST /v1/apps HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
        ).encode()
        errors: list[BaseException] = []

        def send() -> None:
            try:
                sock.sendall(head + b"x" * size)
            except OSError as exc:
                errors.append(exc)

        sender = threading.Thread(target=send)
        sender.start()
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except ConnectionResetError:
            answer += b"<reset>"
        sender.join(30)
        return answer


@pytest.mark.timeout(60)
def test_a_10_mb_body_without_expect_continue_is_413_not_a_reset(arbiter) -> None:
    """A server that answers before reading and closes with the body unread makes the
    kernel reset the connection, and the client never sees the 413."""
    answer = _raw_post(arbiter.url, arbiter.submitter, 10 * 2**20)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # As urllib (and most clients) do it: the whole body sent, then the answer read.
    status, reply = call(arbiter.url, "POST", "/v1/apps", arbiter.submitter, b"x" * 10 * 2**20)
    assert status == 413 and b"at most" in reply, (status, reply[:200])


def _server_side_nodelay(port: int, peer: tuple[str, int]) -> int:
    """TCP_NODELAY of the API's end of the connection from ``peer`` (same process)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        with sock:
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                if sock.getsockname()[1] == port and sock.getpeername()[:2] == peer:
                    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            except OSError:
                continue
    raise AssertionError("the server's end of the connection was not found")


@pytest.mark.timeout(60)
def test_kept_alive_connections_have_nagle_off(arbiter) -> None:
    """Without TCP_NODELAY every request after the first on a kept-alive connection takes
    ~44 ms (Nagle + delayed ACK), and asyncio does not set it on the sockets accepted from
    a listening socket of proto 0."""
    import http.client

    host, port = arbiter.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    for _ in range(3):
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b'{"ok":true}'
    assert _server_side_nodelay(int(port), conn.sock.getsockname()[:2]) != 0
    conn.close()


def test_a_port_in_use_is_refused_before_ray_starts(tmp_path: Path, monkeypatch) -> None:
    """Refused at once, not reported 20 s later once Ray has been started and torn down."""
    from click.testing import CliRunner

    from themis.cli.runtime import serve
    from themis.runtime.workers import ray_cluster

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started before the port was checked")

    monkeypatch.setattr(ray_cluster, "start_local", no_ray)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = CliRunner().invoke(
            serve,
            ["--init", "--state-dir", str(tmp_path / "s"), "--listen", f"127.0.0.1:{port}"],
        )
    assert result.exit_code == 1 and "AssertionError" not in repr(result.exception)
    assert f"cannot listen on 127.0.0.1:{port}" in str(result.exception)


GOOD_APP = """name: ok-{k}
entrypoint: trainers:paced
trials: 2
gpus_per_trial: 1
steps: 20
step_time: 0.1
search_space:
  quality: [1.0]
"""

MALFORMED = [
    ("steps: 20", "steps: 1180591620717411303424"),
    ("steps: 20", "steps: 9223372036854775807"),
    ("steps: 20", "steps: -5"),
    ("gpus_per_trial: 1", "gpus_per_trial: 99999999999999999999"),
    ("trials: 2", "trials: 100000"),
    ("step_time: 0.1", "step_time: 5.0e-324"),
    ("step_time: 0.1", "step_time: .inf"),
    ("step_time: 0.1", "step_time: .nan"),
    ("quality: [1.0]", "quality: [.inf]"),
    ("quality: [1.0]", "quality: {uniform: [-1.0e+308, 1.0e+308]}"),
    ("quality: [1.0]", "quality: [99999999999999999999999]"),
    ("name: ok-{k}", 'name: "ok\\n"'),
    ("entrypoint: trainers:paced", 'entrypoint: "trainers:paced\\n"'),
    ("  quality: [1.0]", '  "quality\\n": [1.0]'),
    ("steps: 20", "steps: 20\nsteps: 30"),
    ("  quality: [1.0]", "  quality: [1.0]\n  quality: [2.0]"),
    ("steps: 20", "steps: 20\nseed: &a 1\nx: *a"),
    ("steps: 20", "steps: 20\nseed: " + "[" * 200 + "]" * 200),
    ("steps: 20", "steps: 20\ncolour: red"),
    ("name: ok-{k}", "name: [1, 2]"),
]


@pytest.mark.timeout(120)
def test_malformed_app_files_through_the_api_are_one_line_and_store_nothing(
    arbiter, tmp_path: Path
) -> None:
    from tests.runtime.conftest import HERE

    for k, (old, new) in enumerate(MALFORMED):
        assert old in GOOD_APP, old
        text = GOOD_APP.replace(old, new).replace("{k}", str(k))
        body = json.dumps({"text": text, "source": f"bad{k}.yaml", "base_dir": str(HERE)})
        status, reply = call(arbiter.url, "POST", "/v1/apps", arbiter.submitter, body.encode())
        detail = json.loads(reply)["detail"]
        assert status == 400 and f"bad{k}.yaml" in detail and "\n" not in detail, (k, reply)
    for body in (b"\xff\xfe not utf-8", b"[]", b"{}", b'{"text": 1}', b"x" * (10 * 2**20)):
        status, reply = call(arbiter.url, "POST", "/v1/apps", arbiter.submitter, body)
        assert status in (400, 413) and "\n" not in json.loads(reply)["detail"], reply[:200]
    status, reply = call(arbiter.url, "GET", "/v1/status", arbiter.admin)
    assert json.loads(reply)["apps"] == []  # nothing stored
    good = GOOD_APP.replace("{k}", "x")
    body = json.dumps({"text": good, "source": "good.yaml", "base_dir": str(HERE)}).encode()
    assert call(arbiter.url, "POST", "/v1/apps", arbiter.submitter, body)[0] == 201
