"""The runtime's durable state: one SQLite database (WAL mode) in the state directory.

It holds apps, trials (with their durable progress: the steps in their last checkpoint,
and their attained GPU-seconds), leases, successive-halving rung metrics, requests from
the CLI, and an event log per app. ``themis serve`` writes every change as it happens, in
one transaction each, so a restarted arbiter rebuilds the exact same apps and progress.

The database belongs to the arbiter process alone: users and training code reach it only
through the arbiter's HTTP API (``runtime.api``). The process writes from its scheduling
thread and reads from its API thread, each with its own connection (WAL lets the reader
run beside the writer).

Nothing is ever created by accident: opening a state directory whose database is
missing, empty, corrupt or of an unknown schema version is refused with one line, unless
``init`` is asked for (``themis serve --init``), which creates a missing or empty one and
moves a corrupt one aside (never deletes it).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import time
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis.errors import ThemisError
from themis.runtime.state import health as state_health
from themis.runtime.state.appfile import AppFile
from themis.runtime.state.health import StateDamaged, StateLost

__all__ = ["NameTaken", "StateDamaged", "StateLost", "Store", "name_key"]

DB_NAME = "themis.db"
#: The layout this code reads and writes. 1 was the unversioned layout of 0.1 (its CLI
#: wrote requests into the database); 2 added apps.reason and apps.note.
SCHEMA_VERSION = 2

#: Submits' idempotency keys (``api/routes.py``): who sent the key, its SHA-256, the
#: SHA-256 of the request and the app it created.
_SUBMIT_KEYS = """
CREATE TABLE IF NOT EXISTS submit_keys (
    principal TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    app_id TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    PRIMARY KEY (principal, key_hash)
);
"""
_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS apps (
    app_id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    spec TEXT NOT NULL,
    source TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    arrival REAL,
    finish REAL,
    t_cluster REAL,
    n_avg REAL,
    rho REAL,
    gpus INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    note TEXT
);
CREATE TABLE IF NOT EXISTS trials (
    app_id TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    config TEXT NOT NULL,
    gang INTEGER NOT NULL,
    budget INTEGER NOT NULL,
    steps_done INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'waiting',
    attained REAL NOT NULL DEFAULT 0,
    checkpoint TEXT,
    starts INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    PRIMARY KEY (app_id, trial_id)
);
CREATE TABLE IF NOT EXISTS leases (
    app_id TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    gpus TEXT NOT NULL,
    granted_at REAL NOT NULL,
    until REAL,
    PRIMARY KEY (app_id, trial_id)
);
CREATE TABLE IF NOT EXISTS rungs (
    app_id TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    rung INTEGER NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (app_id, trial_id, rung)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    wall REAL NOT NULL,
    t REAL,
    app_id TEXT NOT NULL,
    trial_id TEXT,
    message TEXT NOT NULL
);
"""
    + _SUBMIT_KEYS
)

#: App states: submitted (not yet admitted by the arbiter), running, and the ends:
#: finished (a trial ran its whole budget), failed (none did: errors, no metric, a gang
#: the cluster cannot hold; ``reason`` says which), cancelled.
ACTIVE_APP_STATES = ("submitted", "running")
#: Trial states of trials not over yet (parked: paused at a successive-halving rung).
LIVE_TRIAL_STATES = ("waiting", "running", "parked")
#: A trial stopped by successive halving (it lost at a rung): the store's state.
STOPPED_EARLY = "stopped-early"
#: A trial its own tuner's pruner stopped (a tuner app, ``state/tuner.py``).
PRUNED = "pruned"
#: Trial states after which a trial needs no more GPUs (the store's vocabulary).
ENDED = ("finished", STOPPED_EARLY, PRUNED, "failed", "cancelled")


@dataclass(frozen=True)
class AppRow:
    app_id: str
    token_hash: str
    spec: AppFile
    source: str
    state: str
    submitted_at: float
    arrival: float | None
    finish: float | None
    t_cluster: float | None
    n_avg: float | None
    rho: float | None
    gpus: int
    reason: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class AppBrief:
    """An app's row without its spec or token: what a status table shows, cheap to read
    for thousands of apps (no spec is parsed)."""

    app_id: str
    state: str
    submitted_at: float
    finish: float | None
    rho: float | None
    gpus: int
    reason: str | None
    note: str | None
    tuner: str | None = None  # what drives it (``TunerSpec.label``), or None


