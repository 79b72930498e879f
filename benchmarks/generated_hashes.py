"""Themis's decisions on generated workloads, as hashes: the check that a change to the
round leaves every decision as it was, at a scale the fingerprints' 600-job workloads do
not reach.

    nice .venv/bin/python benchmarks/generated_hashes.py [--runs 3000:0,3000:1,10000:2]

Each run is ``targets.py``'s generated Themis run (``--jobs`` Philly-like jobs on one GPU
per 10 jobs, the default options) with its own seed, in a fresh child process; it prints
the SHA-256 (first 16 hex digits) of the run's files as ``themis simulate --out`` writes
them, the rounds and the simulation's CPU seconds. Two checkouts that print the same
hashes made the same decisions (run one with ``PYTHONPATH=<other checkout>/src``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

RUN = """
import hashlib, sys, time
sys.path.insert(0, {here!r})
from instances import rack_spec
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.policies import PolicyOptions, make_policy
from themis.reports.files import run_texts
from themis.reports.record import record_run
from themis.simulator import simulate
from themis.workload.generator import GeneratorSpec, generate
cluster = Cluster.from_spec(rack_spec(max(64, {jobs} // 10)))
workload = generate(GeneratorSpec(jobs={jobs}, seed={seed}, gpus=cluster.size), load_profiles())
policy = make_policy("themis", PolicyOptions())
c = time.process_time()
result = simulate(workload, cluster, policy)
cpu = time.process_time() - c
record = record_run(result, "themis")
texts = run_texts(result, record.summary, record.rows)
digest = hashlib.sha256("".join(texts[k] for k in sorted(texts)).encode()).hexdigest()
print(f"{{digest[:16]}} {{result.rounds}} {{cpu:.1f}} {{cluster.size}}")
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="3000:0,3000:1,10000:2", help="jobs:seed,...")
    args = parser.parse_args(argv)
    for run in args.runs.split(","):
        jobs, seed = (int(x) for x in run.split(":"))
        code = RUN.format(here=str(HERE), jobs=jobs, seed=seed)
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        digest, rounds, cpu, gpus = done.stdout.split()
        print(f"{jobs} jobs seed {seed} on {gpus} GPUs: {digest}  {rounds} rounds, {cpu} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
