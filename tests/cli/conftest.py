"""Helpers: run the CLI in-process, write tiny traces."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from themis.cli.main import run

HEADER = "experiment-id,job-id,start-time,run-time,num-gpus"

#: Three apps, five jobs, gangs of 1 to 4 GPUs: fits a 1x1x4 cluster and runs in ms.
TINY_ROWS = [
    "1, j1, 2018-06-16 04:51:49, 3600.0, 1",
    "1, j2, 2018-06-16 04:52:49, 1800.0, 2",
    "2, j3, 2018-06-16 05:00:00, 7200.0, 4",
    "2, j4, 2018-06-16 05:10:00, 0.0, 1",
    "3, j5, 2018-06-16 06:00:00, 600.0, 2",
]


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """``cli(*args)`` runs ``themis args...`` in-process and returns code, stdout, stderr."""

    def invoke(*args: str) -> Outcome:
        code = run([str(a) for a in args])
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return invoke


def write_trace(path: Path, rows: list[str], header: str = HEADER) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "tiny.csv", TINY_ROWS)


def assert_one_line_error(outcome: Outcome, *fragments: str) -> str:
    """Exit 2, nothing on stdout, exactly one stderr line with every fragment in it."""
    assert outcome.code == 2, outcome
    assert "Traceback" not in outcome.err
    lines = outcome.err.splitlines()
    assert len(lines) == 1, outcome.err
    assert lines[0].startswith("themis: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]
