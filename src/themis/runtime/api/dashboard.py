"""The live view of the cluster: what ``GET /v1/cluster`` answers, and the page that shows it.

``themis serve`` serves the page at ``/dashboard`` (three package data files under
``runtime/static/``: HTML, plain JavaScript and CSS; no build step). The page holds no
data and needs no token to load; it asks for a token, keeps it in the tab's
``sessionStorage`` and calls ``GET /v1/cluster`` with ``Authorization: Bearer``, every
few seconds. A token never travels in a URL the server sees: ``/dashboard#token=...``
is read by the page (a fragment is not sent in requests, so it reaches no access log)
and removed from the address bar at once.

What each token sees, as everywhere in the API (``runtime.auth``):

- the admin token: everything, read-only;
- the submit token (shared by every user): every app's name, state, GPUs, leases, rho
  and queued trials, but no text an app's trials wrote: no events (they hold trial log
  lines and errors) and an ended app's reason rebuilt from its counts
  (``queries.as_seen_by``);
- an app token: its own app only. GPUs other apps hold (or their stopping jobs still
  hold) are shown as taken by "another app", with no name, trial or lease end (one lease
  end per lease would group them back into apps); other apps' rows, rho, queued trials
  and events are left out.

The answer is assembled here from the store (apps, trials, leases, events; read-only)
and from :meth:`StatusReporting.cluster_view` (machines, rho history), which only the
scheduling loop knows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from themis.runtime.api.auth import Principal
from themis.runtime.api.queries import StatusRow, as_seen_by, status_rows
from themis.runtime.state.store import EventRow, LeaseRow, Store

#: Recent events shown, newest first.
EVENTS = 50
#: Queued trials listed (the total is given beside).
QUEUED = 500
#: An event's message is cut at this many characters.
MESSAGE_CHARS = 1000
#: Trial states counted as queued: waiting for GPUs, or paused at a halving rung.
QUEUED_STATES = ("waiting", "parked")
#: The page's files (package data) and their media types, by the name they are served at.
STATIC = {
    "dashboard.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
#: Headers of the page and its files: scripts only from this origin (so nothing an app
#: name or an event smuggles in can run), fetches only to it, never framed, no referrer.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def static_file(name: str) -> bytes:
    """One of the page's files, read from the installed package."""
    return resources.files("themis.runtime.api").joinpath("static", name).read_bytes()


@dataclass(frozen=True)
class ClusterFacts:
    """What ``/v1/cluster`` shows, read once for every caller (``api.snapshot`` keeps it
    for a moment): nothing here depends on who asks; :func:`cluster_for` cuts it."""

    rows: list[StatusRow]  # every app, in page order (``queries.status_rows``)
    held: dict[tuple[str, int], LeaseRow]  # (node id, slot) -> its lease
    view: dict[str, Any]  # the loop's ``cluster_view``
    queued: list[dict[str, Any]]  # every queued trial of active apps, in submission order
    events: list[tuple[int, EventRow]]  # the last EVENTS of every app, newest first


def cluster_facts(store: Store, view: dict[str, Any], rows: list[StatusRow]) -> ClusterFacts:
    """Read what every caller's answer is cut from; ``rows`` are the status rows."""
    held: dict[tuple[str, int], LeaseRow] = {}
    for lease in store.leases():
        for node_id, slot in lease.gpus:
            held[(str(node_id), int(slot))] = lease
    queued: list[dict[str, Any]] = []
    for app in store.app_briefs():
        if app.state not in ("submitted", "running"):
            continue
        for trial in store.trials(app.app_id):
            if trial.state in QUEUED_STATES:
                queued.append(
                    {
                        "app_id": app.app_id,
                        "trial_id": trial.trial_id,
                        "state": "submitted" if app.state == "submitted" else trial.state,
                        "gpus": trial.gang,
                        "steps_done": trial.steps_done,
                        "steps_total": trial.budget,
                    }
                )
    return ClusterFacts(rows, held, view, queued, store.recent_events(None, EVENTS))


