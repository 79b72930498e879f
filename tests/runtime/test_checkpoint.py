"""Checkpoints carry data only and are sealed per app: a file planted by another app's
code, altered, or copied from another trial is refused with its reason and never parsed,
let alone run; the victim runs its real steps."""

from __future__ import annotations

import math
import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.conftest import HERE
from themis.runtime.workers import checkpoint
from themis.runtime.workers.checkpoint import CheckpointRefused
from themis.runtime.workers.lease import LeaseControl, TrialSpec, read_checkpoint, run_trial

VICTIM_KEY = checkpoint.app_key(b"s" * 32, "victim", 1.0)
ATTACKER_KEY = checkpoint.app_key(b"s" * 32, "mallory", 2.0)


def victim_spec(storage: Path, trial: str = "t000") -> TrialSpec:
    return TrialSpec(
        "victim",
        trial,
        "tok",
        "trainers:paced",
        str(HERE),
        {"quality": 1.0, "step_time": 0.0},
        12,
        str(storage / "victim" / trial / "checkpoint.themis"),
        checkpoint_every=5,
        checkpoint_key=VICTIM_KEY,
    )


class _Payload:
    """What app M's code plants: unpickling it creates a file (it could do anything)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def assert_ran_its_real_steps(spec: TrialSpec, outcome) -> None:
    assert (outcome.status, outcome.steps, outcome.checkpoint_step) == ("done", 12, 12)
    refused = [line for line in outcome.last.logs if line.startswith("checkpoint refused")]
    assert len(refused) == 1 and "starting from step 0" in refused[0]
    step, state = read_checkpoint(spec.checkpoint_path, VICTIM_KEY, "victim", spec.trial_id)
    assert step == 12 and state["steps_run"] == list(range(12))


def test_a_planted_pickle_is_refused_and_never_run(tmp_path: Path) -> None:
    """The planted-pickle attack: M writes victim's checkpoint (at its checkpoint path)
    before victim is submitted; unchecked, victim would show 300/300 with no step run and
    run M's code."""
    spec = victim_spec(tmp_path)
    marker = tmp_path / "mallory-ran-here"
    path = Path(spec.checkpoint_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps({"format": 1, "step": 12, "state": _Payload(marker)}))
    outcome = run_trial(spec, LeaseControl())
    assert not marker.exists(), "the planted pickle ran"
    assert_ran_its_real_steps(spec, outcome)
    assert "no seal" in next(line for line in outcome.last.logs if "refused" in line)
    assert [p.name for p in path.parent.glob("checkpoint.themis.refused-*")], "kept aside"


def test_a_checkpoint_sealed_by_another_app_is_refused(tmp_path: Path) -> None:
    spec = victim_spec(tmp_path)
    # Mallory can write a well-formed checkpoint, but only with her own key.
    checkpoint.write(
        spec.checkpoint_path,
        ATTACKER_KEY,
        "victim",
        "t000",
        {"format": 2, "step": 12, "state": {"w": np.ones(4), "steps_run": [], "pids": []}},
    )
    outcome = run_trial(spec, LeaseControl())
    assert_ran_its_real_steps(spec, outcome)
    assert "seal does not match victim/t000" in outcome.last.logs[0]


def test_an_altered_or_copied_checkpoint_is_refused(tmp_path: Path) -> None:
    first = victim_spec(tmp_path, "t000")
    assert run_trial(first, LeaseControl()).status == "done"
    path = Path(first.checkpoint_path)
    data = bytearray(path.read_bytes())
    data[-40] ^= 1  # one bit of the payload
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointRefused, match="seal does not match"):
        read_checkpoint(path, VICTIM_KEY, "victim", "t000")
    # A good checkpoint of trial t001, copied over t000's: the seal names the trial.
    other = victim_spec(tmp_path, "t001")
    assert run_trial(other, LeaseControl()).status == "done"
    path.write_bytes(Path(other.checkpoint_path).read_bytes())
    with pytest.raises(CheckpointRefused, match="victim/t000"):
        read_checkpoint(path, VICTIM_KEY, "victim", "t000")


def test_checkpoints_are_private_files_in_private_directories(tmp_path: Path) -> None:
    spec = victim_spec(tmp_path)
    (tmp_path / "victim").mkdir(mode=0o755)
    os.chmod(tmp_path / "victim", 0o755)  # made looser by someone: tightened
    run_trial(spec, LeaseControl())
    path = Path(spec.checkpoint_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700


def test_only_data_can_be_saved(tmp_path: Path) -> None:
    path = tmp_path / "c.themis"
    with pytest.raises(TypeError, match="cannot hold a .*_Payload"):
        checkpoint.write(path, VICTIM_KEY, "a", "t0", {"x": _Payload(tmp_path / "m")})
    with pytest.raises(TypeError, match="Python objects"):
        checkpoint.write(path, VICTIM_KEY, "a", "t0", np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="no checkpoint key"):
        checkpoint.write(path, "", "a", "t0", {})
    assert not path.exists()


def test_what_training_code_saves_round_trips_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    tree = {
        "w": rng.normal(size=(3, 4)).astype(np.float32),
        "rng": rng.bit_generator.state,  # 128-bit integers
        "opt": {"state": {0: {"step": 3}, 1: {}}, "param_groups": [{"params": [0, 1]}]},
        "gang": (("node", 2),),
        "flags": {True, "x"},
        "blob": b"\x00\xff",
        "nan": math.nan,
        "scalar": np.int64(5),
        "empty": np.zeros((0, 2)),
        None: [None, 1.5, -0.0, "é"],
    }
    path = tmp_path / "c.themis"
    checkpoint.write(path, VICTIM_KEY, "a", "t0", tree)
    back = checkpoint.read(path, VICTIM_KEY, "a", "t0")
    assert back.keys() == tree.keys()
    assert back["w"].dtype == np.float32 and np.array_equal(back["w"], tree["w"])
    assert back["rng"] == tree["rng"]
    assert back["opt"] == tree["opt"] and back["gang"] == tree["gang"]
    assert back["flags"] == tree["flags"] and back["blob"] == tree["blob"]
    assert math.isnan(back["nan"]) and back["scalar"] == 5 and back["scalar"].dtype == np.int64
    assert back["empty"].shape == (0, 2)
    assert back[None] == tree[None] and math.copysign(1, back[None][2]) == -1


def test_torch_tensors_round_trip(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    tree = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(2).bfloat16()}
    path = tmp_path / "c.themis"
    checkpoint.write(path, VICTIM_KEY, "a", "t0", tree)
    back = checkpoint.read(path, VICTIM_KEY, "a", "t0")
    assert torch.equal(back["w"], tree["w"]) and back["b"].dtype == torch.bfloat16


_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
_trees = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=4) | st.integers(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(tree=_trees)
def test_any_tree_of_data_round_trips(tmp_path_factory, tree) -> None:
    path = tmp_path_factory.mktemp("ck") / "c.themis"
    checkpoint.write(path, VICTIM_KEY, "a", "t0", tree)
    assert checkpoint.read(path, VICTIM_KEY, "a", "t0") == tree
