"""Token rotation without a restart: ``themis token rotate admin|submit`` (admin token)
makes a new operator token through the API; the old one is refused from then on, the new
one works, and the state directory's token file holds the new one (0600)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from tests.runtime.test_api import call, one_line_error, themis
from themis.runtime.api.auth import OperatorTokens, read_token_file
from themis.runtime.api.routes import ApiContext, make_api
from themis.runtime.api.server import ApiServer
from themis.runtime.loop.commands import CommandQueue
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.state.store import Store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def api(tmp_path: Path):
    state = tmp_path / "state"
    Store(state, init=True).close()
    tokens = OperatorTokens.load_or_create(state)
    snapshot = {"heartbeat": time.time(), "started": time.time(), "rounds": 0, "gpus": 4,
                "machines": 2, "ray_error": None, "tick": 0.2}  # fmt: skip
    context = ApiContext(state, tokens, CommandQueue(), lambda: snapshot, ArbiterMetrics())
    server = ApiServer.start(make_api(context), "127.0.0.1", 0, None, None)
    try:
        yield server.url, state
    finally:
        server.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("which", ["admin", "submit"])
def test_rotate_refuses_the_old_token_and_accepts_the_new(api, tmp_path: Path, which) -> None:
    url, state = api
    old_admin = read_token_file(state / "admin.token")
    old = read_token_file(state / f"{which}.token")
    assert call(url, "GET", "/v1/status", old)[0] == 200
    out = themis("token", "rotate", which, server=url, token=old_admin)
    assert out.returncode == 0, out.stderr
    new = out.stdout.strip().splitlines()[-1].removeprefix("token: ")
    assert new != old and len(new) >= 40
    assert call(url, "GET", "/v1/status", old)[0] == 401
    assert call(url, "GET", "/v1/status", new)[0] == 200
    path = state / f"{which}.token"
    assert read_token_file(path) == new
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # The other operator token is untouched.
    other = "submit" if which == "admin" else "admin"
    other_token = read_token_file(state / f"{other}.token")
    assert call(url, "GET", "/v1/status", other_token)[0] == 200
    # A restarted arbiter reads the new token from the file.
    assert OperatorTokens.load_or_create(state).identify(new) is not None
    admin = new if which == "admin" else old_admin
    one_line_error(
        themis("token", "rotate", which, server=url, token=old if which == "admin" else "x"),
        "refused",
    )
    written = tmp_path / "new.token"
    out = themis("token", "rotate", which, "--token-file", written, server=url, token=admin)
    assert out.returncode == 0, out.stderr
    assert read_token_file(written) == read_token_file(path) != new
    assert stat.S_IMODE(os.stat(written).st_mode) == 0o600


@pytest.mark.timeout(120)
def test_only_the_admin_token_rotates(api) -> None:
    url, state = api
    submitter = read_token_file(state / "submit.token")
    one_line_error(
        themis("token", "rotate", "admin", server=url, token=submitter),
        "refused",
        "admin token",
    )
    assert read_token_file(state / "submit.token") == submitter
    admin = read_token_file(state / "admin.token")
    status, _ = call(url, "POST", "/v1/tokens/rotate", admin, b'{"which": "root"}')
    assert status == 400
