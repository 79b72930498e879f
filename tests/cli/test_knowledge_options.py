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
        lies = ("--misreport", "1=2", "--misreport", "3=split:2")
        result = cli("simulate", *args, "--restart-cost", cost, *lies)
        assert result.code == 0, result.err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["config"]["restart_cost_s"] == float(cost)
        assert summary["config"]["misreport"] == ["1=work:2", "3=split:2"]
        hours[cost] = summary["gpu_hours"]
    # FIFO starts each of the 4 jobs with work once (the 0-second job never runs): 1 + 2 +
    # 4 + 2 GPUs each hold one extra minute (app 3's one job is its one part).
    assert hours["60"] - hours["0"] == pytest.approx(9 * 60 / 3600)


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--estimate-error", "1.5", "must be in [0, 1)"),
        ("--restart-cost", "-1", ">= 0"),
        ("--misreport", "1", "is not APP=KIND:VALUE"),
        ("--misreport", "1=x", "is not a number"),
        ("--misreport", "9=2", "no app '9'"),
        ("--misreport", "9=split:2", "no app '9'"),
        ("--misreport", "1=lazy:2", "unknown kind of lie 'lazy'"),
        ("--misreport", "1=split:1.5", "an integer >= 2"),
        ("--misreport", "1=work:1", "the truth, not a lie"),
        ("--misreport", "1=placement:odd", "flat or sensitive"),
    ],
)
def test_bad_values_are_one_line_errors(
    cli, tiny_trace: Path, tmp_path: Path, flag: str, value: str, fragment: str
) -> None:
    result = cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path,
                 flag, value)  # fmt: skip
    assert_one_line_error(result, flag, fragment)


def test_truthfulness_writes_its_tables(cli, tiny_trace: Path, tmp_path: Path) -> None:
    where = ("--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path)
    lies = ("--lies", "work:2,work:0.5,split:2,pair:work:0.5", "--liars", "1,middle")
    result = cli("experiment", "truthfulness", *where, "--policies", "srtf", *lies, "-q")
    assert result.code == 0, result.err
    text = (tmp_path / "truthfulness.md").read_text()
    # two liars (app 1, and app 2 arriving in the middle) per lie; a pair counts both
    assert "| srtf | work:2 | 2 |" in text and "| srtf | pair:work:0.5 | 4 |" in text
    assert "| srtf | 0 | split:2 | 1 | 1.0 -> 1.0 |" in text
    rows = (tmp_path / "truthfulness.csv").read_text().splitlines()
    assert rows[0].startswith("policy,seed,lie,liar,partner") and len(rows) == 1 + 4 * 2


def test_truthfulness_over_contexts_gives_each_gain_its_range(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    where = ("--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path)
    lies = ("--lies", "work:0.5", "--liars", "1", "--contexts", "3")
    result = cli("experiment", "truthfulness", *where, "--policies", "srtf", *lies, "-q")
    assert result.code == 0, result.err
    assert "3 contexts" in result.out
    text = (tmp_path / "truthfulness.md").read_text()
    assert "over the contexts" in text and "(3) |" in text
    header, row = (tmp_path / "truthfulness.csv").read_text().splitlines()
    assert header.endswith(",contexts,gain_low,gain_high,gain_sd") and row.split(",")[10] == "3"


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--lies", "work:1", "the truth"),
        ("--contexts", "0", "at least 1"),
        ("--context-error", "1.5", "in (0, 1)"),
        ("--lies", "pair:split", "is not KIND:VALUE"),
        ("--liars", "nobody", "neither an app"),
        ("--liars", "worst:x", "is not worst:N"),
    ],
)
def test_truthfulness_bad_values_are_one_line_errors(
    cli, tiny_trace: Path, flag: str, value: str, fragment: str
) -> None:
    bad = cli("experiment", "truthfulness", "--trace", tiny_trace, "--cluster", "1x1x4",
              flag, value, "-q")  # fmt: skip
    assert_one_line_error(bad, flag, fragment)
