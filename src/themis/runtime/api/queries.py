"""What ``status`` and ``logs`` show, read from the store by the arbiter's API thread.

What a token may read of another app: its name, state, GPUs, rho and trial counts, never
text its trials wrote. An ended app's ``reason`` may quote a trial's error or the metric
names it reported, so a token that may not read that app's text gets a reason rebuilt
from the counts (:func:`as_seen_by`); a live app's ``why`` is the arbiter's own note
(``loop/status.py``), shown to all.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from themis.errors import ThemisError
from themis.runtime.api.auth import Principal
from themis.runtime.loop.halving import STOPPED_EARLY
from themis.runtime.state.store import ACTIVE_APP_STATES, LIVE_TRIAL_STATES, PRUNED, Store


@dataclass(frozen=True)
class StatusRow:
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
    why: str | None  # the outcome's reason once ended; else why it holds nothing
    pruned: int = 0  # trials its tuner's pruner stopped
    tuner: str | None = None  # what drives it: ``TunerSpec.label`` (our words), or None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ended(self) -> bool:
        return self.state not in ACTIVE_APP_STATES


def as_seen_by(row: StatusRow, who: Principal) -> StatusRow:
    """``row`` as ``who`` may see it: an ended app's reason, which may quote what its
    trials wrote, is replaced by one built from its counts unless ``who`` may read it."""
    if who.may_read_text_of(row.app_id) or not row.ended:
        return row
    return replace(row, why=public_reason(row))


def public_reason(row: StatusRow) -> str:
    """How an app ended, from its counts only (no text of its own)."""
    if row.state == "cancelled":
        return "cancelled"
    total = row.alive + row.stopped_early + row.pruned + row.finished + row.failed
    parts = [f"{row.finished} of {total} trials ran their whole budget"]
    if row.stopped_early:
        parts.append(f"{row.stopped_early} stopped early")
    if row.pruned:
        parts.append(f"{row.pruned} pruned by the app's tuner")
    if row.failed:
        parts.append(f"{row.failed} failed")
    return "; ".join(parts) + " (details: the app's token or the admin's)"


def status_rows(store: Store, only: str | None = None) -> list[StatusRow]:
    """One row per app (only app ``only`` if given), in the order pages are cut from:
    active apps in submission order, then ended ones, the last to end first, so the first
    page shows what is going on whatever the history. Three queries whatever the number
    of apps (no spec is parsed): a state of thousands of apps is read in milliseconds."""
    leases: dict[str, int] = {}
    for lease in store.leases(only):
        leases[lease.app_id] = leases.get(lease.app_id, 0) + 1
    tallies = store.trial_tallies(only)
    rows = []
    briefs = store.app_briefs(only)
    active = [a for a in briefs if a.state in ACTIVE_APP_STATES]
    over = sorted(
        (a for a in briefs if a.state not in ACTIVE_APP_STATES),
        key=lambda a: -(a.finish if a.finish is not None else a.submitted_at),
    )
    for app in (*active, *over):
        tally = tallies.get(app.app_id)
        count = tally.states if tally is not None else {}
        ended = app.state not in ACTIVE_APP_STATES
        rows.append(
            StatusRow(
                app.app_id,
                app.state,
                app.rho,
                app.gpus,
                leases.get(app.app_id, 0),
                sum(count.get(s, 0) for s in LIVE_TRIAL_STATES),
                count.get(STOPPED_EARLY, 0),
                count.get("finished", 0),
                count.get("failed", 0),
                0 if tally is None else tally.steps_done,
                0 if tally is None else tally.steps_total,
                app.reason if ended else app.note,
                count.get(PRUNED, 0),
                app.tuner,
            )
        )
    return rows


def log_lines(
    store: Store, app_id: str, after: int = 0, limit: int = 1000
) -> tuple[list[str], int]:
    """The app's event log after event ``after``: (lines, last event id), at most
    ``limit`` events per call (the client asks again from the last id)."""
    if store.app(app_id) is None:
        raise ThemisError(f"no app named {app_id!r}", field="APP")
    lines = []
    last = after
    for event_id, event in store.events(app_id, after, limit):
        stamp = time.strftime("%H:%M:%S", time.localtime(event.wall))
        clock = "" if event.t is None else f" t={event.t:8.1f}s"
        who = f" {event.trial_id}" if event.trial_id else ""
        for k, text in enumerate(event.message.splitlines() or [""]):
            prefix = f"{stamp}{clock}{who}: " if k == 0 else "    "
            lines.append(prefix + text)
        last = event_id
    return lines, last
