"""A submit whose answer is lost can be retried: the ``Idempotency-Key`` the client sends
gets the retry the app the first attempt created, with a token that works, instead of
"an app named ... was already submitted" and a token gone for good. Against the API and a
real arbiter loop on loopback (jobs faked, no Ray), as ``test_api.py``."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.test_api import Arbiter, call, one_line_error, themis
from themis.runtime.api.client import Client
from themis.runtime.state.store import Store


@pytest.fixture
def arbiter(tmp_path: Path):
    a = Arbiter(tmp_path / "state", {})
    try:
        yield a
    finally:
        a.close()


def post_submit(url: str, token: str, path: Path, key: str | None, source: str | None = None):
    body = {"text": path.read_text(), "source": source or str(path), "base_dir": str(path.parent)}
    headers = {} if key is None else {"Idempotency-Key": key}
    return call_with(url, token, json.dumps(body).encode(), headers)


def call_with(url: str, token: str, body: bytes, headers: dict[str, str]):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url + "/v1/apps",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def works(url: str, token: str, app_id: str) -> bool:
    status, _ = call(url, "GET", f"/v1/apps/{app_id}/logs", token)
    return status == 200


def apps(state: Path) -> list[str]:
    store = Store(state, readonly=True)
    try:
        return [row.app_id for row in store.apps()]
    finally:
        store.close()


def test_a_repeated_submit_gets_the_same_app_and_a_working_token(arbiter, tmp_path) -> None:
    path = app_yaml(tmp_path, "sweep", trials=2)
    key = str(uuid.uuid4())
    status, first = post_submit(arbiter.url, arbiter.submitter, path, key)
    assert status == 201 and first["replayed"] is False
    # The answer is lost; the client sends the same request with the same key again.
    status, again = post_submit(arbiter.url, arbiter.submitter, path, key)
    assert status == 201, again
    assert again["app_id"] == "sweep" and again["trials"] == 2 and again["replayed"] is True
    assert works(arbiter.url, again["token"], "sweep")
    # The store keeps token hashes only: the retry's token replaced the lost one.
    assert not works(arbiter.url, first["token"], "sweep")
    assert apps(arbiter.state) == ["sweep"]


def test_without_a_key_a_repeat_is_refused_as_a_taken_name(arbiter, tmp_path) -> None:
    path = app_yaml(tmp_path, "sweep", trials=2)
    assert post_submit(arbiter.url, arbiter.submitter, path, None)[0] == 201
    status, answer = post_submit(arbiter.url, arbiter.submitter, path, None)
    assert status == 409 and "already submitted" in answer["detail"]


def test_the_same_key_with_another_request_is_a_conflict(arbiter, tmp_path) -> None:
    key = str(uuid.uuid4())
    path = app_yaml(tmp_path, "sweep", trials=2)
    assert post_submit(arbiter.url, arbiter.submitter, path, key)[0] == 201
    (tmp_path / "other").mkdir()
    other = app_yaml(tmp_path / "other", "sweep", trials=3)  # same name, another body
    status, answer = post_submit(arbiter.url, arbiter.submitter, other, key)
    assert status == 409, answer
    assert "Idempotency-Key" in answer["detail"] and "token" not in answer
    status, answer = post_submit(arbiter.url, arbiter.submitter, path, key, source="x.yaml")
    assert status == 409  # the source is part of the request too
    assert apps(arbiter.state) == ["sweep"]


def test_another_principals_same_key_does_not_get_the_app(arbiter, tmp_path) -> None:
    key = str(uuid.uuid4())
    path = app_yaml(tmp_path, "sweep", trials=2)
    status, first = post_submit(arbiter.url, arbiter.submitter, path, key)
    assert status == 201
    # The admin token is another principal: its key is its own, a fresh submit.
    status, answer = post_submit(arbiter.url, arbiter.admin, path, key)
    assert status == 409 and "already submitted" in answer["detail"] and "token" not in answer
    assert works(arbiter.url, first["token"], "sweep")  # the submitter's token stands


@pytest.mark.parametrize("key", ["short", "x" * 129, "a" * 31 + "/", "é" * 40])
def test_a_malformed_key_is_one_line_naming_the_header(arbiter, tmp_path, key) -> None:
    path = app_yaml(tmp_path, "sweep", trials=2)
    body = json.dumps({"text": path.read_text(), "source": "s", "base_dir": str(tmp_path)})
    try:
        status, answer = call_with(
            arbiter.url, arbiter.submitter, body.encode(), {"Idempotency-Key": key}
        )
    except UnicodeEncodeError:  # urllib refuses non-latin-1 headers before sending
        return
    assert status == 400 and answer["detail"].startswith("Idempotency-Key must be")
    assert apps(arbiter.state) == []


class DroppingProxy:
    """A TCP proxy to the API that forwards every request whole and waits for the
    arbiter's answer, but drops the first answer (closes the client's connection
    unanswered): the arbiter took the submit, the client never heard."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.dropped = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with client:
                self.connections += 1
                request = _read_request(client)
                with socket.create_connection(self.upstream, timeout=30) as up:
                    up.sendall(request)
                    answer = _read_all(up)
                if self.connections == 1:
                    self.dropped += 1
                    continue  # closed unanswered
                client.sendall(answer)

    def close(self) -> None:
        self.listener.close()


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        rest += conn.recv(65536)
    return head + b"\r\n\r\n" + rest


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_the_cli_retries_a_submit_whose_answer_was_lost(arbiter, tmp_path) -> None:
    """The report's case: the arbiter stored the app and the answer never arrived.
    ``themis submit`` retries with the same key and prints the app and a working token;
    before, it failed, and running it again said the name was taken."""
    proxy = DroppingProxy(arbiter.url)
    try:
        path = app_yaml(tmp_path, "sweep", trials=2)
        out = themis("submit", path, server=proxy.url, token=arbiter.submitter)
        assert out.returncode == 0, out.stderr
        assert proxy.dropped == 1 and proxy.connections == 2
        lines = out.stdout.splitlines()
        assert lines[0] == "submitted app 'sweep' (2 trials)"
        token = lines[1].removeprefix("token: ")
        assert works(arbiter.url, token, "sweep")
        assert "answer was lost" in out.stderr and "Traceback" not in out.stderr
        assert apps(arbiter.state) == ["sweep"]
    finally:
        proxy.close()


def test_the_client_gives_up_after_its_attempts_with_one_line(tmp_path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    path = app_yaml(tmp_path, "sweep", trials=2)
    out = themis("submit", path, server=f"http://127.0.0.1:{port}", token="t" * 43)
    one_line_error(out, "no arbiter answers at")
    with pytest.raises(Exception, match="no arbiter answers"):
        Client(f"http://127.0.0.1:{port}", "t" * 43).submit(path, attempts=1)
