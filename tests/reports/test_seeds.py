"""Several seeds reduced to a median and a range, checked against hand-computed values."""

from __future__ import annotations

import dataclasses
import math

import pytest
from rich.console import Console

from themis.reports.metrics import RunSummary, summarize
from themis.reports.seeds import Spread, aggregate_dict, by_policy, seed_rows, seeds_table


def _runs(result) -> list[tuple[str, RunSummary]]:
    base = summarize(result)
    a = [
        dataclasses.replace(base, policy="a", max_rho=3.0, gpu_hours=100.0, jain_rho=0.5),
        dataclasses.replace(base, policy="a", max_rho=1.0, gpu_hours=300.0, jain_rho=0.9),
        dataclasses.replace(base, policy="a", max_rho=2.0, gpu_hours=200.0, jain_rho=0.7),
    ]
    b = [dataclasses.replace(base, policy="b", max_rho=1.5, gpu_hours=50.0) for _ in range(2)]
    # Interleaved as a run batch returns them: seed by seed.
    return [("a", a[0]), ("b", b[0]), ("a", a[1]), ("b", b[1]), ("a", a[2])]


def test_spread_is_median_and_min_max() -> None:
    assert Spread.of([3.0, 1.0, 2.0]) == Spread(2.0, 1.0, 3.0)
    assert Spread.of([4.0, 1.0, 3.0, 2.0]) == Spread(2.5, 1.0, 4.0)  # even: middle two
    assert Spread.of([7.0]) == Spread(7.0, 7.0, 7.0)
    assert math.isinf(Spread.of([1.0, math.inf]).median)
    with pytest.raises(ValueError):
        Spread.of([])


def test_rows_show_median_and_range_per_policy(result) -> None:
    grouped = by_policy(_runs(result))
    assert list(grouped) == ["a", "b"] and len(grouped["a"]) == 3
    header, rows = seed_rows(grouped)
    a, b = (dict(zip(header, row, strict=True)) for row in rows)
    assert a["max rho"] == "2.00 (1.00-3.00)"
    assert a["GPU-h"] == "200 (100-300)"
    assert a["Jain"] == "0.700 (0.500-0.900)"
    assert b["max rho"] == "1.50"  # every seed the same: no range
    assert b["GPU-h"] == "50"


def test_aggregate_json_and_terminal_table(result) -> None:
    grouped = by_policy(_runs(result))
    data = aggregate_dict(grouped)
    assert data["a"]["max_rho"] == {"median": 2.0, "min": 1.0, "max": 3.0}  # type: ignore[index]
    assert data["b"]["gpu_hours"] == {"median": 50.0, "min": 50.0, "max": 50.0}  # type: ignore[index]
    console = Console(width=120, record=True, color_system=None)
    console.print(seeds_table(grouped, "over seeds 0, 1, 2"))
    text = console.export_text()
    assert "1.00-3.00" in text and "100-300" in text and "over seeds 0, 1, 2" in text
    assert "…" not in text  # nothing cut at 120 columns


def test_a_range_equal_as_shown_is_not_shown(result) -> None:
    base = summarize(result)
    runs = [("p", dataclasses.replace(base, jain_rho=v)) for v in (0.8311, 0.8309)]
    header, (row,) = seed_rows(by_policy(runs))
    assert dict(zip(header, row, strict=True))["Jain"] == "0.831"
