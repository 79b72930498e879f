"""The published API: ``/openapi.json`` for admins, with typed
bodies, declared errors and bearer security; and a bounded fuzz against that schema: no
request may get a 5xx (but the declared 503 "the loop did not answer in time"), an
undeclared status, or an answer its declared schema refuses,
and the scheduling loop must keep ticking.

The fuzz draws requests with hypothesis (no new dependency): a route, a path that may
name an app or not, query values of every type and size, bodies that follow the schema
with hostile values or break it, and every kind of token. ``THEMIS_FUZZ_EXAMPLES`` sets
how many (default 600 here, a few seconds; CI runs 5,000, .ci/run).
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.parse
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.runtime.conftest import app_yaml
from tests.runtime.test_api import Arbiter, call
from themis.runtime.api.ratelimit import RateLimiter
from themis.runtime.state.appfile import read_app_text

EXAMPLES = int(os.environ.get("THEMIS_FUZZ_EXAMPLES", "600"))


@pytest.fixture(scope="module")
def arbiter(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    # A rate no fuzz reaches: the fuzz is for the routes behind the limit
    # (test_api_polling.py tests the limit).
    a = Arbiter(tmp / "state", {}, limiter=RateLimiter(rate=1e6, burst=1e6))
    text = read_app_text(app_yaml(tmp, "known", steps=10**6))
    body = json.dumps({"text": text, "source": "k.yaml", "base_dir": str(tmp)}).encode()
    status, reply = call(a.url, "POST", "/v1/apps", a.submitter, body)
    assert status == 201, reply
    a.app_token = json.loads(reply)["token"]
    a.tmp = tmp
    try:
        yield a
    finally:
        a.close()


@pytest.fixture(scope="module")
def schema(arbiter) -> dict:
    status, reply = call(arbiter.url, "GET", "/openapi.json", arbiter.admin)
    assert status == 200, reply
    return json.loads(reply)


def test_the_schema_is_for_admins_and_declares_bodies_errors_and_security(arbiter, schema):
    assert call(arbiter.url, "GET", "/openapi.json", None)[0] == 401
    assert call(arbiter.url, "GET", "/openapi.json", arbiter.submitter)[0] == 403
    assert call(arbiter.url, "GET", "/openapi.json", arbiter.app_token)[0] == 403
    paths = schema["paths"]
    assert set(paths) == {
        "/healthz", "/v1/status", "/v1/apps", "/v1/apps/{app_id}/cancel",
        "/v1/apps/{app_id}/release", "/v1/apps/{app_id}/logs", "/v1/tokens/rotate", "/metrics",
        "/v1/cluster",
    }  # fmt: skip
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    submit = paths["/v1/apps"]["post"]
    body = submit["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["required"]) == {"text", "source", "base_dir"}
    assert {"400", "401", "403", "413", "503"} <= set(submit["responses"])
    assert submit["responses"]["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SubmitResponse"
    }
    for path, methods in paths.items():
        for operation in methods.values():
            assert ("security" in operation) == (path != "/healthz"), path


# -- the fuzz ---------------------------------------------------------------------------

ROUTES = [
    ("GET", "/healthz", None),
    ("GET", "/v1/status", None),
    ("GET", "/v1/cluster", None),
    ("POST", "/v1/apps", "submit"),
    ("POST", "/v1/apps/{app_id}/cancel", None),
    ("POST", "/v1/apps/{app_id}/release", "release"),
    ("GET", "/v1/apps/{app_id}/logs", None),
    ("POST", "/v1/tokens/rotate", "rotate"),
    ("GET", "/metrics", None),
]

_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=2**62, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-1", "0x10", "", "9" * 40, "1_000"]),
)
_texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["known", "known\n", "../known", "%00", "a" * 300, "t000", "t999"]),
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=10,
)
_APP_TEXTS = st.one_of(
    st.text(max_size=200),
    st.sampled_from(
        [
            "name: x\nsteps: 1180591620717411303424\n",
            "name: 'a\\n'\nentrypoint: m:f\ntrials: 1\ngpus_per_trial: 1\nsteps: 1\nstep_time: 1\n",
            "a: &a [1]\nb: *a\n",
            "steps: 1\nsteps: 2\n",
            "name: y\nentrypoint: m:f\ntrials: 1\ngpus_per_trial: 1\nsteps: 1\n"
            "step_time: 5.0e-324\n",
            "name: z\nentrypoint: m:f\ntrials: 2\ngpus_per_trial: 1\nsteps: 1\n"
            "step_time: 1\nprogress_weight: .nan\n",
            "name: w\nentrypoint: m:f\ntrials: 2\ngpus_per_trial: 1\nsteps: 1\n"
            "step_time: 1\nprogress_weight: 1.0e308\n",
            "[" * 100,
        ]
    ),
)


@st.composite
def requests(draw, tokens: dict[str, str | None]):
    method, template, body_kind = draw(st.sampled_from(ROUTES))
    path = template.replace("{app_id}", urllib.parse.quote(draw(_texts), safe=""))
    query = {}
    if draw(st.booleans()):
        name = draw(st.sampled_from(["after", "wait", "x"]))
        query[name] = str(draw(_numbers))
    if query:
        path += "?" + urllib.parse.urlencode(query)
    body: bytes | None = None
    if body_kind is not None or draw(st.booleans()):
        shape = draw(st.sampled_from(["model", "json", "bytes"]))
        if shape == "model" and body_kind == "submit":
            doc = {
                "text": draw(_APP_TEXTS),
                "source": draw(_texts),
                "base_dir": draw(st.sampled_from(["/", "relative", "/nonexistent", ""])),
            }
            body = json.dumps(doc).encode()
        elif shape == "model" and body_kind == "release":
            body = json.dumps({"trial": draw(_texts)}).encode()
        elif shape == "model" and body_kind == "rotate":
            body = json.dumps({"which": draw(st.sampled_from(["x", "", 1, None]))}).encode()
        elif shape == "json":
            body = json.dumps(draw(_json_values)).encode()
        else:
            body = draw(st.binary(max_size=64))
    who = draw(st.sampled_from(sorted(tokens)))
    if template == "/v1/tokens/rotate" and who == "admin":
        who = "submit"  # a rotation by the admin would invalidate the fuzz's own tokens
    return method, template, path, body, tokens[who]


class Client:
    """One kept-alive connection, reopened after the server closes it."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def send(self, method: str, path: str, body: bytes | None, token: str | None):
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                if response.getheader("connection", "").lower() == "close":
                    self.conn.close()
                return response.status, response.getheader("content-type", ""), data
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                if attempt:
                    raise
        raise AssertionError("unreachable")


