"""After ``themis serve`` dies unstopped (kill -9), its local Ray cluster's processes and
temporary directory are removed: left alone, they linger for up to 2.5 min, the directory
for ever. Here "serve" is a stand-in process that starts the reaper and two long-lived
processes of its run (in their own sessions, as Ray's are not its children once it is
dead), plus one process of *another* run that must survive."""

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
root = sys.argv[1]
keep = reaper.start(root)
env = {**os.environ, "RAY_TMPDIR": root}
mine = [subprocess.Popen(["sleep", "600"], env=env, start_new_session=True).pid,
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", root],
                         start_new_session=True).pid,
        # Named nowhere after the run (as Ray's agents, whose renaming can wipe their
        # environment): of the run because serve started it.
        subprocess.Popen(["sleep", "601"], env={"PATH": os.environ["PATH"]},
                         start_new_session=True).pid]
time.sleep(2.5)  # the reaper notes serve's tree every second
print(json.dumps(mine), flush=True)
time.sleep(600)
"""

#: A serve that dies at once, before its reaper has even looked at its parent.
QUICK = """
import os, sys
from themis.runtime.workers import reaper
reaper.start(sys.argv[1])
os._exit(0)
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
    # Another run's process (not serve's descendant, naming another directory): untouched.
    theirs = subprocess.Popen(
        ["sleep", "600"], env={**os.environ, "RAY_TMPDIR": other}, start_new_session=True
    )
    serve = subprocess.Popen(
        [sys.executable, "-c", SERVE, root], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        mine = json.loads(serve.stdout.readline())
        assert all(alive(p) for p in [*mine, theirs.pid])
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(10)
        deadline = time.monotonic() + 10
        while (any(alive(p) for p in mine) or Path(root).exists()) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert not any(alive(p) for p in mine), "a process of the run outlived serve by 10 s"
        assert not Path(root).exists(), "the run's temp dir was left behind"
        assert alive(theirs.pid) and Path(other).exists()  # another run's: untouched
    finally:
        if serve.poll() is None:
            serve.kill()
        theirs.kill()
        theirs.wait()
        os.rmdir(other)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux /proc")
@pytest.mark.timeout(60)
def test_a_reaper_whose_serve_is_gone_before_it_looks_ends_nothing_else() -> None:
    """Orphans go to init: a reaper that took "my parent" for serve after serve died
    would take every process of the machine for the run's. It notes a tree only while
    serve (named by pid) is its parent."""
    root = tempfile.mkdtemp(prefix="thr-")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        subprocess.run([sys.executable, "-c", QUICK, root], env=env, timeout=30, check=True)
        deadline = time.monotonic() + 15
        while Path(root).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(root).exists()  # the reaper ran (and found nothing of the run)
        time.sleep(1)
        assert alive(bystander.pid) and alive(os.getpid())
    finally:
        bystander.kill()
        bystander.wait()


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


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux /proc")
@pytest.mark.timeout(240)
def test_kill_9_of_serve_on_two_machines_with_jobs_leaves_no_ray_process(tmp_path: Path) -> None:
    """The report: ``--gpus 4 --machines 2``, jobs running on both nodes, ``kill -9`` of
    serve: the second node's DashboardAgent and RuntimeEnvAgent lived 40-90 s. Every
    process of the run (both nodes' raylets, agents and workers, the GCS, serve's Ray
    driver) must be gone within 15 s, and the run's directory with it."""
    pytest.importorskip("ray")
    import psutil

    from tests.runtime.conftest import app_yaml
    from themis.runtime.workers.reaper import processes_of

    url_file = tmp_path / "url"
    state = tmp_path / "state"
    args = [
        sys.executable, "-m", "themis", "serve", "--init", "--gpus", "4", "--machines", "2",
        "--state-dir", str(state), "--listen", "127.0.0.1:0",
        "--url-file", str(url_file), "--lease", "20", "--grace", "10", "--batch-window", "2",
    ]  # fmt: skip
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    serve = subprocess.Popen(args, env=env, stderr=subprocess.DEVNULL)
    root = None
    tree: list = []
    try:
        deadline = time.monotonic() + 120
        while not url_file.exists() or not url_file.read_text().strip():
            assert serve.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.5)
        app = app_yaml(tmp_path, "busy", trials=4, steps=100000, step_time=0.1)
        submitted = subprocess.run(
            [sys.executable, "-m", "themis", "submit", str(app), "--server",
             url_file.read_text().strip(), "--token-file", str(tmp_path / "app.token")],
            env={**env, "THEMIS_TOKEN": (state / "submit.token").read_text().strip()},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        roots = set()
        for child in psutil.Process(serve.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                roots.add(child.environ().get("RAY_TMPDIR"))
        roots.discard(None)
        (root,) = roots
        # Jobs on both nodes: one worker per GPU, besides each node's agents.
        deadline = time.monotonic() + 90
        while True:
            tree = psutil.Process(serve.pid).children(recursive=True)
            names = []
            for proc in tree:
                with contextlib.suppress(psutil.Error):
                    names.append(proc.name())
            if sum(n.startswith("ray::JobActor") for n in names) >= 4:
                break
            assert time.monotonic() < deadline, names
            time.sleep(1)
        assert names.count("raylet") == 2 and names.count("ray::DashboardAgent") == 2
        assert names.count("ray::RuntimeEnvAgent") == 2
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(10)
        killed = time.monotonic()

        def left() -> list[str]:
            alive = []
            for proc in tree:  # is_running: same pid *and* start time
                with contextlib.suppress(psutil.Error):
                    if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                        alive.append(proc.name())
            return alive + [f"marked {pid}" for pid in processes_of(root)]

        while (left() or Path(root).exists()) and time.monotonic() < killed + 15:
            time.sleep(0.5)
        print(f"\nthe run's {len(tree)} processes gone {time.monotonic() - killed:.1f}s after")
        assert left() == []
        assert not Path(root).exists()
    finally:
        if serve.poll() is None:
            serve.kill()
        if root is not None:
            from themis.runtime.workers.reaper import reap

            noted = {}
            for proc in tree:
                with contextlib.suppress(psutil.Error):
                    noted[proc.pid] = proc.create_time()
            reap(root, grace=1.0, noted=noted)
