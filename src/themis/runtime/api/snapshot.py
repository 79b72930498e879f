"""One snapshot of what the read routes show, shared by every caller for a moment.

Why: ``/v1/status`` and ``/v1/cluster`` read every app of the state; with thousands of
apps that is tens of milliseconds of the interpreter lock the scheduling loop needs too,
and 40 pollers each reading it for themselves once aged the loop's tick to 6.6 s. Now the
first caller after ``SNAPSHOT_MAX_AGE`` rebuilds it (the others wait for that one build
and share it: one build at a time, whatever the number of pollers), and each answer is
cut from it for its caller (``dashboard.cluster_for``, ``queries.as_seen_by``). A write
made through the API (submit, cancel, release) drops it, so a client reads its own
writes at once; what the loop changes shows within ``SNAPSHOT_MAX_AGE``.

The API reads with its own read-only SQLite connections (one per thread; WAL: a reader
never blocks the loop's writes, nor a write a reader), so reads cost the loop only the
interpreter time they take, which this bounds.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

#: Oldest a shared snapshot is served (seconds).
SNAPSHOT_MAX_AGE = 0.5
#: Entries kept (the snapshot and one entry per app token's own events).
MAX_ENTRIES = 1024


class SharedReads:
    """Values built at most once per ``max_age`` each, by one caller at a time."""

    def __init__(
        self,
        max_age: float = SNAPSHOT_MAX_AGE,
        max_entries: int = MAX_ENTRIES,
        on_build: Callable[[Hashable], None] | None = None,
    ) -> None:
        self.max_age = max_age
        self.max_entries = max_entries
        self.on_build = on_build
        self._values: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The value of ``key``, rebuilt by ``build()`` when older than ``max_age``."""
        with self._lock:
            now = time.monotonic()
            entry = self._values.get(key)
            if entry is not None and now - entry[0] <= self.max_age:
                self._values.move_to_end(key)
                return entry[1]
            value = build()
            self._values[key] = (time.monotonic(), value)
            self._values.move_to_end(key)
            while len(self._values) > self.max_entries:
                self._values.popitem(last=False)
        if self.on_build is not None:
            self.on_build(key)
        return value

    def invalidate(self) -> None:
        """Forget everything: the next read sees the store as it is now."""
        with self._lock:
            self._values.clear()
