"""The output files: exact columns, full precision, one row per interval."""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import fields
from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.fairness.ftf import posthoc_rho
from themis.reports.files import (
    ALLOCATIONS_COLUMNS,
    APPS_COLUMNS,
    write_allocations_csv,
    write_apps_csv,
    write_run,
)
from themis.reports.metrics import AppRow, RunSummary, app_rows, summarize

from .conftest import make_result


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _header(path: Path) -> list[str]:
    return path.read_text().splitlines()[0].split(",")


def test_run_writes_three_files(tmp_path: Path, result) -> None:
    rows = app_rows(result)
    out = tmp_path / "deep" / "run"
    paths = write_run(out, result, summarize(result, rows), rows, {"seed": 3})
    assert sorted(p.name for p in paths) == ["allocations.csv", "apps.csv", "summary.json"]
    assert all(p.parent == out and p.is_file() for p in paths)


def test_apps_csv_has_exact_columns(tmp_path: Path, result) -> None:
    write_apps_csv(tmp_path / "apps.csv", app_rows(result))
    assert _header(tmp_path / "apps.csv") == [
        "app_id",
        "arrival_s",
        "finish_s",
        "completion_s",
        "t_cluster_s",
        "n_avg",
        "rho",
        "model",
        "gangs",
        "wait_s",
        "t_slice_s",
        "rho_paper",
        "rho_slice",
        "shared",
    ]
    rows = _read(tmp_path / "apps.csv")
    assert [(r["model"], r["gangs"], float(r["wait_s"])) for r in rows] == [
        ("toy", "2x1", 0.0),
        ("toy", "2x1", 0.0),
    ]
    assert list(APPS_COLUMNS) == _header(tmp_path / "apps.csv")


def test_apps_csv_rho_recomputes_exactly_from_its_own_columns(tmp_path: Path) -> None:
    # Values whose short decimal forms would not round-trip.
    rows = [
        AppRow("x", 0.1, 12345.678901234567, 12345.578901234567, 1 / 3, 2 / 7, 0.0),
        AppRow("y", 3.3, 9.999999999999998, 6.699999999999998, 0.7, 1.4142135623730951, 0.0),
    ]
    rows = [
        AppRow(
            r.app_id,
            r.arrival_s,
            r.finish_s,
            r.finish_s - r.arrival_s,
            r.t_cluster_s,
            r.n_avg,
            posthoc_rho(r.arrival_s, r.finish_s, r.t_cluster_s, r.n_avg),
        )
        for r in rows
    ]
    write_apps_csv(tmp_path / "apps.csv", rows)
    for written, original in zip(_read(tmp_path / "apps.csv"), rows, strict=True):
        arrival, finish = float(written["arrival_s"]), float(written["finish_s"])
        t_cl, n_avg = float(written["t_cluster_s"]), float(written["n_avg"])
        assert float(written["rho"]) == posthoc_rho(arrival, finish, t_cl, n_avg)
        assert float(written["rho"]) == original.rho
        assert float(written["completion_s"]) == finish - arrival


def test_apps_csv_both_rhos_recompute_exactly_from_its_own_columns(tmp_path: Path, result) -> None:
    write_apps_csv(tmp_path / "apps.csv", app_rows(result))
    for row in _read(tmp_path / "apps.csv"):
        arrival, finish = float(row["arrival_s"]), float(row["finish_s"])
        t_cl, n_avg = float(row["t_cluster_s"]), float(row["n_avg"])
        assert float(row["rho_paper"]) == posthoc_rho(arrival, finish, t_cl, n_avg)
        assert float(row["rho_slice"]) == (finish - arrival) / float(row["t_slice_s"])
        assert float(row["rho"]) == float(row["rho_paper"])  # the run's: the paper's
        assert row["shared"] == "1"  # a and b overlap from 40 to 100


def test_allocations_csv_one_row_per_interval_sorted_by_start(tmp_path: Path, result) -> None:
    path = tmp_path / "allocations.csv"
    write_allocations_csv(path, result.intervals)
    assert _header(path) == ["start_s", "end_s", "app_id", "job_id", "gpus"]
    assert list(ALLOCATIONS_COLUMNS) == _header(path)
    rows = _read(path)
    assert len(rows) == len(result.intervals)
    starts = [float(r["start_s"]) for r in rows]
    assert starts == sorted(starts) == [0.0, 40.0, 100.0]
    assert [(r["app_id"], r["job_id"], r["gpus"]) for r in rows] == [
        ("a", "a-j", "0 1"),
        ("b", "b-j", "2 3"),
        ("b", "b-j", "1 2"),
    ]
    assert [float(r["end_s"]) for r in rows] == [100.0, 100.0, 340.0]


def test_summary_json_holds_every_summary_field_and_config(tmp_path: Path, result) -> None:
    rows = app_rows(result)
    summary = summarize(result, rows)
    write_run(tmp_path, result, summary, rows, {"seed": 3, "trace": Path("t.csv")})
    data = json.loads((tmp_path / "summary.json").read_text())
    assert set(data) == {f.name for f in fields(RunSummary)} | {"config"}
    assert data["config"] == {"seed": 3, "trace": "t.csv"}
    assert data["max_rho"] == summary.max_rho
    assert data["jain_rho"] == summary.jain_rho


def test_summary_json_writes_infinite_load_as_null(tmp_path: Path) -> None:
    res = make_result([("a", 0.0, 10.0, 5.0, 1.0)], [])
    rows = app_rows(res)
    # Workload.offered_load is always finite; the writer still guards the JSON.
    summary = dataclasses.replace(summarize(res, rows), offered_load=float("inf"))
    write_run(tmp_path, res, summary, rows)
    text = (tmp_path / "summary.json").read_text()
    assert "Infinity" not in text
    assert json.loads(text)["offered_load"] is None


def test_output_dir_that_is_a_file_is_a_user_error(tmp_path: Path, result) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("")
    rows = app_rows(result)
    with pytest.raises(ThemisError) as err:
        write_run(blocker / "run", result, summarize(result, rows), rows)
    assert "cannot create output directory" in str(err.value)


def test_summary_fields_are_the_documented_ones() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    for f in fields(RunSummary):
        assert f"`{f.name}`" in doc, f.name
    for column in APPS_COLUMNS + ALLOCATIONS_COLUMNS:
        assert f"`{column}`" in doc, column
