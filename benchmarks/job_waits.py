"""Job-level waits on the HyperDrive gang mix: the measurement behind
docs/gangs.md, section 6. Not a speed benchmark.

    PYTHONPATH=src .venv/bin/python benchmarks/job_waits.py [--cluster 1x1x8] [--seeds 0,1,2]
        [--stride 8] [--vgg-share 0.75] [--one-app-per-trial] [--policies themis,ftf-oracle]

The workload is the bundled HyperDrive trace with ``--gang-mix --vgg-share S`` (as
``themis simulate`` builds it for the seed), keeping every ``stride``-th trial of each
experiment (trials 0, K, 2K, ...; 628 jobs at K = 8). ``--one-app-per-trial`` makes each
kept trial an app of its own, arriving with its experiment: what a Gavel-format file of
the same jobs gives (Gavel's traces have no apps). Prints, per seed and policy, the
summary's per-app and job-level figures (docs/metrics.md).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from themis.experiments.workloads import Variants
from themis.model.cluster import Cluster
from themis.model.workload import Workload
from themis.policies.base import PolicyOptions
from themis.policies.registry import make_policy
from themis.reports.metrics import summarize
from themis.simulator.engine import simulate
from themis.workload.loader import load_workload


def workload(
    cluster: Cluster, seed: int, stride: int, vgg_share: float, one_app_per_trial: bool
) -> Workload:
    loaded = load_workload("hyperdrive", seed=seed)
    varied = Variants(True, ("vgg", vgg_share), 1.0).apply(loaded, cluster, seed)
    apps = [replace(a, jobs=a.jobs[::stride]) for a in varied.apps if a.jobs[::stride]]
    if one_app_per_trial:
        apps = [
            replace(a, app_id=f"{a.app_id}/{j.job_id}", jobs=(j,)) for a in apps for j in a.jobs
        ]
    return replace(varied, apps=tuple(apps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="1x1x8")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--stride", type=int, default=8)
    parser.add_argument("--vgg-share", type=float, default=0.75)
    parser.add_argument("--one-app-per-trial", action="store_true")
    parser.add_argument("--policies", default="themis,ftf-oracle")
    args = parser.parse_args()
    cluster = Cluster.from_spec(args.cluster)
    print(
        "seed policy apps jobs | max_rho mean_compl_h | job wait p50/p99/max h | "
        "slowdown p50/p99 | starts/job | 1-GPU jobs' wait mean/max h"
    )
    for seed in (int(s) for s in args.seeds.split(",")):
        w = workload(cluster, seed, args.stride, args.vgg_share, args.one_app_per_trial)
        for name in args.policies.split(","):
            result = simulate(w, cluster, make_policy(name, PolicyOptions(seed=seed)))
            s = summarize(result)
            one = s.jobs_by_gang.get(1, {})
            print(
                f"{seed} {name} {s.apps} {s.jobs} | {s.max_rho:.2f} "
                f"{s.mean_completion_s / 3600:.1f} | {s.job_wait_p50_s / 3600:.1f} / "
                f"{s.job_wait_p99_s / 3600:.1f} / {s.job_wait_max_s / 3600:.1f} | "
                f"{s.job_slowdown_p50:.1f} / {s.job_slowdown_p99:.1f} | "
                f"{s.starts_per_job_mean:.1f} | {one.get('wait_mean_s', 0) / 3600:.1f} / "
                f"{one.get('wait_max_s', 0) / 3600:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
