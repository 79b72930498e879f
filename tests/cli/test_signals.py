"""SIGTERM and SIGINT to a running ``themis compare``: prompt exit, no worker left.

A real process tree: ``themis compare -j 2`` in a subprocess, signalled once its two
workers exist. Before the fix SIGTERM killed the parent alone (the workers ran on under
PID 1) and SIGINT waited for the runs in flight to finish; SIGKILL left them running too.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from .children import start_cli

psutil = pytest.importorskip("psutil")

SRC = Path(__file__).parents[2] / "src"
#: Long enough (minutes of CPU) that the runs are surely still going when signalled.
LONG_RUN = ["--trace", "generate:jobs=3000,load=1.2", "--cluster", "4x4x4"]


def _wait_for_children(parent, count: int, limit_s: float = 60.0) -> list:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        children = parent.children()
        if len(children) >= count:
            return children
        time.sleep(0.05)
    raise AssertionError(f"{count} workers never started")


def _alive(process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(
    ("signum", "code", "word"),
    [
        (signal.SIGTERM, 143, "terminated"),
        (signal.SIGINT, 130, "interrupted"),
        (signal.SIGKILL, -9, None),  # no clean-up possible: the workers die with the parent
    ],
)
def test_a_signal_stops_compare_and_its_workers(tmp_path, signum, code, word) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = tmp_path / "out"
    command = [sys.executable, "-m", "themis", "compare", "--policies", "themis,las"]
    command += ["-j", "2", "-q", *LONG_RUN, "--out", str(out)]
    proc = start_cli(command, env, new_session=True)
    workers = []
    try:
        workers = _wait_for_children(psutil.Process(proc.pid), 2)
        assert proc.poll() is None
        proc.send_signal(signum)  # to the parent alone, as systemd or Popen.terminate do
        _, err = proc.communicate(timeout=60)  # hangs while a worker holds the pipe
        assert proc.returncode == code, err
        if word is not None:
            assert err.strip().endswith(f"themis: {word}"), err
        assert "Traceback" not in err
        for worker in workers:
            worker.wait(timeout=10) if _alive(worker) else None
        assert not [w.pid for w in workers if _alive(w)]
        assert not (out / "themis" / "summary.json").exists()  # stopped, not finished
    finally:
        for process in [*workers, psutil.Process(proc.pid) if proc.poll() is None else None]:
            if process is not None and _alive(process):
                process.kill()
        proc.wait(timeout=10)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_compare_keeps_the_runs_that_finished(tmp_path, signum) -> None:
    """FIFO finishes in seconds, Themis takes minutes: stopped between the two, the
    folder keeps FIFO's files and record (what the same command again reuses), and
    nothing of Themis's."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = tmp_path / "out"
    command = [sys.executable, "-m", "themis", "compare", "--policies", "themis,fifo"]
    command += ["-j", "2", "-q", *LONG_RUN, "--out", str(out)]
    proc = start_cli(command, env)
    try:
        deadline = time.monotonic() + 300
        while not (out / "fifo" / "themis-record.json").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "FIFO never finished"
            time.sleep(0.1)
        proc.send_signal(signum)
        proc.communicate(timeout=60)
        assert proc.returncode in (130, 143)
        names = sorted(p.name for p in (out / "fifo").iterdir())
        assert names == ["allocations.csv", "apps.csv", "summary.json", "themis-record.json"]
        assert not (out / "themis").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
