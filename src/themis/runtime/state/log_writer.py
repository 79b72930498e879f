"""The app logs' writer: batched off the scheduling loop, bounded per app.

A trial's ``trial.log`` lines travel job actor -> poll -> the loop's report handling ->
here. They used to be written one transaction each with ``synchronous=FULL`` on the
loop's thread, without bound: one app writing 200 lines of 4,000 characters a step
grew the database 3.4 MB/s and stalled every tenant's scheduling. Now:

- the loop only *enqueues* (in memory, never waiting on the disk); a thread of its own
  writes what is queued in one transaction every ``flush_every`` seconds (or as soon as
  ``batch_lines`` are queued), on its own connection with ``synchronous=NORMAL``: logs
  may lose their last fraction of a second in a power cut, unlike submits and durable
  progress, which stay synchronous on the loop's connection;
- every line is cut at ``max_line`` characters (counted: ``cut``);
- each app has a budget of ``lines_per_s`` lines and ``bytes_per_s`` bytes per second (a
  token bucket holding ``burst_s`` seconds of each): what is over it is dropped, counted
  (``rate``), and said in the app's own log ("N lines dropped (rate limit ...)") at
  most once a second;
- the queue holds at most ``queue_lines`` lines; past it, lines are dropped and counted
  (``queue``): the disk being slow never grows the arbiter's memory;
- the state keeps at most ``keep_lines`` lines and ``keep_bytes`` bytes of log per app:
  past either, its oldest lines are deleted down to 90% of the cap, counted
  (``pruned``) and said in its log.

Every count goes to ``on_count(app_id, why, lines)`` (the loop's Prometheus counter
``themis_log_lines_limited_total{app,why}``). The arbiter's own lines (admitted,
granted, failed: ...) skip the rate budget but not the cut, the queue bound or the cap.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from themis.runtime.state import health as state_health

log = logging.getLogger("themis.runtime")

#: Why a line was not kept as written: cut to ``max_line``, over the app's rate budget,
#: the queue full, pruned from the state past the app's cap.
CUT, RATE, QUEUE, PRUNED = "cut", "rate", "queue", "pruned"
#: The marker a cut line ends with.
CUT_MARK = " [cut]"


@dataclass(frozen=True)
class LogLimits:
    """The bounds of one arbiter's app logs (``themis serve`` defaults)."""

    #: Characters kept of one line.
    max_line: int = 4000
    #: Lines per second one app may add to its log (sustained).
    lines_per_s: float = 50.0
    #: Bytes (UTF-8) per second one app may add to its log (sustained).
    bytes_per_s: float = 64 * 1024
    #: Seconds of either rate an idle app may spend at once.
    burst_s: float = 10.0
    #: Lines the state keeps per app (oldest pruned).
    keep_lines: int = 20_000
    #: Bytes of log the state keeps per app (oldest pruned).
    keep_bytes: int = 8 * 2**20
    #: Seconds between batched writes.
    flush_every: float = 0.25
    #: Lines queued that start a write before ``flush_every``.
    batch_lines: int = 1000
    #: Lines the queue holds at most (every app together).
    queue_lines: int = 20_000


@dataclass
class _Budget:
    """One app's token bucket, and what it dropped since the last note."""

    lines: float
    bytes: float
    at: float
    dropped: int = 0
    noted_at: float = 0.0
    last_t: float | None = None


@dataclass
class _Kept:
    """What the state holds of one app's log (to prune past the cap)."""

    lines: int = 0
    bytes: int = 0


@dataclass
class _Row:
    wall: float
    t: float | None
    app_id: str
    trial_id: str | None
    message: str


@dataclass
class _Queue:
    rows: deque[_Row] = field(default_factory=deque)
    written: int = 0  # rows written so far (for flush)
    queued: int = 0  # rows ever queued


