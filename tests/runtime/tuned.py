"""Optuna objectives the tuner tests run as Themis apps, written as any Optuna user writes
them (``trial.suggest_*``, ``trial.report``, ``trial.should_prune``)."""

from __future__ import annotations

import os
import time

import optuna

#: Intermediate values each trial reports (the app files' ``steps``).
STEPS = 12


def objective(trial: optuna.Trial) -> float:
    """A quadratic bowl: trials far from x = 2 report worse values at every step, so a
    median pruner stops them once a few trials have completed."""
    x = trial.suggest_float("x", -10.0, 10.0)
    pace = float(os.environ.get("TUNED_PACE", "0.05"))
    value = 0.0
    for step in range(STEPS):
        time.sleep(pace)
        value = (x - 2.0) ** 2 + 1.0 / (step + 1)
        trial.report(value, step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return value


def slow(trial: optuna.Trial) -> float:
    """The same bowl at 0.4 s a step: long enough for a test to restart serve mid-study."""
    x = trial.suggest_float("x", -10.0, 10.0)
    value = 0.0
    for step in range(STEPS):
        time.sleep(0.4)
        value = (x - 2.0) ** 2 + 1.0 / (step + 1)
        trial.report(value, step)
    return value


def tune_bowl(config: dict) -> None:
    """A Ray Tune function trainable (``tune.report`` per iteration) on the same bowl."""
    from ray import tune

    pace = float(os.environ.get("TUNED_PACE", "0.05"))
    for step in range(STEPS):
        time.sleep(pace)
        tune.report({"loss": (config["x"] - 2.0) ** 2 + 1.0 / (step + 1)})


def tune_slow(config: dict) -> None:
    """The Tune bowl at 0.4 s an iteration, for a restart mid-search."""
    from ray import tune

    for step in range(STEPS):
        time.sleep(0.4)
        tune.report({"loss": (config["x"] - 2.0) ** 2 + 1.0 / (step + 1)})


def broken(trial: optuna.Trial) -> float:
    """An objective that fails at its third step."""
    x = trial.suggest_float("x", -10.0, 10.0)
    for step in range(STEPS):
        if step == 2:
            raise ValueError("diverged")
        trial.report(x, step)
    return x
