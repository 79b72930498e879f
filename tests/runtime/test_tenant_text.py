"""What one tenant's trials write (log lines, errors, tracebacks, reasons quoting them) is
read by that app's token and the admin only: every route and every CLI command, walked
with another app's token and with the shared submit token, shows none of it.

A real arbiter loop on loopback (jobs faked, no Ray): the victim app ``alpha`` logs a
marker and fails with it in its error, so the marker sits in its events, its trials'
reasons and its app's reason, as a real trial's would."""

from __future__ import annotations

import json
import time

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour
from tests.runtime.test_api import Arbiter, call, submitted, themis
from themis.runtime.api.dashboard import STATIC

MARKER = "zq7SECRET"
VICTIM = Behaviour(
    step_time=0.05,
    error_at=2,
    error=f"RuntimeError: {MARKER} in the traceback\nTraceback: line 3 {MARKER}",
    logs=(f"{MARKER} logged by alpha", f"loss=0.1 {MARKER}"),
)


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    """``alpha`` failed with the marker in its error and logs; ``beta`` runs on."""
    tmp = tmp_path_factory.mktemp("tenants")
    a = Arbiter(tmp / "state", {"alpha": VICTIM, "beta": Behaviour(step_time=0.2)})
    try:
        a.tokens_of = {}
        a.tmp = tmp
        for name, steps in (("alpha", 50), ("beta", 10**5)):
            out = themis(
                "submit", app_yaml(tmp, name, trials=2, steps=steps), server=a.url,
                token=a.submitter,
            )  # fmt: skip
            a.tokens_of[name] = submitted(out)
        deadline = time.monotonic() + 30
        while True:
            rows = json.loads(call(a.url, "GET", "/v1/status", a.admin)[1])["apps"]
            alpha = next(r for r in rows if r["app_id"] == "alpha")
            if alpha["state"] == "failed":
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.2)
        yield a
    finally:
        a.close()


def routes_of(a: Arbiter) -> set[tuple[str, str]]:
    """Every (method, path) the running API serves."""
    app = a.api.server.config.app.app  # inside the request limit (api.connections)
    return {(method, r.path) for r in app.routes for method in getattr(r, "methods", ())}


def requests_for(a: Arbiter, victim: str) -> dict[tuple[str, str], list[tuple[str, bytes | None]]]:
    """How to call each route, aimed at ``victim`` where a route names an app."""
    app_file = app_yaml(a.tmp, "gamma", trials=1, steps=10)
    submit = json.dumps(
        {"text": app_file.read_text(), "source": "g.yaml", "base_dir": str(a.tmp)}
    ).encode()
    return {
        ("GET", "/healthz"): [("/healthz", None)],
        ("GET", "/v1/status"): [("/v1/status", None)],
        ("GET", "/v1/cluster"): [("/v1/cluster", None)],
        ("GET", "/"): [("/", None)],
        ("GET", "/dashboard"): [("/dashboard", None)],
        ("GET", "/dashboard/{name}"): [(f"/dashboard/{name}", None) for name in STATIC],
        ("POST", "/v1/apps"): [("/v1/apps", submit), ("/v1/apps", b"{}")],
        ("POST", "/v1/apps/{app_id}/cancel"): [(f"/v1/apps/{victim}/cancel?wait=0", b"{}")],
        ("POST", "/v1/apps/{app_id}/release"): [
            (f"/v1/apps/{victim}/release", b'{"trial": "t000"}')
        ],
        ("GET", "/v1/apps/{app_id}/logs"): [
            (f"/v1/apps/{victim}/logs", None),
            (f"/v1/apps/{victim}/logs?after=0", None),
        ],
        ("POST", "/v1/tokens/rotate"): [("/v1/tokens/rotate", b'{"which": "submit"}')],
        ("GET", "/metrics"): [("/metrics", None)],
        ("GET", "/openapi.json"): [("/openapi.json", None)],
    }


def test_the_victims_text_is_there_for_its_own_token_and_the_admin(tenants) -> None:
    """The control: the marker is in the state, so its absence below means something."""
    for token in (tenants.admin, tenants.tokens_of["alpha"]):
        status = call(tenants.url, "GET", "/v1/status", token)[1].decode()
        cluster = call(tenants.url, "GET", "/v1/cluster", token)[1].decode()
        logs = call(tenants.url, "GET", "/v1/apps/alpha/logs", token)[1].decode()
        assert MARKER in status and MARKER in cluster and MARKER in logs
    out = themis("status", server=tenants.url, token=tenants.admin)
    assert MARKER in out.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("who", ["submit", "beta"])
def test_every_route_hides_another_apps_text(tenants, who: str) -> None:
    token = tenants.submitter if who == "submit" else tenants.tokens_of["beta"]
    table = requests_for(tenants, "alpha")
    assert set(table) == routes_of(tenants), "a route this test does not walk"
    for (method, _), calls in table.items():
        for path, body in calls:
            status, answer = call(tenants.url, method, path, token, body)
            assert MARKER.encode() not in answer, (who, method, path, status, answer[:300])
            assert b"traceback" not in answer.lower(), (who, method, path, answer[:300])
    # What the submit token still sees of alpha: its name, state and counts.
    view = json.loads(call(tenants.url, "GET", "/v1/status", token)[1])
    alpha = [r for r in view["apps"] if r["app_id"] == "alpha"]
    if who == "submit":
        assert alpha[0]["state"] == "failed" and alpha[0]["failed"] == 2
        assert alpha[0]["why"].startswith("0 of 2 trials ran their whole budget; 2 failed")
        cluster = json.loads(call(tenants.url, "GET", "/v1/cluster", token)[1])
        assert "alpha" in {a["app_id"] for a in cluster["apps"]} and cluster["events"] == []
    else:
        assert alpha == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("who", ["submit", "beta"])
def test_every_command_hides_another_apps_text(tenants, who: str) -> None:
    token = tenants.submitter if who == "submit" else tenants.tokens_of["beta"]
    url = tenants.url
    runs = [
        themis("status", server=url, token=token),
        themis("status", "--json", server=url, token=token),
        themis("logs", "alpha", server=url, token=token),
        themis("cancel", "alpha", "--wait", "0", server=url, token=token),
        themis("token", "rotate", "submit", server=url, token=token),
    ]
    for out in runs:
        assert MARKER not in out.stdout + out.stderr, out
        assert "Traceback" not in out.stderr, out
    assert runs[0].returncode == 0 and "alpha" in runs[0].stdout or who == "beta"
