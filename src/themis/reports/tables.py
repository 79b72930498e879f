"""Summaries as a terminal table: one row per metric, one column per run.

Metrics run down the side so that a comparison of several policies still fits an
80-column terminal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.table import Table

from themis.reports.metrics import RunSummary


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h"


def _ratio(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "n/a"


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


#: (label, how to show it) per metric, in display order.
ROWS: tuple[tuple[str, Callable[[RunSummary], str]], ...] = (
    ("apps / jobs", lambda s: f"{s.apps:,} / {s.jobs:,}"),
    ("max rho", lambda s: _ratio(s.max_rho)),
    ("Jain's index (rho)", lambda s: f"{s.jain_rho:.3f}"),
    ("mean completion", lambda s: _hours(s.mean_completion_s)),
    ("median completion", lambda s: _hours(s.median_completion_s)),
    ("makespan", lambda s: _hours(s.makespan_s)),
    ("GPU-hours used", lambda s: f"{s.gpu_hours:,.0f}"),
    ("utilization", lambda s: _percent(s.utilization)),
    ("placement score", lambda s: _percent(s.placement_score)),
    ("offered load", lambda s: _ratio(s.offered_load)),
    ("rounds", lambda s: f"{s.rounds:,}"),
)


def summary_table(summaries: Sequence[RunSummary], title: str | None = None) -> Table:
    """A table of one or several run summaries, one column per run (headed by its policy)."""
    if not summaries:
        raise ValueError("no summaries to show")
    table = Table(title=title, title_justify="left")
    table.add_column("metric", style="bold")
    for summary in summaries:
        table.add_column(summary.policy, justify="right")
    for label, show in ROWS:
        table.add_row(label, *(show(s) for s in summaries))
    return table
