"""Scale benchmarks: how time, CPU and memory grow with the size of the problem.

    nice .venv/bin/python benchmarks/scale.py [--full] [--repeats N] [--only auction,gpus,jobs]
                                              [--job-policies fifo,max-min,themis]
                                              [--plot benchmarks/scale.png]

Three sweeps, each point measured in a fresh process (so peak memory is that point's own):

- **auction**: one ``themis auction`` (``themis.cli.main.run``, the command's own code
  path: reading and checking the JSON file, Partial Allocation with every c_i re-solve,
  printing the outcome) on 128 machines x 8 GPUs in 16 racks, all 1,024 free, with 10 ->
  1,000 bidders of 8 placement-aware menu entries each (``instances.auction_payload``);
- **gpus**: one Themis arbiter round (default knob f = 0.8) on clusters of 64 -> 10,000
  GPUs (racks of 10 machines x 8), every GPU free, with one app per 10 GPUs wanting GPUs
  (1,000 apps at 10,000 GPUs): visibility, bids, the auction, leftover;
- **jobs**: a whole simulation of 1,000 -> 100,000 generated Philly-like jobs
  (``themis.workload.generator``, load 1.0) on a cluster of about one GPU per 10 jobs
  (10,000 GPUs at 100,000 jobs) under fifo, max-min and themis.

The default sizes finish in a few minutes on 2 cores; ``--full`` adds the largest ones
(1,000 bidders are in the default; 30,000 and 100,000 jobs, and themis beyond 10,000 jobs,
only with ``--full``). Each point prints the median over ``--repeats`` runs of the wall
time, the CPU time (``time.process_time``) and the peak resident memory of the process
(``ru_maxrss``: it includes the interpreter and its libraries, about 100 MB). Machines here
are shared and noisy: compare ratios within one run, and CPU rather than wall time when
the machine is loaded. A point whose first run takes more than 10 CPU seconds is measured
once.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent

AUCTION_SIZES = [10, 30, 100, 300, 1000]
GPU_SIZES = [64, 256, 1024, 4096, 10000]
GPU_SIZES_FULL: list[int] = []
JOB_SIZES = [1000, 3000, 10000]
JOB_SIZES_FULL = [30000, 100000]
#: Themis simulations beyond this many jobs only with --full (they take minutes).
THEMIS_DEFAULT_MAX_JOBS = 10000
JOB_POLICIES = ["fifo", "max-min", "themis"]
#: A point whose first run takes more CPU seconds than this is not repeated.
SLOW_POINT = 10.0


# -- one measurement, in a child process --------------------------------------------------


def _measure(work: Callable[[], object]) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    return {"wall": wall, "cpu": cpu, "peak_mb": peak_kb / 1024.0}


def _child_auction(bidders: int, seed: int) -> dict[str, float]:
    sys.path.insert(0, str(HERE))
    from instances import write_auction

    from themis.cli.main import run

    with tempfile.TemporaryDirectory() as tmp:
        path = write_auction(Path(tmp) / "auction.json", bidders, seed=seed)
        out = open(os.devnull, "w")  # noqa: SIM115 - closed below

        def work() -> None:
            saved = sys.stdout
            sys.stdout = out
            try:
                code = run(["auction", str(path), "--seed", str(seed)])
            finally:
                sys.stdout = saved
            if code != 0:
                raise RuntimeError(f"themis auction exited with {code}")

        result = _measure(work)
        out.close()
    return result


def _child_round(gpus: int, seed: int) -> dict[str, float]:
    import random

    sys.path.insert(0, str(HERE))
    from instances import rack_spec
    from run import auction_round_view  # the HyperDrive-like apps of benchmarks/run.py

    from themis.arbiter.options import ArbiterOptions
    from themis.arbiter.round import Arbiter
    from themis.policies import PolicyOptions

    cluster_spec = rack_spec(gpus)
    apps = max(10, gpus // 10)
    cluster, view = auction_round_view(apps, seed=seed, cluster_spec=cluster_spec)
    knob = PolicyOptions().fairness_knob
    arbiter = Arbiter(cluster, ArbiterOptions(fairness_knob=knob, lease=600.0), random.Random(seed))
    result = _measure(lambda: arbiter.run_round(view))
    result["size_gpus"] = cluster.size
    return result


def _child_jobs(jobs: int, policy: str, seed: int) -> dict[str, float]:
    sys.path.insert(0, str(HERE))
    from instances import rack_spec

    from themis.model.cluster import Cluster
    from themis.model.profiles import load_profiles
    from themis.policies import PolicyOptions, make_policy
    from themis.simulator import simulate
    from themis.workload.generator import GeneratorSpec, generate

    cluster = Cluster.from_spec(rack_spec(max(64, jobs // 10)))
    workload = generate(GeneratorSpec(jobs=jobs, seed=seed, gpus=cluster.size), load_profiles())
    rounds = [0]
    chosen = make_policy(policy, PolicyOptions())  # imports every policy: not timed

    def work() -> None:
        rounds[0] = simulate(workload, cluster, chosen).rounds

    result = _measure(work)
    result["size_gpus"] = cluster.size
    result["rounds"] = rounds[0]
    return result


def child_main(argv: list[str]) -> None:
    kind, size, seed = argv[0], int(argv[1]), int(argv[2])
    if kind == "auction":
        result = _child_auction(size, seed)
    elif kind == "gpus":
        result = _child_round(size, seed)
    else:
        result = _child_jobs(size, kind.removeprefix("jobs:"), seed)
    print(json.dumps(result))


# -- the parent: sweeps, table, plot --------------------------------------------------------


def _point(kind: str, size: int, repeats: int) -> dict[str, float]:
    runs: list[dict[str, float]] = []
    for seed in range(repeats):
        if runs and runs[0]["cpu"] > SLOW_POINT:
            break  # a slow point is measured once: its noise is small next to its size
        proc = subprocess.run(
            [sys.executable, __file__, "--child", kind, str(size), str(seed)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} {size} failed:\n{proc.stderr}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    point = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    return point


def sweeps(args: argparse.Namespace) -> list[tuple[str, str, int, dict[str, float]]]:
    """(sweep, series, size, medians) per point, printed as they come."""
    only = set(args.only.split(","))
    plan: list[tuple[str, str, int]] = []
    if "auction" in only:
        plan += [("auction", "themis auction", n) for n in AUCTION_SIZES]
    if "gpus" in only:
        plan += [
            ("gpus", "Themis round", n) for n in GPU_SIZES + (GPU_SIZES_FULL if args.full else [])
        ]
    if "jobs" in only:
        sizes = JOB_SIZES + (JOB_SIZES_FULL if args.full else [])
        for policy in [p for p in args.job_policies.split(",") if p]:
            for n in sizes:
                if policy == "themis" and n > THEMIS_DEFAULT_MAX_JOBS and not args.full:
                    continue
                plan.append((f"jobs:{policy}", policy, n))
    rows = []
    print(
        f"{'sweep':<8} {'series':<15} {'size':>8} {'GPUs':>6} {'wall s':>8} {'CPU s':>8} "
        f"{'peak MB':>8} {'rounds':>7}"
    )
    for kind, series, size in plan:
        point = _point(kind, size, args.repeats)
        sweep = kind.split(":")[0]
        gpus = int(point.get("size_gpus", 1024))
        rounds = f"{int(point['rounds']):>7}" if "rounds" in point else f"{'':>7}"
        print(
            f"{sweep:<8} {series:<15} {size:>8} {gpus:>6} {point['wall']:>8.2f} "
            f"{point['cpu']:>8.2f} {point['peak_mb']:>8.0f} {rounds}",
            flush=True,
        )
        rows.append((sweep, series, size, point))
    return rows


def slopes(rows: list[tuple[str, str, int, dict[str, float]]]) -> None:
    """The growth exponent of CPU time between consecutive sizes of each series."""
    by_series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for sweep, series, size, point in rows:
        by_series.setdefault((sweep, series), []).append((size, point["cpu"]))
    print("\nGrowth of CPU time (log-log slope between consecutive sizes; 1 = linear):")
    for (sweep, series), points in by_series.items():
        parts = []
        for (n0, t0), (n1, t1) in zip(points, points[1:], strict=False):
            if t0 > 0 and t1 > 0:
                parts.append(f"{n0}->{n1}: {math.log(t1 / t0) / math.log(n1 / n0):.2f}")
        print(f"  {sweep:<8} {series:<15} " + ", ".join(parts))


def plot(rows: list[tuple[str, str, int, dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweeps_in = [s for s in ("auction", "gpus", "jobs") if any(r[0] == s for r in rows)]
    fig, axes = plt.subplots(1, len(sweeps_in), figsize=(5 * len(sweeps_in), 4), squeeze=False)
    labels = {"auction": "bidders (1,024 GPUs)", "gpus": "GPUs (one app per 10)", "jobs": "jobs"}
    for ax, sweep in zip(axes[0], sweeps_in, strict=True):
        series = sorted({r[1] for r in rows if r[0] == sweep})
        for name in series:
            pts = [(r[2], r[3]["cpu"]) for r in rows if r[0] == sweep and r[1] == name]
            ax.loglog([p[0] for p in pts], [max(p[1], 1e-3) for p in pts], "o-", label=name)
        ax.set_xlabel(labels[sweep])
        ax.set_ylabel("CPU seconds (median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        child_main(argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="add the largest sizes (slow)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="auction,gpus,jobs")
    parser.add_argument(
        "--job-policies",
        default=",".join(JOB_POLICIES),
        help="the policies of the jobs sweep, comma-separated (default: fifo,max-min,themis)",
    )
    parser.add_argument("--plot", type=Path, default=HERE / "scale.png")
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {args.repeats}")
    rows = sweeps(args)
    slopes(rows)
    plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
