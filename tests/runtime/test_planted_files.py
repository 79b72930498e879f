"""What another app (same OS user, so able to write anywhere in the storage) plants at a
victim's paths costs the victim at most a restart from step 0, never a hang, a crash or
a permanent failure; and an older checkpoint of the trial itself (a replay) is refused.

Each test runs a real lease of the paced trainer in this process (``run_trial``), as a
job actor does, on a planted path: a FIFO (``read_bytes`` blocked on it for ever), a
symlink, a directory, a huge sparse file, a file where the app's or the trial's
directory goes (``NotADirectoryError`` on every start)."""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.test_checkpoint import VICTIM_KEY, victim_spec
from themis.runtime.workers import checkpoint
from themis.runtime.workers.checkpoint import CheckpointRefused
from themis.runtime.workers.lease import LeaseControl, Outcome, TrialSpec, run_trial


def run_bounded(spec: TrialSpec, seconds: float = 30.0) -> Outcome:
    """``run_trial`` in a thread: a read that blocks fails the test instead of hanging it."""
    result: list[Outcome] = []
    thread = threading.Thread(target=lambda: result.append(run_trial(spec, LeaseControl())))
    thread.daemon = True
    thread.start()
    thread.join(seconds)
    assert result, f"the trial did not return within {seconds}s (blocked on a planted file)"
    return result[0]


def assert_fresh_start_with(outcome: Outcome, spec: TrialSpec, reason: str, why: str) -> None:
    assert (outcome.status, outcome.steps, outcome.checkpoint_step) == ("done", 12, 12)
    refused = [line for line in outcome.last.logs if line.startswith("checkpoint refused")]
    assert len(refused) == 1 and reason in refused[0] and "starting from step 0" in refused[0]
    assert outcome.last.refused == why and outcome.last.start_step == 0
    found = checkpoint.read(spec.checkpoint_path, VICTIM_KEY, "victim", spec.trial_id)
    assert found["step"] == 12 and found["state"]["steps_run"] == list(range(12))


@pytest.mark.timeout(60)
def test_a_fifo_at_the_checkpoint_neither_blocks_nor_crashes_the_restore(tmp_path: Path) -> None:
    spec = victim_spec(tmp_path)
    path = Path(spec.checkpoint_path)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)  # no writer ever opens it: a blocking open or read waits for ever
    outcome = run_bounded(spec)
    assert_fresh_start_with(outcome, spec, "not a regular file (a FIFO)", "unsafe")
    assert [p.name for p in path.parent.glob("checkpoint.themis.refused-*")], "kept aside"


@pytest.mark.timeout(60)
def test_a_symlink_at_the_checkpoint_is_not_followed(tmp_path: Path) -> None:
    # Even a link to this very trial's genuine checkpoint: the path itself must be a file.
    spec = victim_spec(tmp_path)
    genuine = tmp_path / "elsewhere.themis"
    checkpoint.write(genuine, VICTIM_KEY, "victim", "t000", {"format": 2, "step": 3, "state": {}})
    path = Path(spec.checkpoint_path)
    path.parent.mkdir(parents=True)
    path.symlink_to(genuine)
    outcome = run_bounded(spec)
    assert_fresh_start_with(outcome, spec, "cannot be opened safely", "unsafe")
    assert genuine.exists()  # the link moved aside, not its target
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")  # read through, it would fill memory
    with pytest.raises(CheckpointRefused, match="cannot be opened safely"):
        checkpoint.read_file(link)
    with pytest.raises(CheckpointRefused, match="a character device"):
        checkpoint.read_file("/dev/zero")


@pytest.mark.timeout(60)
def test_a_huge_or_oversize_file_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    spec = victim_spec(tmp_path)
    path = Path(spec.checkpoint_path)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:  # sparse: 17 GiB, past the limit, almost no disk
        f.truncate(checkpoint.MAX_BYTES + (1 << 30))
    outcome = run_bounded(spec)
    assert_fresh_start_with(outcome, spec, "over the", "unsafe")
    # The limit is the module's: a genuine checkpoint past it is refused the same way...
    monkeypatch.setattr(checkpoint, "MAX_BYTES", 100)
    with pytest.raises(CheckpointRefused, match="over the 100-byte limit"):
        checkpoint.read(spec.checkpoint_path, VICTIM_KEY, "victim", "t000")
    # ...and never written: it could not be read back.
    with pytest.raises(ValueError, match="over the 100-byte limit"):
        checkpoint.write(tmp_path / "big", VICTIM_KEY, "victim", "t000", {"b": b"x" * 200})


