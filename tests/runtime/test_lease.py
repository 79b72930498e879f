"""The lease API in one process: resume, stop on request, atomic checkpoints, reports."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import themis
from tests.runtime.conftest import HERE
from themis.runtime.workers.lease import (
    BUFFERED_LINE_CHARS,
    BUFFERED_LINES,
    BUFFERED_REPORTS,
    LeaseControl,
    TrialSpec,
    read_checkpoint,
    run_trial,
    write_checkpoint,
)


def spec(tmp_path: Path, entry: str = "trainers:paced", budget: int = 12, **config) -> TrialSpec:
    return TrialSpec(
        "app",
        "t000",
        "tok",
        entry,
        str(HERE),
        {"quality": 1.0, "step_time": 0.0, **config},
        budget,
        str(tmp_path / "ck" / "checkpoint.themis"),
        checkpoint_every=5,
        checkpoint_key=KEY,
    )


KEY = "ab" * 32


def read(s: TrialSpec):
    return read_checkpoint(s.checkpoint_path, s.checkpoint_key, s.app_id, s.trial_id)


def test_budget_run_reports_every_step_and_checkpoints(tmp_path: Path) -> None:
    s = spec(tmp_path)
    outcome = run_trial(s, LeaseControl())
    assert (outcome.status, outcome.steps, outcome.checkpoint_step) == ("done", 12, 12)
    assert [steps for steps, _ in outcome.last.reports] == list(range(1, 13))
    step, state = read(s)
    assert step == 12 and state["steps_run"] == list(range(12))


def test_stop_request_checkpoints_and_resume_keeps_the_count(tmp_path: Path) -> None:
    s = spec(tmp_path, budget=40, step_time=0.02)
    control = LeaseControl()
    timer = threading.Timer(0.25, control.request_stop)
    timer.start()
    first = run_trial(s, control)
    timer.cancel()
    assert first.status == "paused"
    assert 0 < first.steps < 40 and first.checkpoint_step == first.steps
    second = run_trial(s, LeaseControl())
    assert second.status == "done" and second.steps == 40
    assert [steps for steps, _ in second.last.reports][0] == first.steps + 1
    _, state = read(s)
    assert state["steps_run"] == list(range(40))  # resumed, nothing lost or repeated
    assert len(state["pids"]) == 2


def test_stopped_before_start_runs_nothing(tmp_path: Path) -> None:
    control = LeaseControl()
    control.request_stop()
    outcome = run_trial(spec(tmp_path), control)
    assert (outcome.status, outcome.steps) == ("paused", 0)


def test_errors_are_outcomes_with_the_message(tmp_path: Path) -> None:
    outcome = run_trial(spec(tmp_path, "trainers:broken"), LeaseControl())
    assert outcome.status == "error"
    assert outcome.error == "ValueError: this trial is broken"
    assert any("Traceback" in line for line in outcome.last.logs)
    missing = run_trial(spec(tmp_path, "no_such_module:train"), LeaseControl())
    assert missing.status == "error" and "ModuleNotFoundError" in (missing.error or "")


def test_checkpoint_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.themis"
    write_checkpoint(path, 3, {"a": 1}, KEY, "app", "t000")

    class Boom(Exception):
        pass

    def fail(*args, **kwargs):
        raise Boom

    monkeypatch.setattr("os.fsync", fail)
    with pytest.raises(Boom):
        write_checkpoint(path, 4, {"a": 2}, KEY, "app", "t000")
    assert read_checkpoint(path, KEY, "app", "t000") == (3, {"a": 1})  # the old one, whole
    assert [p.name for p in tmp_path.iterdir()] == ["c.themis"]  # no temp file left


def test_lease_is_exported_lazily() -> None:
    import subprocess
    import sys

    code = "import sys, themis; assert 'ray' not in sys.modules; themis.lease; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
    assert themis.lease.__module__ == "themis.runtime.workers.lease"


def test_a_gang_is_one_rank_per_gpu_with_local_ranks_per_node(tmp_path: Path) -> None:
    from dataclasses import replace

    from themis.runtime.workers.lease import rendezvous_env

    gang = (("nodeA", 3), ("nodeB", 1))
    per_gpu = replace(spec(tmp_path), gang=gang)
    assert per_gpu.members() == [
        ("nodeA", 1, 0, 3), ("nodeA", 1, 1, 3), ("nodeA", 1, 2, 3), ("nodeB", 1, 0, 1),
    ]  # fmt: skip
    assert per_gpu.world_size == 4
    env = rendezvous_env(replace(per_gpu, rank=2, local_rank=2, local_world_size=3), 1234)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == (
        "2", "4", "2", "3",
    )  # fmt: skip
    per_node = replace(per_gpu, rank_per_gpu=False)
    assert per_node.members() == [("nodeA", 3, 0, 1), ("nodeB", 1, 0, 1)]
    assert per_node.world_size == 2
    assert replace(spec(tmp_path)).world_size == 1  # no gang (a test's direct run)


def test_the_ranks_of_a_node_are_listed_in_local_rank_order(tmp_path: Path) -> None:
    """Each rank must see its node's GPUs of the gang in local-rank order."""
    from dataclasses import replace

    from themis.runtime.workers.jobs import node_peers

    members = replace(spec(tmp_path), gang=(("A", 3), ("B", 1))).members()
    assert [node_peers(members, k) for k in range(4)] == [[0, 1, 2]] * 3 + [[3]]


def test_what_a_trial_buffers_between_polls_is_bounded_and_what_is_dropped_is_said(
    tmp_path: Path,
) -> None:
    # 50 steps of 200 lines of 20,000 characters, no poll in between: without a bound the
    # actor held 10,000 lines (200 MB) for the arbiter's next poll.
    control = LeaseControl()
    s = spec(tmp_path, "trainers:flood", budget=50, lines=200, width=20_000, step_time=0.0)
    lines = run_trial(s, control).last.logs
    assert len(lines) == BUFFERED_LINES + 1
    assert max(len(line) for line in lines) <= BUFFERED_LINE_CHARS
    assert lines[-1].startswith(f"[themis: {50 * 200 - BUFFERED_LINES} log lines and 0 reports")
    # Reports keep the newest: the rungs read the last values.
    control = LeaseControl()
    for step in range(BUFFERED_REPORTS + 500):
        control.add_report((step, {"loss": float(step)}))
    progress = control.drain(s)
    assert len(progress.reports) == BUFFERED_REPORTS
    assert progress.reports[-1][0] == BUFFERED_REPORTS + 499
    assert "500 reports dropped" in progress.logs[-1]
    # The next poll starts afresh.
    assert control.drain(s).logs == ()
