"""A numpy MLP trained by minibatch SGD on a generated two-spirals classification set.

The entrypoint of ``app.yaml`` (``mlp:train``). Every trial trains one configuration
(learning rate, hidden units) under a Themis lease: it resumes from its last checkpoint,
asks the lease whether to go on at every step, reports the validation loss that
successive halving ranks trials by, and returns when the lease ends.
"""

from __future__ import annotations

import numpy as np

import themis

DATA_SEED = 7  # every trial sees the same data set
POINTS = 2000
BATCH = 64


def spirals(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved noisy spirals in the plane: a set a linear model cannot separate."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.0, 1.0, n)) * 3.0 * np.pi
    label = rng.integers(0, 2, n)
    sign = np.where(label == 0, 1.0, -1.0)
    x = np.stack([sign * t * np.cos(t), sign * t * np.sin(t)], axis=1) / (3.0 * np.pi)
    x += rng.normal(0.0, 0.03, x.shape)
    return x.astype(np.float64), label


def init(config: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    hidden = int(config["hidden"])
    return {
        "w1": rng.normal(0.0, 1.0, (2, hidden)),
        "b1": np.zeros(hidden),
        "w2": rng.normal(0.0, 1.0 / np.sqrt(hidden), (hidden, 2)),
        "b2": np.zeros(2),
        "rng": rng.bit_generator.state,
    }


def forward(p: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.tanh(x @ p["w1"] + p["b1"])
    logits = h @ p["w2"] + p["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    return h, probs


def loss(p: dict, x: np.ndarray, y: np.ndarray) -> float:
    _, probs = forward(p, x)
    return float(-np.mean(np.log(probs[np.arange(len(y)), y] + 1e-12)))


def sgd_step(p: dict, x: np.ndarray, y: np.ndarray, lr: float) -> None:
    h, probs = forward(p, x)
    grad = probs.copy()
    grad[np.arange(len(y)), y] -= 1.0
    grad /= len(y)
    dh = (grad @ p["w2"].T) * (1.0 - h**2)
    p["w2"] -= lr * (h.T @ grad)
    p["b2"] -= lr * grad.sum(axis=0)
    p["w1"] -= lr * (x.T @ dh)
    p["b1"] -= lr * dh.sum(axis=0)


def train(trial: themis.Trial) -> None:
    x, y = spirals(POINTS, DATA_SEED)
    x_val, y_val = spirals(500, DATA_SEED + 1)
    params = trial.restore() or init(trial.config, seed=int(trial.trial_id[1:]))
    rng = np.random.default_rng()
    rng.bit_generator.state = params["rng"]
    lr = float(trial.config["lr"])
    for _ in themis.lease(trial, save=lambda: params):
        batch = rng.integers(0, POINTS, BATCH)
        sgd_step(params, x[batch], y[batch], lr)
        params["rng"] = rng.bit_generator.state
        trial.report(loss=loss(params, x_val, y_val))
    val = loss(params, x_val, y_val)
    trial.log(f"steps {trial.start_step}-{trial.steps}: val loss {val:.4f}")
