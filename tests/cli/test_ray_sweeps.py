"""``--ray``: a sweep's simulations as Ray tasks on a real local cluster (2 CPUs) give the
same bytes as the local process pool; a failing run is named while the others finish;
the same command again reuses every run; without Ray installed, a one-line error."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import themis
from themis.reports.files import RECORD_FILE

from .children import start_cli
from .conftest import Outcome, assert_one_line_error

#: Two seeds of three policies: six runs of a few hundred ms each.
SWEEP = ["--trace", "generate:jobs=40,load=1.0", "--cluster", "1x2x4"]
SWEEP += ["--policies", "themis,las,fifo", "--seeds", "2", "-q"]

#: Where this process's themis comes from (the checkout's src/ for an editable install,
#: site-packages for an installed wheel, compiled in CI's second run): the sweep's driver
#: must run the same code as the Ray workers, or the runner refuses their results.
THEMIS_HOME = str(Path(themis.__file__).parents[1])


@pytest.fixture(scope="module")
def head() -> Iterator[object]:
    """A cluster as an operator starts one: ``ray start --head`` with 2 CPUs."""
    pytest.importorskip("ray")
    from ..runtime.raytest import RayHead

    root = Path(tempfile.mkdtemp(prefix="ths-"))  # short: Ray puts sockets there
    cluster = RayHead(root, gpus=0, cpus=2)
    saved = dict(os.environ)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        os.environ.clear()
        os.environ.update(saved)


def files(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` by relative path; the run records without ``cpu_s`` (the
    CPU time the run took, the one field that records a time)."""
    found = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == RECORD_FILE:
            record = json.loads(data)
            record["record"].pop("cpu_s")
            data = json.dumps(record).encode()
        found[path.relative_to(out).as_posix()] = data
    return found


