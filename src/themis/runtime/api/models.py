"""The API's request and response bodies, typed (pydantic), for its published schema.

``GET /openapi.json`` (admin token) is generated from these: every route's body, its
answers, its errors and its bearer security. Request bodies are still read by the API
under a size bound *before* they are parsed (``api._bounded_body``), then checked
against these models (a mismatch is one-line 400). Responses carry the fields listed
here; ``extra="allow"`` on the status models lets a newer arbiter add fields without
breaking an older client's schema check.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Error(BaseModel):
    """Every error: one line."""

    detail: str


class Health(BaseModel):
    ok: bool


class SubmitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="the app file (app.yaml), as text")
    source: str = Field(description="its name, for error messages (cut at 200 characters)")
    base_dir: str = Field(description="absolute folder a relative 'workdir' resolves from")


class SubmitResponse(BaseModel):
    app_id: str
    token: str = Field(description="the app's own token: shown once")
    trials: int
    replayed: bool = Field(
        default=False,
        description="a repeat of a submit made with the same Idempotency-Key: the same "
        "app, with a new token (the earlier one is refused from now on)",
    )


class ReleaseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trial: str = Field(max_length=64, description="the trial whose lease ends now")


class Reply(BaseModel):
    reply: str


class RotateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    which: Literal["admin", "submit"]


class RotateResponse(BaseModel):
    which: Literal["admin", "submit"]
    token: str


class LogsResponse(BaseModel):
    lines: list[str]
    last: int = Field(description="the last event id: ask again with after=last")
    state: str | None


class Liveness(BaseModel):
    model_config = ConfigDict(extra="allow")
    heartbeat: float = Field(description="wall clock of the loop's last tick")
    started: float | None = None
    rounds: int | None = None
    gpus: int | None = None
    machines: int | None = None
    ray_error: str | None = None
    ray_down_since: float | None = None
    tick: float
    age: float = Field(description="seconds since the last tick")
    state: Literal["alive", "stalled", "ray-unreachable"]


class AppStatus(BaseModel):
    model_config = ConfigDict(extra="allow")
    app_id: str
    state: str
    rho: float | None
    gpus: int
    leases: int
    alive: int
    stopped_early: int
    finished: int
    failed: int
    steps_done: int
    steps_total: int
    why: str | None
    pruned: int = Field(0, description="trials the app's tuner pruned")
    tuner: str | None = Field(
        None, description="the tuner that drives the app (kind sampler/pruner), or null"
    )


class StatusResponse(BaseModel):
    arbiter: Liveness
    apps: list[AppStatus] = Field(
        description="a page of apps: active ones first, then ended ones, the last to end first"
    )
    apps_total: int = Field(description="apps this token sees, on every page")
    next: int | None = Field(description="the offset of the next page (None: no more)")


class GpuSlot(BaseModel):
    slot: int = Field(description="the GPU's place on its machine (the arbiter's bookkeeping)")
    app_id: str | None = Field(description="who holds it (None: free, or another app)")
    trial_id: str | None
    granted_at: float | None = Field(description="wall clock of the grant")
    until: float | None = Field(description="wall clock its lease ends (None: open-ended)")
    other: bool = Field(description="held by an app this token may not see (app tokens)")
    draining: bool = Field(
        description="its lease ended and its job has not returned yet (checkpointing)"
    )


class Machine(BaseModel):
    node_id: str = Field(description="the Ray node id")
    rack: str
    gpu_type: str | None
    address: str | None = Field(description="the node's IP as Ray reports it")
    gpus: list[GpuSlot]


class QueuedTrial(BaseModel):
    app_id: str
    trial_id: str
    state: Literal["submitted", "waiting", "parked"] = Field(
        description="submitted: its app is not admitted yet; parked: paused at a rung"
    )
    gpus: int
    steps_done: int
    steps_total: int


class Event(BaseModel):
    id: int
    wall: float
    t: float | None = Field(description="seconds since the arbiter's epoch")
    app_id: str
    trial_id: str | None
    message: str


class ClusterResponse(BaseModel):
    """``GET /v1/cluster``: what the dashboard shows (an app token: its own app only)."""

    now: float = Field(description="the arbiter's wall clock")
    role: Literal["admin", "submit", "app"] = Field(description="what the token is")
    arbiter: Liveness
    machines: list[Machine] = Field(description="by rack, then node id")
    apps: list[AppStatus] = Field(description="a page of apps, as in /v1/status")
    apps_total: int
    next: int | None = Field(description="the offset of the next page of apps (None: no more)")
    rho: dict[str, list[tuple[float, float]]] = Field(
        description="app -> [wall clock, rho] points since serve started (apps of the page)"
    )
    queued: list[QueuedTrial] = Field(description="at most 500")
    queued_total: int
    events: list[Event] = Field(
        description="the last 50 this token may read, newest first (none to the submit "
        "token: events hold what trials logged and raised)"
    )


def errors(*codes: int) -> dict[int | str, dict[str, object]]:
    """The declared error answers of a route (all are :class:`Error`)."""
    what = {
        400: "bad input (one line naming the field)",
        401: "no token, or an unknown one",
        403: "a token that may not do this",
        404: "no such app",
        409: "an app of that name exists (names are unique ignoring case and Unicode form), "
        "or an Idempotency-Key sent before with another request",
        413: "request body too large",
        429: "over this token's request rate: retry after Retry-After seconds",
        503: "the scheduling loop is busy or did not answer in time, or the state database "
        "is damaged",
    }
    return {code: {"model": Error, "description": what[code]} for code in codes}


def body_schema(model: type[BaseModel]) -> dict[str, object]:
    """``openapi_extra`` for a route that reads its body itself (bounded) and checks it
    against ``model``: the body is documented as if FastAPI parsed it."""
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
