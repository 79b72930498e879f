"""Commands from the API thread to the scheduling thread, answered exactly once.

The arbiter's state has one writer, its scheduling loop; the HTTP API runs on other
threads. An action (submit an app, cancel it, release a lease) is a :class:`Command`
put on a :class:`CommandQueue`; the loop takes the queued ones at its next tick and
answers each. A caller that stops waiting *expires* its command: the loop then never
takes it, so a request that timed out (and told the user so) never happens later. The
queue lives in memory only: nothing a dead process was asked survives into the next.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from themis.errors import ThemisError

PENDING, TAKEN, EXPIRED, DONE = "pending", "taken", "expired", "done"


class Unanswered(ThemisError):
    """The loop did not take the command in time (the API answers 503)."""


class Busy(ThemisError):
    """Too many commands queued (the API answers 503)."""


class Conflict(ThemisError):
    """The request contradicts one made before (the API answers 409): an idempotency key
    reused for another request."""


@dataclass
class Command:
    kind: str  # "submit", "cancel", "release"
    app_id: str
    payload: dict[str, Any] = field(default_factory=dict)
    state: str = PENDING
    result: Any = None
    error: str | None = None
    error_kind: type[ThemisError] = ThemisError
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def take(self) -> bool:
        """The loop claims the command; False if its caller gave up already."""
        with self._lock:
            if self.state != PENDING:
                return False
            self.state = TAKEN
            return True

    def answer(self, result: Any) -> None:
        with self._lock:
            self.state, self.result = DONE, result
        self._done.set()

    def refuse(self, message: str, kind: type[ThemisError] = ThemisError) -> None:
        """Answer with an error; ``kind`` is the error the caller sees (the API maps
        some kinds to their own status, e.g. a name taken to 409)."""
        with self._lock:
            self.state, self.error, self.error_kind = DONE, message, kind
        self._done.set()

    def wait(self, timeout: float) -> Any:
        """The answer; a refusal is a :class:`ThemisError`. After ``timeout`` seconds
        the command is expired, unless the loop took it already (then its answer, which
        comes within one tick, is awaited)."""
        if not self._done.wait(timeout):
            with self._lock:
                if self.state == PENDING:
                    self.state = EXPIRED
                    raise Unanswered(
                        f"no answer from the arbiter's scheduling loop within {timeout:g}s; "
                        "the request was withdrawn and will not happen"
                    )
            self._done.wait()
        if self.error is not None:
            raise self.error_kind(self.error)
        return self.result


class CommandQueue:
    """Thread-safe FIFO of commands, bounded so that a flood is refused, not queued."""

    def __init__(self, limit: int = 1000) -> None:
        self._items: deque[Command] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Event()
        self.limit = limit

    def put(self, command: Command) -> Command:
        with self._lock:
            if len(self._items) >= self.limit:
                raise Busy("the arbiter is busy: too many requests queued, try again")
            self._items.append(command)
        self._arrived.set()
        return command

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, waking at once when a command arrives: the
        loop's pause between ticks, so that a request is answered without waiting a tick."""
        if self._arrived.wait(timeout):
            self._arrived.clear()

    def drain(self) -> list[Command]:
        """Every queued command the loop may still act on, in order."""
        with self._lock:
            items = list(self._items)
            self._items.clear()
        return [c for c in items if c.take()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def submit_command(app: Any, source: str, key: Any = None) -> tuple[Command, str]:
    """A submit command for a checked ``AppFile`` and the app's new token (only its hash
    travels to the loop and the store). ``key``: the submit's idempotency key
    (``state.store.SubmitKey``), or None."""
    from themis.runtime.state.tokens import new_token, token_hash

    token = new_token()
    payload = {"app": app, "token_hash": token_hash(token), "source": source, "key": key}
    return Command("submit", app.name, payload), token
