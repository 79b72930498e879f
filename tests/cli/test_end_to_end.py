"""The installed ``themis`` script, run as a user would."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import HEADER, write_trace

SCRIPT = Path(sys.executable).parent / "themis"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="themis script not installed")


def _run(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_fifo_on_the_bundled_trace(tmp_path: Path) -> None:
    done = _run("simulate", "--policy", "fifo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # Off a terminal: plain progress lines only (the last one when the run ends).
    assert done.stderr.splitlines()[-1].startswith("themis: run 1/1, ")
    assert "\x1b" not in done.stderr
    out = tmp_path / "out" / "fifo"
    summary = json.loads((out / "summary.json").read_text())
    with (out / "apps.csv").open(newline="") as handle:
        apps = list(csv.DictReader(handle))
    assert summary["apps"] == len(apps) > 0
    assert summary["config"]["trace"] == "hyperdrive"
    assert 0 < summary["utilization"] <= 1
    assert f"{summary['apps']} apps" in done.stdout.splitlines()[0]


def test_bad_trace_row_is_one_line_and_exit_2(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", ["1, j1, 2018-06-16 04:51:49, soon, 1"])
    done = _run("simulate", "--trace", trace, "--cluster", "1x1x4", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"themis: error: {trace}:2, field 'run-time': 'soon' is not a number"
    ]


def test_header_only_is_one_line_and_exit_2(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "\n")
    done = _run("simulate", "--trace", trace, cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_version_and_help(tmp_path: Path) -> None:
    assert _run("--version", cwd=tmp_path).stdout.startswith("themis ")
    assert _run("--help", cwd=tmp_path).returncode == 0
