"""Where the mean-JCT gap between PCS's Themis and ``themis`` comes from (docs/results.md,
"Against PCS's Themis"): PCS's rule, re-divide the whole cluster at every arrival, job end
and 600 s, greedily, the app with the largest rho first, each given its whole demand
(tests/fixtures/pcs/README.md), written here on this project's simulator, with either
fair time:

- ``pcs``: the app's work over ``min(D, G / N_avg)`` GPUs (its private ``1/N`` slice,
  capped by its demand): PCS's;
- ``paper``: ``T_cluster * N_avg`` (``T_cluster`` = its time alone on the whole cluster,
  capped by its demand): this project's, the paper's approximation.

Run on a PCS slice and compared with PCS's own output, the first tells whether the two
simulators agree under PCS's rule (then the rest of the gap is policy), the second how
much of it the fair time alone makes. The rest (min-max instead of greedy, leases, the
auction and the leftover step) is measured with ``themis simulate`` options (see
docs/results.md). Every app here is 1-GPU trials (a PCS slice), which the rule assumes.

    python benchmarks/pcs_gap.py tests/fixtures/pcs/s0e4a51_0_400.csv --gpus 64

Not a registered policy: nothing here changes what ``themis`` or any policy decides.
"""

from __future__ import annotations

import argparse
import statistics
import time

from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies.base import Assignment, Policy, PolicyOptions, Schedule, SchedulingView
from themis.simulator.engine import simulate
from themis.workload.loader import load_workload

#: PCS's re-division period for every workload but its ``gavel`` one (seconds).
QUANTUM = 600.0
CLUSTERS = {32: "1x4x8", 64: "1x8x8"}


class GreedyRhoPolicy(Policy):
    """PCS's Themis rule on 1-GPU trials (module docstring); ``fair`` picks the fair time."""

    name = "pcs-greedy"
    description = "PCS's Themis rule: greedy by rho over apps at every event"

    def __init__(
        self, options: PolicyOptions, fair: str, leases: bool = False, at_held: bool = False
    ) -> None:
        super().__init__(options)
        #: Whether rho is taken with the GPUs the app holds now (as Themis ranks: an app
        #: holding none is worst off, ties by arrival) instead of with those it would get.
        self.at_held = at_held
        if fair not in ("pcs", "paper"):
            raise ValueError(f"fair time 'pcs' or 'paper', not {fair!r}")
        self.fair = fair
        #: Whether a running job keeps its GPUs until its grant (600 s) ends, as under
        #: Themis's leases, instead of competing at every arrival and job end.
        self.leases = leases

    def _fair_time(self, app: AppState, gpus: int, n: float) -> float:
        tpi = app.profile.time_per_iteration
        work = sum(j.spec.work for j in app.jobs) * tpi  # GPU-seconds: 1-GPU trials
        demand = len(app.jobs)
        if self.fair == "pcs":
            return work / min(demand, gpus / n)
        return work / min(demand, gpus) * n

    def schedule(self, view: SchedulingView) -> Schedule:
        now, gpus = view.now, view.cluster.size
        apps = [a for a in view.apps if a.finish is None and a.live_jobs()]
        state = {}
        for app in apps:
            tpi = app.profile.time_per_iteration
            remaining = sum(j.remaining_at(now) for j in app.live_jobs()) * tpi
            state[app] = (remaining, self._fair_time(app, gpus, view.n_avg(app)))
        schedule: Schedule = {}
        leased: dict[AppState, int] = {}
        if self.leases:
            for job in view.running():
                if job.until is not None and not view.ending(job):
                    schedule[job] = Assignment(job.gpus, job.until)
                    leased[job.app] = leased.get(job.app, 0) + job.gang
        left = gpus - sum(leased.values())
        share: dict[AppState, int] = {}
        # arrival order: PCS's stable sort keeps it among equal rho
        pool = [a for a in apps if a.demand() > leased.get(a, 0)]
        while left > 0 and pool:
            # the first of equal maxima, as PCS's stable sort takes it
            if self.at_held:
                best = max(pool, key=lambda app: _rho_held(app, now, state[app]))
            else:
                best = max(pool, key=lambda app, cap=left: _rho(app, now, cap, state[app]))
            share[best] = min(left, best.demand() - leased.get(best, 0))
            left -= share[best]
            pool.remove(best)
        until = now + QUANTUM
        starting: list[JobState] = []
        for app, count in share.items():
            running = [j for j in app.running_jobs() if j not in schedule]
            for job in running[:count]:
                schedule[job] = Assignment(job.gpus, until)
            starting.extend(app.idle_jobs()[: max(0, count - len(running))])
        busy = {g for a in schedule.values() for g in a.gpus}
        free = iter(g for g in range(gpus) if g not in busy)
        for job in starting:
            schedule[job] = Assignment((next(free),), until)
        return schedule


def _rho(app: AppState, now: float, cap: int, state: tuple[float, float]) -> float:
    """PCS's rho of ``app`` given ``min(cap, demand)`` GPUs: (elapsed + remaining time on
    them) / fair time; ``state`` is (remaining GPU-seconds, fair time)."""
    remaining, fair = state
    return (now - app.arrival + remaining / min(cap, app.demand())) / fair


def _rho_held(app: AppState, now: float, state: tuple[float, float]) -> float:
    """Rho with the GPUs ``app`` holds now; infinite when it holds none."""
    held = len(app.held())
    if held == 0:
        return float("inf")
    remaining, fair = state
    return (now - app.arrival + remaining / held) / fair


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a PCS trace of 1-GPU trials (a tests/fixtures/pcs slice)")
    parser.add_argument("--gpus", type=int, choices=sorted(CLUSTERS), default=64)
    parser.add_argument("--fair", choices=("pcs", "paper"), action="append")
    parser.add_argument(
        "--leases", action="store_true", help="running jobs keep their GPUs for 600 s"
    )
    parser.add_argument(
        "--at-held", action="store_true", help="rho with the GPUs held now, as Themis ranks"
    )
    args = parser.parse_args()
    workload = load_workload(args.trace)
    for fair in args.fair or ["pcs", "paper"]:
        start = time.process_time()
        result = simulate(
            workload,
            Cluster.from_spec(CLUSTERS[args.gpus]),
            GreedyRhoPolicy(PolicyOptions(), fair, args.leases, args.at_held),
        )
        mean = statistics.fmean(float(a.finish or 0.0) - a.arrival for a in result.apps)
        print(
            f"{args.trace} {args.gpus} GPUs, greedy with the {fair} fair time"
            f"{', 600 s leases' if args.leases else ''}"
            f"{', rho at the GPUs held' if args.at_held else ''}: mean JCT "
            f"{mean / 3600:.1f} h ({time.process_time() - start:.0f} s CPU)"
        )


if __name__ == "__main__":
    main()
