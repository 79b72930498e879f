"""Summaries as a terminal table.

A few runs: one row per metric, one column per run, which fits an 80-column terminal.
Many runs (a comparison of every policy): one row per run and a column per headline
metric, so that the table grows downwards instead of off the screen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.table import Table

from themis.reports.metrics import RunSummary
from themis.units import duration_text, gpu_hours_text


def show_hours(seconds: float) -> str:
    """Adaptive: a 178 s completion shows as ``178 s``, not ``0.0 h``."""
    return duration_text(seconds)


def show_ratio(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "n/a"


def show_percent(value: float) -> str:
    return f"{100 * value:.1f}%"


#: (label, how to show it) per metric, in display order.
ROWS: tuple[tuple[str, Callable[[RunSummary], str]], ...] = (
    ("apps / jobs", lambda s: f"{s.apps:,} / {s.jobs:,}"),
    ("max rho", lambda s: show_ratio(s.max_rho)),
    ("Jain's index (rho)", lambda s: f"{s.jain_rho:.3f}"),
    (
        "rho p50 / p90 / p99",
        lambda s: f"{show_ratio(s.rho_p50)} / {show_ratio(s.rho_p90)} / {show_ratio(s.rho_p99)}",
    ),
    ("apps with rho > 1", lambda s: f"{s.apps_rho_over_1:,} ({show_percent(s.share_rho_over_1)})"),
    ("max rho, apps that shared", lambda s: show_ratio(s.max_rho_shared)),
    (
        "max rho paper / slice",
        lambda s: f"{show_ratio(s.max_rho_paper)} / {show_ratio(s.max_rho_slice)}",
    ),
    (
        "job wait p50 / p99 / max",
        lambda s: " / ".join(
            show_hours(v) for v in (s.job_wait_p50_s, s.job_wait_p99_s, s.job_wait_max_s)
        ),
    ),
    (
        "job slowdown p50 / p99 / max",
        lambda s: " / ".join(
            show_ratio(v) for v in (s.job_slowdown_p50, s.job_slowdown_p99, s.job_slowdown_max)
        ),
    ),
    (
        "starts per job mean / max",
        lambda s: f"{s.starts_per_job_mean:.2f} / {s.starts_per_job_max:,}",
    ),
    ("mean completion", lambda s: show_hours(s.mean_completion_s)),
    ("median completion", lambda s: show_hours(s.median_completion_s)),
    ("makespan", lambda s: show_hours(s.makespan_s)),
    ("GPU-hours used", lambda s: gpu_hours_text(s.gpu_hours)),
    ("utilization", lambda s: show_percent(s.utilization)),
    ("placement score", lambda s: show_percent(s.placement_score)),
    ("offered load", lambda s: show_ratio(s.offered_load)),
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


#: Runs up to this many get a column each; more get a row each.
MAX_COLUMNS = 4

#: The headline metrics of the one-row-per-run layout: short headers for ROWS' labels.
_SHORT = {
    "max rho": "max rho",
    "Jain's index (rho)": "Jain",
    "apps with rho > 1": "rho > 1",
    "mean completion": "mean compl.",
    "median completion": "median compl.",
    "makespan": "makespan",
    "GPU-hours used": "GPU-h",
    "utilization": "util.",
    "placement score": "placed",
}
#: (short header, how to show it): the same formatting as ROWS, in ROWS' order.
WIDE: tuple[tuple[str, Callable[[RunSummary], str]], ...] = tuple(
    (_SHORT[label], show) for label, show in ROWS if label in _SHORT
)

#: The job-level figures of the one-row-per-run layout, a table of their own below the
#: first (one table with both would not fit 120 columns).
JOB_COLUMNS: tuple[tuple[str, Callable[[RunSummary], str]], ...] = (
    ("wait p50", lambda s: show_hours(s.job_wait_p50_s)),
    ("wait p99", lambda s: show_hours(s.job_wait_p99_s)),
    ("wait max", lambda s: show_hours(s.job_wait_max_s)),
    ("slowdown p50", lambda s: show_ratio(s.job_slowdown_p50)),
    ("slowdown p99", lambda s: show_ratio(s.job_slowdown_p99)),
    ("slowdown max", lambda s: show_ratio(s.job_slowdown_max)),
    ("starts mean", lambda s: f"{s.starts_per_job_mean:.2f}"),
    ("starts max", lambda s: f"{s.starts_per_job_max:,}"),
)


Column = tuple[str, Callable[[RunSummary], str]]


def runs_table(
    summaries: Sequence[RunSummary], title: str | None = None, columns: Sequence[Column] = WIDE
) -> Table:
    """One row per run: for comparisons too wide for a column per run."""
    if not summaries:
        raise ValueError("no summaries to show")
    first = summaries[0]
    caption = (
        f"{first.apps:,} apps / {first.jobs:,} jobs, "
        f"offered load {show_ratio(first.offered_load)}; "
        "placed = share of GPU-time at the best span"
    )
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column("policy", style="bold", no_wrap=True)
    for label, _ in columns:
        table.add_column(label, justify="right", no_wrap=True)
    for summary in summaries:
        table.add_row(summary.policy, *(show(summary) for _, show in columns))
    return table


def jobs_table(summaries: Sequence[RunSummary], columns: Sequence[Column] = JOB_COLUMNS) -> Table:
    """One row per run, the job-level figures: each job's wait for its first GPU, its
    slowdown and how many times it was started (docs/metrics.md)."""
    if not summaries:
        raise ValueError("no summaries to show")
    caption = (
        "jobs: wait = arrival to first GPU; slowdown = completion / isolated time at the "
        "best placement; starts = times a job's gang was (re)started"
    )
    table = Table(caption=caption, caption_justify="left")
    table.add_column("policy", style="bold", no_wrap=True)
    for label, _ in columns:
        table.add_column(label, justify="right", no_wrap=True)
    for summary in summaries:
        table.add_row(summary.policy, *(show(summary) for _, show in columns))
    return table


def fit_columns(
    summaries: Sequence[RunSummary], columns: Sequence[Column], width: int
) -> list[list[Column]]:
    """``columns`` cut into consecutive groups that each fit ``width`` characters beside
    the policy column, as rich draws them (a border and a space either side of each
    cell). One table too wide for the terminal had rich cut its cells to "0…": on 80
    columns the utilization and placement could not be read."""

    def drawn(label: str, cells: Sequence[str]) -> int:
        return max(len(label), *(len(c) for c in cells)) + 3

    policy = drawn("policy", [s.policy for s in summaries]) + 1  # and the last border
    groups: list[list[Column]] = [[]]
    used = policy
    for column in columns:
        need = drawn(column[0], [column[1](s) for s in summaries])
        if groups[-1] and used + need > width:
            groups.append([])
            used = policy
        groups[-1].append(column)
        used += need
    return groups


def comparison_tables(
    summaries: Sequence[RunSummary], title: str | None = None, width: int | None = None
) -> list[Table]:
    """The layout that fits: a column per run for a few (job figures included), a row per
    run for many, then a second table of the job-level figures; on a terminal narrower
    than a table (``width``), the table's columns are split over several tables."""
    if len(summaries) <= MAX_COLUMNS:
        return [summary_table(summaries, title)]
    if width is None:
        return [runs_table(summaries, title), jobs_table(summaries)]
    tables = [
        runs_table(summaries, title if k == 0 else None, group)
        for k, group in enumerate(fit_columns(summaries, WIDE, width))
    ]
    tables += [jobs_table(summaries, g) for g in fit_columns(summaries, JOB_COLUMNS, width)]
    return tables


def comparison_table(summaries: Sequence[RunSummary], title: str | None = None) -> Table:
    """The layout that fits: a column per run for a few, a row per run for many (the
    job-level figures of many runs: ``jobs_table``)."""
    if len(summaries) <= MAX_COLUMNS:
        return summary_table(summaries, title)
    return runs_table(summaries, title)
