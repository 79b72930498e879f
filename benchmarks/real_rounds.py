"""Auctions of real simulated rounds, captured and re-solved.

    nice .venv/bin/python benchmarks/real_rounds.py [--trace generate:jobs=2000,load=1.5]
                                                    [--cluster 2x10x8] [--knob 0] [--top 20]

Runs ``themis`` on a workload (``workload`` is the bundled HyperDrive trace unless
``--trace`` names another, as ``themis simulate`` reads it), keeps the candidates of every
auction the arbiter ran, and re-solves the ``--top`` largest (by menu entries) three ways,
x* and every re-solve: the default path under the simulator's default node limit, the
same with no limit, and HiGHS's MIP alone for x*. It prints per auction the bidders,
entries, CPU seconds of each, whether the limited run hit its limit and its gap, and
whether the default answer is the unlimited one (same x* and the same c_i).
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=None)
    parser.add_argument("--cluster", default="2x4x8")
    parser.add_argument("--knob", type=float, default=0.0)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)

    import themis.arbiter.bidding as bidding
    from themis.auction.budget import DEFAULT_NODE_LIMIT, Budget, Limits
    from themis.auction.mip import solve_mip
    from themis.auction.partial_allocation import build_candidates
    from themis.auction.solver import solve_all
    from themis.model.cluster import Cluster
    from themis.model.profiles import load_profiles
    from themis.policies import PolicyOptions, make_policy
    from themis.simulator import simulate
    from themis.workload import load_workload
    from themis.workload.generator import GeneratorSpec, generate

    cluster = Cluster.from_spec(args.cluster)
    if args.trace and args.trace.startswith("generate:"):
        fields = dict(kv.split("=") for kv in args.trace.removeprefix("generate:").split(","))
        spec = GeneratorSpec(
            jobs=int(fields.get("jobs", 1000)),
            load=float(fields.get("load", 1.0)),
            seed=int(fields.get("seed", 0)),
            gpus=cluster.size,
        )
        workload = generate(spec, load_profiles())
    else:
        workload = load_workload()
    captured: list[list] = []
    real = bidding.partial_allocation

    def spy(bids, offer, *rest, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        positions = kwargs.get("positions")
        captured.append(build_candidates(bids, offer, positions=positions))
        return real(bids, offer, *rest, **kwargs)

    bidding.partial_allocation = spy  # type: ignore[assignment]
    policy = make_policy("themis", PolicyOptions(fairness_knob=args.knob))
    simulate(workload, cluster, policy)
    print(f"{len(captured)} auctions; the {args.top} largest by menu entries:")
    captured.sort(key=lambda c: -sum(len(g) for g in c))
    same = limited = 0
    cpus: dict[str, list[float]] = {"default": [], "unlimited": [], "mip x*": []}
    for candidates in captured[: args.top]:
        groups = [g for g in candidates if g]
        if not groups:
            continue
        t = time.process_time()
        best, without = solve_all(candidates, budget=Budget(Limits(DEFAULT_NODE_LIMIT, None)))
        cpus["default"].append(time.process_time() - t)
        t = time.process_time()
        free_best, free_without = solve_all(candidates)
        cpus["unlimited"].append(time.process_time() - t)
        t = time.process_time()
        solve_mip(groups)
        cpus["mip x*"].append(time.process_time() - t)
        limited += best.bound is not None or any(s.bound is not None for s in without.values())
        same += (best, without) == (free_best, free_without)
        print(
            f"  {len(groups):4d} bidders {sum(len(g) for g in groups):5d} entries: "
            f"default {cpus['default'][-1]:.3f} s, unlimited {cpus['unlimited'][-1]:.3f} s, "
            f"MIP x* {cpus['mip x*'][-1]:.3f} s, gap {best.gap:.3g}",
            flush=True,
        )
    for name, values in cpus.items():
        print(f"{name}: median {statistics.median(values):.4f} s, max {max(values):.4f} s")
    print(f"limited: {limited}; default answer identical to the unlimited one: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
