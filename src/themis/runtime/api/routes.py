"""The arbiter's HTTP API (FastAPI), served by ``themis serve`` beside its scheduling loop.

Every route but ``/healthz`` needs ``Authorization: Bearer <token>`` (``runtime.auth``
says which token may do what). Reads (status, logs) come from the store through a
read-only connection per API thread; actions (submit, cancel, release) are commands the
scheduling loop answers (``runtime.commands``), so the loop stays the store's one writer.

Routes (JSON unless said otherwise):

- ``GET /healthz``: ``{"ok": true}``, no token (for load balancers and probes);
- ``GET /v1/status?offset=N&limit=M``: the arbiter's liveness and one row per app (an app
  token: its own), a page of ``limit`` (default ``PAGE``) apps from ``offset``: active
  apps first, then ended ones, the last to end first; ``apps_total`` and ``next`` (the
  next page's offset, or null) say what is left;
- ``POST /v1/apps``: ``{"text": <app.yaml>, "source": <name>, "base_dir": <abs path>}`` ->
  ``{"app_id", "token", "trials", "replayed"}``; the body is refused unread past its size
  limit; with an ``Idempotency-Key`` header, a repeat of the same request by the same
  principal answers the same app with a new token (``replayed``: true), the same key
  with another request is a 409 (``loop/submit_replay.py``);
- ``POST /v1/apps/{app}/cancel?wait=S`` and ``POST /v1/apps/{app}/release``
  (``{"trial": "t003"}``);
- ``GET /v1/apps/{app}/logs?after=N``: ``{"lines", "last", "state"}``;
- ``GET /v1/cluster?offset=N&limit=M``: the live view of the cluster (machines and who
  holds their GPUs until when, a page of apps as in status and their rho over time,
  queued trials, recent events); an app token: its own app;
- ``GET /dashboard``: the page that shows it (no token to load it; it asks for one and
  calls ``/v1/cluster``; ``runtime.dashboard``), with ``/dashboard/dashboard.js`` and
  ``/dashboard/dashboard.css``;
- ``GET /metrics``: Prometheus text format (admin token);
- ``GET /openapi.json`` (admin token): the schema, from ``api_models``;
- ``POST /v1/tokens/rotate`` (``{"which": "admin" | "submit"}``, admin token) ->
  ``{"which", "token"}``: a new operator token, in its file too; the old one is refused
  from then on.

Errors are ``{"detail": "<one line>"}`` with 400 (bad input), 401 (no or unknown token),
403 (a token that may not do this), 404, 409 (an app of that name exists, ignoring case,
or an idempotency key reused for another request), 413 (too large), 429 (over the
token's rate, with ``Retry-After``; ``api.ratelimit``), 503 (busy, timed out, or the
state database damaged: then ``/healthz`` answers 503 too and
the loop stops at its next tick).

The read routes answer from a snapshot shared by every caller for ``SNAPSHOT_MAX_AGE``
(``api.snapshot``), so a flood of polls costs the scheduling loop one read per moment.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from themis.errors import ThemisError
from themis.runtime.api import models as m
from themis.runtime.api.auth import OPERATOR_TOKEN_FILES, OperatorTokens, Principal, write_new_token
from themis.runtime.api.dashboard import (
    EVENTS,
    PAGE_HEADERS,
    STATIC,
    ClusterFacts,
    cluster_facts,
    cluster_for,
    static_file,
)
from themis.runtime.api.metrics import ApiMetrics
from themis.runtime.api.queries import as_seen_by, log_lines, status_rows
from themis.runtime.api.ratelimit import RateLimiter, retry_after
from themis.runtime.api.snapshot import SharedReads
from themis.runtime.loop.commands import (
    Busy,
    Command,
    CommandQueue,
    Conflict,
    Unanswered,
    submit_command,
)
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.state.appfile import MAX_APP_BYTES, parse_app_text
from themis.runtime.state.health import StateDamaged, StateLost, health_of
from themis.runtime.state.store import DB_NAME, NameTaken, Store, SubmitKey
from themis.runtime.state.tokens import token_hash

#: Largest request body: an app file JSON-escaped, plus its fields.
MAX_BODY = 2 * MAX_APP_BYTES + 4096
#: Longest a client may make the API wait for the scheduling loop.
MAX_WAIT = 120.0
#: A body over its limit is read and discarded up to this size before the 413, so that a
#: client that sent it whole (no ``Expect: 100-continue``) reads the answer instead of a
#: connection reset; past it the connection is closed unread.
DRAIN_LIMIT = 16 * 2**20
#: Event ids are SQLite integers.
MAX_EVENT_ID = 2**63 - 1
#: The loop is called stalled when its last tick is older than this many ticks (and 5 s).
STALL_TICKS = 50
#: Apps per page of ``/v1/status`` and ``/v1/cluster`` unless ``limit`` says otherwise,
#: and the most ``limit`` may ask: an answer does not grow with the state's history.
PAGE = 200
MAX_PAGE = 1000


#: The header a submit carries its idempotency key in (a random UUID per submit, the same
#: on its retries; ``loop/submit_replay.py``), and what a key must look like: long
#: enough to be unguessable, since the key and the request are what a replay needs.
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9_.:-]{32,128}")


def submit_key(header: str, role: str, body: m.SubmitRequest) -> SubmitKey:
    """A submit's idempotency key as the store keeps it (hashes only), or a 400."""
    if IDEMPOTENCY_KEY.fullmatch(header) is None:
        raise ApiError(
            400,
            f"{IDEMPOTENCY_HEADER} must be 32 to 128 letters, digits or '-_.:' (a random "
            "UUID per submit, the same on its retries)",
        )
    request = json.dumps([body.text, body.source, body.base_dir]).encode("utf-8")
    return SubmitKey(role, token_hash(header), hashlib.sha256(request).hexdigest())


