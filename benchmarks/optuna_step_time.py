"""What one step of ``examples/optuna_mlp`` takes: the ``step_time`` of its app file.

A step of a tuner app is one ``trial.report``: here an epoch of the numpy MLP plus the
report to the study's SQLite storage and the pruner's ``should_prune``, which read and
write that file. The study of ``objective.py`` runs in this process on a fresh SQLite
file (as each Themis job opens it), ``--trials`` trials; printed: the reports made, the
wall and CPU seconds per report (medians of ``--runs`` runs).

    .venv/bin/python benchmarks/optuna_step_time.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "optuna_mlp"


def one_run(trials: int) -> tuple[int, float, float]:
    import objective  # examples/optuna_mlp/objective.py
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        study = optuna.create_study(
            storage=f"sqlite:///{tmp}/study.db",
            sampler=optuna.samplers.TPESampler(seed=0),
            pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=4),
        )
        wall, cpu = time.perf_counter(), time.process_time()
        study.optimize(objective.objective, n_trials=trials)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        reports = sum(len(t.intermediate_values) for t in study.trials)
    return reports, wall / reports, cpu / reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(EXAMPLE))
    runs = [one_run(args.trials) for _ in range(args.runs)]
    print(f"reports per run: {[r[0] for r in runs]}")
    print(f"wall s per report (median of {args.runs}): {statistics.median(r[1] for r in runs):.4f}")
    print(f"CPU s per report  (median of {args.runs}): {statistics.median(r[2] for r in runs):.4f}")


if __name__ == "__main__":
    main()
