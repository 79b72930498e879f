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
- **Online successive halving** (``online_halving``). Instead of folding the stopping into
  the durations, each trial of an app gets the full budget ``D`` (rounded to whole
  iterations, a power-of-2 multiple of its first rung) and the app declares its search:
  ``eta = 2``, rungs at ``D / 2^R, D / 2^(R-1), ..., D / 2`` with ``R = ceil(log2 n)``
  (so that keeping ``ceil(n / 2)`` at each rung leaves one trial). Each trial gets a loss
  curve ``final + scale * x^-decay`` (x: the fraction of the budget done) with ``final``
  U(0.05, 0.5), ``scale`` U(0.05, 0.5), ``decay`` U(0.3, 1.0), drawn from a second
  ``Random`` seeded from the seed, so that models, gangs and durations are drawn exactly
  as without the option; the arrival gaps aim at ``load`` with the work the searches will
  run (``Search.total_work``: the same whichever trials stop), so they are the same
  draws, scaled. Curves cross, so an early rung sometimes stops the eventual best trial, as
  in real searches. Which trial stops where is decided during the run, at the rungs
  (``simulator/search.py``). HyperDrive stays as it is: its durations are what Philly ran.
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
from themis.model.workload import AppSpec, JobSpec, LossCurve, Search, Workload

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
    #: 1: apps declare their search and the simulator decides it online (see above).
    online_halving: int = 0

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
        if self.online_halving not in (0, 1):
            raise ThemisError(f"must be 0 or 1, got {self.online_halving}", field="online_halving")


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
        if spec.online_halving:  # the work the declared search will run, exactly
            tpi = profiles[model].time_per_iteration
            app = _search_app("", 0.0, model, gang, full * gang / tpi, trials)
            assert app.search is not None
            gpu_seconds += app.search.total_work(trials, app.jobs[0].work) * tpi
        else:
            gpu_seconds += gang * sum(budgets)
        sweeps.append((model, gang, budgets))
    mean_gap = gpu_seconds / (len(sweeps) * spec.load * spec.gpus)
    apps = []
    arrival = 0.0
    curve_rng = random.Random(f"loss-curves:{spec.seed}")
    curves: dict[tuple[str, str], LossCurve] = {}
    for k, (model, gang, budgets) in enumerate(sweeps):
        if k:
            arrival += rng.expovariate(1.0 / mean_gap)
        tpi = profiles[model].time_per_iteration
        if spec.online_halving:
            app = _search_app(
                f"app{k}", arrival, model, gang, max(budgets) * gang / tpi, len(budgets)
            )
            for job in app.jobs:
                curves[(app.app_id, job.job_id)] = LossCurve(
                    curve_rng.uniform(0.05, 0.5),
                    curve_rng.uniform(0.05, 0.5),
                    curve_rng.uniform(0.3, 1.0),
                )
            apps.append(app)
            continue
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
            **({"online_halving": 1} if spec.online_halving else {}),
        },
        "arrivals": "trace",
        "seed": spec.seed,
    }
    return Workload(tuple(apps), dict(profiles), f"generated (seed {spec.seed})", notes, curves)


def _search_app(
    app_id: str, arrival: float, model: str, gang: int, iterations: float, trials: int
) -> AppSpec:
    """An app of ``trials`` trials of the full budget, declaring successive halving
    (eta 2) with rungs at whole iterations (see the module docstring)."""
    rungs = math.ceil(math.log2(trials)) if trials > 1 else 0
    first = max(1, round(iterations / 2**rungs))
    budget = float(first * 2**rungs)
    jobs = tuple(JobSpec(f"{app_id}-trial{t}", gang, budget) for t in range(trials))
    return AppSpec(app_id, arrival, model, jobs, Search(eta=2, min_work=float(first)))
