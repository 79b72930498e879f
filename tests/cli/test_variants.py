"""Workload variants and generated workloads on ``simulate`` and ``compare``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from .conftest import assert_one_line_error


def _apps(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_variants_change_the_simulated_workload(cli, tiny_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = cli(
        "simulate", "--trace", tiny_trace, "--cluster", "1x2x2", "--gang-mix",
        "--vgg-share", "1", "--contention", "2", "--out", out, "--app-interval", "600",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "one every 300 s (2x contention)" in result.out
    # The header says the workload is not the trace as written.
    assert "tiny.csv with --gang-mix and --model-share vgg=1: 3 apps" in result.out
    rows = _apps(out / "apps.csv")
    assert all(r["model"].startswith("vgg") for r in rows)
    gangs = {int(group.split("x")[0]) for r in rows for group in r["gangs"].split()}
    assert gangs <= {1, 2}  # capped at one 2-GPU machine
    assert [float(r["arrival_s"]) for r in rows] == [0.0, 300.0, 600.0]  # 600 s / 2
    config = json.loads((out / "summary.json").read_text())["config"]
    assert (config["gang_mix"], config["model_share"], config["contention"]) == (
        True,
        "vgg=1",
        2.0,
    )


def test_generated_trace_runs_and_is_recorded(cli, tmp_path: Path) -> None:
    out = tmp_path / "gen"
    result = cli(
        "compare", "--trace", "generate:jobs=12,load=1.5,max_trials=4", "--cluster", "1x2x4",
        "--policies", "themis,fifo", "--out", out, "-j", "1",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "generated (jobs=12,load=1.5,max_trials=4, seed 0)" in result.out
    data = json.loads((out / "comparison.json").read_text())
    assert data["config"]["format"] == "generated"
    assert data["config"]["arrivals"] == "trace"
    assert sum(1 for _ in _apps(out / "themis" / "apps.csv")) >= 3  # 12 jobs, <= 4 per app


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--model-share", "vgg"], ["field '--model-share'", "FAMILY=SHARE"]),
        (["--model-share", "bert=0.5"], ["field '--model-share'", "no model name starts with"]),
        (["--vgg-share", "2"], ["field '--model-share'", "[0, 1]"]),
        (["--vgg-share", "0.5", "--model-share", "vgg=0.5"], ["not both"]),
        (["--contention", "0"], ["field '--contention'", "> 0"]),
        (["--trace", "generate:jobs=lots"], ["field '--trace'", "'jobs' must be"]),
        (["--trace", "generate:jobs=5", "--arrivals", "interval"], ["field '--arrivals'"]),
    ],
)
def test_bad_variants_are_one_line_errors(cli, tiny_trace: Path, tmp_path: Path, args, fragments):
    base = ["simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path / "o"]
    result = cli(*base, *args)
    assert_one_line_error(result, *fragments)


def test_experiment_paper_checks_seeds_before_running(cli, tmp_path: Path) -> None:
    result = cli("experiment", "paper", "--seeds", "1,1", "--out", tmp_path / "p")
    assert_one_line_error(result, "field '--seeds'", "listed twice")
    assert not (tmp_path / "p").exists()
    result = cli("experiment", "paper", "--seeds", "3", "--seed", "1", "--out", tmp_path / "p")
    assert_one_line_error(result, "not both")


def test_a_generated_trace_is_drawn_again_for_each_seed(cli, tmp_path: Path) -> None:
    out = tmp_path / "gen"
    result = cli(
        "compare", "--trace", "generate:jobs=10,max_trials=3", "--cluster", "1x2x4",
        "--policies", "fifo", "--seeds", "2", "--out", out, "-j", "1",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "seed 0: generated (jobs=10,max_trials=3, seed 0)" in result.out
    assert "seed 1: generated (jobs=10,max_trials=3, seed 1)" in result.out
    first, second = (_apps(out / f"seed{s}" / "fifo" / "apps.csv") for s in (0, 1))
    key = ("arrival_s", "model", "gangs")
    assert [tuple(r[k] for k in key) for r in first] != [tuple(r[k] for k in key) for r in second]
