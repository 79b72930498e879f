"""A Ray Tune function trainable for the numpy MLP of ``examples/mlp_sweep`` (two
spirals), written as any Tune user writes one: nothing of Themis in it.

Run it with Tune alone (``python trainable.py``: ``Tuner.fit`` with OptunaSearch and ASHA
in this process), or as a Themis app sharing a GPU cluster fairly with other apps
(``themis submit examples/tune_mlp/app.yaml``): the app file declares the same searcher,
scheduler and space as data, and Themis runs each trial under a lease.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from ray import tune

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mlp_sweep"))
from mlp import DATA_SEED, POINTS, init, loss, sgd_step, spirals  # noqa: E402

EPOCHS = 20  # the app file's steps: one report per epoch
BATCHES = 25  # minibatches of 64 per epoch
BATCH = 64


def train_mlp(config: dict) -> None:
    x, y = spirals(POINTS, DATA_SEED)
    x_val, y_val = spirals(500, DATA_SEED + 1)
    params = init({"hidden": config["hidden"]}, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(EPOCHS):
        for _ in range(BATCHES):
            batch = rng.integers(0, POINTS, BATCH)
            sgd_step(params, x[batch], y[batch], config["lr"])
        tune.report({"loss": loss(params, x_val, y_val)})


if __name__ == "__main__":
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    tuner = tune.Tuner(
        train_mlp,
        param_space={"lr": tune.loguniform(1e-3, 3.0), "hidden": tune.choice([8, 16, 64])},
        tune_config=tune.TuneConfig(
            metric="loss",
            mode="min",
            search_alg=OptunaSearch(seed=0),
            scheduler=ASHAScheduler(grace_period=4, reduction_factor=2, max_t=EPOCHS),
            num_samples=16,
        ),
    )
    best = tuner.fit().get_best_result()
    print(f"best: {best.metrics['loss']:.4f} with {best.config}")
