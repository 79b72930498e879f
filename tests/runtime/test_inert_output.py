"""Text from the arbiter reaches a terminal inert: every client command, fed hostile text
(screen clears, window titles, OSC 52 clipboard writes, OSC 8 links, bidi overrides) by a
real arbiter whose trial logs and raises it, and by a stub arbiter that puts it in every
field of every answer, prints no raw ESC, BEL, C1 or bidi control. The dashboard's script
escapes the same set (run in node when it is installed)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour
from tests.runtime.test_api import Arbiter, call, submitted, themis
from themis.cli.inert import BIDI_CONTROLS, inert
from themis.cli.json_output import say
from themis.cli.main import one_line

CLEAR_AND_TITLE = "\x1b[2J\x1b]0;title\x07"
OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
BIDI = "invoice_\u202egpj.exe"
HOSTILE = f"{CLEAR_AND_TITLE} {OSC52} {OSC8} {BIDI} \x9b31m [link=https://evil]x[/link]"
#: What must never reach a terminal raw.
FORBIDDEN = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f" + "".join(map(chr, BIDI_CONTROLS)) + "\u2028\u2029]"
)


def assert_inert(out: subprocess.CompletedProcess) -> None:
    for name, stream in (("stdout", out.stdout), ("stderr", out.stderr)):
        found = FORBIDDEN.findall(stream)
        assert not found, (name, found, stream[:500])
        assert "\x1b" not in stream and "\u202e" not in stream


def test_inert_escapes_controls_and_bidi_visibly_and_leaves_the_rest() -> None:
    assert inert(CLEAR_AND_TITLE) == "\\x1b[2J\\x1b]0;title\\x07"
    assert inert(BIDI) == "invoice_\\u202egpj.exe"
    assert inert("\x9b\x7f\x00\t\n\u2066\u200f\u061c") == (
        "\\x9b\\x7f\\x00\\x09\\x0a\\u2066\\u200f\\u061c"
    )
    plain = "résumé 漢字 emoji 🎉 [bold] <script> 100%"
    assert inert(plain) == plain
    assert not FORBIDDEN.search(inert(HOSTILE))
    assert not FORBIDDEN.search(one_line(f"error:\n{HOSTILE}"))


def test_say_keeps_lines_and_escapes_the_rest(capsys) -> None:
    say(f"first {BIDI}\nsecond {OSC52}", False)
    out = capsys.readouterr().out
    assert out.count("\n") == 2 and not FORBIDDEN.search(out.replace("\n", ""))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is absent")
def test_the_dashboards_inert_matches_the_clis() -> None:
    script = resources.files("themis.runtime.api").joinpath("static", "dashboard.js").read_text()
    start = script.index("  var CONTROLS")
    end = script.index("  function el(")
    samples = [HOSTILE, "plain text", "\u2028\u2029\u200e\u061c\x00\x7f\x85", BIDI]
    program = script[start:end] + f"console.log(JSON.stringify({json.dumps(samples)}.map(inert)));"
    out = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [inert(s) for s in samples]
    # Every text the page shows goes through el() or inert(): no other textContent of
    # server data.
    for line in script.splitlines():
        if ".textContent =" in line and "inert(" not in line:
            safe = ('= "";', "clock(", "String(v)", "data.queued_total", "total ?")
            assert any(fragment in line for fragment in safe), line


# -- a real arbiter whose trial logs and raises hostile text ---------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    victim = Behaviour(step_time=0.05, error_at=2, error=f"RuntimeError: {HOSTILE}",
                       logs=(HOSTILE, f"loss {BIDI}"))  # fmt: skip
    a = Arbiter(tmp / "state", {"alpha": victim})
    try:
        a.alpha = submitted(
            themis("submit", app_yaml(tmp, "alpha", steps=50), server=a.url, token=a.submitter)
        )
        deadline = time.monotonic() + 30
        while json.loads(call(a.url, "GET", "/v1/status", a.admin)[1])["apps"][0]["state"] != (
            "failed"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        yield a
    finally:
        a.close()


@pytest.mark.timeout(120)
def test_status_logs_cancel_and_errors_print_a_hostile_trials_text_inert(hostile) -> None:
    url = hostile.url
    runs = {
        "status": themis("status", server=url, token=hostile.admin),
        "status-app": themis("status", server=url, token=hostile.alpha),
        "logs": themis("logs", "alpha", server=url, token=hostile.alpha),
        "logs-admin": themis("logs", "alpha", server=url, token=hostile.admin),
        "cancel": themis("cancel", "alpha", server=url, token=hostile.alpha),
        # An error quoting what the user typed, as the arbiter answers it.
        "error": themis("cancel", f"x{CLEAR_AND_TITLE}{BIDI}", server=url, token=hostile.admin),
        "error-logs": themis("logs", f"{OSC52}", server=url, token=hostile.admin),
    }
    for name, out in runs.items():
        assert_inert(out)
        assert "Traceback" not in out.stderr, (name, out.stderr)
    # The text is shown, escaped: the reader sees that it was there.
    assert "\\x1b]52;c;" in runs["logs"].stdout and "invoice_\\u202egpj.exe" in runs["logs"].stdout
    assert "\\x1b[2J" in runs["status"].stdout
    assert "[link=https://evil]" in runs["status"].stdout  # shown, not parsed as markup
    assert "\\x1b[2J" in runs["error"].stderr


# -- a stub arbiter that answers hostile text in every field ----------------------------


class _Hostile(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        path = self.path
        if "fail" in path:
            status, body = 400, {"detail": HOSTILE}
        elif path.startswith("/v1/status"):
            arbiter = {
                "heartbeat": time.time(), "started": time.time(), "rounds": 1, "gpus": 4,
                "machines": 2, "ray_error": HOSTILE, "ray_down_since": time.time(),
                "tick": 0.1, "age": 0.1, "state": "ray-unreachable",
            }  # fmt: skip
            row = {
                "app_id": HOSTILE, "state": HOSTILE, "rho": 1.0, "gpus": 1, "leases": 1,
                "alive": 1, "stopped_early": 0, "finished": 0, "failed": 0, "steps_done": 1,
                "steps_total": 2, "why": HOSTILE,
            }  # fmt: skip
            status, body = 200, {"arbiter": arbiter, "apps": [row]}
        elif "/logs" in path:
            status, body = 200, {"lines": [HOSTILE, BIDI], "last": 0, "state": "finished"}
        elif path.startswith("/v1/apps/") and "cancel" in path:
            status, body = 200, {"reply": HOSTILE}
        elif path == "/v1/apps":
            status, body = 201, {"app_id": HOSTILE, "token": HOSTILE, "trials": HOSTILE}
        elif path == "/v1/tokens/rotate":
            status, body = 200, {"which": "submit", "token": HOSTILE}
        else:
            status, body = 404, {"detail": HOSTILE}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._answer()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(120)
def test_every_client_command_prints_a_hostile_arbiters_answers_inert(stub, tmp_path: Path):
    app = app_yaml(tmp_path, "mine")
    runs = {
        "status": themis("status", server=stub, token="t"),
        "status-json": themis("status", "--json", server=stub, token="t"),
        "logs": themis("logs", "alpha", server=stub, token="t"),
        "logs-follow": themis("logs", "-f", "alpha", server=stub, token="t"),
        "cancel": themis("cancel", "alpha", server=stub, token="t"),
        "submit": themis("submit", app, server=stub, token="t"),
        "rotate": themis("token", "rotate", "submit", server=stub, token="t"),
        "error": themis("cancel", "fail", server=stub, token="t"),
        "error-status": themis("logs", "fail", server=stub, token="t"),
    }
    for name, out in runs.items():
        assert_inert(out)
        assert "Traceback" not in out.stderr, (name, out.stderr)
    assert "invoice_\\u202egpj.exe" in runs["status"].stdout
    assert runs["status"].returncode == 3  # Ray unreachable: not alive
    assert json.loads(runs["status-json"].stdout)["apps"][0]["why"] == HOSTILE  # JSON escapes
    assert runs["error"].returncode == 2 and "\\x1b]52;c;" in runs["error"].stderr
