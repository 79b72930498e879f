"""``themis simulate --ideal-time``: the run's summary says which ideal time its headline
rho divides by, its config and options keep it (a run again from the summary keeps it),
and a bad value is one line naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import assert_one_line_error


def test_simulate_records_the_ideal_time(cli, tmp_path: Path) -> None:
    args = ["simulate", "-q", "--trace", "generate:jobs=60,load=1.5", "--cluster", "1x2x8"]
    cli(*args, "--out", str(tmp_path / "paper"))
    cli(*args, "--ideal-time", "slice", "--out", str(tmp_path / "slice"))
    paper = json.loads((tmp_path / "paper" / "summary.json").read_text())
    sliced = json.loads((tmp_path / "slice" / "summary.json").read_text())
    assert paper["ideal_time"] == "paper" and "ideal_time" not in paper["config"]
    assert sliced["ideal_time"] == sliced["config"]["ideal_time"] == "slice"
    assert sliced["options"]["ideal-time"] == "slice"
    # The headline is the slice's; both runs report both definitions.
    assert sliced["max_rho"] == sliced["max_rho_slice"]
    assert paper["max_rho"] == paper["max_rho_paper"]
    # A run again from its summary keeps its ideal time.
    cli("simulate", "-q", "--config", str(tmp_path / "slice" / "summary.json"),
        "--out", str(tmp_path / "again"))  # fmt: skip
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert again["ideal_time"] == "slice" and again["max_rho"] == sliced["max_rho"]


def test_a_bad_ideal_time_is_one_line(cli) -> None:
    assert_one_line_error(cli("simulate", "--ideal-time", "private"), "--ideal-time")
