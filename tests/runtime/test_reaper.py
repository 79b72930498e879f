"""After ``themis serve`` dies unstopped (kill -9), its local Ray cluster's processes and
temporary directory are removed (issue 20, defect 9): they lingered for up to 2.5 min,
the directory for ever. Here "serve" is a stand-in process that starts the reaper and
two long-lived processes of its run (in their own sessions, as Ray's are not its
children once it is dead), plus one process of *another* run that must survive."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

SERVE = """
import json, os, subprocess, sys, time
from themis.runtime.workers import reaper
root, other = sys.argv[1], sys.argv[2]
keep = reaper.start(root)
env = {**os.environ, "RAY_TMPDIR": root}
mine = [subprocess.Popen(["sleep", "600"], env=env, start_new_session=True).pid,
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", root],
                         start_new_session=True).pid]
theirs = subprocess.Popen(["sleep", "600"], env={**os.environ, "RAY_TMPDIR": other},
                          start_new_session=True).pid
print(json.dumps([mine, theirs]), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux /proc")
@pytest.mark.timeout(60)
def test_kill_9_of_serve_ends_its_runs_processes_and_removes_its_temp_dir() -> None:
    root = tempfile.mkdtemp(prefix="thr-")
    other = tempfile.mkdtemp(prefix="thr-")
    (Path(root) / "ray" / "session").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    serve = subprocess.Popen(
        [sys.executable, "-c", SERVE, root, other], stdout=subprocess.PIPE, text=True, env=env
    )
    theirs = None
    try:
        mine, theirs = json.loads(serve.stdout.readline())
        assert all(alive(p) for p in [*mine, theirs])
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(10)
        deadline = time.monotonic() + 10
        while (any(alive(p) for p in mine) or Path(root).exists()) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert not any(alive(p) for p in mine), "a process of the run outlived serve by 10 s"
        assert not Path(root).exists(), "the run's temp dir was left behind"
        assert alive(theirs) and Path(other).exists()  # another run's: untouched
    finally:
        if serve.poll() is None:
            serve.kill()
        if theirs is not None and alive(theirs):
            os.kill(theirs, signal.SIGKILL)
        os.rmdir(other)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux /proc")
@pytest.mark.timeout(180)
def test_kill_9_of_a_real_serve_leaves_no_ray_process_after_10_s(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    import psutil

    from themis.runtime.workers.reaper import processes_of

    url_file = tmp_path / "url"
    args = [
        sys.executable, "-m", "themis", "serve", "--init", "--gpus", "2",
        "--state-dir", str(tmp_path / "state"), "--listen", "127.0.0.1:0",
        "--url-file", str(url_file), "--lease", "8", "--grace", "4",
    ]  # fmt: skip
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    serve = subprocess.Popen(args, env=env, stderr=subprocess.DEVNULL)
    root = None
    try:
        deadline = time.monotonic() + 120
        while not url_file.exists() or not url_file.read_text().strip():
            assert serve.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.5)
        # The run's temp dir, as Ray's processes (serve's descendants) were given it.
        roots = set()
        for child in psutil.Process(serve.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                roots.add(child.environ().get("RAY_TMPDIR"))
        roots.discard(None)
        (root,) = roots
        assert len(processes_of(root)) >= 3  # GCS, raylet, agents, serve's Ray driver...
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(10)
        deadline = time.monotonic() + 10
        while (processes_of(root) or Path(root).exists()) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = [psutil.Process(p).cmdline()[:3] for p in processes_of(root)]
        assert left == [], left
        assert not Path(root).exists()
    finally:
        if serve.poll() is None:
            serve.kill()
        if root is not None:
            from themis.runtime.workers.reaper import reap

            reap(root, grace=1.0)
