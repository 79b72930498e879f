"""What one restart of a job costs on this cluster, as observed, for the policy.

The simulator tells the policy a run's restart cost (``Policy.set_restart_cost``): the
seconds a gang holds its GPUs without progress at each start. Themis, for one, renews an
app's ending leases within its fair share when restarts cost time (handing GPUs round
buys a restart each way). The runtime knows that cost only by watching jobs, so it does:

- **start-up**: from the launch of a job to its first report that its training function
  runs (a Ray worker, the app's imports, its checkpoint read and restored);
- **stop**: from the stop request to the job's cooperative return (the step under way
  finished and the checkpoint written), for jobs that returned by themselves (a job
  killed after the grace tells nothing about saving).

An app's cost is the median of its last few start-ups plus the median of its last few
stops (medians: one slow start, a cold cache or a busy node, does not swing it). The
cluster's cost, the one number the policy takes, is the median over the apps seen
lately, so one app cannot set it alone once three or more have run: an app's code is
the tenant's, and it can start as slowly as it likes. Each observation is clamped to
``[0, cap]`` (the lease: a restart dearer than a lease says nothing more).

Before any observation the cost is the operator's default (``--restart-cost``). The
policy is told a new cost only when it moved by more than :data:`TOLERANCE` of the
last one told, and at most once a lease (``interval``), unless it crossed zero: a policy
may rebuild its state when told another cost (Themis starts a fresh arbiter, its
reservation books anew), so neither wobbles nor an app that starts fast and slow by
turns may make it do so often. The decisions for a given cost are the policy's own,
unchanged.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict, deque

#: Observations kept per app and per kind (start-up, stop).
PER_APP = 5
#: Apps whose costs are kept (the most recently observed); the cluster's cost is their
#: median.
APPS = 64
#: Relative change of the cluster's cost below which the policy is not told again.
TOLERANCE = 0.25


class RestartCosts:
    """Observed start-up and stop times per app, and the cluster's restart cost."""

    def __init__(self, default: float, cap: float, interval: float = 0.0) -> None:
        self.default = max(0.0, default)
        self.cap = max(0.0, cap)
        self.interval = interval
        self.told_at: float | None = None  # when (monotonic seconds) it was told
        self._starts: OrderedDict[str, deque[float]] = OrderedDict()
        self._stops: OrderedDict[str, deque[float]] = OrderedDict()
        self.told: float | None = None  # the cost the policy was last told
        self.observed = 0

    def started(self, app_id: str, seconds: float) -> None:
        """A job of ``app_id`` ran its training function ``seconds`` after its launch."""
        self._add(self._starts, app_id, seconds)

    def stopped(self, app_id: str, seconds: float) -> None:
        """A job of ``app_id`` returned ``seconds`` after it was told to stop."""
        self._add(self._stops, app_id, seconds)

    def _add(self, book: OrderedDict[str, deque[float]], app_id: str, seconds: float) -> None:
        if seconds != seconds:  # NaN: nothing observed
            return
        book.setdefault(app_id, deque(maxlen=PER_APP)).append(min(max(seconds, 0.0), self.cap))
        book.move_to_end(app_id)
        while len(book) > APPS:
            book.popitem(last=False)
        self.observed += 1

    def of_app(self, app_id: str) -> float | None:
        """The app's restart cost (None before its first start-up was seen)."""
        starts = self._starts.get(app_id)
        if not starts:
            return None
        stops = self._stops.get(app_id)
        return statistics.median(starts) + (statistics.median(stops) if stops else 0.0)

    def estimate(self) -> float:
        """The cluster's restart cost: the median over the apps seen, else the default."""
        costs = [c for app in self._starts if (c := self.of_app(app)) is not None]
        return statistics.median(costs) if costs else self.default

    def to_tell(self, now: float) -> float | None:
        """The cost to tell the policy at ``now`` (monotonic seconds), or None when it
        has not moved enough, or was told less than ``interval`` ago."""
        cost = self.estimate()
        told = self.told
        if told is None or (told == 0.0) != (cost == 0.0):
            return cost
        recent = self.told_at is not None and now - self.told_at < self.interval
        if abs(cost - told) > TOLERANCE * told and not recent:
            return cost
        return None

    def tell(self, cost: float, now: float) -> None:
        """``cost`` was told at ``now`` (or offered and refused: not offered again until
        it moves)."""
        self.told, self.told_at = cost, now
