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
    # the four lies and the placebo, each by two liars
    assert rows[0].startswith("policy,seed,lie,liar,partner") and len(rows) == 1 + 5 * 2
    assert "| srtf | placebo `work:1.01` | 2 |" in text and "Noise floor (srtf)" in text


def test_truthfulness_over_contexts_gives_each_gain_its_range(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    where = ("--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path)
    lies = ("--lies", "work:0.5", "--liars", "1", "--contexts", "3", "--placebo", "none")
    result = cli("experiment", "truthfulness", *where, "--policies", "srtf", *lies, "-q")
    assert result.code == 0, result.err
    assert "3 contexts" in result.out
    text = (tmp_path / "truthfulness.md").read_text()
    assert "over the contexts" in text and "(3) |" in text and "placebo" not in text
    header, row = (tmp_path / "truthfulness.csv").read_text().splitlines()
    assert header.endswith(",contexts,gain_low,gain_high,gain_sd,contexts_gained,context_gains")
    assert row.split(",")[10] == "3" and len(row.split(",")[-1].split()) == 3


def test_truthfulness_json_holds_the_placebo_row_computed_like_the_others(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    """Four contexts by default; the placebo is added to the lies, measured for the same
    liars in the same contexts, marked, and named as the noise floor; --json prints the
    document truthfulness.json holds and nothing else on stdout."""
    where = ("--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path)
    lies = ("--lies", "work:0.5", "--liars", "1,middle")
    result = cli("experiment", "truthfulness", *where, "--policies", "srtf", *lies, "--json")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document == json.loads((tmp_path / "truthfulness.json").read_text())
    settings = document["settings"]
    assert settings["contexts"] == 4 and settings["placebo"] == "work:1.01"
    assert settings["lies"] == ["work:0.5", "work:1.01"]
    summary = {s["lie"]: s for s in document["summary"]}
    assert summary["work:1.01"]["placebo"] and not summary["work:0.5"]["placebo"]
    assert summary["work:1.01"]["cases"] == summary["work:0.5"]["cases"] == 2
    assert summary["work:1.01"]["context_runs"] == summary["work:0.5"]["context_runs"] == 8
    assert document["noise_floor"]["srtf"] == summary["work:1.01"]
    cases = document["cases"]
    liars = {c["liar"] for c in cases}
    assert len(liars) == 2 and len(cases) == 4
    assert sorted((c["lie"], c["liar"]) for c in cases) == sorted(
        (lie, liar) for lie in ("work:0.5", "work:1.01") for liar in liars
    )
    for case in cases:
        gains = case["context_gains"]
        assert case["contexts"] == len(gains) == 4
        assert case["contexts_gained"] == sum(1 for g in gains if g > 0.01)
        # the expected gain weighs each context's by its honest completion
        assert min(gains) - 1e-12 <= case["gain"] <= max(gains) + 1e-12


def test_truthfulness_counts_the_placebo_once_when_it_is_also_a_lie(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    where = ("--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path)
    lies = ("--lies", "work:1.01,work:2", "--liars", "1", "--contexts", "2")
    result = cli("experiment", "truthfulness", *where, "--policies", "srtf", *lies, "--json")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["settings"]["lies"] == ["work:1.01", "work:2"]
    assert [s["placebo"] for s in document["summary"]] == [True, False]


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--lies", "work:1", "the truth"),
        ("--contexts", "0", "at least 1"),
        ("--context-error", "1.5", "in (0, 1)"),
        ("--context-jitter", "-1", ">= 0"),
        ("--placebo", "work:1", "the truth"),
        ("--placebo", "nonsense", "is not KIND:VALUE"),
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