def cluster_answer(store: Store, view: dict[str, Any], who: Principal) -> dict[str, Any]:
    """The dashboard's data as ``who`` may see it, read now (all but ``arbiter`` and
    ``now``, which the API adds); the API serves :func:`cluster_for` of a shared
    snapshot instead."""
    rows = status_rows(store)
    facts = cluster_facts(store, view, rows)
    return cluster_for(facts, who, lambda app_id: store.recent_events(app_id, EVENTS))


def cluster_for(
    facts: ClusterFacts,
    who: Principal,
    events_of: Callable[[str], list[tuple[int, EventRow]]],
    offset: int = 0,
    limit: int | None = None,
) -> dict[str, Any]:
    """``facts`` as ``who`` may see them, apps ``offset`` to ``offset + limit`` (every
    app: None); ``events_of(app)`` gives an app token its own app's recent events."""
    only = who.app_id if who.role == "app" else None
    view = facts.view
    epoch = float(view.get("epoch") or 0.0)

    def visible(app_id: str) -> bool:
        return only is None or app_id == only

    held = facts.held
    stopping = {(str(n), int(s)): (str(a), str(t)) for n, s, a, t in view.get("draining", [])}
    machines = []
    for node in view.get("machines", []):
        gpus = []
        for slot in range(int(node["gpus"])):
            holder = held.get((node["node_id"], slot))
            job = stopping.get((node["node_id"], slot))
            if holder is None and job is not None:
                # No lease any more, but its job has not returned: the GPU is not free.
                if visible(job[0]):
                    gpus.append(_gpu(slot, job[0], job[1], draining=True))
                else:
                    gpus.append(_gpu(slot, other=True, draining=True))
            elif holder is None:
                gpus.append(_gpu(slot))
            elif visible(holder.app_id):
                until = None if holder.until is None else epoch + holder.until
                gpus.append(
                    _gpu(slot, holder.app_id, holder.trial_id, epoch + holder.granted_at, until)
                )
            else:
                gpus.append(_gpu(slot, other=True))
        machines.append({**{k: node.get(k) for k in _MACHINE_FIELDS}, "gpus": gpus})

    mine = [row for row in facts.rows if visible(row.app_id)]
    page = mine[offset:] if limit is None else mine[offset : offset + limit]
    apps = [as_seen_by(row, who).to_dict() for row in page]
    names = {row["app_id"] for row in apps}
    rho = {
        app_id: [[wall, value] for wall, value in points]
        for app_id, points in view.get("rho", {}).items()
        if app_id in names
    }
    queued = [q for q in facts.queued if visible(q["app_id"])]
    if who.role == "submit":
        readable: list[tuple[int, EventRow]] = []  # events hold what trials logged and raised
    elif only is not None:
        readable = events_of(only)
    else:
        readable = facts.events
    events = [
        {
            "id": event_id,
            "wall": event.wall,
            "t": event.t,
            "app_id": event.app_id,
            "trial_id": event.trial_id,
            "message": event.message[:MESSAGE_CHARS],
        }
        for event_id, event in readable
        if who.may_read_text_of(event.app_id)
    ]
    nxt = offset + len(page)
    return {
        "role": who.role,
        "machines": machines,
        "apps": apps,
        "apps_total": len(mine),
        "next": nxt if nxt < len(mine) else None,
        "rho": rho,
        "queued": queued[:QUEUED],
        "queued_total": len(queued),
        "events": events,
    }


_MACHINE_FIELDS = ("name", "node_id", "rack", "gpu_type", "address")


def _gpu(
    slot: int,
    app_id: str | None = None,
    trial_id: str | None = None,
    granted_at: float | None = None,
    until: float | None = None,
    other: bool = False,
    draining: bool = False,
) -> dict[str, Any]:
    return {
        "slot": slot,
        "app_id": app_id,
        "trial_id": trial_id,
        "granted_at": granted_at,
        "until": until,
        "other": other,
        "draining": draining,
    }
