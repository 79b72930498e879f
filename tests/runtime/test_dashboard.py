"""The dashboard's data and files, against a real arbiter loop on loopback (jobs faked, no
Ray): ``GET /v1/cluster`` shows machines, who holds each GPU until when, rho over time,
queued trials and events; an app token sees only its own app; a missing or wrong token
is refused; the page is served with headers that let only its own script run, and that
script never parses what the server sends as HTML. The page in a real browser:
``test_dashboard_browser.py``."""

from __future__ import annotations

import json
import re
import time
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour
from tests.runtime.test_api import Arbiter, call, submitted, themis
from themis.fairness.ftf import RHO_MAX
from themis.runtime.api.dashboard import PAGE_HEADERS, STATIC
from themis.runtime.loop.history import RhoHistory

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    """Two apps of three trials each on four GPUs (two machines of two): both hold GPUs,
    some trials wait."""
    tmp = tmp_path_factory.mktemp("dash")
    a = Arbiter(tmp / "state", {"alpha": Behaviour(step_time=0.2), "beta": Behaviour(0.2)})
    try:
        a.tokens_of = {}
        for name in ("alpha", "beta"):
            out = themis(
                "submit", app_yaml(tmp, name, trials=3, steps=10**5), server=a.url,
                token=a.submitter,
            )  # fmt: skip
            a.tokens_of[name] = submitted(out)
        deadline = time.monotonic() + 30
        while True:
            view = cluster(a.url, a.admin)
            holders = {g["app_id"] for m in view["machines"] for g in m["gpus"]}
            if {"alpha", "beta"} <= holders and all(len(view["rho"].get(n, ())) >= 3
                                                     for n in ("alpha", "beta")):  # fmt: skip
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        yield a
    finally:
        a.close()


def cluster(url: str, token: str | None) -> dict:
    status, body = call(url, "GET", "/v1/cluster", token)
    assert status == 200, body
    return json.loads(body)


def test_the_submit_token_sees_every_gpu_holder_rho_and_queue_but_no_event(busy) -> None:
    view = cluster(busy.url, busy.submitter)
    assert view["role"] == "submit" and view["arbiter"]["state"] == "alive"
    machines = view["machines"]
    assert [len(m["gpus"]) for m in machines] == [2, 2]
    assert all(m["rack"] == "default" for m in machines)
    held = [g for m in machines for g in m["gpus"] if g["app_id"] is not None]
    assert {g["app_id"] for g in held} <= {"alpha", "beta"} and len(held) >= 2
    for gpu in held:
        assert re.fullmatch(r"t00[0-2]", gpu["trial_id"]) and not gpu["other"]
        # A lease of the arbiter's options (2 s), in wall-clock seconds.
        assert gpu["granted_at"] <= view["now"] + 1 and 0 < gpu["until"] - gpu["granted_at"] <= 3
    assert [a["app_id"] for a in view["apps"]] == ["alpha", "beta"]
    for name in ("alpha", "beta"):
        walls = [p[0] for p in view["rho"][name]]
        assert walls == sorted(walls) and walls[-1] <= view["now"]
        assert all(0 < p[1] <= RHO_MAX for p in view["rho"][name])
    # Six trials on four GPUs: two wait (or are starting: granted, not yet leased).
    waiting = {(q["app_id"], q["trial_id"]) for q in view["queued"]}
    assert view["queued_total"] == len(view["queued"]) == len(waiting) >= 1
    assert all(q["state"] == "waiting" and q["gpus"] == 1 for q in view["queued"])
    # Events hold what trials logged and raised: the shared submit token reads none.
    assert view["events"] == []
    admin = cluster(busy.url, busy.admin)
    assert admin["role"] == "admin"
    ids = [e["id"] for e in admin["events"]]
    assert ids == sorted(ids, reverse=True) and 0 < len(ids) <= 50
    assert {e["app_id"] for e in admin["events"]} <= {"alpha", "beta"}


def test_an_app_token_sees_its_own_app_and_no_trace_of_another(busy) -> None:
    status, body = call(busy.url, "GET", "/v1/cluster", busy.tokens_of["alpha"])
    assert status == 200
    assert b"beta" not in body  # no name, row, rho, queued trial or event of beta
    view = json.loads(body)
    assert view["role"] == "app"
    assert [a["app_id"] for a in view["apps"]] == ["alpha"] and set(view["rho"]) == {"alpha"}
    assert {q["app_id"] for q in view["queued"]} <= {"alpha"}
    assert {e["app_id"] for e in view["events"]} == {"alpha"}
    gpus = [g for m in view["machines"] for g in m["gpus"]]
    others = [g for g in gpus if g["other"]]
    assert others, "beta holds GPUs: they show as another app's"
    for gpu in others:  # anonymous: no name, trial, grant or lease end to group them by
        assert gpu["app_id"] is gpu["trial_id"] is gpu["granted_at"] is gpu["until"] is None
    assert {g["app_id"] for g in gpus if not g["other"]} <= {"alpha", None}


