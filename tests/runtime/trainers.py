"""Training functions the runtime tests submit (imported in job actors from this folder).

``paced`` trains a tiny linear regression by SGD and paces each step to ``step_time``
seconds, standing in for a GPU step of known length on a machine whose GPUs are logical.
Its checkpointed state lists every step index it ran, so a test can check that no
completed step was lost or run twice in the trial's lineage.
"""

from __future__ import annotations

import os
import time

import numpy as np

import themis


def paced(trial: themis.Trial) -> None:
    config = trial.config
    step_time = float(config.get("step_time", 0.1))
    state = trial.restore() or {"w": np.zeros(4), "steps_run": [], "pids": [], "leases": []}
    state["pids"].append(os.getpid())
    state["leases"].append((trial.gpus, trial.gang))
    rng = np.random.default_rng(len(state["steps_run"]))
    truth = np.array([1.0, -2.0, 0.5, 3.0])
    for step in themis.lease(trial, save=lambda: state):
        started = time.monotonic()
        x = rng.normal(size=(32, 4))
        y = x @ truth
        grad = x.T @ (x @ state["w"] - y) / len(y)
        state["w"] -= 0.05 * grad
        state["steps_run"].append(step)
        # Lower quality, higher loss: successive halving must stop the worst.
        trial.report(loss=float(np.mean((x @ state["w"] - y) ** 2)) + 10.0 / config["quality"])
        rest = step_time - (time.monotonic() - started)
        if rest > 0:
            time.sleep(rest)


def stubborn(trial: themis.Trial) -> None:
    """Ignores its lease: never asks whether to go on. With ``started`` in its config, it
    first creates that file, so a test knows the loop is running (not a guess by sleep)."""
    marker = trial.config.get("started")
    if marker:
        with open(str(marker), "w") as f:
            f.write(str(os.getpid()))
    while True:
        time.sleep(0.05)


def broken(trial: themis.Trial) -> None:
    raise ValueError("this trial is broken")


def ranks(trial: themis.Trial) -> None:
    """``paced``, after writing this rank's rendezvous variables, node and GPUs where the
    test reads them."""
    import json

    import ray

    names = (
        "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "CUDA_VISIBLE_DEVICES",
    )  # fmt: skip
    env = {name: os.environ.get(name) for name in names}
    env["rank"] = trial.rank
    env["local_rank"] = trial.local_rank
    env["local_world_size"] = trial.local_world_size
    env["node"] = ray.get_runtime_context().get_node_id()
    env["ray_gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]  # what Ray gave this process
    env["pid"] = os.getpid()
    path = os.path.join(trial.config["env_dir"], f"rank{trial.rank}.json")
    with open(path, "w") as f:
        json.dump(env, f)
    paced(trial)


class _Planted:
    """Unpickling this creates the file ``marker``: stands for any code an attacker runs."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


def plant(trial: themis.Trial) -> None:
    """App M, the attacker: writes checkpoints for app ``victim``'s trials under the
    storage root ``storage`` before victim runs. t000 gets a well-formed checkpoint
    sealed with M's own key; t001 a pickle that creates the file ``marker`` when loaded."""
    import pickle

    from themis.runtime.workers import checkpoint

    spec = trial._spec  # hostile code reads whatever it can reach: its own key
    root = os.path.join(trial.config["storage"], "victim")
    for victim_trial in ("t000", "t001"):
        path = os.path.join(root, victim_trial, "checkpoint.themis")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if victim_trial == "t000":
            state = {"w": np.zeros(4), "steps_run": [], "pids": [], "leases": []}
            tree = {"format": 2, "step": 10**6, "state": state, "wall": 0.0}
            checkpoint.write(path, spec.checkpoint_key, "victim", victim_trial, tree)
        else:
            with open(path, "wb") as f:
                pickle.dump(
                    {"format": 1, "step": 10**6, "state": _Planted(trial.config["marker"])}, f
                )
    paced(trial)


def flood(trial: themis.Trial) -> None:
    """A hostile tenant's log flood: ``lines`` lines of ``width`` characters every step
    (200 x 4,000 by default), steps of ``step_time`` seconds, until its lease ends."""
    config = trial.config
    lines, width = int(config.get("lines", 200)), int(config.get("width", 4000))
    step_time = float(config.get("step_time", 0.1))
    state = trial.restore() or {"steps": 0}
    for step in themis.lease(trial, save=lambda: state):
        for k in range(lines):
            trial.log(f"{step:06d}:{k:04d} " + "x" * width)
        state["steps"] = step + 1
        time.sleep(step_time)
