"""What ``submit``, ``cancel``, ``status`` and ``logs`` do, through the state database.

The arbiter and its clients share nothing but the store: a submit inserts the app (the
arbiter admits it at its next tick), a cancel inserts a request and waits for the
arbiter's answer, status and logs read. No socket is opened, so nothing listens for
clients at all; who may submit is who may write the state directory (mode 0700).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from themis.errors import ThemisError
from themis.runtime.appfile import load_app_file
from themis.runtime.store import LIVE_TRIAL_STATES, Store
from themis.runtime.tokens import new_token, token_hash


@dataclass(frozen=True)
class Submitted:
    app_id: str
    token: str
    trials: int


def submit(store: Store, app_file: str | Path) -> Submitted:
    app = load_app_file(app_file)
    token = new_token()
    store.add_app(app, token_hash(token), str(app_file))
    return Submitted(app.name, token, app.trials)


def send_request(
    store: Store,
    kind: str,
    app_id: str,
    token: str | None,
    payload: dict[str, str] | None = None,
    wait: float = 30.0,
    poll: float = 0.1,
) -> str:
    """Queue a request for the arbiter and return its answer; a refusal, or no answer
    within ``wait`` seconds, is a :class:`ThemisError`."""
    if not token:
        raise ThemisError("a token is needed (--token or THEMIS_TOKEN)", field="--token")
    request_id = store.add_request(kind, app_id, token, payload)
    deadline = time.monotonic() + wait
    while True:
        row = store.request(request_id)
        if row is not None and row.state != "pending":
            if row.state == "refused":
                raise ThemisError(f"refused: {row.reply}")
            return row.reply or "done"
        if time.monotonic() >= deadline:
            raise ThemisError(
                f"no answer from the arbiter within {wait:g}s (is 'themis serve' running with "
                f"this state directory?); the request stays queued"
            )
        time.sleep(poll)


@dataclass(frozen=True)
class StatusRow:
    app_id: str
    state: str
    rho: float | None
    gpus: int
    leases: int
    alive: int
    stopped: int
    finished: int
    failed: int
    steps_done: int
    steps_total: int


def status_rows(store: Store) -> list[StatusRow]:
    leases: dict[str, int] = {}
    for lease in store.leases():
        leases[lease.app_id] = leases.get(lease.app_id, 0) + 1
    rows = []
    for app in store.apps():
        trials = store.trials(app.app_id)
        count = {s: sum(t.state == s for t in trials) for s in ("stopped", "finished", "failed")}
        rows.append(
            StatusRow(
                app.app_id,
                app.state,
                app.rho,
                app.gpus,
                leases.get(app.app_id, 0),
                sum(t.state in LIVE_TRIAL_STATES for t in trials),
                count["stopped"],
                count["finished"],
                count["failed"],
                sum(t.steps_done for t in trials),
                sum(t.budget for t in trials),
            )
        )
    return rows


def log_lines(store: Store, app_id: str, after: int = 0) -> tuple[list[str], int]:
    """The app's event log after event ``after``: (lines, last event id)."""
    if store.app(app_id) is None:
        raise ThemisError(f"no app named '{app_id}'", field="APP")
    lines = []
    last = after
    for event_id, event in store.events(app_id, after):
        stamp = time.strftime("%H:%M:%S", time.localtime(event.wall))
        clock = "" if event.t is None else f" t={event.t:8.1f}s"
        who = f" {event.trial_id}" if event.trial_id else ""
        for k, text in enumerate(event.message.splitlines() or [""]):
            prefix = f"{stamp}{clock}{who}: " if k == 0 else "    "
            lines.append(prefix + text)
        last = event_id
    return lines, last