@pytest.mark.parametrize("token", [None, "", "not-a-token", "Bearer"])
def test_a_missing_or_wrong_token_is_refused(busy, token) -> None:
    status, body = call(busy.url, "GET", "/v1/cluster", token)
    assert status == 401
    assert json.loads(body)["detail"] in ("unknown token", "a token is needed (--token or "
                                          "THEMIS_TOKEN)")  # fmt: skip


def test_the_page_loads_without_a_token_holds_no_data_and_lets_only_its_script_run(busy):
    status, page = call(busy.url, "GET", "/dashboard", None)
    assert status == 200
    assert b"alpha" not in page and busy.admin.encode() not in page
    import urllib.request

    with urllib.request.urlopen(busy.url + "/dashboard", timeout=10) as response:
        headers = response.headers
        assert headers["Content-Type"].startswith("text/html")
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp and headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cache-Control"] == "no-store"
    # No inline script or style (the policy would block them): only the two files.
    assert re.findall(rb"<script[^>]*>", page) == [b'<script src="dashboard/dashboard.js">']
    assert b"style=" not in page and b"<style" not in page
    for name in ("dashboard.js", "dashboard.css"):
        status, body = call(busy.url, "GET", f"/dashboard/{name}", None)
        assert (
            status == 200
            and body == resources.files("themis.runtime.api").joinpath("static", name).read_bytes()
        )
    for name in ("../api.py", "nothing.js", "dashboard.html"):
        assert call(busy.url, "GET", f"/dashboard/{name}", None)[0] == 404
    status, _ = call(busy.url, "GET", "/", None)
    assert status == 200  # followed the redirect to the page


def test_the_script_never_parses_server_data_as_html_and_keeps_tokens_out_of_urls():
    script = resources.files("themis.runtime.api").joinpath("static", "dashboard.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "setTimeout(\"", "localStorage"):  # fmt: skip
        assert sink not in script, sink
    # The token goes in a header, and is kept per tab only.
    assert '"Authorization": "Bearer " + value' in script and "sessionStorage" in script
    # Requests name no token in their URL: the only fetch is the bare path.
    assert re.findall(r"fetch\(([^,]*),", script) == ['"v1/cluster"']
    # A fragment token is removed from the address bar once read.
    assert "history.replaceState" in script


def test_the_page_files_ship_as_package_data() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["themis.runtime.api"]
    static = resources.files("themis.runtime.api").joinpath("static")
    for name in STATIC:
        assert static.joinpath(name).is_file(), name
        assert f"static/*{Path(name).suffix}" in patterns, name
    assert PAGE_HEADERS["X-Content-Type-Options"] == "nosniff"


def test_cluster_is_in_the_published_schema(busy) -> None:
    status, body = call(busy.url, "GET", "/openapi.json", busy.admin)
    assert status == 200
    schema = json.loads(body)
    route = schema["paths"]["/v1/cluster"]["get"]
    answer = route["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/ClusterResponse"}
    assert {"401"} <= set(route["responses"]) and "security" in route
    fields = schema["components"]["schemas"]["ClusterResponse"]["properties"]
    assert {"machines", "apps", "rho", "queued", "events", "role", "arbiter"} <= set(fields)


# -- the rho history --------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    points=st.lists(
        st.tuples(st.sampled_from("abcde"), st.floats(allow_nan=True, allow_infinity=True)),
        max_size=300,
    ),
    max_points=st.integers(2, 20),
    max_apps=st.integers(1, 4),
)
def test_rho_history_is_bounded_ordered_and_keeps_the_newest(points, max_points, max_apps):
    history = RhoHistory(max_points, max_apps)
    added: dict[str, list[tuple[float, float]]] = {}
    for wall, (app, rho) in enumerate(points):
        history.add(app, float(wall), rho)
        if rho == rho:  # NaN skipped
            added.setdefault(app, []).append((float(wall), min(rho, RHO_MAX)))
    kept = history.series()
    assert len(kept) <= max_apps
    for app, series in kept.items():
        assert 1 <= len(series) <= max_points
        walls = [w for w, _ in series]
        assert walls == sorted(set(walls))
        assert set(series) <= set(added[app])  # a thinned copy of what was added
        assert series[-1] == added[app][-1]  # the newest point is always there
        assert all(rho <= RHO_MAX for _, rho in series)
    if added:
        last_app = next(app for _, (app, rho) in reversed(list(enumerate(points))) if rho == rho)
        assert last_app in kept  # the app seen last is never the one dropped
    assert history.series({"a"}).keys() <= {"a"}


