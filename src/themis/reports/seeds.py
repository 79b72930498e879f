"""Runs over several seeds reduced to a median and a range (min-max) per metric.

One seed is one draw of everything random in a run (the model draw, a generated workload,
the variants, the policy's choices): a difference between two policies that is smaller
than either's range over seeds is noise, whatever one seed says. The median, not the
mean, is shown because a single seed with a starving app can move a mean of five by a
factor. The definitions are in ``docs/metrics.md`` ("Several seeds").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from rich.table import Table

from themis.reports.metrics import RunSummary
from themis.reports.tables import show_ratio


@dataclass(frozen=True)
class Spread:
    """The median of a metric over seeds and its range."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """Median (the mean of the two middle values for an even count) and min-max;
        non-finite values (an offered load with one arrival) make every number inf."""
        if not values:
            raise ValueError("a spread of no values is undefined")
        if not all(math.isfinite(v) for v in values):
            return cls(math.inf, math.inf, math.inf)
        return cls(statistics.median(values), min(values), max(values))


@dataclass(frozen=True)
class SeedMetric:
    """A metric the multi-seed table shows: its summary field, header and number format."""

    key: str
    header: str
    show: Callable[[float], str]


#: The metrics of the multi-seed table, in display order. Units sit in the headers, not
#: the cells, so that a "median (low-high)" cell stays short.
SEED_METRICS: tuple[SeedMetric, ...] = (
    SeedMetric("max_rho", "max rho", show_ratio),
    SeedMetric("jain_rho", "Jain", lambda v: f"{v:.3f}"),
    SeedMetric("rho_p50", "rho p50", show_ratio),
    SeedMetric("rho_p90", "rho p90", show_ratio),
    SeedMetric("rho_p99", "rho p99", show_ratio),
    SeedMetric("share_rho_over_1", "rho>1 %", lambda v: f"{100 * v:.1f}"),
    SeedMetric("max_rho_shared", "max rho shared", show_ratio),
    SeedMetric("mean_completion_s", "mean compl. h", lambda v: f"{v / 3600:,.1f}"),
    SeedMetric("gpu_hours", "GPU-h", lambda v: f"{v:,.0f}"),
    SeedMetric("utilization", "util. %", lambda v: f"{100 * v:.1f}"),
    SeedMetric("placement_score", "placed %", lambda v: f"{100 * v:.1f}"),
)

#: The job-level metrics over seeds: reports show them after SEED_METRICS, a terminal in a
#: second table (``jobs_seeds_table``).
JOB_SEED_METRICS: tuple[SeedMetric, ...] = (
    SeedMetric("job_wait_p50_s", "job wait p50 h", lambda v: f"{v / 3600:,.1f}"),
    SeedMetric("job_wait_p99_s", "job wait p99 h", lambda v: f"{v / 3600:,.1f}"),
    SeedMetric("job_wait_max_s", "job wait max h", lambda v: f"{v / 3600:,.1f}"),
    SeedMetric("job_slowdown_p50", "slowdown p50", show_ratio),
    SeedMetric("job_slowdown_p99", "slowdown p99", show_ratio),
    SeedMetric("starts_per_job_mean", "starts/job", lambda v: f"{v:.2f}"),
    SeedMetric("starts_per_job_max", "starts max", lambda v: f"{v:,.0f}"),
)


#: The metrics a terminal has room for (120 columns); reports show all of SEED_METRICS.
TERMINAL_KEYS = frozenset(
    {"max_rho", "jain_rho", "rho_p90", "share_rho_over_1", "mean_completion_s", "gpu_hours",
     "utilization", "placement_score"}
)  # fmt: skip


def spreads(summaries: Sequence[RunSummary]) -> dict[str, Spread]:
    """Every numeric summary field's spread over ``summaries`` (one per seed)."""
    if not summaries:
        raise ValueError("no runs to aggregate")
    numeric = [k for k, v in asdict(summaries[0]).items() if isinstance(v, (int, float))]
    return {k: Spread.of([float(getattr(s, k)) for s in summaries]) for k in numeric}


def by_policy(
    runs: Sequence[tuple[str, RunSummary]],
) -> dict[str, list[RunSummary]]:
    """(policy, summary) pairs grouped by policy, in first-seen order."""
    grouped: dict[str, list[RunSummary]] = {}
    for policy, summary in runs:
        grouped.setdefault(policy, []).append(summary)
    return grouped


def spread_text(spread: Spread, show: Callable[[float], str], sep: str = " ") -> str:
    """``median (low-high)``, or the median alone when every seed shows the same number;
    with ``sep="\n"`` (a terminal) the range goes on a second line, unbracketed."""
    low, high = show(spread.low), show(spread.high)
    if low == high:  # equal as shown: a range "0.831-0.831" would only be noise
        return show(spread.median)
    low_high = f"{low}-{high}"
    return (
        f"{show(spread.median)}\n{low_high}"
        if sep == "\n"
        else f"{show(spread.median)} ({low_high})"
    )


def seed_rows(
    grouped: Mapping[str, Sequence[RunSummary]],
    sep: str = " ",
    metrics: Sequence[SeedMetric] = SEED_METRICS,
) -> tuple[list[str], list[list[str]]]:
    """The multi-seed table as a header and rows of text: one row per policy, a
    ``median (low-high)`` cell per metric of ``SEED_METRICS`` (the seeds are named in
    the table's caption)."""
    header = ["policy", *(m.header for m in metrics)]
    rows = []
    for policy, summaries in grouped.items():
        spread = spreads(summaries)
        rows.append([policy, *(spread_text(spread[m.key], m.show, sep) for m in metrics)])
    return header, rows


def aggregate_dict(grouped: Mapping[str, Sequence[RunSummary]]) -> dict[str, object]:
    """``{policy: {metric: {"median", "min", "max"}}}`` for ``comparison.json``
    (non-finite numbers as ``None``)."""

    def number(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return {
        policy: {
            key: {"median": number(s.median), "min": number(s.low), "max": number(s.high)}
            for key, s in spreads(summaries).items()
        }
        for policy, summaries in grouped.items()
    }


def seeds_table(
    grouped: Mapping[str, Sequence[RunSummary]],
    caption: str = "",
    metrics: Sequence[SeedMetric] | None = None,
) -> Table:
    """The multi-seed table for a terminal: the median over the range in each cell, so
    that eight metrics fit 120 columns (a narrower terminal folds cells, never cuts them).
    ``metrics``: default the TERMINAL_KEYS of SEED_METRICS (``JOB_SEED_METRICS``: the
    job-level table)."""
    shown = [m for m in SEED_METRICS if m.key in TERMINAL_KEYS] if metrics is None else metrics
    header, rows = seed_rows(grouped, "\n", shown)
    table = Table(caption=caption or None, caption_justify="left")
    table.add_column(header[0], style="bold", no_wrap=True)
    for name in header[1:]:
        table.add_column(name, justify="right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table
