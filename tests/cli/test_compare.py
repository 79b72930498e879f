"""``themis compare``: every policy on one workload, one table, one directory each."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import themis
from themis.policies import policy_names
from themis.workload import load_workload

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
            "themis-record.json",
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
    assert sorted(p.name for p in out.iterdir()) == [
        "comparison.json",
        "fifo",
        "max-min",
        "themis-run.json",
    ]


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
    # the comparison's four figures and the CDF of the jobs' waits (the Jobs section)
    assert text.count("<figure") == text.count("<svg") == 5
    assert '<h2 id="jobs">Jobs</h2>' in text and '<a href="#jobs">Jobs</a>' in text
    # Results come first, the configuration last; the usage figure is an image inside
    # its SVG (the report was 4.9 MB on the bundled trace, 4 MB of it this curve).
    assert (
        text.index('id="comparison"') < text.index('id="jobs"') < text.index('id="configuration"')
    )
    assert text.count("<image") >= 1
    assert "<th>themis</th><th>fifo</th>" in text
    assert "<td>--cluster</td><td>1x1x4</td>" in text  # the configuration, as typed
    assert "<td>--lease</td><td>600</td>" in text and "False" not in text
    # What wrote it: version, the command line as typed, the date.
    assert f"written by themis {themis.__version__} · themis compare --trace {tiny_trace} " in text
    assert " UTC</p>" in text
    assert "themis: the 3 worst apps" in text
    assert f"wrote {report / 'report.html'}" in result.out


def test_seeds_run_every_policy_per_seed_and_aggregate(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cmp"
    report = tmp_path / "rep"
    result = cli(
        "compare", "--trace", tiny_trace, "--cluster", "1x1x4", "--policies", "themis,fifo",
        "--seeds", "0,2,5", "--out", out, "--report", report, "-j", "1",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert sorted(p.name for p in out.iterdir()) == [
        "comparison.json",
        "seed0",
        "seed2",
        "seed5",
        "themis-run.json",
    ]
    data = json.loads((out / "comparison.json").read_text())
    assert data["config"]["seeds"] == [0, 2, 5] and "seed" not in data["config"]
    runs = data["runs"]
    assert [(r["seed"], r["policy"]) for r in runs] == [
        (s, p) for s in (0, 2, 5) for p in ("themis", "fifo")
    ]
    for policy in ("themis", "fifo"):
        values = sorted(r["mean_completion_s"] for r in runs if r["policy"] == policy)
        assert data["aggregate"][policy]["mean_completion_s"] == {
            "median": values[1],
            "min": values[0],
            "max": values[2],
        }
    drawn_models = set()
    for seed in (0, 2, 5):
        summary = json.loads((out / f"seed{seed}" / "themis" / "summary.json").read_text())
        assert summary["config"]["seed"] == seed
        # The seed drives the model draw: each seed's apps train that seed's models.
        drawn = load_workload(str(tiny_trace), seed=seed)
        with (out / f"seed{seed}" / "themis" / "apps.csv").open(newline="") as handle:
            models = [row["model"] for row in csv.DictReader(handle)]
        assert models == [app.model for app in drawn.apps]
        drawn_models.add(tuple(models))
    assert len(drawn_models) == 3  # the seeds really drew different models
    assert "median (min-max) over seeds 0, 2, 5" in result.out
    assert "jobs, median (min-max) over seeds 0, 2, 5" in result.out
    text = (report / "report.html").read_text()
    assert text.count("<svg") == 5 and "over all seeds" in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--seeds", "0,0"], "listed twice"),
        (["--seeds", "x"], "a count N or a list"),
        (["--seeds", "0"], "in 1..100"),
        (["--seeds", "1,-2"], ">= 0"),
        (["--seeds", "2", "--seed", "3"], "not both"),
    ],
)
def test_bad_seeds_are_one_line(cli, tiny_trace: Path, tmp_path: Path, args, fragment) -> None:
    result = cli("compare", "--trace", tiny_trace, "--out", tmp_path / "o", *args)
    assert_one_line_error(result, "field '--seeds'", fragment)
    assert not (tmp_path / "o").exists()


def test_commands_import_matplotlib_only_to_draw_a_report() -> None:
    # `themis --help` stays fast: simulate, compare and experiment import no plotting.
    code = (
        "import sys, themis.cli.main, themis.cli.compare, themis.cli.experiment;"
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
