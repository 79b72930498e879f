"""Synthetic Philly-like workloads: hyperparameter sweeps with successive halving, arriving
as a Poisson process at a target cluster load (``themis trace generate``).

Distributions (docs/traces.md, "Generator"), all drawn from one ``random.Random(seed)``:

- **Sweeps.** Each app is a sweep of ``n`` trials of one model, ``n`` uniform in
  ``[min_trials, max_trials]`` (the last app is cut to the requested job count); its
  model is uniform over the profiles.
- **Gang.** One size for all trials of an app: 1 GPU with probability 0.70, 2 with 0.10,
  4 with 0.15, 8 with 0.05 (the Philly job-size mix as Gavel's generator uses it).
- **Duration.** The time a trial runs to completion on its gang, ``D``: ``10^U(1.5, 3)``
  minutes with probability 0.8, else ``10^U(3, 4)`` minutes (Gavel's Philly-derived mix).
- **Successive halving** (rate 2). ``n`` trials start; at each rung the better half (at
  least one) goes on and the rest stop, until one is left. With ``R`` rungs, a trial
  stopped at rung ``k`` ran ``D / 2^(R-k)``; the last one ran ``D``. Which trial stops
  when is a random permutation. This is the app scheduler's early stopping folded into
  the trace, the way HyperDrive records stopped trials as short jobs.
- **Arrivals.** Exponential gaps of mean ``W / (apps * load * gpus)``, where ``W`` is the
  sweep GPU-seconds drawn: the workload offers ``load`` GPU-seconds of work per
  GPU-second of a ``gpus``-GPU cluster while apps arrive. The first app arrives at 0.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec, Workload

#: (gang, cumulative probability): 70% 1 GPU, 10% 2, 15% 4, 5% 8.
GANG_MIX = ((1, 0.70), (2, 0.80), (4, 0.95), (8, 1.0))
#: Probability that a duration is short, 10^U(1.5, 3) minutes; else 10^U(3, 4).
SHORT_PROBABILITY = 0.8
SHORT_LOG10_MINUTES = (1.5, 3.0)
LONG_LOG10_MINUTES = (3.0, 4.0)


@dataclass(frozen=True)
class GeneratorSpec:
    """What to generate; ``gpus`` is the cluster size ``load`` refers to."""

    jobs: int
    seed: int = 0
    load: float = 1.0
    gpus: int = 64
    min_trials: int = 1
    max_trials: int = 16

    def check(self) -> None:
        if self.jobs < 1:
            raise ThemisError(f"must be >= 1, got {self.jobs}", field="--jobs")
        if not (math.isfinite(self.load) and self.load > 0):
            raise ThemisError(f"must be a number > 0, got {self.load}", field="--load")
        if self.gpus < 1:
            raise ThemisError(f"must be >= 1, got {self.gpus}", field="--cluster")
        if self.min_trials < 1:
            raise ThemisError(f"must be >= 1, got {self.min_trials}", field="--min-trials")
        if self.max_trials < self.min_trials:
            raise ThemisError(
                f"must be >= --min-trials ({self.min_trials}), got {self.max_trials}",
                field="--max-trials",
            )


def gang_size(u: float) -> int:
    """The gang of a uniform draw ``u`` in [0, 1) under ``GANG_MIX``."""
    for gang, cumulative in GANG_MIX:
        if u < cumulative:
            return gang
    return GANG_MIX[-1][0]


def halving_budgets(trials: int, full: float) -> list[float]:
    """Run time of each of ``trials`` trials under successive halving (rate 2), the
    longest last: e.g. 5 trials of full run ``D`` give ``[D/4, D/4, D/4, D/2, D]``."""
    counts = []  # trials stopped at each rung
    alive = trials
    while alive > 1:
        survivors = max(1, alive // 2)
        counts.append(alive - survivors)
        alive = survivors
    rungs = len(counts)
    budgets = []
    for rung, stopped in enumerate(counts):
        budgets += [full / 2 ** (rungs - rung)] * stopped
    return budgets + [full]


def generate(spec: GeneratorSpec, profiles: dict[str, ModelProfile]) -> Workload:
    """A seeded synthetic workload of exactly ``spec.jobs`` jobs (see the module docstring)."""
    spec.check()
    rng = random.Random(spec.seed)
    names = sorted(profiles)
    sweeps: list[tuple[str, int, list[float]]] = []  # (model, gang, seconds per trial)
    remaining = spec.jobs
    gpu_seconds = 0.0
    while remaining:
        trials = min(rng.randint(spec.min_trials, spec.max_trials), remaining)
        remaining -= trials
        model = rng.choice(names)
        gang = gang_size(rng.random())
        low, high = SHORT_LOG10_MINUTES if rng.random() < SHORT_PROBABILITY else LONG_LOG10_MINUTES
        full = 60.0 * 10 ** rng.uniform(low, high)
        budgets = halving_budgets(trials, full)
        rng.shuffle(budgets)
        gpu_seconds += gang * sum(budgets)
        sweeps.append((model, gang, budgets))
    mean_gap = gpu_seconds / (len(sweeps) * spec.load * spec.gpus)
    apps = []
    arrival = 0.0
    for k, (model, gang, budgets) in enumerate(sweeps):
        if k:
            arrival += rng.expovariate(1.0 / mean_gap)
        tpi = profiles[model].time_per_iteration
        jobs = tuple(
            JobSpec(f"app{k}-trial{t}", gang, seconds * gang / tpi)
            for t, seconds in enumerate(budgets)
        )
        apps.append(AppSpec(f"app{k}", arrival, model, jobs))
    notes: dict[str, object] = {
        "format": "generated",
        "generator": {
            "jobs": spec.jobs,
            "seed": spec.seed,
            "load": spec.load,
            "gpus": spec.gpus,
            "min_trials": spec.min_trials,
            "max_trials": spec.max_trials,
        },
        "arrivals": "trace",
        "seed": spec.seed,
    }
    return Workload(tuple(apps), dict(profiles), f"generated (seed {spec.seed})", notes)
