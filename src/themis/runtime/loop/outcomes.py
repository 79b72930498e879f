"""How an app ended, said honestly.

An app is over when every trial has ended. It **finished** only if at least one trial
ran its whole step budget; otherwise it **failed**, and the reason says why: every
trial raised, no trial ever reported the metric successive halving ranks by (a typo in
``early_stopping.metric`` looks exactly like this), or a mix. A cancelled app is
``cancelled``. Before this, an app whose trials all failed ended "finished".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from themis.runtime.loop.halving import STOPPED_EARLY
from themis.runtime.state.store import PRUNED


@dataclass(frozen=True)
class AppOutcome:
    state: str  # "finished" or "failed"
    reason: str


def app_outcome(
    trial_states: dict[str, str],
    first_error: str | None,
    metric: str | None,
    metric_seen: bool,
    reported: set[str],
) -> AppOutcome:
    """``metric`` is the halving metric (None without halving); ``metric_seen`` whether
    any trial reported it; ``reported`` the metric names the trials did report."""
    n = len(trial_states)
    count = Counter(trial_states.values())
    finished, failed, early = count["finished"], count["failed"], count[STOPPED_EARLY]
    pruned = count[PRUNED]
    parts = [f"{finished} of {n} trials ran their whole budget"]
    if early:
        parts.append(f"{early} stopped early by successive halving")
    if pruned:
        parts.append(f"{pruned} pruned by the app's tuner")
    if failed:
        parts.append(f"{failed} failed")
    if finished:
        return AppOutcome("finished", "; ".join(parts))
    if metric is not None and not metric_seen:
        names = ", ".join(sorted(reported)) or "none"
        return AppOutcome(
            "failed",
            f"no trial reported the metric '{metric}' that successive halving ranks by "
            f"(metrics reported: {names})",
        )
    if failed == n and first_error:
        return AppOutcome("failed", f"all {n} trials failed; the first: {first_error}")
    return AppOutcome("failed", "; ".join(parts))
