"""``--estimate-error``, ``--restart-cost``, ``--misreport`` and ``experiment
truthfulness`` on the command line: recorded in the summary, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import assert_one_line_error


def test_conditions_are_recorded_and_restarts_cost_gpu_hours(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    hours = {}
    for cost in ("0", "60"):
        out = tmp_path / cost
        args = ("--trace", tiny_trace, "--cluster", "1x1x4", "--policy", "fifo", "--out", out)
        result = cli("simulate", *args, "--restart-cost", cost, "--misreport", "1=2")
        assert result.code == 0, result.err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["config"]["restart_cost_s"] == float(cost)
        assert summary["config"]["misreport"] == {"1": 2.0}
        hours[cost] = summary["gpu_hours"]
    # FIFO starts each of the 4 jobs with work once (the 0-second job never runs): 1 + 2 +
    # 4 + 2 GPUs each hold one extra minute.
    assert hours["60"] - hours["0"] == pytest.approx(9 * 60 / 3600)


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--estimate-error", "1.5", "must be in [0, 1)"),
        ("--restart-cost", "-1", ">= 0"),
        ("--misreport", "1", "is not APP=FACTOR"),
        ("--misreport", "1=x", "is not a number"),
        ("--misreport", "9=2", "no app '9'"),
    ],
)
def test_bad_values_are_one_line_errors(
    cli, tiny_trace: Path, tmp_path: Path, flag: str, value: str, fragment: str
) -> None:
    result = cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path,
                 flag, value)  # fmt: skip
    assert_one_line_error(result, flag, fragment)


def test_truthfulness_writes_its_table(cli, tiny_trace: Path, tmp_path: Path) -> None:
    where = ("--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path)
    result = cli("experiment", "truthfulness", *where, "--policies", "srtf", "--liar", "2", "-q")
    assert result.code == 0, result.err
    text = (tmp_path / "truthfulness.md").read_text()
    assert "| srtf | 2x its work |" in text and "| srtf | 0.5x its work |" in text
    bad = cli("experiment", "truthfulness", "--trace", tiny_trace, "--factors", "1", "-q")
    assert_one_line_error(bad, "--factors")
