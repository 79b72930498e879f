"""Speed benchmarks: one command, printed figures.

    .venv/bin/python benchmarks/run.py [--repeats N] [--policies a,b] [--knobs 0,0.5,0.8]
                                       [--skip-auction]

1. Wall and CPU time of the HyperDrive simulation (bundled trace, default arrivals, 64
   GPUs) per policy: the median of ``--repeats`` runs, and the total CPU time of the whole
   comparison (every policy listed, each once). Themis runs once per fairness knob in
   ``--knobs`` (default: the library default 0.8; f = 0 is the slowest, every app bids).
2. The median wall time of one Themis arbiter round with 100 bidders on 512 GPUs (all free,
   f = 0 so that every app bids): visibility, bids, Partial Allocation with its 100
   re-solves for the hidden payments, leftover allocation.

Machines here are shared and noisy: compare figures within one run, and quote medians.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from themis.arbiter.options import ArbiterOptions
from themis.arbiter.round import Arbiter
from themis.fairness.ftf import t_cluster
from themis.fairness.shares import FairShares
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec
from themis.policies import PolicyOptions, make_policy, policy_names
from themis.policies.base import SchedulingView
from themis.simulator import simulate
from themis.workload import load_workload


def time_simulations(
    policies: list[str], repeats: int, knobs: list[float]
) -> list[tuple[str, float, float, int]]:
    """Per policy (Themis per knob): median wall seconds, median CPU seconds, rounds."""
    workload = load_workload()
    cluster = Cluster.from_spec("2x4x8")
    rows = []
    for name in policies:
        for knob in knobs if name == "themis" else [PolicyOptions().fairness_knob]:
            times = []
            cpus = []
            rounds = 0
            for _ in range(repeats):
                options = PolicyOptions(fairness_knob=knob)
                policy = make_policy(name, options)
                start, cpu = time.perf_counter(), time.process_time()
                result = simulate(workload, cluster, policy)
                times.append(time.perf_counter() - start)
                cpus.append(time.process_time() - cpu)
                rounds = result.rounds
            label = f"{name} f={knob:g}" if name == "themis" else name
            rows.append((label, statistics.median(times), statistics.median(cpus), rounds))
    return rows


def auction_round_view(
    bidders: int, seed: int, cluster_spec: str = "8x8x8"
) -> tuple[Cluster, SchedulingView]:
    """``bidders`` HyperDrive-like apps (1-GPU trials, some 2-, 4- and 8-GPU ones) that
    arrived at different times and hold nothing, on ``cluster_spec`` (default 8 racks x 8
    machines x 8 GPUs), all free."""
    rng = random.Random(seed)
    cluster = Cluster.from_spec(cluster_spec)
    profiles = load_profiles()
    names = sorted(profiles)
    shares = FairShares()  # each app its own owner, as the simulator keeps N_avg
    apps = []
    for i in range(bidders):
        model = rng.choice(names)
        jobs = tuple(
            JobSpec(f"a{i}-j{j}", rng.choice((1, 1, 1, 1, 2, 4, 8)), rng.uniform(1e3, 1e5))
            for j in range(rng.randint(5, 60))
        )
        spec = AppSpec(f"a{i}", float(i * 60), model, jobs)
        app = AppState(spec, profiles[model], 0.0)
        app.t_cluster = t_cluster(app.profile, app.remaining_by_gang(0.0), cluster.shape)
        shares.arrive(spec.arrival, app.app_id, app.app_id)
        apps.append(app)
    now = bidders * 60.0
    view = SchedulingView(
        now,
        cluster,
        apps,
        lambda a: shares.n_eff(a.app_id, now),
    )
    return cluster, view


def time_auction_round(bidders: int, repeats: int) -> tuple[float, int]:
    times = []
    granted = 0
    for r in range(repeats):
        cluster, view = auction_round_view(bidders, seed=r)
        arbiter = Arbiter(cluster, ArbiterOptions(fairness_knob=0.0, lease=600.0), random.Random(r))
        start = time.perf_counter()
        schedule = arbiter.run_round(view)
        times.append(time.perf_counter() - start)
        granted = sum(len(a.gpus) for a in schedule.values())
        assert arbiter.last_round is not None and len(arbiter.last_round.bids) == bidders
    return statistics.median(times), granted


def _knobs(text: str) -> list[float]:
    try:
        knobs = [float(k) for k in text.split(",") if k.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not knobs or not all(0.0 <= k < 1.0 for k in knobs):
        raise argparse.ArgumentTypeError(f"each knob must satisfy 0 <= f < 1: {text!r}")
    return knobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", default=",".join(policy_names()))
    parser.add_argument(
        "--knobs",
        type=_knobs,
        default=[PolicyOptions().fairness_knob],
        help="fairness knobs f to time Themis at, comma-separated (0 <= f < 1)",
    )
    parser.add_argument("--skip-auction", action="store_true")
    args = parser.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    knobs = args.knobs
    print(f"HyperDrive trace, 64 GPUs (2x4x8), median of {args.repeats} run(s):")
    print(f"  {'policy':<14} {'wall s':>8} {'CPU s':>8} {'rounds':>8}")
    total = 0.0
    for name, seconds, cpu, rounds in time_simulations(policies, args.repeats, knobs):
        print(f"  {name:<14} {seconds:>8.2f} {cpu:>8.2f} {rounds:>8}", flush=True)
        total += cpu
    print(f"  {'total':<14} {'':>8} {total:>8.2f}  (the whole comparison, CPU s)")
    sys.stdout.flush()
    if not args.skip_auction:
        seconds, granted = time_auction_round(100, args.repeats)
        print(
            f"One Themis round, 100 bidders on 512 GPUs (f=0), median of {args.repeats}: "
            f"{seconds * 1000:.0f} ms ({granted} GPUs placed)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
