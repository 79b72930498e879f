"""Whether the state database can still be trusted, shared by every connection to it.

A database damaged under a running arbiter (pages overwritten, a disk failing) used to
surface as a traceback from whichever statement read a bad page first: the API answered
plain-text 500s, the loop counted a generic fault and went on writing into the damaged
file, and ``/healthz`` stayed green. Here every connection the runtime opens on the
database (the loop's, the log writer's, each API thread's read-only one) is a
:class:`GuardedConnection`: an SQLite error that means damage (corrupt page, not a
database, I/O error, disk full) is recorded once in the path's :class:`Health` and raised
as :class:`StateDamaged`. The loop's next tick then stops the arbiter with one line
(``Store.check_file``), the API answers 503 and ``/healthz`` fails; nothing more is
written.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable
from typing import Any

from themis.errors import ThemisError

#: SQLite's primary result codes that mean the file cannot be trusted (the low byte of
#: an extended code): SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB.
DAMAGE_CODES = frozenset({10, 11, 13, 26})


class StateLost(ThemisError):
    """The state database was deleted, replaced or damaged under the running arbiter."""


class StateDamaged(StateLost):
    """An SQLite error that means the database file is damaged (or its disk failing)."""

    def __init__(self, message: str, problem: str = "", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.problem = problem or message


class Health:
    """The first damage seen on one database file, by any connection in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.problem: str | None = None

    def record(self, problem: str) -> None:
        with self._lock:
            if self.problem is None:
                self.problem = " ".join(problem.split())[:300]


_registry: dict[str, Health] = {}
_registry_lock = threading.Lock()


def health_of(path: str | os.PathLike[str]) -> Health:
    """The one :class:`Health` of the database at ``path`` in this process."""
    key = os.path.realpath(path)
    with _registry_lock:
        return _registry.setdefault(key, Health())


def is_damage(exc: BaseException) -> bool:
    """Whether an SQLite error says the file is damaged, not that a statement was wrong."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in DAMAGE_CODES
    text = str(exc).lower()
    return any(w in text for w in ("malformed", "not a database", "disk i/o error"))


class _GuardedCursor(sqlite3.Cursor):
    """A cursor whose damage errors become :class:`StateDamaged` (reads fail while
    fetching too, not only in ``execute``)."""

    health: Health | None = None

    def _damaged(self, exc: sqlite3.DatabaseError) -> StateDamaged:
        health = getattr(self.connection, "health", None)
        problem = str(exc) or type(exc).__name__
        if isinstance(health, Health):
            health.record(problem)
        return StateDamaged(f"the state database is damaged ({problem})", problem)

    def execute(self, sql: str, parameters: Any = (), /) -> _GuardedCursor:
        try:
            return super().execute(sql, parameters)  # type: ignore[return-value]
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise self._damaged(exc) from None
            raise

    def executemany(self, sql: str, seq: Iterable[Any], /) -> _GuardedCursor:
        try:
            return super().executemany(sql, seq)  # type: ignore[return-value]
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise self._damaged(exc) from None
            raise

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise self._damaged(exc) from None
            raise

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise self._damaged(exc) from None
            raise

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size)
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise self._damaged(exc) from None
            raise

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise self._damaged(exc) from None
            raise


class GuardedConnection(sqlite3.Connection):
    """``sqlite3.connect(..., factory=GuardedConnection)``; set ``health`` after."""

    health: Health | None = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.cursor(_GuardedCursor).execute(sql, parameters)

    def executemany(self, sql: str, seq: Iterable[Any], /) -> sqlite3.Cursor:
        return self.cursor(_GuardedCursor).executemany(sql, seq)


def connect(path: str, health: Health, **kwargs: Any) -> GuardedConnection:
    """An SQLite connection whose damage errors are recorded in ``health``."""
    try:
        db = sqlite3.connect(path, factory=GuardedConnection, **kwargs)
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            health.record(str(exc))
            raise StateDamaged(f"the state database is damaged ({exc})", str(exc)) from None
        raise
    assert isinstance(db, GuardedConnection)
    db.health = health
    return db
