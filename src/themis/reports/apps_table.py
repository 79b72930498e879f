"""Per-app tables: the worst apps of a run (or of every seed of a policy), worst first.

This is the table a user reads when max rho is bad: which app, training what, in gangs
of what size, how long it waited for its first GPU, and how far from fair it finished.
Times are in hours with two decimals in every row, so that a column sorts as numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from themis.reports.html import Table
from themis.reports.metrics import AppRow
from themis.reports.record import RunRecord

#: How many apps the "worst apps" table shows per policy.
WORST = 10

#: A run and the seed it ran with (``None`` when the report has one seed).
SeededRecord = tuple[int | None, RunRecord]


def _header(seeded: bool) -> list[str]:
    return [
        "app",
        *(["seed"] if seeded else []),
        "model",
        "gangs",
        "wait (h)",
        "completion (h)",
        "rho",
    ]


def _cells(row: AppRow, seed: int | None, seeded: bool) -> list[str]:
    return [
        row.app_id,
        *([str(seed)] if seeded else []),
        row.model,
        row.gangs,
        f"{row.wait_s / 3600:,.2f}",
        f"{row.completion_s / 3600:,.2f}",
        f"{row.rho:.2f}",
    ]


def ranked(runs: Sequence[SeededRecord]) -> list[tuple[int | None, AppRow]]:
    """Every app of ``runs`` with its seed, highest rho first (ties: seed, then app id,
    so the order is the same on every machine)."""
    pairs = [(seed, row) for seed, record in runs for row in record.rows]
    return sorted(pairs, key=lambda p: (-p[1].rho, p[0] if p[0] is not None else -1, p[1].app_id))


def worst_apps_table(policy: str, runs: Sequence[SeededRecord], n: int = WORST) -> Table:
    """The ``n`` apps with the highest rho of ``policy``'s runs (over all seeds)."""
    seeded = any(seed is not None for seed, _ in runs)
    rows = [_cells(row, seed, seeded) for seed, row in ranked(runs)[:n]]
    where = " over all seeds" if seeded else ""
    return Table(
        _header(seeded), rows, f"{policy}: the {len(rows)} worst apps{where}", sortable=True
    )


def all_apps_table(policy: str, runs: Sequence[SeededRecord]) -> Table:
    """Every app of ``policy``'s runs, worst first, folded under one line."""
    seeded = any(seed is not None for seed, _ in runs)
    pairs = ranked(runs)
    over = sum(1 for _, row in pairs if row.rho > 1.0)
    rows = [_cells(row, seed, seeded) for seed, row in pairs]
    return Table(
        _header(seeded),
        rows,
        sortable=True,
        folded=f"{policy}: all {len(rows):,} apps ({over:,} with rho > 1), sortable",
    )
