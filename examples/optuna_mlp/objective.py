"""An Optuna objective for the numpy MLP of ``examples/mlp_sweep`` (two spirals), written
as any Optuna user writes one: nothing of Themis in it.

Run it as Optuna alone would (``python objective.py``: the study below, in this
process), or as a Themis app sharing a GPU cluster fairly with other apps
(``themis submit examples/optuna_mlp/app.yaml``): the app file declares the same study
settings as data, and Themis runs each trial of it under a lease.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mlp_sweep"))
from mlp import DATA_SEED, POINTS, init, loss, sgd_step, spirals  # noqa: E402

EPOCHS = 20  # the app file's steps: one report per epoch
BATCHES = 25  # minibatches of 64 per epoch
BATCH = 64


def objective(trial: optuna.Trial) -> float:
    lr = trial.suggest_float("lr", 1e-3, 3.0, log=True)
    hidden = trial.suggest_categorical("hidden", [8, 16, 64])
    x, y = spirals(POINTS, DATA_SEED)
    x_val, y_val = spirals(500, DATA_SEED + 1)
    params = init({"hidden": hidden}, seed=trial.number)
    rng = np.random.default_rng(trial.number)
    val = float("inf")
    for epoch in range(EPOCHS):
        for _ in range(BATCHES):
            batch = rng.integers(0, POINTS, BATCH)
            sgd_step(params, x[batch], y[batch], lr)
        val = loss(params, x_val, y_val)
        trial.report(val, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return val


if __name__ == "__main__":
    study = optuna.create_study(
        direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=0),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=4),
    )
    study.optimize(objective, n_trials=16)
    print(f"best: {study.best_value:.4f} with {study.best_params}")
