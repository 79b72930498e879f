"""The HTTP API and the CLI clients against a real arbiter loop on loopback (jobs faked,
no Ray): who may do what with which token, limits on what is sent, liveness in status,
requests that time out and never happen, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour, FakeLauncher, nodes
from themis.runtime.api.auth import OperatorTokens, read_token_file
from themis.runtime.api.routes import ApiContext, make_api
from themis.runtime.api.server import ApiServer
from themis.runtime.loop.commands import CommandQueue
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.options import RUNTIME_KNOBS
from themis.runtime.loop.service import ArbiterService, ServiceOptions
from themis.runtime.state.health import StateLost
from themis.runtime.state.store import Store

OPTIONS = ServiceOptions(
    knobs=replace(RUNTIME_KNOBS, lease=2.0),
    batch_window=0.2,
    grace=1.0,
    tick=0.05,
    inventory_every=0.5,
    status_every=0.1,
)


class Arbiter:
    """An arbiter loop on a thread (it owns its store, as in serve) and its API."""

    def __init__(self, state: Path, behaviours: dict[str, Behaviour], limiter=None) -> None:
        self.state = state
        Store(state, init=True).close()
        self.tokens = OperatorTokens.load_or_create(state)
        self.admin = read_token_file(state / "admin.token")
        self.submitter = read_token_file(state / "submit.token")
        self.commands = CommandQueue()
        self.metrics = ArbiterMetrics()
        self.paused = threading.Event()
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.service: ArbiterService | None = None
        self.thread = threading.Thread(target=self._loop, args=(behaviours,), daemon=True)
        self.thread.start()
        assert self.ready.wait(10)
        context = ApiContext(
            state, self.tokens, self.commands, self.snapshot, self.metrics, self.view, limiter
        )
        self.api = ApiServer.start(
            make_api(context), "127.0.0.1", 0, None, None, metrics=context.api_metrics
        )
        self.url = self.api.url

    def snapshot(self):
        assert self.service is not None
        return self.service.snapshot()

    def view(self):
        assert self.service is not None
        return self.service.cluster_view()

    def _loop(self, behaviours) -> None:
        store = Store(self.state)
        launcher = FakeLauncher(OPTIONS.grace, behaviours)
        self.service = ArbiterService(
            store,
            self.state / "ck",
            OPTIONS,
            nodes,
            launcher=launcher,
            metrics=self.metrics,
            commands=self.commands,
        )
        self.ready.set()
        while not self.stopping.is_set():
            if not self.paused.is_set():
                try:
                    self.service.tick()
                except StateLost:  # as ArbiterService.run: write nothing more, stop
                    self.service.store.give_up()
                    return
            time.sleep(OPTIONS.tick)
        store.close()

    def close(self) -> None:
        self.api.stop()
        self.stopping.set()
        self.thread.join(10)


@pytest.fixture
def arbiter(tmp_path: Path):
    a = Arbiter(
        tmp_path / "state", {"slow": Behaviour(step_time=0.2), "quick": Behaviour(step_time=0.01)}
    )
    try:
        yield a
    finally:
        a.close()


def themis(*args: str, server: str | None = None, token: str | None = None, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("THEMIS_")}
    if server is not None:
        env["THEMIS_SERVER"] = server
    if token is not None:
        env["THEMIS_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "themis", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )


def one_line_error(out: subprocess.CompletedProcess, *fragments: str) -> str:
    assert out.returncode == 2, out
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def call(url: str, method: str, path: str, token: str | None, body: bytes | None = None):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def submitted(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[1].removeprefix("token: ")


@pytest.mark.timeout(120)
def test_submit_from_another_directory_status_logs_and_cancel(arbiter, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = app_yaml(tmp_path, "slow", trials=3, steps=1000)
    out = themis(
        "submit",
        path,
        "--token-file",
        tmp_path / "tok",
        server=arbiter.url,
        token=arbiter.submitter,
        cwd=elsewhere,
    )
    token = submitted(out)
    assert out.stdout.splitlines()[0] == "submitted app 'slow' (3 trials)"
    assert (tmp_path / "tok").read_text().strip() == token
    assert (tmp_path / "tok").stat().st_mode & 0o077 == 0
    assert list(elsewhere.iterdir()) == []  # no state created where the client runs
    one_line_error(
        themis("submit", path, server=arbiter.url, token=arbiter.submitter),
        "field 'name'",
        "already submitted",
    )
    deadline = time.monotonic() + 20
    while True:
        status = themis("status", server=arbiter.url, token=token, cwd=elsewhere)
        assert status.returncode == 0, status.stderr
        lines = status.stdout.splitlines()
        if lines[2].split()[1] == "running" and lines[2].split()[3] == "3":
            break
        assert time.monotonic() < deadline, status.stdout
        time.sleep(0.3)
    assert lines[0].startswith(f"arbiter alive at {arbiter.url}: last tick")
    assert lines[1].split() == [
        "app",
        "state",
        "rho",
        "GPUs",
        "leases",
        "alive",
        "early",
        "done",
        "failed",
        "steps",
        "why",
    ]
    logs = themis("logs", "slow", server=arbiter.url, token=token)
    assert "admitted: 3 trials" in logs.stdout and "granted GPUs" in logs.stdout
    assert themis("cancel", "slow", server=arbiter.url, token=token).stdout.strip() == (
        "cancelled app 'slow'"
    )
    row = themis("status", server=arbiter.url, token=token).stdout.splitlines()[2].split()
    assert row[:2] == ["slow", "cancelled"]


@pytest.mark.timeout(120)
def test_tokens_act_only_where_they_may(arbiter, tmp_path: Path) -> None:
    mine = submitted(
        themis(
            "submit",
            app_yaml(tmp_path, "slow", steps=1000),
            server=arbiter.url,
            token=arbiter.submitter,
        )
    )
    theirs = submitted(
        themis(
            "submit",
            app_yaml(tmp_path, "other", steps=1000),
            server=arbiter.url,
            token=arbiter.admin,
        )
    )
    url = arbiter.url
    one_line_error(
        themis("cancel", "other", server=url, token=mine),
        "refused: this token may not act on app 'other'",
    )
    one_line_error(themis("logs", "other", server=url, token=mine), "may not act on app 'other'")
    one_line_error(
        themis("cancel", "other", server=url, token=arbiter.submitter), "may not act on app 'other'"
    )
    one_line_error(themis("cancel", "other", server=url, token="forged"), "refused: unknown token")
    one_line_error(themis("cancel", "other", server=url), "a token is needed")
    status, body = call(url, "POST", "/v1/apps/other/release", mine, b'{"trial": "t000"}')
    assert status == 403
    assert call(url, "GET", "/metrics", mine)[0] == 403
    assert call(url, "GET", "/metrics", arbiter.submitter)[0] == 403
    assert call(url, "GET", "/metrics", None)[0] == 401
    assert call(url, "GET", "/healthz", None) == (200, b'{"ok":true}')
    # An app token sees its own row only; the submit token sees every app.
    own = json.loads(call(url, "GET", "/v1/status", mine)[1])["apps"]
    assert [r["app_id"] for r in own] == ["slow"]
    every = json.loads(call(url, "GET", "/v1/status", arbiter.submitter)[1])["apps"]
    assert [r["app_id"] for r in every] == ["slow", "other"]
    # The right token, and the admin's, do act.
    assert themis("cancel", "other", server=url, token=theirs).returncode == 0
    assert themis("cancel", "slow", server=url, token=arbiter.admin).returncode == 0


@pytest.mark.timeout(60)
def test_hostile_submissions_are_refused_fast(arbiter, tmp_path: Path) -> None:
    from tests.runtime.test_appfile import ALIAS_BOMB

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    started = time.monotonic()
    one_line_error(
        themis("submit", bomb, server=arbiter.url, token=arbiter.submitter),
        "anchors and aliases are not allowed",
    )
    huge = tmp_path / "huge.yaml"
    huge.write_text("name: x\n#" + "x" * (7 * 2**20) + "\n")
    one_line_error(
        themis("submit", huge, server=arbiter.url, token=arbiter.submitter),
        "7.0 MiB",
        "at most 64 KiB",
    )
    assert time.monotonic() - started < 10  # two CLI processes, each refusing in ms
    # Sent straight to the API: the body is refused before it is read or parsed (a body
    # that still fits the socket buffers, so that the client reads the answer).
    started = time.monotonic()
    body = json.dumps({"text": "x" * (300 * 2**10), "source": "h", "base_dir": "/"}).encode()
    status, reply = call(arbiter.url, "POST", "/v1/apps", arbiter.submitter, body)
    assert status == 413 and time.monotonic() - started < 1.0, reply
    body = json.dumps({"text": ALIAS_BOMB, "source": "b", "base_dir": str(tmp_path)}).encode()
    started = time.monotonic()
    status, reply = call(arbiter.url, "POST", "/v1/apps", arbiter.submitter, body)
    assert status == 400 and b"aliases" in reply and time.monotonic() - started < 1.0
    assert json.loads(call(arbiter.url, "GET", "/v1/status", arbiter.admin)[1])["apps"] == []


@pytest.mark.timeout(60)
def test_a_cancel_that_times_out_is_withdrawn_and_never_happens(arbiter, tmp_path: Path) -> None:
    token = submitted(
        themis(
            "submit",
            app_yaml(tmp_path, "slow", steps=1000),
            server=arbiter.url,
            token=arbiter.submitter,
        )
    )
    arbiter.paused.set()  # the loop stops ticking
    one_line_error(
        themis("cancel", "slow", "--wait", "0.5", server=arbiter.url, token=token),
        "withdrawn and will not happen",
    )
    status, reply = call(arbiter.url, "POST", "/v1/apps/slow/cancel?wait=0.2", token, b"{}")
    assert status == 503 and b"withdrawn" in reply
    arbiter.paused.clear()
    time.sleep(1.0)
    (row,) = json.loads(call(arbiter.url, "GET", "/v1/status", token)[1])["apps"]
    assert row["state"] in ("submitted", "running")


@pytest.mark.timeout(60)
def test_status_says_when_the_loop_stalls_and_when_nobody_answers(arbiter, tmp_path: Path) -> None:
    arbiter.paused.set()
    time.sleep(5.5)
    out = themis("status", server=arbiter.url, token=arbiter.admin)
    assert out.returncode == 3
    assert out.stdout.startswith(
        f"arbiter STALLED (its scheduling loop stopped ticking) at {arbiter.url}"
    )
    arbiter.paused.clear()
    arbiter.close()
    one_line_error(
        themis("status", server=arbiter.url, token=arbiter.admin),
        f"no arbiter answers at {arbiter.url}",
        "is 'themis serve' running",
    )


@pytest.mark.timeout(60)
def test_metrics_show_gpus_rho_leases_queue_and_round_latency(arbiter, tmp_path: Path) -> None:
    submitted(
        themis(
            "submit",
            app_yaml(tmp_path, "slow", trials=4, steps=1000),
            server=arbiter.url,
            token=arbiter.submitter,
        )
    )
    deadline = time.monotonic() + 20
    while True:
        status, text = call(arbiter.url, "GET", "/metrics", arbiter.admin)
        text = text.decode()
        if 'themis_app_gpus{app="slow"} 4.0' in text:
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.3)
    assert status == 200
    assert 'themis_app_rho{app="slow"}' in text
    assert "themis_leases_granted_total 4.0" in text
    assert "themis_queue_apps 0.0" in text
    assert "themis_round_seconds_count" in text and "themis_leases_preempted_total" in text
    assert "themis_arbiter_heartbeat_seconds" in text


def test_cli_errors_without_an_arbiter_are_one_line(tmp_path: Path) -> None:
    one_line_error(
        themis("status", server="http://127.0.0.1:9", token="x"),
        "no arbiter answers at http://127.0.0.1:9",
    )
    one_line_error(themis("status", server="ftp://x", token="x"), "not an http(s) URL")
    one_line_error(
        themis("submit", tmp_path / "missing.yaml", server="http://127.0.0.1:9", token="x"),
        "cannot read app file",
    )


@pytest.mark.timeout(60)
def test_a_malformed_app_file_is_one_line_naming_the_field(arbiter, tmp_path: Path) -> None:
    bad = app_yaml(tmp_path, "bad", gpus_per_trial=0)
    line = one_line_error(
        themis("submit", bad, server=arbiter.url, token=arbiter.submitter),
        "field 'gpus_per_trial'",
        ">= 1",
    )
    assert line.startswith(f"themis: error: {bad}")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nsearch_space: {lr: [1, 2}\n")
    one_line_error(
        themis("submit", broken, server=arbiter.url, token=arbiter.submitter), "invalid YAML", ":2"
    )
    one_line_error(
        themis(
            "submit",
            app_yaml(tmp_path, "big", gpus_per_trial=5),
            server=arbiter.url,
            token=arbiter.submitter,
        ),
        "a trial needs 5 GPUs and the cluster has 4",
    )
    assert json.loads(call(arbiter.url, "GET", "/v1/status", arbiter.admin)[1])["apps"] == []


@pytest.mark.timeout(60)
def test_https_with_uvicorns_tls_and_a_private_ca(tmp_path: Path) -> None:
    """--tls-cert/--tls-key: the API over HTTPS; the client trusts THEMIS_CA_FILE and
    refuses the server without it."""
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    state = tmp_path / "state"
    Store(state, init=True).close()
    tokens = OperatorTokens.load_or_create(state)
    snapshot = {"heartbeat": time.time(), "started": time.time(), "rounds": 0, "gpus": 4,
                "machines": 2, "ray_error": None, "tick": 0.2}  # fmt: skip
    context = ApiContext(state, tokens, CommandQueue(), lambda: snapshot, ArbiterMetrics())
    api = ApiServer.start(make_api(context), "127.0.0.1", 0, str(cert), str(key))
    try:
        assert api.url.startswith("https://127.0.0.1:")
        admin = read_token_file(state / "admin.token")
        env = {k: v for k, v in os.environ.items() if not k.startswith("THEMIS_")}
        run = [sys.executable, "-m", "themis", "status"]
        trusted = {**env, "THEMIS_SERVER": api.url, "THEMIS_TOKEN": admin,
                   "THEMIS_CA_FILE": str(cert)}  # fmt: skip
        out = subprocess.run(run, env=trusted, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"arbiter alive at {api.url}")
        untrusted = {**env, "THEMIS_SERVER": api.url, "THEMIS_TOKEN": admin}
        out = subprocess.run(run, env=untrusted, capture_output=True, text=True, timeout=60)
        one_line_error(out, "CERTIFICATE_VERIFY_FAILED")
    finally:
        api.stop()