def response_schema(schema: dict, template: str, method: str, status: int) -> dict | None:
    responses = schema["paths"][template][method.lower()]["responses"]
    declared = responses.get(str(status))
    assert declared is not None, f"{method} {template}: undeclared status {status}"
    content = declared.get("content", {}).get("application/json")
    return None if content is None else content.get("schema")


@pytest.mark.timeout(900)
def test_a_bounded_fuzz_gets_no_5xx_no_schema_violation_and_the_loop_lives(arbiter, schema):
    tokens = {
        "none": None,
        "garbage": "x" * 43,
        "admin": arbiter.admin,
        "submit": arbiter.submitter,
        "app": arbiter.app_token,
    }
    client = Client(arbiter.url)
    seen: dict[int, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,  # the same requests every run: CI is reproducible
    )
    @given(request=requests(tokens))
    def one(request) -> None:
        method, template, path, body, token = request
        status, kind, data = client.send(method, path, body, token)
        seen[status] = seen.get(status, 0) + 1
        # 503 is the one 5xx the API means (declared): the loop did not take a command in
        # time (e.g. cancel?wait=0) or too many are queued. Anything else is a bug.
        assert status < 500 or (status == 503 and b"scheduling loop" in data), (
            method, path, body, status, data[:300],
        )  # fmt: skip
        expected = response_schema(schema, template, method, status)
        if kind.startswith("application/json"):
            doc = json.loads(data)
            if status >= 400:
                assert isinstance(doc["detail"], str) and "\n" not in doc["detail"], doc
            if expected is not None:
                jsonschema.validate(doc, {**expected, "components": schema["components"]})

    started = time.monotonic()
    one()
    took = time.monotonic() - started
    # The loop kept ticking, and the arbiter still serves.
    assert arbiter.thread.is_alive()
    assert time.time() - arbiter.snapshot()["heartbeat"] < 5
    assert call(arbiter.url, "GET", "/v1/status", arbiter.admin)[0] == 200
    print(f"fuzz: {EXAMPLES} requests in {took:.1f}s; statuses {sorted(seen.items())}")
    Path(arbiter.tmp / "fuzz.json").write_text(json.dumps(seen))
