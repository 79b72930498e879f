"""The summary table: one column per run, one row per metric."""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from themis.reports.metrics import summarize
from themis.reports.tables import ROWS, summary_table


def _render(table) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_one_column_per_summary(result) -> None:
    s = summarize(result)
    other = dataclasses.replace(s, policy="other", max_rho=7.5)
    table = summary_table([s, other])
    assert [c.header for c in table.columns] == ["metric", "hand", "other"]
    assert table.row_count == len(ROWS)
    text = _render(table)
    assert "7.50" in text and "2.00" in text  # max rho of each
    assert "0.900" in text  # Jain's index


def test_infinite_offered_load_is_shown_as_na(result) -> None:
    s = dataclasses.replace(summarize(result), offered_load=float("inf"))
    assert "n/a" in _render(summary_table([s]))


def test_no_summaries_is_an_error() -> None:
    with pytest.raises(ValueError):
        summary_table([])
