"""The dashboard in a real browser (headless Chromium, ``tests/runtime/browser.py``).

- Against ``themis serve`` on a real local Ray cluster (two nodes, logical GPUs) with two
  apps running: the admin token's page shows both apps on the machines' GPUs, in the
  apps table and on the rho chart; no token and a wrong one are refused and the page says
  so; an app token's page shows its app and nothing of the other.
- Against an arbiter loop with faked jobs: app names and event messages written to hurt
  (``<script>``, ``"><img onerror=...>``) show as text and run nothing.

Skipped, saying why, where Chromium is absent; ``.ci/run`` installs it, so CI runs them.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import time
from pathlib import Path

import pytest

from tests.runtime.browser import ABSENT, CHROMIUM, Dom, Tab, dump_dom
from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour
from tests.runtime.raytest import local_cluster
from tests.runtime.test_api import Arbiter, call, submitted, themis
from tests.runtime.test_end_to_end import start_serve
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store
from themis.runtime.state.tokens import new_token, token_hash

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason=ABSENT),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def page(url: str, tmp: Path, token: str | None) -> Dom:
    """The dashboard as the browser built it; the token, if any, in the URL's fragment
    (read by the page, never sent to the server)."""
    fragment = "" if token is None else f"#token={token}"
    profile = tmp / f"profile-{time.monotonic_ns()}"
    return Dom.of(dump_dom(f"{url}/dashboard{fragment}", profile))


def gpu_holders(dom: Dom) -> list[str]:
    return [e.attrs["data-app"] for e in dom.find("li", class_="gpu") if "data-app" in e.attrs]


# -- a real arbiter on a real Ray cluster -----------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster()


@pytest.mark.timeout(300)
def test_the_dashboard_of_a_running_arbiter_in_chromium(cluster, tmp_path: Path) -> None:
    state = tmp_path / "state"
    users = tmp_path / "users"
    users.mkdir()
    serve, url = start_serve(cluster, state, tmp_path, init=True)
    try:
        admin = (state / "admin.token").read_text().strip()
        submitter = (state / "submit.token").read_text().strip()
        tokens = {}
        for name in ("alpha", "beta"):  # 2 trials each on 4 GPUs: both apps hold GPUs
            path = app_yaml(users, name, trials=2, steps=3000, step_time=0.1)
            tokens[name] = submitted(themis("submit", path, server=url, token=submitter))
        deadline = time.monotonic() + 120
        while True:
            status, body = call(url, "GET", "/v1/cluster", admin)
            assert status == 200, body
            view = json.loads(body)
            holders = {g["app_id"] for m in view["machines"] for g in m["gpus"]}
            if {"alpha", "beta"} <= holders and all(view["rho"].get(n) for n in tokens):
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.5)

        dom = page(url, tmp_path, admin)
        assert dom.state == "ok", dom.by_id("notice").text
        # GPUs by rack and machine: two machines of two GPUs, every one held.
        machines = dom.find("div", class_="machine")
        assert len(machines) == 2 and len(dom.find("li", class_="gpu")) == 4
        assert {e.attrs["data-rack"] for e in dom.find("div", class_="rack")} == {"r0"}
        held = gpu_holders(dom)
        assert {"alpha", "beta"} <= set(held)
        for gpu in dom.find("li", class_="held"):
            assert "until " in gpu.text and " / t00" in gpu.text  # app / trial, lease end
        assert [r.attrs["data-app"] for r in dom.find("tr", class_="app")] == ["alpha", "beta"]
        assert {e.attrs["data-app"] for e in dom.find("polyline")} == {"alpha", "beta"}
        arbiter = dom.by_id("arbiter").text
        assert "admin token" in arbiter and "arbiter alive" in arbiter
        assert admin not in dump_dom(f"{url}/dashboard#token={admin}", tmp_path / "p2")

        # Refused: no token, a wrong one.
        missing = page(url, tmp_path, None)
        assert missing.state == "no-token"
        assert "A token is needed" in missing.by_id("notice").text
        assert "hidden" not in missing.by_id("login").attrs
        assert "hidden" in missing.by_id("view").attrs and not gpu_holders(missing)
        wrong = page(url, tmp_path, "not-" + admin)
        assert wrong.state == "refused"
        assert "Refused (401): unknown token" in wrong.by_id("notice").text
        assert not gpu_holders(wrong) and "alpha" not in wrong.by_id("view").text

        # An app token: its app, the other's GPUs as "another app", no name of it.
        mine = page(url, tmp_path, tokens["alpha"])
        assert mine.state == "ok"
        assert set(gpu_holders(mine)) == {"alpha"}
        assert len(mine.find("li", class_="other")) == held.count("beta") >= 1
        assert "beta" not in dump_dom(f"{url}/dashboard#token={tokens['alpha']}", tmp_path / "p3")
        assert "app token: your app only" in mine.by_id("arbiter").text

        for name, token in tokens.items():
            assert themis("cancel", name, server=url, token=token).returncode == 0
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0, serve.stderr.read() if serve.stderr else ""
    finally:
        if serve.poll() is None:
            serve.kill()


# -- hostile names and messages ---------------------------------------------------------

#: Each would run (set data-pwned on the body) if the page parsed it as HTML.
HOSTILE = [
    "<script>document.body.setAttribute('data-pwned','1')</script>",
    "\"><img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">",
]


def test_hostile_app_names_and_messages_render_as_text(tmp_path: Path) -> None:
    arbiter = Arbiter(tmp_path / "state", {})
    try:
        # Names the app file's rules refuse, written straight into the store: the page
        # must not count on those rules.
        base = load_app_file(app_yaml(tmp_path, "base"))
        store = Store(tmp_path / "state")
        own = new_token()
        for k, name in enumerate(HOSTILE):
            hashed = token_hash(own if k else new_token())
            store.add_app(dataclasses.replace(base, name=name), hashed, "x")
            store.log(None, name, "t000", f"</td></tr></table>{name}<b>bold</b>")
        store.close()
        for token in (arbiter.admin, own):
            dom = page(arbiter.url, tmp_path, token)
            assert dom.state == "ok", dom.by_id("notice").text
            [body] = dom.find("body")
            assert "data-pwned" not in body.attrs
            assert not dom.find("img") and not dom.find("b")
            assert len(dom.find("script")) == 1  # the page's own
            shown = HOSTILE if token == arbiter.admin else HOSTILE[1:]
            rows = {r.attrs["data-app"]: r.text for r in dom.find("tr", class_="app")}
            for name in shown:
                assert name in rows, sorted(rows)
                assert name in rows[name]  # the name as text in its row
            events = dom.by_id("events").text
            for name in shown:
                assert f"</td></tr></table>{name}<b>bold</b>" in events
            if token == own:
                assert HOSTILE[0] not in dom.by_id("view").text
    finally:
        arbiter.close()


# -- a user typing the token ------------------------------------------------------------


@pytest.fixture
def tab(tmp_path: Path):
    t = Tab(tmp_path / "tab-profile")
    try:
        yield t
    finally:
        t.close()


STATE = "document.body && document.body.getAttribute('data-state')"
HOLDERS = "[...document.querySelectorAll('li.gpu[data-app]')].map(e => e.dataset.app).sort()"


def test_typing_a_token_keeps_it_in_the_tab_and_out_of_every_url(tmp_path: Path, tab) -> None:
    arbiter = Arbiter(tmp_path / "state", {"alpha": Behaviour(0.2), "beta": Behaviour(0.2)})
    try:
        tokens = {
            name: submitted(
                themis("submit", app_yaml(tmp_path, name, trials=2, steps=10**5),
                       server=arbiter.url, token=arbiter.submitter)
            )
            for name in ("alpha", "beta")
        }  # fmt: skip
        tab.go(f"{arbiter.url}/dashboard")
        assert tab.wait_for(f"{STATE} === 'no-token' && {STATE}")
        assert tab.evaluate("document.activeElement.id") == "token"
        # Typed and submitted as a user does: the form's own submit event.
        tab.evaluate(
            f"document.getElementById('token').value = {json.dumps(tokens['alpha'])};"
            "document.getElementById('login').requestSubmit(); true"
        )
        assert tab.wait_for(f"{STATE} === 'ok' && {HOLDERS}.length && {HOLDERS}") == [
            "alpha",
            "alpha",
        ]
        assert tab.evaluate("document.getElementById('token').value") == ""  # not left there
        # The style sheet applied (the page's policy allows its own): each GPU bar has the
        # colour of its app, as the rho line does.
        bar = tab.evaluate(
            "getComputedStyle(document.querySelector('li.gpu[data-app]')).borderLeftColor"
        )
        tab.wait_for("document.querySelectorAll('polyline').length")
        line = tab.evaluate("getComputedStyle(document.querySelector('polyline')).stroke")
        assert bar == line == "rgb(68, 119, 170)"  # c0, #4477AA
        assert tab.evaluate("sessionStorage.getItem('themis.token')") == tokens["alpha"]
        assert tab.evaluate("localStorage.length") == 0 and tab.evaluate("document.cookie") == ""
        assert tab.evaluate("location.href") == f"{arbiter.url}/dashboard"
        assert "beta" not in tab.evaluate("document.documentElement.outerHTML")
        # The page refreshes itself (the 3 s timer), and survives a reload of the tab.
        first = tab.evaluate("document.getElementById('updated').textContent")
        tab.wait_for(f"document.getElementById('updated').textContent !== {json.dumps(first)}")
        tab.reload()
        assert tab.wait_for(f"{STATE} === 'ok' && {HOLDERS}.length > 0")
        # Forgotten: gone from the tab, the form is back.
        tab.evaluate("document.getElementById('forget').click(); true")
        assert tab.wait_for(f"{STATE} === 'no-token'")
        assert tab.evaluate("sessionStorage.getItem('themis.token')") is None
        # A fragment token is read, then removed from the address bar.
        tab.go(f"{arbiter.url}/dashboard#token={tokens['beta']}")
        assert tab.wait_for(f"{STATE} === 'ok' && {HOLDERS}.length && {HOLDERS}") == [
            "beta",
            "beta",
        ]
        assert tab.evaluate("location.href") == f"{arbiter.url}/dashboard"
        # A token rotated away or mistyped is refused on the next refresh, and forgotten.
        tab.evaluate("sessionStorage.setItem('themis.token', 'wrong'); true")
        assert tab.wait_for(f"{STATE} === 'refused'", timeout=10)
        notice = tab.evaluate("document.getElementById('notice').textContent")
        assert notice.startswith("Refused (401): unknown token")
        assert tab.evaluate("sessionStorage.getItem('themis.token')") is None
        assert tab.evaluate("document.getElementById('view').hidden") is True
    finally:
        arbiter.close()
