"""``themis simulate``: files, output, defaults and one-line errors for bad input."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from themis.fairness.ftf import posthoc_rho

from .conftest import HEADER, TINY_ROWS, assert_one_line_error, write_trace

APPS_HEADER = (
    "app_id,arrival_s,finish_s,completion_s,t_cluster_s,n_avg,rho,model,gangs,wait_s,"
    "t_slice_s,rho_paper,rho_slice,shared"
)
ALLOC_HEADER = "start_s,end_s,app_id,job_id,gpus"


def test_writes_three_files_with_the_right_columns(cli, tiny_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", out)
    assert result.code == 0, result.err
    assert sorted(p.name for p in out.iterdir()) == [
        "allocations.csv",
        "apps.csv",
        "summary.json",
        "themis-run.json",
    ]
    apps = (out / "apps.csv").read_text().splitlines()
    assert apps[0] == APPS_HEADER
    assert [line.split(",")[0] for line in apps[1:]] == ["1", "2", "3"]
    allocations = (out / "allocations.csv").read_text().splitlines()
    assert allocations[0] == ALLOC_HEADER
    assert len(allocations) > 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "themis"
    assert (summary["apps"], summary["jobs"]) == (3, 5)
    assert summary["config"]["cluster"] == "1x1x4"


def test_apps_csv_rho_recomputes_from_its_columns(cli, tiny_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", out).code == 0
    with (out / "apps.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        a, f = float(row["arrival_s"]), float(row["finish_s"])
        want = posthoc_rho(a, f, float(row["t_cluster_s"]), float(row["n_avg"]))
        assert float(row["rho"]) == want


def test_allocation_gpus_are_space_separated_ids_in_the_cluster(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    assert cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", out).code == 0
    with (out / "allocations.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    starts = [float(r["start_s"]) for r in rows]
    assert starts == sorted(starts)
    gangs = {"j1": 1, "j2": 2, "j3": 4, "j5": 2}
    for row in rows:
        gpus = [int(g) for g in row["gpus"].split(" ")]
        assert len(gpus) == gangs[row["job_id"]]
        assert all(0 <= g < 4 for g in gpus)
        assert float(row["end_s"]) > float(row["start_s"])


def test_prints_workload_line_and_summary_table(cli, tiny_trace: Path, tmp_path: Path) -> None:
    result = cli(
        "simulate",
        "--trace",
        tiny_trace,
        "--cluster",
        "1x1x4",
        "--policy",
        "fifo",
        "--out",
        tmp_path / "o",
    )
    assert result.code == 0
    first = result.out.splitlines()[0]
    for fragment in ("tiny.csv", "3 apps", "5 jobs", "GPU-hours", "offered load", "1x1x4"):
        assert fragment in first
    assert "max rho" in result.out and "fifo" in result.out
    # Not a terminal: no bar, only plain progress lines (here the closing one).
    lines = result.err.splitlines()
    assert lines and all(line.startswith("themis: run ") for line in lines), result.err
    assert lines[-1].startswith("themis: run 1/1, ")
    assert "\x1b" not in result.err


def test_default_output_dir_is_out_slash_policy(
    cli, tiny_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--policy", "max-min").code
        == 0
    )
    assert (tmp_path / "out" / "max-min" / "apps.csv").is_file()


def test_same_seed_same_files(cli, tiny_trace: Path, tmp_path: Path) -> None:
    for name in ("one", "two"):
        assert (
            cli(
                "simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path / name
            ).code
            == 0
        )
    for file in ("apps.csv", "allocations.csv", "summary.json"):
        assert (tmp_path / "one" / file).read_text() == (tmp_path / "two" / file).read_text()


# --- bad input: one line on stderr, exit 2 ---------------------------------------------


def _bad_trace(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    return write_trace(tmp_path / "bad.csv", rows, header)


def test_malformed_row_names_file_and_line(cli, tmp_path: Path) -> None:
    trace = _bad_trace(tmp_path, [TINY_ROWS[0], "1, j2, 2018-06-16 04:52:49, 1800.0"])
    result = cli("simulate", "--trace", trace, "--cluster", "1x1x4", "--out", tmp_path / "o")
    assert_one_line_error(result, f"{trace}:3", "field 'num-gpus': expected 5 fields, got 4")


def test_unknown_model_names_file_line_and_field(cli, tmp_path: Path) -> None:
    trace = _bad_trace(
        tmp_path,
        ["1, j1, 2018-06-16 04:51:49, 60.0, 1, vgg16", "2, j2, 2018-06-16 04:52:49, 60.0, 1, gpt9"],
        header=HEADER + ",model",
    )
    result = cli("simulate", "--trace", trace, "--cluster", "1x1x4", "--out", tmp_path / "o")
    assert_one_line_error(result, f"{trace}:3", "field 'model'", "gpt9")


def test_negative_run_time_names_file_line_and_field(cli, tmp_path: Path) -> None:
    trace = _bad_trace(tmp_path, ["1, j1, 2018-06-16 04:51:49, -5.0, 1"])
    result = cli("simulate", "--trace", trace, "--cluster", "1x1x4", "--out", tmp_path / "o")
    assert_one_line_error(result, f"{trace}:2", "field 'run-time'")


def test_gang_larger_than_cluster_names_file_line_and_field(cli, tmp_path: Path) -> None:
    trace = _bad_trace(tmp_path, [TINY_ROWS[0], "4, j9, 2018-06-16 07:00:00, 60.0, 8"])
    result = cli("simulate", "--trace", trace, "--cluster", "1x1x4", "--out", tmp_path / "o")
    line = assert_one_line_error(result, f"{trace}:3", "field 'num-gpus'", "8 GPUs")
    assert "4" in line
    assert not (tmp_path / "o").exists()  # checked before anything is written


def test_unknown_policy_is_one_line_naming_the_flag(cli, tiny_trace: Path, tmp_path: Path) -> None:
    result = cli("simulate", "--trace", tiny_trace, "--policy", "nope", "--out", tmp_path / "o")
    assert_one_line_error(result, "field '--policy'", "nope", "themis", "fifo")


def test_missing_trace_file(cli, tmp_path: Path) -> None:
    result = cli("simulate", "--trace", tmp_path / "absent.csv", "--out", tmp_path / "o")
    assert_one_line_error(result, "absent.csv", "no such trace")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--fairness-knob", "1"], ["field '--fairness-knob'", "[0, 1)"]),
        (["--fairness-knob", "-0.1"], ["field '--fairness-knob'"]),
        (["--fairness-knob", "nan"], ["field '--fairness-knob'"]),
        (["--lease", "0"], ["field '--lease'", "> 0"]),
        (["--lease", "inf"], ["field '--lease'"]),
        (["--batch-window", "-1"], ["field '--batch-window'", ">= 0"]),
        (["--app-interval", "-1"], ["field '--app-interval'"]),
        (["--app-interval", "inf"], ["field '--app-interval'"]),
        (["--cluster", "2x4"], ["field '--cluster'", "RxMxG"]),
        (["--cluster", "0x4x8"], ["field '--cluster'"]),
        (["--lease", "ten"], ["--lease", "not a valid float"]),
        (["--arrivals", "poisson"], ["--arrivals", "poisson"]),
        (["--seed", "x"], ["--seed"]),
        (["--polcy", "fifo"], ["--polcy", "Did you mean"]),
        (["--profiles"], ["--profiles", "requires an argument"]),
    ],
)
def test_bad_options_are_one_line(cli, tiny_trace: Path, tmp_path: Path, args, fragments) -> None:
    result = cli("simulate", "--trace", tiny_trace, "--out", tmp_path / "o", *args)
    assert_one_line_error(result, *fragments)


def test_bad_profiles_file_names_file_and_field(cli, tiny_trace: Path, tmp_path: Path) -> None:
    profiles = tmp_path / "profiles.json"
    profiles.write_text('{"toy": {"time_per_iteration": 1, "cross_machine": "x", "cross_rack": 1}}')
    result = cli("simulate", "--trace", tiny_trace, "--profiles", profiles, "--out", tmp_path / "o")
    assert_one_line_error(result, str(profiles), "toy.cross_machine")


def test_output_dir_that_is_a_file(cli, tiny_trace: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", blocker / "x")
    assert_one_line_error(result, "cannot create output directory")


def test_tiny_trace_summary_uses_adaptive_units_and_a_sane_load(cli, tmp_path: Path) -> None:
    """Three short jobs arriving a second apart on 64 GPUs never contend: the load is the
    GPUs they could hold (4 of 64), and minutes show as minutes."""
    trace = tmp_path / "tiny.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "1,1,0,0,resnet50,178,1\n2,1,1,0,vgg16,170,1\n3,2,2,0,vgg16,100,0\n"
    )
    result = cli("simulate", "--trace", trace, "--out", tmp_path / "o", "-q")
    assert result.code == 0, result.err
    first = result.out.splitlines()[0]
    assert "0.15 GPU-hours" in first and "offered load 0.06 on 64 GPUs" in first
    table = result.out
    assert "0.0 h" not in table
    assert re.search(r"mean completion\s*│\s*2\.\d min", table), table
    assert re.search(r"GPU-hours used\s*│\s*0\.15", table), table
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["offered_load"] == pytest.approx(4 / 64)
