"""Per-token rate limits of the API: one token bucket per caller.

Why: every read is served from the one process that also runs the scheduling loop, and
Python threads share one interpreter lock, so a tenant that polls as fast as it can takes
that lock from everyone, the loop included (40 pollers once pushed the loop's tick to
6.6 s). A bucket per caller lets each poll at a steady ``rate`` with bursts of
``burst``; past it the API answers 429 with ``Retry-After`` at once, without touching the
store, and counts it (``themis_api_rate_limited_total{role}``).

A caller is its token (admin, one app), except the submit token, which every user
shares: its buckets are per client address, so one user's polling does not spend
another's. A token bucket rather than a library (``limits``, ``slowapi``): twenty lines,
no new dependency, and it must run before FastAPI's dependency machinery anyway.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

#: Requests per second a caller may sustain, and the burst it may spend at once.
RATE = 20.0
BURST = 60.0
#: Callers remembered (least recently seen forgotten first: it starts again with a full
#: bucket, which is what a caller that has not called for a while has anyway).
MAX_CALLERS = 10_000


class RateLimiter:
    def __init__(
        self,
        rate: float = RATE,
        burst: float = BURST,
        max_callers: int = MAX_CALLERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.max_callers = max_callers
        self.clock = clock
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, caller: Hashable) -> float:
        """Spend one request of ``caller``'s bucket: 0.0 if it may go on, else the seconds
        until it may (nothing is spent then)."""
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.pop(caller, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
            self._buckets[caller] = (tokens - 1.0 if wait == 0.0 else tokens, now)
            while len(self._buckets) > self.max_callers:
                self._buckets.popitem(last=False)
        return wait


def retry_after(wait: float) -> str:
    """The ``Retry-After`` header: whole seconds, at least 1."""
    return str(max(1, math.ceil(wait)))
