"""``themis`` under each ``--ranking`` on a PCS slice (tests/fixtures/pcs/), beside PCS's own
Themis: mean JCT, worst demand-capped rho and the apps above rho 1, the rho computed as the
anchor test does (``tests/policies/test_pcs_anchor.py``: ``(f - a) / (W / min(D, G /
N_avg))``, N_avg time-averaged over the app's life, from each simulator's finishes).

    python benchmarks/pcs_ranking.py tests/fixtures/pcs/see9e8c_3000_100.csv --gpus 32 \\
        --ranking verified --ranking prospective --seed 0 --seed 1

One line per (ranking, ideal time, seed), and PCS's ``THEMIS`` first. Nothing here
changes what any policy decides.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import time
from pathlib import Path

from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy
from themis.simulator.engine import simulate
from themis.workload.loader import load_workload

CLUSTERS = {32: "1x4x8", 64: "1x8x8"}


def n_avg(spans: list[tuple[float, float]]) -> list[float]:
    """Each app's time-averaged number of active apps (itself included) over its life."""
    out = []
    for a, f in spans:
        if f <= a:
            out.append(1.0)
            continue
        overlap = sum(max(0.0, min(f, f2) - max(a, a2)) for a2, f2 in spans)
        out.append(overlap / (f - a))
    return out


def figures(
    spans: list[tuple[float, float]], work: list[float], demand: list[int], gpus: int
) -> tuple[float, float, int]:
    """Mean JCT (h), worst demand-capped rho, apps with that rho above 1."""
    rhos = [
        (f - a) / (w / min(d, gpus / n))
        for (a, f), w, d, n in zip(spans, work, demand, n_avg(spans), strict=True)
    ]
    mean = statistics.fmean(f - a for a, f in spans) / 3600
    return mean, max(rhos), sum(r > 1 for r in rhos)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a tests/fixtures/pcs slice (.csv)")
    parser.add_argument("--gpus", type=int, choices=sorted(CLUSTERS), default=64)
    parser.add_argument("--ranking", action="append")
    parser.add_argument("--ideal-time", action="append", dest="ideal")
    parser.add_argument("--seed", type=int, action="append")
    args = parser.parse_args()
    path = Path(args.trace)
    with path.open() as f:
        rows = list(csv.DictReader(f))
    work = [float(r["service"]) for r in rows]
    demand = [int(r["num_jobs"]) for r in rows]
    pcs = path.with_name(f"{path.stem}.THEMIS.{args.gpus}.csv.gz")
    with gzip.open(pcs, "rt", newline="") as f:
        out = sorted(csv.DictReader(f), key=lambda r: int(r["app_id"]))
    origin = min(float(r["submit_time"]) for r in out)
    spans = [(float(r["submit_time"]) - origin, float(r["end_time"]) - origin) for r in out]
    mean, worst, above = figures(spans, work, demand, args.gpus)
    print(f"{path.stem} {args.gpus} GPUs PCS-THEMIS: {mean:.1f} h, rho {worst:.2f}, >1 {above}")
    workload = load_workload(str(path))
    for ranking in args.ranking or ["verified", "prospective"]:
        for ideal in args.ideal or ["paper"]:
            for seed in args.seed or [0]:
                start = time.process_time()
                options = PolicyOptions(ranking=ranking, ideal_time=ideal, seed=seed)
                result = simulate(
                    workload,
                    Cluster.from_spec(CLUSTERS[args.gpus]),
                    make_policy("themis", options),
                )
                by_id = {a.app_id: a for a in result.apps}
                ours = [by_id[str(k)] for k in range(len(rows))]
                spans = [(a.arrival, float(a.finish or 0.0)) for a in ours]
                mean, worst, above = figures(spans, work, demand, args.gpus)
                print(
                    f"{path.stem} {args.gpus} GPUs themis --ranking {ranking} --ideal-time "
                    f"{ideal} seed {seed}: {mean:.1f} h, rho {worst:.2f}, >1 {above} "
                    f"({time.process_time() - start:.0f} s CPU)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
