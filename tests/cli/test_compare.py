"""``themis compare``: every policy on one workload, one table, one directory each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis.policies import policy_names

from .conftest import assert_one_line_error


def test_default_runs_every_policy_themis_first(cli, tiny_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = cli("compare", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", out)
    assert result.code == 0, result.err
    names = policy_names()
    expected = ["themis"] + [n for n in names if n != "themis"]
    data = json.loads((out / "comparison.json").read_text())
    assert [run["policy"] for run in data["runs"]] == expected
    assert data["config"]["cluster"] == "1x1x4"
    for name in expected:
        assert sorted(p.name for p in (out / name).iterdir()) == [
            "allocations.csv",
            "apps.csv",
            "summary.json",
        ]
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["policy"] == name
        assert name in result.out  # a column of the one table
    assert result.out.count("max rho") == 1


def test_policies_option_picks_and_orders(cli, tiny_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = cli(
        "compare",
        "--trace",
        tiny_trace,
        "--cluster",
        "1x1x4",
        "--policies",
        "max-min, fifo",
        "--out",
        out,
    )
    assert result.code == 0, result.err
    data = json.loads((out / "comparison.json").read_text())
    assert [run["policy"] for run in data["runs"]] == ["max-min", "fifo"]
    assert sorted(p.name for p in out.iterdir()) == ["comparison.json", "fifo", "max-min"]


def test_default_output_dir_is_out_compare(
    cli, tiny_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("compare", "--trace", tiny_trace, "--cluster", "1x1x4", "--policies", "fifo")
    assert result.code == 0
    assert (tmp_path / "out" / "compare" / "comparison.json").is_file()
    assert (tmp_path / "out" / "compare" / "fifo" / "summary.json").is_file()


@pytest.mark.parametrize(
    ("policies", "fragment"),
    [("fifo,nope", "unknown policy 'nope'"), ("fifo,fifo", "listed twice"), ("fifo,", "empty")],
)
def test_bad_policy_lists_are_one_line(cli, tiny_trace: Path, tmp_path: Path, policies, fragment):
    result = cli("compare", "--trace", tiny_trace, "--policies", policies, "--out", tmp_path / "o")
    assert_one_line_error(result, "field '--policies'", fragment)
    assert not (tmp_path / "o").exists()


def test_report_writes_one_self_contained_html(cli, tiny_trace: Path, tmp_path: Path) -> None:
    report = tmp_path / "rep"
    result = cli(
        "compare",
        "--trace",
        tiny_trace,
        "--cluster",
        "1x1x4",
        "--policies",
        "themis,fifo",
        "--out",
        tmp_path / "cmp",
        "--report",
        report,
        "--workers",
        "2",
    )
    assert result.code == 0, result.err
    assert sorted(p.name for p in report.iterdir()) == ["report.html"]
    text = (report / "report.html").read_text()
    assert text.count('<img alt="') == 4
    assert "<th>themis</th><th>fifo</th>" in text
    assert f"wrote {report / 'report.html'}" in result.out