class LogWriter:
    """Queues app log lines and writes them in batches on its own thread."""

    def __init__(
        self,
        path: Path,
        limits: LogLimits | None = None,
        on_count: Callable[[str, str, int], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.limits = limits or LogLimits()
        self.on_count = on_count
        self.health = state_health.health_of(self.path)
        self._q = _Queue()
        self._cond = threading.Condition()
        self._budgets: dict[str, _Budget] = {}
        self._kept: dict[str, _Kept] = {}
        self._closed = False
        self.failed: str | None = None
        self._db = state_health.connect(
            f"file:{self.path}?mode=rw",
            self.health,
            uri=True,
            timeout=30.0,
            isolation_level=None,
            check_same_thread=False,
        )
        self._db.execute("PRAGMA synchronous=NORMAL")
        for app_id, lines, size in self._db.execute(
            "SELECT app_id, count(*), coalesce(sum(length(CAST(message AS BLOB))), 0)"
            " FROM events GROUP BY app_id"
        ):
            self._kept[app_id] = _Kept(int(lines), int(size))
        self._thread = threading.Thread(target=self._run, name="themis-log-writer", daemon=True)
        self._thread.start()

    # -- the loop's side: enqueue, never wait ---------------------------------------------

    def event(self, t: float | None, app_id: str, trial_id: str | None, message: str) -> None:
        """One of the arbiter's own lines (no rate budget)."""
        now = time.time()
        with self._cond:
            self._put(_Row(now, t, app_id, trial_id, self._cut(app_id, message)), limit=2)

    def trial_lines(
        self, t: float | None, app_id: str, trial_id: str | None, lines: Sequence[str]
    ) -> None:
        """Lines a trial wrote: cut, then within the app's budget, else dropped (counted)."""
        now = time.time()
        limits = self.limits
        with self._cond:
            budget = self._budget(app_id, now)
            budget.last_t = t
            dropped_before = budget.dropped
            for k, line in enumerate(lines):
                if budget.lines < 1:  # the rest is over budget: counted, not looked at
                    budget.dropped += len(lines) - k
                    break
                cut = len(line) > limits.max_line
                text = line[: limits.max_line] + CUT_MARK if cut else line
                size = len(text.encode("utf-8", "replace"))
                if budget.bytes >= size:
                    budget.lines -= 1
                    budget.bytes -= size
                    if cut:
                        self._count(app_id, CUT, 1)
                    self._put(_Row(now, t, app_id, trial_id, text), limit=1)
                else:
                    budget.dropped += 1
            self._count(app_id, RATE, budget.dropped - dropped_before)  # counted at once
            if budget.dropped and now - budget.noted_at >= 1.0:
                note = (
                    f"{budget.dropped} lines dropped (rate limit: {limits.lines_per_s:g} "
                    f"lines/s, {limits.bytes_per_s / 1024:g} KiB/s per app)"
                )
                self._put(_Row(now, t, app_id, None, note), limit=2)
                budget.dropped = 0
                budget.noted_at = now
            self._cond.notify()

    def _budget(self, app_id: str, now: float) -> _Budget:
        limits = self.limits
        cap_lines = limits.lines_per_s * limits.burst_s
        cap_bytes = limits.bytes_per_s * limits.burst_s
        budget = self._budgets.get(app_id)
        if budget is None:
            budget = self._budgets[app_id] = _Budget(cap_lines, cap_bytes, now)
        elapsed = max(0.0, now - budget.at)
        budget.lines = min(cap_lines, budget.lines + elapsed * limits.lines_per_s)
        budget.bytes = min(cap_bytes, budget.bytes + elapsed * limits.bytes_per_s)
        budget.at = now
        return budget

    def _cut(self, app_id: str, text: str) -> str:
        if len(text) <= self.limits.max_line:
            return text
        self._count(app_id, CUT, 1)
        return text[: self.limits.max_line] + CUT_MARK

    def _put(self, row: _Row, limit: int) -> None:
        """Queue a row (lock held); past ``limit`` times the queue bound it is dropped."""
        if self._closed or len(self._q.rows) >= limit * self.limits.queue_lines:
            self._count(row.app_id, QUEUE, 1)
            return
        self._q.rows.append(row)
        self._q.queued += 1
        if len(self._q.rows) >= self.limits.batch_lines:
            self._cond.notify()

    def _count(self, app_id: str, why: str, lines: int) -> None:
        if self.on_count is not None and lines:
            with contextlib.suppress(Exception):  # a metric never stops the log
                self.on_count(app_id, why, lines)

    def forget(self, app_id: str) -> None:
        """An ended app's budget goes (its lines, if it logs again, start a new one)."""
        with self._cond:
            budget = self._budgets.pop(app_id, None)
            if budget is not None and budget.dropped:
                note = f"{budget.dropped} lines dropped (rate limit)"
                self._put(_Row(time.time(), budget.last_t, app_id, None, note), limit=2)

    # -- flushing and stopping ------------------------------------------------------------

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every line queued so far is written (tests, shutdown); False on
        timeout or when the writer has stopped with lines unwritten."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._q.queued
            self._cond.notify_all()
            while self._q.written < target and self._thread.is_alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return self._q.written >= target

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop (once)."""
        if self._closed:
            return
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    # -- the writer's thread --------------------------------------------------------------

    def _run(self) -> None:
        limits = self.limits
        while True:
            with self._cond:
                if not self._closed and len(self._q.rows) < limits.batch_lines:
                    self._cond.wait(limits.flush_every)
                if self._closed and not self._q.rows:
                    return
                rows = list(self._q.rows)
                self._q.rows.clear()
            if not rows:
                continue
            try:
                self._write(rows)
            except Exception as exc:  # noqa: BLE001 (recorded; the loop stops on damage)
                self.failed = f"{type(exc).__name__}: {exc}"
                log.error("themis serve: writing app logs failed: %s", self.failed)
                with self._cond:
                    self._closed = True
                    self._q.written += len(rows)
                    self._cond.notify_all()
                return
            with self._cond:
                self._q.written += len(rows)
                self._cond.notify_all()

    def _write(self, rows: list[_Row]) -> None:
        if self.health.problem is not None:
            problem = self.health.problem
            raise state_health.StateDamaged(f"the state database is damaged ({problem})")
        db = self._db
        touched: set[str] = set()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT INTO events (wall, t, app_id, trial_id, message) VALUES (?, ?, ?, ?, ?)",
                [(r.wall, r.t, r.app_id, r.trial_id, r.message) for r in rows],
            )
            for r in rows:
                kept = self._kept.setdefault(r.app_id, _Kept())
                kept.lines += 1
                kept.bytes += len(r.message.encode("utf-8", "replace"))
                touched.add(r.app_id)
            notes = [self._prune(db, app_id) for app_id in sorted(touched)]
            db.executemany(
                "INSERT INTO events (wall, t, app_id, trial_id, message) VALUES (?, ?, ?, ?, ?)",
                [n for n in notes if n is not None],
            )
        except BaseException:
            with contextlib.suppress(sqlite3.Error, state_health.StateLost):
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _prune(
        self, db: sqlite3.Connection, app_id: str
    ) -> tuple[float, None, str, None, str] | None:
        """Delete the app's oldest lines past its cap (down to 90% of it); the note that
        says so, to be written after."""
        limits = self.limits
        kept = self._kept[app_id]
        if kept.lines <= limits.keep_lines and kept.bytes <= limits.keep_bytes:
            return None
        lines_over = kept.lines - int(limits.keep_lines * 0.9)
        bytes_over = kept.bytes - int(limits.keep_bytes * 0.9)
        count = size = 0
        last_id = None
        for event_id, length in db.execute(
            "SELECT id, length(CAST(message AS BLOB)) FROM events WHERE app_id = ? ORDER BY id",
            (app_id,),
        ):
            if count >= lines_over and size >= bytes_over:
                break
            count += 1
            size += int(length or 0)
            last_id = event_id
        if last_id is None:
            return None
        db.execute("DELETE FROM events WHERE app_id = ? AND id <= ?", (app_id, last_id))
        kept.lines -= count
        kept.bytes -= size
        self._count(app_id, PRUNED, count)
        note = (
            f"{count} older log lines pruned: the state keeps at most {limits.keep_lines} "
            f"lines and {limits.keep_bytes // 2**20} MiB of log per app"
        )
        kept.lines += 1
        kept.bytes += len(note)
        return (time.time(), None, app_id, None, note)