@dataclass(frozen=True)
class TrialTally:
    """An app's trials counted by state, with their steps done and budgets summed."""

    states: dict[str, int]
    steps_done: int
    steps_total: int


@dataclass(frozen=True)
class SubmitKey:
    """A submit's idempotency key as kept: who sent it, the key's and the request's
    SHA-256 (never the key itself), and the app it created."""

    principal: str
    key_hash: str
    body_hash: str
    app_id: str = ""


@dataclass(frozen=True)
class TrialRow:
    app_id: str
    trial_id: str
    idx: int
    config: dict[str, Any]
    gang: int
    budget: int
    steps_done: int
    state: str
    attained: float
    checkpoint: str | None
    starts: int
    reason: str | None


@dataclass(frozen=True)
class LeaseRow:
    app_id: str
    trial_id: str
    gpus: list[list[Any]]  # [[node_id, slot], ...]
    granted_at: float
    until: float | None


@dataclass(frozen=True)
class EventRow:
    wall: float
    t: float | None
    app_id: str
    trial_id: str | None
    message: str


class NameTaken(ThemisError):
    """An app of that name exists, ignoring case and Unicode form (the API's 409)."""


def name_key(name: str) -> str:
    """What two app names must differ in: ``waiter``, ``Waiter`` and ``WAITER`` (and the
    compatibility forms of one name, such as a fullwidth ``Ｗaiter``) are one app, since
    their storage folders collide on case-insensitive file systems. Apps of an older
    state that differ only so are kept as they are; a new one is refused."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def trial_id_of(index: int) -> str:
    return f"t{index:03d}"


class Store:
    """One connection to the state database; not shared between threads."""

    def __init__(self, state_dir: str | Path, init: bool = False, readonly: bool = False) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / DB_NAME
        self.lost = False
        #: Damage seen by any connection to this file in this process (``health``).
        self.health = state_health.health_of(self.path)
        self.logs: Any = None  # a LogWriter once the arbiter starts one (log_writer.py)
        where = str(self.path)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if fresh and not init:
            what = "no state database" if not self.path.exists() else "an empty state database"
            raise ThemisError(
                f"{what}; start the arbiter with 'themis serve --init' to create one",
                source=where,
            )
        if not readonly:
            private_dir(self.state_dir)
        if fresh:
            # Made 0600 before SQLite opens it: SQLite gives its -wal and -shm the mode
            # of the database file, so they are private from their creation too.
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            os.chmod(self.path, 0o600)
        elif init and _corrupt(self.path):
            aside = self.path.with_name(f"{DB_NAME}.corrupt-{int(time.time())}")
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                side = Path(str(self.path) + suffix)
                if side.exists():
                    os.replace(side, Path(str(aside) + suffix))
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            fresh = True
        if not readonly:
            _tighten_files(self.path)
        uri = f"file:{self.path}?mode={'ro' if readonly else 'rw'}"
        umask = os.umask(0o077)  # whatever SQLite creates besides: never readable by others
        try:
            self.db = _connect(uri, self.health, where)
            self.db.row_factory = sqlite3.Row
            self._open(fresh, readonly, where)
        finally:
            os.umask(umask)
        self._identity = _identity(self.path)

    def _open(self, fresh: bool, readonly: bool, where: str) -> None:
        if not readonly:
            # The file opened now is the one checked below: damage recorded against an
            # earlier file at this path (moved aside by --init) no longer applies.
            self.health.problem = None
        try:
            if not readonly:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=FULL")
            if fresh:
                with self.tx():
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            self.db.execute(statement)
                    self.db.execute(
                        "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
            version = self.meta("schema_version")
        except (sqlite3.DatabaseError, StateDamaged) as exc:
            self.db.close()
            what = exc.problem if isinstance(exc, StateDamaged) else str(exc)
            kind = StateDamaged if isinstance(exc, StateDamaged) else ThemisError
            raise kind(
                f"not a readable themis database ({what}); 'themis serve --init' moves it "
                "aside and starts a new one",
                source=where,
            ) from None
        if version != str(SCHEMA_VERSION):
            self.db.close()
            raise ThemisError(
                f"schema version {version or 'none (themis 0.1)'} is not the {SCHEMA_VERSION} "
                "this themis reads",
                source=where,
            )
        if not readonly and not fresh:
            # A table added without a new schema version (older themis ignores it): the
            # idempotency keys of submits, created in a database that predates it.
            self.db.execute(_SUBMIT_KEYS)
        if not readonly and not fresh:
            # Every open, not only --init: a corrupt page otherwise surfaces seconds later
            # as a traceback from whatever statement reads it first.
            problem = _integrity_problem(self.db)
            if problem is not None:
                self.db.close()
                raise ThemisError(
                    f"the state database failed its integrity check ({problem}); restore a "
                    "backup ('themis state backup', docs/runtime.md) or 'themis serve "
                    "--init' moves it aside and starts a new one",
                    source=where,
                )
        if not readonly:
            # The app's log is read by app (``events``) and pruned oldest first
            # (``log_writer``): both walk this index, not the whole table. Old themis
            # versions read a database with it unchanged.
            self.db.execute("CREATE INDEX IF NOT EXISTS events_app ON events (app_id, id)")

    def check_file(self) -> None:
        """The database file at the state path is still the one open here; else the
        arbiter must stop (:class:`StateLost`), with what it held rescued first.

        A deleted database went unnoticed: SQLite goes on writing to the open (unlinked)
        file, every answer looks fine, and the next start finds no database. Called every
        tick (one ``stat``)."""
        if self.lost:
            raise StateLost("the state database was lost earlier", source=str(self.path))
        if self.health.problem is not None:
            self._stop_damaged(self.health.problem)
        try:
            now = _identity(self.path)
        except FileNotFoundError:
            how = "deleted"
        else:
            if now == self._identity:
                return
            how = "replaced"
        self.lost = True
        self._stop_logs()
        stamp = time.strftime("%Y%m%dT%H%M%S")
        rescued = self.path.with_name(f"{DB_NAME}.rescued-{stamp}")
        kept = ""
        try:
            _backup_connection(self.db, rescued)
            wal = Path(f"{self.path}-wal")
            if wal.exists():
                wal_copy = Path(f"{self.path}-wal.rescued-{stamp}")
                _private_copy(wal, wal_copy)
                kept = f"; its WAL as it was: {wal_copy}"
            saved = (
                f"what it held is in {rescued} (to go on: move it to {self.path}, remove "
                f"{self.path.name}-wal and -shm, start serve)"
            )
        except (OSError, sqlite3.Error) as exc:
            saved = f"and it could not be rescued ({exc})"
        self.db.execute("PRAGMA query_only=ON")  # nothing more is written anywhere
        raise StateLost(
            f"the state database was {how} under the running arbiter; stopping: {saved}{kept}",
            source=str(self.path),
        )

    def give_up(self) -> None:
        """Write nothing more: the arbiter stops on lost or damaged state, wherever in a
        tick it was met, and its shutdown must not write into what is left."""
        self.lost = True
        self._stop_logs()
        with suppress(sqlite3.Error, StateLost):
            self.db.execute("PRAGMA query_only=ON")

    def _stop_damaged(self, problem: str) -> None:
        """Stop on damage: the file stays where it is (it is the evidence, and a backup
        or ``--init`` is the way on); nothing more is written to it."""
        self.give_up()
        raise StateDamaged(
            f"the state database is damaged under the running arbiter ({problem}); stopping, "
            "nothing more is written: restore a backup ('themis state backup', "
            "docs/runtime.md) or 'themis serve --init' moves it aside and starts a new one",
            source=str(self.path),
        )

    def _stop_logs(self) -> None:
        """The log writer flushes what it holds (into the file as it is) and stops."""
        if self.logs is not None:
            self.logs.close()

    def close(self) -> None:
        if self.logs is not None:
            self.logs.close()
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so writers queue instead of deadlocking).
        Refused once the database was found damaged: nothing is written into it."""
        if self.health.problem is not None:
            raise StateDamaged(
                f"the state database is damaged ({self.health.problem}); nothing is written",
                source=str(self.path),
            )
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- meta -----------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        return None if row is None else row["value"]

    def set_meta(self, key: str, value: str) -> None:
        with self.tx() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def epoch(self) -> float:
        """The wall-clock instant the runtime's clock counts from, fixed at first use so
        that arrival and finish times keep their meaning across restarts."""
        with self.tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
            if row is not None:
                return float(row["value"])
            epoch = time.time()
            db.execute("INSERT INTO meta (key, value) VALUES ('epoch', ?)", (repr(epoch),))
            return epoch

    # -- apps and trials ------------------------------------------------------------------

    def add_app(
        self, app: AppFile, token_hash: str, source: str, key: SubmitKey | None = None
    ) -> None:
        """Insert a submitted app and its trials; a name in use is refused. ``key``: the
        submit's idempotency key, kept with the app in the same transaction (so a retry
        finds the app whenever the app exists)."""
        name = name_key(app.name)
        with self.tx() as db:
            for (existing,) in db.execute("SELECT app_id FROM apps"):
                if name_key(existing) == name:
                    same = "" if existing == app.name else f" (as '{existing}')"
                    raise NameTaken(
                        f"an app named '{app.name}' was already submitted{same}; names are "
                        "unique ignoring case",
                        source=source,
                        field="name",
                    )
            if key is not None:
                db.execute(
                    "INSERT INTO submit_keys (principal, key_hash, app_id, body_hash)"
                    " VALUES (?, ?, ?, ?)",
                    (key.principal, key.key_hash, app.name, key.body_hash),
                )
            db.execute(
                "INSERT INTO apps (app_id, token_hash, spec, source, state, submitted_at)"
                " VALUES (?, ?, ?, ?, 'submitted', ?)",
                (app.name, token_hash, json.dumps(app.to_dict()), source, time.time()),
            )
            db.executemany(
                "INSERT INTO trials (app_id, trial_id, idx, config, gang, budget)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (app.name, trial_id_of(i), i, json.dumps(c), app.gpus_per_trial, app.steps)
                    for i, c in enumerate(app.configs)
                ],
            )

    def apps(self, states: tuple[str, ...] | None = None) -> list[AppRow]:
        """Apps in submission order, optionally only those in ``states``."""
        query = "SELECT * FROM apps"
        args: tuple[Any, ...] = ()
        if states is not None:
            query += f" WHERE state IN ({','.join('?' * len(states))})"
            args = states
        rows = self.db.execute(query + " ORDER BY submitted_at, app_id", args).fetchall()
        return [_app_row(r) for r in rows]

    def app_briefs(self, app_id: str | None = None) -> list[AppBrief]:
        """Every app (or app ``app_id``) in submission order, without specs."""
        where, args = ("WHERE app_id = ?", (app_id,)) if app_id is not None else ("", ())
        rows = self.db.execute(
            "SELECT app_id, state, submitted_at, finish, rho, gpus, reason, note, "
            "json_extract(spec, '$.tuner.label') FROM apps "
            f"{where} ORDER BY submitted_at, app_id",  # nosec B608 (constant text)
            args,
        ).fetchall()
        return [AppBrief(*r) for r in rows]

    def trial_tallies(self, app_id: str | None = None) -> dict[str, TrialTally]:
        """app -> its trials counted by state (one grouped query for every app)."""
        where, args = ("WHERE app_id = ?", (app_id,)) if app_id is not None else ("", ())
        rows = self.db.execute(
            "SELECT app_id, state, COUNT(*), SUM(steps_done), SUM(budget) FROM trials "
            f"{where} GROUP BY app_id, state",  # nosec B608 (constant text)
            args,
        ).fetchall()
        states: dict[str, dict[str, int]] = {}
        sums: dict[str, list[int]] = {}
        for app, state, count, done, total in rows:
            states.setdefault(app, {})[state] = count
            acc = sums.setdefault(app, [0, 0])
            acc[0] += done or 0
            acc[1] += total or 0
        return {app: TrialTally(states[app], *sums[app]) for app in states}

    def submitted_with(self, principal: str, key_hash: str) -> SubmitKey | None:
        """The submit this principal made with this idempotency key, if any."""
        row = self.db.execute(
            "SELECT * FROM submit_keys WHERE principal = ? AND key_hash = ?",
            (principal, key_hash),
        ).fetchone()
        if row is None:
            return None
        return SubmitKey(row["principal"], row["key_hash"], row["body_hash"], row["app_id"])

    def set_app_token(self, app_id: str, token_hash: str) -> None:
        """Replace an app's token (its hash): the old token is refused from now on."""
        with self.tx() as db:
            db.execute("UPDATE apps SET token_hash = ? WHERE app_id = ?", (token_hash, app_id))

    def app_with_token(self, token_hash: str) -> str | None:
        """The app whose token has this hash, if any."""
        row = self.db.execute(
            "SELECT app_id FROM apps WHERE token_hash = ?", (token_hash,)
        ).fetchone()
        return None if row is None else str(row["app_id"])

    def app(self, app_id: str) -> AppRow | None:
        row = self.db.execute("SELECT * FROM apps WHERE app_id = ?", (app_id,)).fetchone()
        return None if row is None else _app_row(row)

    def update_app(self, app_id: str, **fields: Any) -> None:
        _check_columns(
            fields,
            {"state", "arrival", "finish", "t_cluster", "n_avg", "rho", "gpus", "reason", "note"},
        )
        with self.tx() as db:
            _update(db, "apps", fields, "app_id = ?", (app_id,))

    def trials(self, app_id: str | None = None) -> list[TrialRow]:
        if app_id is None:
            rows = self.db.execute("SELECT * FROM trials ORDER BY app_id, idx").fetchall()
        else:
            rows = self.db.execute(
                "SELECT * FROM trials WHERE app_id = ? ORDER BY idx", (app_id,)
            ).fetchall()
        return [_trial_row(r) for r in rows]

    def update_trial(self, app_id: str, trial_id: str, **fields: Any) -> None:
        _check_columns(
            fields, {"steps_done", "state", "attained", "checkpoint", "starts", "reason"}
        )
        with self.tx() as db:
            _update(db, "trials", fields, "app_id = ? AND trial_id = ?", (app_id, trial_id))

    # -- leases ---------------------------------------------------------------------------

    def set_lease(
        self,
        app_id: str,
        trial_id: str,
        gpus: list[tuple[str, int]],
        granted_at: float,
        until: float | None,
    ) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO leases (app_id, trial_id, gpus, granted_at, until)"
                " VALUES (?, ?, ?, ?, ?)",
                (app_id, trial_id, json.dumps([list(g) for g in gpus]), granted_at, until),
            )
            db.execute(
                "UPDATE trials SET state = 'running' WHERE app_id = ? AND trial_id = ?",
                (app_id, trial_id),
            )

    def drop_lease(self, app_id: str, trial_id: str) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM leases WHERE app_id = ? AND trial_id = ?", (app_id, trial_id))

    def leases(self, app_id: str | None = None) -> list[LeaseRow]:
        if app_id is None:
            rows = self.db.execute("SELECT * FROM leases ORDER BY app_id, trial_id").fetchall()
        else:
            rows = self.db.execute(
                "SELECT * FROM leases WHERE app_id = ? ORDER BY trial_id", (app_id,)
            ).fetchall()
        return [
            LeaseRow(r["app_id"], r["trial_id"], json.loads(r["gpus"]), r["granted_at"], r["until"])
            for r in rows
        ]

    def void_leases(self) -> int:
        """At start-up: leases of a previous arbiter process ended with it (its job actors
        died with it); their trials wait again. Returns how many were voided."""
        with self.tx() as db:
            count = db.execute("DELETE FROM leases").rowcount
            db.execute("UPDATE trials SET state = 'waiting' WHERE state = 'running'")
            return count

    # -- successive halving ---------------------------------------------------------------

    def add_rung(self, app_id: str, trial_id: str, rung: int, value: float) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO rungs (app_id, trial_id, rung, value) VALUES (?, ?, ?, ?)",
                (app_id, trial_id, rung, value),
            )

    def rungs(self, app_id: str) -> dict[int, dict[str, float]]:
        """rung -> {trial_id: metric value at that rung}."""
        out: dict[int, dict[str, float]] = {}
        for r in self.db.execute("SELECT * FROM rungs WHERE app_id = ?", (app_id,)):
            out.setdefault(r["rung"], {})[r["trial_id"]] = r["value"]
        return out

    # -- event log ------------------------------------------------------------------------

    def start_log_writer(self, limits: Any = None, on_count: Any = None) -> Any:
        """From now on the event log is written in batches by a thread of its own, within
        per-app limits (``log_writer``); returns the writer. The arbiter starts one: its
        loop then never waits on the disk for a log line."""
        from themis.runtime.state.log_writer import LogWriter

        if self.logs is None:
            self.logs = LogWriter(self.path, limits, on_count)
        return self.logs

    def log(self, t: float | None, app_id: str, trial_id: str | None, message: str) -> None:
        """One line of the arbiter's own in an app's log (queued when a writer runs)."""
        if self.logs is not None:
            self.logs.event(t, app_id, trial_id, message)
            return
        with self.tx() as db:
            db.execute(
                "INSERT INTO events (wall, t, app_id, trial_id, message) VALUES (?, ?, ?, ?, ?)",
                (time.time(), t, app_id, trial_id, message),
            )

    def trial_lines(
        self, t: float | None, app_id: str, trial_id: str | None, lines: Sequence[str]
    ) -> None:
        """Lines a trial wrote: through the writer's per-app limits when one runs."""
        if self.logs is not None:
            self.logs.trial_lines(t, app_id, trial_id, lines)
            return
        for line in lines:
            self.log(t, app_id, trial_id, line)

    def flush_logs(self) -> None:
        """Every queued log line written (a reader on this connection sees them all)."""
        if self.logs is not None:
            self.logs.flush()

    def events(self, app_id: str, after: int = 0, limit: int = -1) -> list[tuple[int, EventRow]]:
        self.flush_logs()
        rows = self.db.execute(
            "SELECT * FROM events WHERE app_id = ? AND id > ? ORDER BY id LIMIT ?",
            (app_id, after, limit),
        ).fetchall()
        return [
            (r["id"], EventRow(r["wall"], r["t"], r["app_id"], r["trial_id"], r["message"]))
            for r in rows
        ]

    def recent_events(
        self, app_id: str | None = None, limit: int = 50
    ) -> list[tuple[int, EventRow]]:
        """The last ``limit`` events, newest first: of app ``app_id`` if given, else of
        every app (the dashboard's "recent events")."""
        self.flush_logs()
        where, args = ("WHERE app_id = ?", (app_id,)) if app_id is not None else ("", ())
        rows = self.db.execute(
            f"SELECT * FROM events {where} ORDER BY id DESC LIMIT ?",  # nosec B608
            (*args, limit),
        ).fetchall()
        return [
            (r["id"], EventRow(r["wall"], r["t"], r["app_id"], r["trial_id"], r["message"]))
            for r in rows
        ]