def cli_process(*args: object) -> Outcome:
    """``themis args...`` in a child process. Whatever starts or joins Ray runs there:
    Ray initialized and shut down inside the test process leaves state behind that makes
    the runtime's later Ray tests fail (actors cancelled), and a sweep's driver is a
    process of its own in real use anyway."""
    env = {**os.environ, "PYTHONPATH": THEMIS_HOME}
    done = subprocess.run(
        [sys.executable, "-m", "themis", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)


@pytest.mark.timeout(600)
def test_compare_on_a_ray_cluster_writes_the_local_pools_bytes(head, tmp_path) -> None:
    cli = cli_process
    local = cli("compare", *SWEEP, "-j", "2", "--out", tmp_path / "local")
    assert local.code == 0, local.err
    on_ray = cli("compare", *SWEEP, "--ray", head.address, "--out", tmp_path / "ray")
    assert on_ray.code == 0, on_ray.err
    mine, theirs = files(tmp_path / "local"), files(tmp_path / "ray")
    assert len(mine) == 2 + 6 * 4  # manifest, comparison.json; per run 3 files + record
    assert mine == theirs
    assert on_ray.out == local.out.replace(str(tmp_path / "local"), str(tmp_path / "ray"))
    again = cli("compare", *SWEEP, "--ray", head.address, "--out", tmp_path / "ray")
    assert again.code == 0 and "reused 6 of 6 runs" in again.out
    assert files(tmp_path / "ray") == theirs


def _failing_batch(address: str, root: str) -> tuple[str, str, list[str], list[str], str]:
    """The failing-task batch, run in a child process (see ``cli_process``): the
    failure's label and error, the labels recorded and heard, and what ``ordered`` raises."""
    from themis.experiments.ray_engine import RayEngine
    from themis.experiments.runner import RunsFailed, run_batch

    from ..experiments.test_runner import requests

    todo = [replace(r, out_dir=Path(root) / f"run{i}") for i, r in enumerate(requests())]
    todo[1] = replace(todo[1], policy="no-such-policy")  # raises inside the Ray worker
    heard: list[str] = []
    with RayEngine(address) as engine:
        batch = run_batch(todo, on_progress=lambda label, *_: heard.append(label), engine=engine)
    [failure] = batch.failures
    try:
        batch.ordered(todo)
        raised = ""
    except RunsFailed as exc:
        raised = str(exc)
    return failure.label, str(failure.error), sorted(batch.records), sorted(heard), raised


@pytest.mark.timeout(600)
def test_a_failing_task_is_reported_and_the_others_are_kept(head, tmp_path) -> None:
    from themis.experiments import saved

    from ..experiments.test_runner import requests

    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as child:
        label, error, records, heard, raised = child.submit(
            _failing_batch, head.address, str(tmp_path)
        ).result()
    todo = [replace(r, out_dir=tmp_path / f"run{i}") for i, r in enumerate(requests())]
    assert label == "themis f=0" and "no-such-policy" in error
    assert records == ["fifo", "max-min", "themis"]
    assert all(saved.load(todo[i]) is not None for i in (0, 2, 3))
    assert heard == sorted(r.label for r in todo)  # one progress call per run
    assert "1 of 4 simulations failed, first 'themis f=0'" in raised


@pytest.mark.timeout(600)
def test_auto_starts_a_local_ray_and_stops_it(tmp_path) -> None:
    pytest.importorskip("ray")
    local = cli_process("compare", *SWEEP, "-j", "2", "--out", tmp_path / "local")
    on_ray = cli_process("compare", *SWEEP, "--ray", "auto", "--out", tmp_path / "ray")
    assert (local.code, on_ray.code) == (0, 0), on_ray.err
    assert files(tmp_path / "local") == files(tmp_path / "ray")


def test_without_ray_installed_ray_is_a_one_line_error(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an import of a missing package does
    for args in (["compare", *SWEEP], ["experiment", "paper", "--policies", "fifo"]):
        result = cli(*args, "--ray", "auto", "--out", tmp_path / "out")
        assert_one_line_error(result, "--ray", "pip install 'themis-scheduler[runtime]'")
    assert not (tmp_path / "out").exists()  # checked before anything is read or written


def test_workers_and_ray_do_not_go_together(cli, tmp_path) -> None:
    result = cli("compare", *SWEEP, "-j", "2", "--ray", "auto", "--out", tmp_path / "out")
    assert_one_line_error(result, "--workers", "--ray")


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_a_ray_sweep_keeps_what_finished_and_leaves_no_ray(
    tmp_path, signum, code
) -> None:
    """LAS finishes in seconds, Themis takes minutes: signalled between the two, the
    command exits as without Ray (Ray's own SIGTERM handler and its plain
    KeyboardInterrupt do not get in the way), LAS is kept and every Ray process the
    command started (GCS, raylet, workers) is gone."""
    pytest.importorskip("ray")
    psutil = pytest.importorskip("psutil")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "themis", "compare", "--policies", "themis,las", "-q"]
    command += ["--trace", "generate:jobs=3000,load=1.2", "--cluster", "4x4x4"]
    command += ["--out", str(out), "--ray", "auto"]
    env = {**os.environ, "PYTHONPATH": THEMIS_HOME}
    proc = start_cli(command, env)
    started: list = []
    try:
        deadline = time.monotonic() + 300
        while not (out / "las" / RECORD_FILE).exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "LAS never finished"
            time.sleep(0.2)
        started = psutil.Process(proc.pid).children(recursive=True)
        assert len(started) >= 3  # at least GCS, raylet and a worker
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err
        assert err.strip().endswith("terminated" if code == 143 else "interrupted"), err
        assert sorted(p.name for p in out.iterdir()) == ["las", "themis-run.json"]
        time.sleep(2)
        alive = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not alive, [p.cmdline() for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for p in started:
            with contextlib.suppress(psutil.Error):
                p.kill()


def test_an_address_where_no_ray_answers_is_a_one_line_error_at_once(cli, tmp_path) -> None:
    pytest.importorskip("ray")
    from ..runtime.raytest import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    result = cli("compare", *SWEEP, "--ray", address, "--out", tmp_path / "out")
    assert_one_line_error(result, "--ray", f"no Ray cluster answers at {address}")
    assert not (tmp_path / "out").exists()
