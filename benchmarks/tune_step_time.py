"""What one step of ``examples/tune_mlp`` takes: the ``step_time`` of its app file.

A step of a Ray Tune app is one ``tune.report``: here an epoch of the numpy MLP plus
ASHA's decision, which takes the scheduler's sealed state from its file under a lock
and puts it back. The app's trials run one after another in this process through
``run_trial`` (what each Themis job runs; no Ray cluster), ``--trials`` of them on a
fresh state directory; printed: the reports made, the wall and CPU seconds per report
(medians of ``--runs`` runs; each trial's suggest and complete included).

    .venv/bin/python benchmarks/tune_step_time.py
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "examples" / "tune_mlp" / "app.yaml"


def one_run(trials: int) -> tuple[int, float, float]:
    from themis.runtime.state.appfile import load_app_file
    from themis.runtime.workers.lease import LeaseControl, TrialSpec, run_trial

    app = load_app_file(APP)
    assert app.tuner is not None
    reports = 0
    with tempfile.TemporaryDirectory() as tmp:
        tuner = {**app.tuner.to_dict(), "state_dir": f"{tmp}/tune"}
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(trials):
            spec = TrialSpec(
                app.name, f"t{i:03d}", "tok", app.entrypoint, app.workdir, {}, app.steps,
                f"{tmp}/t{i}/checkpoint.themis", app.checkpoint_every,
                checkpoint_key="cd" * 32, tuner=tuner,
            )  # fmt: skip
            reports += run_trial(spec, LeaseControl()).steps
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return reports, wall / reports, cpu / reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    one_run(1)  # imports (Ray Tune, Optuna) out of the figures
    runs = [one_run(args.trials) for _ in range(args.runs)]
    print(f"reports per run: {[r[0] for r in runs]}")
    print(f"wall s per report (median of {args.runs}): {statistics.median(r[1] for r in runs):.4f}")
    print(f"CPU s per report  (median of {args.runs}): {statistics.median(r[2] for r in runs):.4f}")


if __name__ == "__main__":
    main()