@pytest.mark.timeout(60)
def test_a_directory_at_the_checkpoint_is_moved_aside(tmp_path: Path) -> None:
    spec = victim_spec(tmp_path)
    Path(spec.checkpoint_path).mkdir(parents=True)
    outcome = run_bounded(spec)
    assert_fresh_start_with(outcome, spec, "not a regular file (a directory)", "unsafe")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("level", ["app", "trial"])
def test_a_file_where_a_directory_goes_costs_no_more_than_a_fresh_start(
    tmp_path: Path, level: str
) -> None:
    """``<storage>/<app>`` or ``<storage>/<app>/<trial>`` a regular file: every trial
    failed with NotADirectoryError, the app ended failed at 0 steps."""
    spec = victim_spec(tmp_path)
    planted = tmp_path / "victim" if level == "app" else tmp_path / "victim" / "t000"
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text("planted")
    outcome = run_bounded(spec)
    assert (outcome.status, outcome.steps, outcome.checkpoint_step) == ("done", 12, 12)
    moved = [line for line in outcome.last.logs if line.startswith("checkpoint directory")]
    assert len(moved) == 1 and "was a file, not a directory: moved to" in moved[0]
    assert planted.is_dir() and not planted.is_symlink()
    aside = list(planted.parent.glob(f"{planted.name}.planted-*"))
    assert len(aside) == 1 and aside[0].read_text() == "planted"  # kept for the operator
    found = checkpoint.read(spec.checkpoint_path, VICTIM_KEY, "victim", "t000")
    assert found["step"] == 12


@pytest.mark.timeout(60)
def test_a_symlinked_app_directory_does_not_lead_checkpoints_elsewhere(tmp_path: Path) -> None:
    spec = victim_spec(tmp_path)
    theirs = tmp_path / "mallory"
    theirs.mkdir()
    (tmp_path / "victim").symlink_to(theirs)
    outcome = run_bounded(spec)
    assert outcome.status == "done" and outcome.checkpoint_step == 12
    assert not (tmp_path / "victim").is_symlink() and list(theirs.iterdir()) == []


@pytest.mark.timeout(60)
def test_an_older_checkpoint_of_the_same_trial_is_refused(tmp_path: Path) -> None:
    """The replay: the trial checkpointed step 5, then 10 (the arbiter counts 10); a copy
    of step 5's file, sealed and genuine, is put back. It is refused as stale and the
    trial starts from 0, telling the arbiter so (``start_step``) for its count."""
    spec = victim_spec(tmp_path)
    path = Path(spec.checkpoint_path)
    assert run_trial(replace(spec, stop_at=5), LeaseControl()).checkpoint_step == 5
    shutil.copy(path, tmp_path / "old")
    second = run_trial(replace(spec, stop_at=10, expected_step=5), LeaseControl())
    assert second.checkpoint_step == 10 and second.last.start_step == 5 and not second.last.refused
    shutil.copy(tmp_path / "old", path)  # the replay
    outcome = run_bounded(replace(spec, expected_step=10))
    assert_fresh_start_with(outcome, spec, "holds step 5 and the arbiter counts 10", "stale")


@pytest.mark.timeout(60)
def test_a_checkpoint_newer_than_the_count_is_kept_past_the_budget_refused(
    tmp_path: Path,
) -> None:
    """Newer than the arbiter's count is genuine (its job was lost before reporting it):
    resumed. Past the budget it is impossible: refused."""
    spec = victim_spec(tmp_path)
    assert run_trial(replace(spec, stop_at=7), LeaseControl()).checkpoint_step == 7
    outcome = run_trial(replace(spec, expected_step=5), LeaseControl())
    assert outcome.status == "done" and outcome.last.start_step == 7 and not outcome.last.refused
    state = {"w": [0.0] * 4, "steps_run": [], "pids": [], "leases": []}
    tree = {"format": 2, "step": 99, "state": state, "wall": 0.0}
    checkpoint.write(spec.checkpoint_path, VICTIM_KEY, "victim", "t000", tree)
    outcome = run_bounded(spec)
    assert_fresh_start_with(outcome, spec, "past the budget of 12", "newer")
