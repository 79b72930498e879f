"""Progress: bars on a terminal, periodic plain lines elsewhere (CI, logs); no time left."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.progress import Progress, TimeElapsedColumn, TimeRemainingColumn

from themis.cli.progress import PlainProgress, RunsProgress, clock_text, progress_bar

from .conftest import TINY_ROWS, write_trace


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_prints_at_most_every_interval_without_time_left() -> None:
    clock, out = FakeClock(), io.StringIO()
    plain = PlainProgress(out, interval=30, clock=clock)
    runs = RunsProgress(plain, 2, "policies")
    clock.now += 10
    runs("themis", 1, 4)  # 10 s in: too early for a line
    assert out.getvalue() == ""
    clock.now += 20
    runs("themis", 2, 4)  # 30 s in, a quarter done (half of one of two runs)
    assert out.getvalue().splitlines() == ["themis: policies 0/2, 0:30 elapsed (themis 2/4)"]
    clock.now += 5
    runs("themis", 4, 4)
    runs("fifo", 1, 1)
    assert len(out.getvalue().splitlines()) == 1  # 5 s after the last line
    plain.close()
    assert out.getvalue().splitlines()[-1] == "themis: policies 2/2, 0:35 elapsed"


def test_clock_text() -> None:
    assert [clock_text(s) for s in (0, 42.4, 725, 3723)] == ["0:00", "0:42", "12:05", "1:02:03"]


def test_bars_on_a_terminal_show_elapsed_time_and_no_estimate(monkeypatch) -> None:
    # An estimate from apps done was 2-40x off (the module's docstring): none is shown.
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress_bar(True) as progress:
        assert isinstance(progress, Progress)
        assert any(isinstance(c, TimeElapsedColumn) for c in progress.columns)
        assert not any(isinstance(c, TimeRemainingColumn) for c in progress.columns)


def test_off_a_terminal_stderr_gets_plain_lines_and_no_control_characters(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from themis.cli.main import run

    monkeypatch.setenv("THEMIS_PROGRESS_SECONDS", "0")
    trace = write_trace(tmp_path / "tiny.csv", TINY_ROWS)
    args = ["simulate", "--trace", str(trace), "--cluster", "1x1x4", "--out", str(tmp_path / "o")]
    assert run(args) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines and all(line.startswith("themis: run ") for line in lines), err
    assert lines[-1].startswith("themis: run 1/1, ")
    assert "\x1b" not in err and "\r" not in err
    assert run([*args, "-q"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("seconds", ["-1", "soon"])
def test_a_bad_interval_falls_back_to_the_default(monkeypatch, seconds: str) -> None:
    from themis.cli import progress

    monkeypatch.setenv("THEMIS_PROGRESS_SECONDS", seconds)
    assert progress._plain_seconds() == progress.DEFAULT_PLAIN_SECONDS