def _connect(uri: str, health: state_health.Health, where: str) -> sqlite3.Connection:
    try:
        return state_health.connect(uri, health, uri=True, timeout=30.0, isolation_level=None)
    except StateDamaged as exc:
        raise StateDamaged(
            f"not a readable themis database ({exc.problem}); 'themis serve --init' moves "
            "it aside and starts a new one",
            source=where,
        ) from None


def _check_columns(fields: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")


def _update(
    db: sqlite3.Connection, table: str, fields: dict[str, Any], where: str, args: tuple[Any, ...]
) -> None:
    if not fields:
        return
    sets = ", ".join(f"{k} = ?" for k in fields)
    # Table, columns and condition are this module's constants (columns checked against
    # an allow-list by _check_columns); every value is a bound parameter.
    statement = f"UPDATE {table} SET {sets} WHERE {where}"  # nosec B608
    db.execute(statement, (*fields.values(), *args))


def _app_row(r: sqlite3.Row) -> AppRow:
    return AppRow(
        r["app_id"],
        r["token_hash"],
        AppFile.from_dict(json.loads(r["spec"])),
        r["source"],
        r["state"],
        r["submitted_at"],
        r["arrival"],
        r["finish"],
        r["t_cluster"],
        r["n_avg"],
        r["rho"],
        r["gpus"],
        r["reason"],
        r["note"],
    )


def _trial_row(r: sqlite3.Row) -> TrialRow:
    return TrialRow(
        r["app_id"],
        r["trial_id"],
        r["idx"],
        json.loads(r["config"]),
        r["gang"],
        r["budget"],
        r["steps_done"],
        r["state"],
        r["attained"],
        r["checkpoint"],
        r["starts"],
        r["reason"],
    )


def _corrupt(path: Path) -> bool:
    """Whether ``path`` is not an SQLite database SQLite can read."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db.execute("PRAGMA quick_check").fetchone()[0] != "ok"
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return True


def _integrity_problem(db: sqlite3.Connection) -> str | None:
    """None when SQLite's ``quick_check`` passes, else its first complaint (one line)."""
    try:
        first = db.execute("PRAGMA quick_check").fetchone()[0]
    except StateDamaged as exc:
        return exc.problem
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if first == "ok" else " ".join(str(first).split())[:200]


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def private_dir(path: Path) -> None:
    """``path`` exists and only its owner may enter it (0700): made so, tightened when
    looser (an existing 0755 directory let other users read the WAL's live events), or
    refused when it is not ours to tighten."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
        if stat.S_IMODE(st.st_mode) & 0o077:
            if st.st_uid != os.getuid():
                raise ThemisError(
                    f"the state directory is open to other users (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}) and belongs to another user",
                    source=str(path),
                )
            os.chmod(path, 0o700)
    except OSError as exc:
        raise ThemisError(
            f"cannot make the state directory private: {exc.strerror}", source=str(path)
        ) from None


def _tighten_files(path: Path) -> None:
    """The database and its -wal and -shm, 0600 when they exist."""
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            if stat.S_IMODE(p.stat().st_mode) & 0o077:
                os.chmod(p, 0o600)
        except FileNotFoundError:
            continue


def _private_copy(source: Path, dest: Path) -> None:
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out)


def _backup_connection(source: sqlite3.Connection, dest: Path) -> None:
    """A consistent copy of what ``source`` sees, through SQLite's online backup API,
    into a new 0600 file ``dest`` (refused if it exists)."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    target = sqlite3.connect(dest)
    try:
        source.backup(target)
    finally:
        target.close()


def backup(state_dir: str | Path, dest: str | Path) -> str:
    """``themis state backup``: copy the state database to ``dest`` while the arbiter
    runs (SQLite's online backup API reads a consistent snapshot beside the writer),
    check the copy, and say what it holds. ``dest`` is new (never overwritten), 0600."""
    path = Path(state_dir) / DB_NAME
    dest = Path(dest)
    if not path.exists():
        raise ThemisError("no state database", source=str(path))
    if dest.exists():
        raise ThemisError("exists; a backup never overwrites a file", source=str(dest))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
        try:
            _backup_connection(source, dest)
        finally:
            source.close()
        copy = sqlite3.connect(f"file:{dest}?mode=ro", uri=True)
        try:
            problem = _integrity_problem(copy)
            apps = copy.execute("SELECT count(*) FROM apps").fetchone()[0]
            events = copy.execute("SELECT count(*) FROM events").fetchone()[0]
        finally:
            copy.close()
    except (OSError, sqlite3.Error) as exc:
        raise ThemisError(f"backup failed: {exc}", source=str(dest)) from None
    if problem is not None:
        raise ThemisError(
            f"the copy failed its integrity check ({problem}): the database itself is damaged",
            source=str(dest),
        )
    return f"backed up {path} to {dest}: {apps} apps, {events} events (quick_check ok)"
