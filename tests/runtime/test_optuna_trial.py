"""A tuner app's trial in one process (``run_trial``, no Ray): the objective run as one
trial of its study, pruned by the study's pruner, unwound at a lease end and run again
with the same Optuna trial, and a planted storage unable to pass its trials off as the
app's."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from themis.runtime.workers.lease import LeaseControl, TrialSpec, run_trial

optuna = pytest.importorskip("optuna")
HERE = Path(__file__).resolve().parent
KEY = "cd" * 32


def spec(tmp: Path, trial: int, pruner: str = "NopPruner", entry: str = "objective", **more):
    tuner = {
        "kind": "optuna",
        "direction": "minimize",
        "sampler": "RandomSampler",
        "sampler_args": {"seed": 0},
        "pruner": pruner,
        "pruner_args": more,
        "metric": "value",
        "study_name": "s",
        "storage": f"sqlite:///{tmp / 'study.db'}",
    }
    return TrialSpec(
        "app",
        f"t{trial:03d}",
        "tok",
        f"tuned:{entry}",
        str(HERE),
        {},
        12,
        str(tmp / f"t{trial}" / "checkpoint.themis"),
        5,
        checkpoint_key=KEY,
        tuner=tuner,
    )


def study(tmp: Path):
    return optuna.load_study(study_name="s", storage=f"sqlite:///{tmp / 'study.db'}")


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_the_studys_pruner_prunes_and_the_outcome_says_so(tmp_path: Path) -> None:
    pruner = {"n_startup_trials": 2, "n_warmup_steps": 1}
    outcomes = [
        run_trial(spec(tmp_path, i, "MedianPruner", **pruner), LeaseControl()) for i in range(8)
    ]
    pruned = [o for o in outcomes if o.status == "pruned"]
    assert pruned, [o.status for o in outcomes]
    for o in pruned:
        assert o.note.startswith("pruned by MedianPruner at step "), o.note
        assert 0 < o.steps < 12 and o.checkpoint_step == 0
    done = [o for o in outcomes if o.status == "done"]
    assert all(o.steps == 12 and o.note.startswith("completed: optuna trial") for o in done)
    states = [t.state.name for t in study(tmp_path).trials]
    assert states.count("PRUNED") == len(pruned) and states.count("COMPLETE") == len(done)


@pytest.mark.timeout(60)
def test_a_lease_end_unwinds_the_objective_and_the_next_lease_runs_the_same_trial(
    tmp_path: Path,
) -> None:
    one = spec(tmp_path, 0, entry="slow")  # 0.4 s a step
    control = LeaseControl()
    threading.Timer(1.0, control.request_stop).start()
    first = run_trial(one, control)
    assert first.status == "paused" and 0 < first.steps < 12 and first.checkpoint_step == 0
    [running] = study(tmp_path).trials
    assert running.state.name == "RUNNING"
    second = run_trial(one, LeaseControl())
    assert second.status == "done" and second.steps == 12
    assert any("resuming optuna trial 0 from step 0" in line for line in second.last.logs)
    [complete] = study(tmp_path).trials  # the same trial, not a new one
    assert complete.state.name == "COMPLETE" and complete.params == running.params
    # Run again (a restart that lost the arbiter's record): told from the study, not rerun.
    third = run_trial(one, LeaseControl())
    assert third.status == "done" and third.steps == 0 and third.note.startswith("completed")
    assert len(study(tmp_path).trials) == 1


def test_a_planted_trial_without_the_apps_mark_is_not_taken_for_the_apps(
    tmp_path: Path,
) -> None:
    planted = optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
    forged = planted.ask()
    forged.set_user_attr("themis_trial", "app/t000#" + "0" * 32)
    planted.tell(forged, 0.0)  # "already completed, value 0"
    outcome = run_trial(spec(tmp_path, 0), LeaseControl())
    assert outcome.status == "done" and outcome.steps == 12  # ran for real
    assert len(study(tmp_path).trials) == 2


def test_an_objective_that_raises_fails_its_trial_and_the_studys(tmp_path: Path) -> None:
    outcome = run_trial(spec(tmp_path, 0, entry="broken"), LeaseControl())
    assert outcome.status == "error" and "ValueError: diverged" in outcome.error
    [failed] = study(tmp_path).trials
    assert failed.state.name == "FAIL" and len(failed.intermediate_values) == 2