# -- the answer, from a store and a view made by hand -----------------------------------

NODES = ["node-a" + "0" * 50, "node-b" + "0" * 50]
VIEW_MACHINES = [
    {"node_id": NODES[0], "rack": "r0", "gpus": 2, "gpu_type": None, "address": "10.0.0.1"},
    {"node_id": NODES[1], "rack": "r1", "gpus": 2, "gpu_type": "V100", "address": "10.0.0.2"},
]


@pytest.fixture(scope="module")
def hand_store(tmp_path_factory):
    """Apps 'red' (running, 2 trials) and 'blue' (submitted, 3 trials): red's t000 holds
    node a's GPUs until t=130, red's t001 drains on node b's slot 0."""
    from themis.runtime.state.appfile import load_app_file
    from themis.runtime.state.store import Store

    tmp = tmp_path_factory.mktemp("hand")
    store = Store(tmp / "state", init=True)
    for name, trials in (("red", 2), ("blue", 3)):
        store.add_app(load_app_file(app_yaml(tmp, name, trials=trials)), "h-" + name, "x")
    store.update_app("red", state="running", rho=1.5)
    store.set_lease("red", "t000", [(NODES[0], 0), (NODES[0], 1)], 100.0, 130.0)
    store.update_trial("red", "t001", state="waiting")
    store.log(5.0, "red", "t000", "granted")
    store.log(6.0, "blue", None, "submitted")
    yield store
    store.close()


def hand_view(**extra):
    return {
        "epoch": 1000.0,
        "machines": VIEW_MACHINES,
        "rho": {"red": [(1100.0, 2.0), (1101.0, 1.5)], "gone": [(1.0, 1.0)]},
        "draining": [[NODES[1], 0, "red", "t001"]],
        **extra,
    }


def test_the_answer_places_leases_on_machines_in_wall_clock_and_marks_draining(hand_store):
    from themis.runtime.api.auth import Principal
    from themis.runtime.api.dashboard import cluster_answer

    answer = cluster_answer(hand_store, hand_view(), Principal("admin"))
    a, b = answer["machines"]
    assert (a["rack"], b["rack"], b["gpu_type"], a["address"]) == ("r0", "r1", "V100", "10.0.0.1")
    assert [(g["app_id"], g["trial_id"], g["until"]) for g in a["gpus"]] == [
        ("red", "t000", 1130.0),  # epoch + the store's runtime seconds
        ("red", "t000", 1130.0),
    ]
    assert a["gpus"][0]["granted_at"] == 1100.0 and not a["gpus"][0]["draining"]
    assert b["gpus"][0] == {
        "slot": 0, "app_id": "red", "trial_id": "t001", "granted_at": None, "until": None,
        "other": False, "draining": True,
    }  # fmt: skip
    assert b["gpus"][1]["app_id"] is None and not b["gpus"][1]["other"]
    assert set(answer["rho"]) == {"red"}  # series only of apps in the store
    assert answer["rho"]["red"] == [[1100.0, 2.0], [1101.0, 1.5]]
    queued = [(q["app_id"], q["trial_id"], q["state"]) for q in answer["queued"]]
    assert queued == [("red", "t001", "waiting")] + [("blue", f"t00{k}", "submitted")
                                                      for k in range(3)]  # fmt: skip
    assert answer["queued_total"] == 4
    assert [e["message"] for e in answer["events"]] == ["submitted", "granted"]


@settings(max_examples=60, deadline=None)
@given(
    holders=st.lists(st.sampled_from(["red", "blue", None]), min_size=4, max_size=4),
    viewer=st.sampled_from(["red", "blue"]),
)
def test_an_app_token_never_sees_another_apps_name(hand_store, holders, viewer) -> None:
    """Whoever drains where, the answer to one app's token names no other app."""
    from themis.runtime.api.auth import Principal
    from themis.runtime.api.dashboard import cluster_answer

    slots = [(n, s) for n in NODES for s in (0, 1)]
    draining = [[n, s, app, "t002"] for (n, s), app in zip(slots, holders, strict=True) if app]
    view = hand_view(draining=draining, rho={"red": [(1.0, 1.0)], "blue": [(1.0, 2.0)]})
    # red's lease covers node a: a draining entry there is ignored (the lease shows).
    answer = cluster_answer(hand_store, view, Principal("app", viewer))
    other = "blue" if viewer == "red" else "red"
    assert other not in json.dumps(answer)
    assert [a["app_id"] for a in answer["apps"]] == [viewer]
    gpus = [g for m in answer["machines"] for g in m["gpus"]]
    assert sum(g["other"] for g in gpus) == sum(
        1 for k, (n, s) in enumerate(slots)
        if (n == NODES[0] and viewer != "red") or (n == NODES[1] and holders[k] == other)
    )  # fmt: skip