class ApiError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


@dataclass
class ApiContext:
    state_dir: Path
    tokens: OperatorTokens
    commands: CommandQueue
    snapshot: Callable[[], dict[str, Any]]
    metrics: ArbiterMetrics
    #: The loop's machines and rho history for ``/v1/cluster`` (``cluster_view``); None:
    #: no machine and no history (an API without a loop, in tests).
    view: Callable[[], dict[str, Any]] | None = None
    #: Each caller's requests per second (``api.ratelimit``; None: the defaults).
    limiter: RateLimiter | None = None
    #: The API's metrics, on ``metrics``' registry (None: made by ``make_api``).
    api_metrics: ApiMetrics | None = None


def make_api(ctx: ApiContext) -> FastAPI:
    app = FastAPI(
        title="themis arbiter",
        description="The Themis arbiter's API (docs/runtime.md, 'The lease API' and "
        "'Security'). Every route but /healthz needs 'Authorization: Bearer <token>'.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # served below, to admins only
    )
    local = threading.local()
    state_health = health_of(ctx.state_dir / DB_NAME)
    rotating = threading.Lock()
    if ctx.api_metrics is None:
        ctx.api_metrics = ApiMetrics(ctx.metrics.registry)
    api_metrics = ctx.api_metrics
    limiter = ctx.limiter or RateLimiter()
    shared = SharedReads(on_build=lambda key: api_metrics.snapshot_builds.inc())
    # Declares the bearer scheme in the schema; the token itself is checked by principal().
    bearer = [Security(HTTPBearer(auto_error=False, description="admin, submit or app token"))]

    def store() -> Store:
        s = getattr(local, "store", None)
        if s is None:
            s = local.store = Store(ctx.state_dir, readonly=True)
        return s

    def principal(request: Request) -> Principal:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "a token is needed (--token or THEMIS_TOKEN)")
        token = token.strip()
        who = ctx.tokens.identify(token)
        if who is not None:
            return who
        app_id = store().app_with_token(token_hash(token))
        if app_id is None:
            raise ApiError(401, "unknown token")
        return Principal("app", app_id)

    def caller(request: Request) -> Principal:
        """Who calls (401 if nobody), within their rate (429 past it, counted)."""
        who = principal(request)
        if who.role == "submit":  # shared by every user: a bucket per client address
            key: tuple[str, str | None] = ("submit", request.client and request.client.host)
        else:
            key = (who.role, who.app_id)
        wait = limiter.take(key)
        if wait > 0:
            api_metrics.rate_limited.labels(who.role).inc()
            raise ApiError(
                429,
                f"too many requests from this token; retry in {wait:.1f} s",
                {"Retry-After": retry_after(wait)},
            )
        return who

    def world() -> ClusterFacts:
        """The shared snapshot of every app (``api.snapshot``)."""

        def build() -> ClusterFacts:
            view = ctx.view() if ctx.view is not None else {}
            return cluster_facts(store(), view, status_rows(store()))

        facts: ClusterFacts = shared.get("world", build)
        return facts

    def events_of(app_id: str) -> list[Any]:
        return list(shared.get(("events", app_id), lambda: store().recent_events(app_id, EVENTS)))

    def acting_on(request: Request, app_id: str) -> Principal:
        who = caller(request)
        if not who.may_act_on(app_id):
            raise ApiError(403, f"this token may not act on app {app_id!r}")
        return who

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"Connection": "close"} if exc.status == 413 else exc.headers
        detail = _one_line(exc.detail)
        return JSONResponse({"detail": detail}, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _bad_parameter(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's 422 is a list of objects; the API's errors are one line, and 400.
        return JSONResponse({"detail": _first_error(exc.errors())}, status_code=400)

    @app.exception_handler(ThemisError)
    async def _user_error(request: Request, exc: ThemisError) -> JSONResponse:
        if isinstance(exc, StateLost):  # damaged under us: the loop stops at its next tick
            ctx.metrics.state_faults.inc()
            # Said without the server's paths, and without advice meant for its operator.
            detail = exc.message
            if isinstance(exc, StateDamaged):
                detail = f"the state database is damaged ({exc.problem}); the arbiter stops"
            return JSONResponse({"detail": _one_line(detail)}, status_code=503)
        status = 503 if isinstance(exc, (Unanswered, Busy)) else 400
        if isinstance(exc, (NameTaken, Conflict)):
            status = 409
        if exc.message.startswith("no app named"):
            status = 404
        return JSONResponse({"detail": _one_line(exc.format())}, status_code=status)

    @app.get("/healthz", response_model=m.Health, responses=m.errors(503))
    def healthz() -> Any:
        problem = state_health.problem
        if problem is not None:  # a probe takes the arbiter out of service at once
            detail = _one_line(f"the state database is damaged ({problem})")
            return JSONResponse({"ok": False, "detail": detail}, status_code=503)
        return {"ok": True}

    @app.get(
        "/v1/status",
        response_model=m.StatusResponse,
        responses=m.errors(400, 401, 429, 503),
        dependencies=bearer,
    )
    def status(request: Request, offset: int = 0, limit: int = PAGE) -> dict[str, Any]:
        _check_page(offset, limit)
        who = caller(request)
        mine = [r for r in world().rows if who.role != "app" or r.app_id == who.app_id]
        page = mine[offset : offset + limit]
        rows = [as_seen_by(r, who).to_dict() for r in page]
        nxt = offset + len(page)
        return {
            "arbiter": liveness(ctx.snapshot()),
            "apps": rows,
            "apps_total": len(mine),
            "next": nxt if nxt < len(mine) else None,
        }

    @app.get(
        "/v1/cluster",
        response_model=m.ClusterResponse,
        responses=m.errors(400, 401, 429, 503),
        dependencies=bearer,
    )
    def cluster(
        request: Request, response: Response, offset: int = 0, limit: int = PAGE
    ) -> dict[str, Any]:
        _check_page(offset, limit)
        who = caller(request)
        answer = cluster_for(world(), who, events_of, offset, limit)
        response.headers["Cache-Control"] = "no-store"
        return {"now": time.time(), "arbiter": liveness(ctx.snapshot()), **answer}

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("dashboard", status_code=307)

    @app.get("/dashboard", include_in_schema=False)
    def dashboard_page() -> Response:
        return _static("dashboard.html")

    @app.get("/dashboard/{name}", include_in_schema=False)
    def dashboard_file(name: str) -> Response:
        if name not in STATIC or name.endswith(".html"):
            raise ApiError(404, "no such file")
        return _static(name)

    @app.post(
        "/v1/apps",
        status_code=201,
        response_model=m.SubmitResponse,
        responses=m.errors(400, 401, 403, 409, 413, 429, 503),
        dependencies=bearer,
        openapi_extra=m.body_schema(m.SubmitRequest),
    )
    async def submit(request: Request) -> dict[str, Any]:
        who = caller(request)
        if not who.may_submit:
            raise ApiError(403, "submitting needs the submit or admin token")
        header = request.headers.get(IDEMPOTENCY_HEADER)
        body = _model(m.SubmitRequest, await _bounded_body(request))
        if not Path(body.base_dir).is_absolute():
            raise ApiError(400, "base_dir must be an absolute path")
        key = None if header is None else submit_key(header, who.role, body)
        return await run_in_threadpool(
            _submit_now, body.text, body.source[:200], Path(body.base_dir), key
        )

    def _submit_now(
        text: str, source: str, base_dir: Path, key: SubmitKey | None
    ) -> dict[str, Any]:
        app_file = parse_app_text(text, source, base_dir)
        command, token = submit_command(app_file, source, key)
        result = ctx.commands.put(command).wait(30.0)
        shared.invalidate()  # the submitter reads its app at once
        return {**result, "token": token}

    @app.post(
        "/v1/apps/{app_id}/cancel",
        response_model=m.Reply,
        responses=m.errors(400, 401, 403, 404, 429, 503),
        dependencies=bearer,
    )
    def cancel(app_id: str, request: Request, wait: float = 30.0) -> dict[str, Any]:
        if not math.isfinite(wait) or wait < 0:
            raise ApiError(400, f"wait must be a finite number of seconds >= 0, got {wait}")
        acting_on(request, app_id)
        command = ctx.commands.put(Command("cancel", app_id))
        try:
            return {"reply": command.wait(min(max(wait, 0.0), MAX_WAIT))}
        finally:
            shared.invalidate()

    @app.post(
        "/v1/apps/{app_id}/release",
        response_model=m.Reply,
        responses=m.errors(400, 401, 403, 404, 413, 429, 503),
        dependencies=bearer,
        openapi_extra=m.body_schema(m.ReleaseRequest),
    )
    async def release(app_id: str, request: Request) -> dict[str, Any]:
        acting_on(request, app_id)
        trial = _model(m.ReleaseRequest, await _bounded_body(request, 1024)).trial
        command = ctx.commands.put(Command("release", app_id, {"trial": trial}))
        try:
            return {"reply": await run_in_threadpool(command.wait, 30.0)}
        finally:
            shared.invalidate()

    @app.get(
        "/v1/apps/{app_id}/logs",
        response_model=m.LogsResponse,
        responses=m.errors(400, 401, 403, 404, 429, 503),
        dependencies=bearer,
    )
    def logs(app_id: str, request: Request, after: int = 0) -> dict[str, Any]:
        if not 0 <= after <= MAX_EVENT_ID:
            raise ApiError(400, f"after must be an event id from 0 to {MAX_EVENT_ID}")
        acting_on(request, app_id)
        lines, last = log_lines(store(), app_id, after)
        row = store().app(app_id)
        return {"lines": lines, "last": last, "state": None if row is None else row.state}

    @app.post(
        "/v1/tokens/rotate",
        response_model=m.RotateResponse,
        responses=m.errors(400, 401, 403, 413, 429),
        dependencies=bearer,
        openapi_extra=m.body_schema(m.RotateRequest),
    )
    async def rotate(request: Request) -> dict[str, Any]:
        if caller(request).role != "admin":
            raise ApiError(403, "rotating a token needs the admin token")
        which = _model(m.RotateRequest, await _bounded_body(request, 1024)).which
        return {"which": which, "token": await run_in_threadpool(_rotate_now, which)}

    def _rotate_now(which: str) -> str:
        # The file first: if it cannot be written, the old token stays valid everywhere.
        with rotating:
            token = write_new_token(ctx.state_dir / OPERATOR_TOKEN_FILES[which])
            ctx.tokens = ctx.tokens.with_token(which, token)
        return token

    @app.get(
        "/metrics",
        response_class=Response,
        responses={
            200: {"content": {"text/plain": {}}, "description": "Prometheus text format"},
            **m.errors(401, 403, 429),
        },
        dependencies=bearer,
    )
    def metrics(request: Request) -> Response:
        if caller(request).role != "admin":
            raise ApiError(403, "metrics need the admin token")
        return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        """The API's schema (OpenAPI 3), to admins: it lists every route and field."""
        if caller(request).role != "admin":
            raise ApiError(403, "the schema needs the admin token")
        return JSONResponse(app.openapi())

    return app


_Model = TypeVar("_Model", bound=BaseModel)


def _static(name: str) -> Response:
    """A file of the dashboard page, with headers that let only its own scripts run."""
    return Response(static_file(name), media_type=STATIC[name], headers=PAGE_HEADERS)


def _check_page(offset: int, limit: int) -> None:
    if not 0 <= offset <= MAX_EVENT_ID:
        raise ApiError(400, f"offset must be from 0 to {MAX_EVENT_ID}, got {offset}")
    if not 1 <= limit <= MAX_PAGE:
        raise ApiError(400, f"limit must be from 1 to {MAX_PAGE}, got {limit}")


def _model(model: type[_Model], body: bytes) -> _Model:
    """``body`` checked against ``model``; a mismatch is one-line 400."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise ApiError(400, _first_error(exc.errors())) from None


def _one_line(text: str) -> str:
    """An error as one line, whatever user input it quotes (a newline shown as ``\\n``)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _first_error(errors: Any) -> str:
    """Pydantic's list of errors as one line: where, then what."""
    first = errors[0] if errors else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = f"{where}: {first.get('msg', 'invalid request')}" if where else first.get("msg")
    return " ".join(str(message or "invalid request").split())[:300]


async def _bounded_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request body, refused (413) past ``limit`` bytes: nothing past the limit is
    kept, and up to ``DRAIN_LIMIT`` is read and dropped first so the client sees the 413."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        if int(declared) <= DRAIN_LIMIT:
            await _drain(request)
        raise ApiError(413, f"request body of {int(declared)} bytes; at most {limit}")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            await _drain(request, size)
            raise ApiError(413, f"request body over {limit} bytes; at most {limit}")
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(request: Request, size: int = 0) -> None:
    """Read and drop the rest of the body, up to ``DRAIN_LIMIT`` bytes in all."""
    async for chunk in request.stream():
        size += len(chunk)
        if size > DRAIN_LIMIT:
            return


def liveness(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The loop's snapshot plus whether it is alive: it ticked recently and Ray answers."""
    age = time.time() - snapshot["heartbeat"]
    stalled = age > max(5.0, STALL_TICKS * snapshot["tick"])
    state = "stalled" if stalled else ("ray-unreachable" if snapshot["ray_error"] else "alive")
    return {**snapshot, "age": age, "state": state}
