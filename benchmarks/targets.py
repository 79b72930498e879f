"""The scale targets, measured side by side in one run.

    nice .venv/bin/python benchmarks/targets.py [--jobs 100000] [--bidders 1000] [--seeds 0,1,2]
                                                [--lease-align 0,60] [--skip-jobs]

Each figure runs in a fresh child process, one after another, so that they share the
machine's state of the moment (compare CPU seconds, not wall, when it is loaded):

1. the held-out auction family (``heldout.py``) at ``--bidders``: wall seconds of the
   whole ``partial_allocation`` call under the runtime's 1 s deadline, and CPU seconds
   under the simulator's default node limit, each with x*'s certified gap (target: within
   the deadline and at most 1%);
2. Themis on ``--jobs`` generated jobs on one GPU per 10 jobs (``scale.py``'s jobs sweep;
   target at 100,000 jobs / 10,000 GPUs: 60 s CPU), once per ``--lease-align`` value
   (0: the default; > 0 aligns lease ends to that many seconds, which changes decisions:
   the measured prototype of "fewer rounds");
3. the bundled HyperDrive comparison, every registered policy once (``run.py``; target:
   20 s CPU in all, Themis 5).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


AUCTION = """
import json, random, sys, time
sys.path.insert(0, {here!r})
from heldout import write_auction
from pathlib import Path
from themis.auction import partial_allocation
from themis.auction.budget import DEFAULT_NODE_LIMIT, Limits
from themis.cli.auction_file import read_auction_file
import numpy, highspy
path = write_auction(Path({tmp!r}) / "a.json", {bidders}, {seed})
data = read_auction_file(str(path))
out = {{}}
for name, limits in (("deadline", Limits(None, 1.0)), ("nodes", Limits(DEFAULT_NODE_LIMIT, None))):
    w, c = time.perf_counter(), time.process_time()
    o = partial_allocation(data.bids, data.gpus, random.Random(0), limits=limits)
    w, c = time.perf_counter() - w, time.process_time() - c
    out[name] = {{"wall": w, "cpu": c, "gap": o.gap, "rel": o.gap / (o.objective + o.gap)}}
print(json.dumps(out))
"""

#: Themis on generated jobs, the simulation alone timed (``cpu``, ``wall``, ``result``):
#: ``compiled_core.py`` runs the same body, then writes the run's files.
GENERATED_RUN = """
sys.path.insert(0, {here!r})
from instances import rack_spec
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.policies import PolicyOptions, make_policy
from themis.simulator import simulate
from themis.workload.generator import GeneratorSpec, generate
cluster = Cluster.from_spec(rack_spec(max(64, {jobs} // 10)))
workload = generate(GeneratorSpec(jobs={jobs}, seed=0, gpus=cluster.size), load_profiles())
policy = make_policy("themis", PolicyOptions(lease_align={align}))
w, c = time.perf_counter(), time.process_time()
result = simulate(workload, cluster, policy)
cpu, wall = time.process_time() - c, time.perf_counter() - w
"""

JOBS = (
    "import json, sys, time"
    + GENERATED_RUN
    + """print(json.dumps({{"wall": wall, "cpu": cpu, "rounds": result.rounds,
                  "gpus": cluster.size}}))
"""
)

BUNDLED = """
import json, sys
sys.path.insert(0, {here!r})
from run import time_simulations
from themis.policies import policy_names
rows = time_simulations(policy_names(), 1, [0.8])
print(json.dumps([[label, wall, cpu, rounds] for label, wall, cpu, rounds in rows]))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--bidders", type=int, default=1000)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--lease-align", default="0")
    parser.add_argument("--skip-jobs", action="store_true")
    args = parser.parse_args(argv)
    here = str(HERE)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in [int(s) for s in args.seeds.split(",")]:
            r = _child(AUCTION.format(here=here, tmp=tmp, bidders=args.bidders, seed=seed))
            d, n = r["deadline"], r["nodes"]
            print(
                f"held-out {args.bidders} bidders seed {seed}: 1 s deadline {d['wall']:.2f} s wall,"
                f" gap {100 * d['rel']:.2f}%; node limit {n['cpu']:.2f} s CPU, "
                f"gap {100 * n['rel']:.2f}%",
                flush=True,
            )
    if not args.skip_jobs:
        for align in [float(a) for a in args.lease_align.split(",")]:
            r = _child(JOBS.format(here=here, jobs=args.jobs, align=align))
            print(
                f"themis {args.jobs} jobs / {r['gpus']} GPUs, lease align {align:g} s: "
                f"{r['cpu']:.1f} s CPU ({r['wall']:.1f} wall), {r['rounds']} rounds, "
                f"{1000 * r['cpu'] / max(1, r['rounds']):.2f} ms a round",
                flush=True,
            )
    rows = _child(BUNDLED.format(here=here))
    total = sum(row[2] for row in rows)
    for label, wall, cpu, rounds in rows:
        print(f"bundled {label:<14} {cpu:7.2f} s CPU {wall:7.2f} s wall {rounds:7d} rounds")
    print(f"bundled comparison, {len(rows)} policies: {total:.1f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
