"""A Ray Tune app's trial in one process (``run_trial``, no Ray cluster): the searcher's
configuration kept across a lease end, and the searcher's pickled state read only under
the app's seal (a planted pickle is moved aside, never unpickled)."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pytest

from themis.runtime.workers.lease import LeaseControl, TrialSpec, run_trial

pytest.importorskip("ray.tune")
HERE = Path(__file__).resolve().parent
KEY = "cd" * 32


def spec(tmp: Path, trial: int, scheduler: str = "FIFOScheduler", **args) -> TrialSpec:
    tuner = {
        "kind": "ray-tune",
        "direction": "minimize",
        "sampler": "OptunaSearch",
        "sampler_args": {"seed": 0},
        "pruner": scheduler,
        "pruner_args": args,
        "metric": "loss",
        "space": {"x": {"uniform": [-10.0, 10.0]}},
        "state_dir": str(tmp / "tune"),
    }
    return TrialSpec(
        "app",
        f"t{trial:03d}",
        "tok",
        "tuned:tune_bowl",
        str(HERE),
        {},
        12,
        str(tmp / f"t{trial}" / "checkpoint.themis"),
        5,
        checkpoint_key=KEY,
        tuner=tuner,
    )


def suggested(outcome) -> str:
    return next(line for line in outcome.last.logs if line.startswith("suggested by"))


def test_asha_stops_trials_at_its_rungs(tmp_path: Path) -> None:
    asha = {"grace_period": 2, "reduction_factor": 2, "max_t": 12}
    outcomes = [
        run_trial(spec(tmp_path, i, "ASHAScheduler", **asha), LeaseControl()) for i in range(6)
    ]
    stopped = [o for o in outcomes if o.status == "pruned"]
    assert stopped, [(o.status, o.steps) for o in outcomes]
    assert {o.steps for o in stopped} <= {2, 4, 8}
    assert all(o.note.startswith("stopped by ASHAScheduler at iteration") for o in stopped)
    assert all(o.steps == 12 for o in outcomes if o.status == "done")


@pytest.mark.timeout(60)
def test_a_lease_end_keeps_the_trials_configuration(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TUNED_PACE", "0.3")
    one = spec(tmp_path, 0)
    control = LeaseControl()
    threading.Timer(1.0, control.request_stop).start()
    first = run_trial(one, control)
    assert first.status == "paused" and 0 < first.steps < 12
    config = suggested(first).split(": ", 1)[1]
    monkeypatch.setenv("TUNED_PACE", "0")
    second = run_trial(one, LeaseControl())
    assert second.status == "done" and second.steps == 12
    assert any(f"the same configuration {config}" in line for line in second.last.logs)


class _Planted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_planted_searcher_pickle_is_never_read(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    state = tmp_path / "tune"
    state.mkdir()
    (state / "searcher.pkl").write_bytes(pickle.dumps(_Planted(marker)))
    (state / "searcher.mac").write_text("0" * 32)  # a seal the planter cannot make
    outcome = run_trial(spec(tmp_path, 0), LeaseControl())
    assert outcome.status == "done" and outcome.steps == 12
    assert not marker.exists()  # the planted pickle never ran
    assert any("fails its seal" in line for line in outcome.last.logs)
    assert list(state.glob("searcher.pkl.refused-*"))
