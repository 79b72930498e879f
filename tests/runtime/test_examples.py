"""The example apps under the lease API, in one process: a trial paused at a lease end
and resumed from its checkpoint ends exactly where an uninterrupted one does."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from themis.runtime.state.appfile import load_app_file
from themis.runtime.workers.lease import LeaseControl, TrialSpec, run_trial

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def trial_spec(example: str, index: int, budget: int, path: Path) -> TrialSpec:
    app = load_app_file(EXAMPLES / example / "app.yaml")
    return TrialSpec(
        app.name,
        f"t{index:03d}",
        "tok",
        app.entrypoint,
        app.workdir,
        app.configs[index],
        budget,
        str(path),
        app.checkpoint_every,
        checkpoint_key="cd" * 32,
    )


def final_loss(outcome) -> float:
    return outcome.last.reports[-1][1]["loss"]


@pytest.mark.parametrize(("example", "index"), [("mlp_sweep", 5), ("torch_sweep", 4)])
@pytest.mark.timeout(120)
def test_paused_and_resumed_trial_ends_where_an_uninterrupted_one_does(
    tmp_path: Path, example: str, index: int
) -> None:
    if example == "torch_sweep":
        pytest.importorskip("torch")
    whole = run_trial(trial_spec(example, index, 60, tmp_path / "whole.pkl"), LeaseControl())
    assert whole.status == "done" and whole.steps == 60
    split = trial_spec(example, index, 60, tmp_path / "split.pkl")
    first = run_trial(replace(split, stop_at=25), LeaseControl())  # e.g. a rung at 25
    assert (first.status, first.steps, first.checkpoint_step) == ("done", 25, 25)
    second = run_trial(split, LeaseControl())
    assert second.steps == 60 and second.last.reports[0][0] == 26
    assert final_loss(second) == pytest.approx(final_loss(whole), rel=1e-9)
    # And it learned something: the loss fell from its first report.
    assert final_loss(whole) < first.last.reports[0][1]["loss"]
