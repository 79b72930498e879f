"""The held-out auction family: menus that are *not* nested prefixes.

    nice .venv/bin/python benchmarks/heldout.py write DIR [--bidders 50,100,200] [--seeds 0]
    nice .venv/bin/python benchmarks/heldout.py time [--bidders 50,100,200] [--seeds 0,1,2]
                                                     [--timeout 120] [-- extra themis args]
    nice .venv/bin/python benchmarks/heldout.py budget [--bidders ...] [--seeds ...]
                                                       [--node-limit N] [--deadline S]

``time`` measures the CPU time of the whole ``themis auction FILE`` command (start-up
included) in a child process; ``budget`` runs Partial Allocation in this process under the
given limits and prints the auction's own CPU and wall time (the whole
``partial_allocation`` call, bid checking included), whether it hit its limits, x*'s
certified gap (also relative to its bound), the largest re-solve gap, and how many
winners pay nothing (c_i = 1) with the mean c_i.

``benchmarks/instances.py`` builds menus the way the Themis agent does (nested prefixes of
one chain from rotated starts), on which the LP relaxation is nearly always integral. This
family is the counter-example, generated here with our own seeded generator:

- 128 machines x 8 GPUs in 16 racks of 8 machines, every GPU free;
- each bidder has 8 menu entries, each of 1, 2, 4 or 8 GPUs (uniformly); an entry lies on
  one machine with probability 0.7 (random GPUs of a random machine), else it is split in
  two halves over two random machines (a 1-GPU entry always lies on one machine);
- rho = base / (size x placement factor), with the bidder's base uniform in [1, 30] and
  "none" = 2 x base; the factor is 1 on one machine, ``SAME_RACK`` over two machines of a
  rack, ``CROSS_RACK`` over two racks.

So every entry's gain ``log(none / rho) = log(2 x size x factor)`` depends only on its
size and spread: the family is full of exact ties and overlapping bundles, which is what
makes it hard for an exact search.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MACHINES = 128
GPUS_PER_MACHINE = 8
MACHINES_PER_RACK = 8
ENTRIES = 8
SIZES = (1, 2, 4, 8)
ONE_MACHINE = 0.7
#: Placement factors of an entry split over two machines of one rack, or of two racks.
SAME_RACK = 0.9
CROSS_RACK = 0.7


def auction_payload(bidders: int, seed: int = 0, machines: int = MACHINES) -> dict:
    """The JSON object of one ``themis auction`` input file (see the module docstring)."""
    rng = random.Random(f"heldout-{bidders}-{seed}-{machines}")
    gpus = [f"m{m}g{g}" for m in range(machines) for g in range(GPUS_PER_MACHINE)]
    payload: dict = {
        "gpus": {
            f"m{m}g{g}": {"machine": f"m{m}", "rack": f"r{m // MACHINES_PER_RACK}"}
            for m in range(machines)
            for g in range(GPUS_PER_MACHINE)
        },
        "bids": {},
    }
    for k in range(bidders):
        base = rng.uniform(1.0, 30.0)
        menu = []
        for _ in range(ENTRIES):
            size = rng.choice(SIZES)
            if size == 1 or rng.random() < ONE_MACHINE:
                m = rng.randrange(machines)
                chosen = [m * GPUS_PER_MACHINE + g for g in rng.sample(range(8), size)]
                factor = 1.0
            else:
                m1, m2 = rng.sample(range(machines), 2)
                half = size // 2
                chosen = [m1 * GPUS_PER_MACHINE + g for g in rng.sample(range(8), half)]
                chosen += [m2 * GPUS_PER_MACHINE + g for g in rng.sample(range(8), half)]
                same = m1 // MACHINES_PER_RACK == m2 // MACHINES_PER_RACK
                factor = SAME_RACK if same else CROSS_RACK
            menu.append({"gpus": [gpus[i] for i in chosen], "rho": base / (size * factor)})
        payload["bids"][f"app{k}"] = {"none": 2.0 * base, "menu": menu}
    return payload


def write_auction(path: Path, bidders: int, seed: int = 0) -> Path:
    path.write_text(json.dumps(auction_payload(bidders, seed)))
    return path


def _time_one(path: Path, timeout: float, extra: list[str]) -> tuple[str, float | None]:
    """CPU seconds of ``themis auction FILE`` in a child process (None: timed out)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, "-m", "themis", "auction", str(path), *extra],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"> {timeout:.0f} s wall (stopped)", None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return f"{cpu:.2f} s CPU, {time.perf_counter() - start:.2f} s wall", cpu


def _budget_one(path: Path, args: argparse.Namespace) -> str:
    """One auction in this process under ``--node-limit`` / ``--deadline``."""
    import highspy  # noqa: F401 - imported before the clock, as a long-running arbiter has
    import numpy  # noqa: F401

    from themis.auction import partial_allocation
    from themis.auction.budget import DEFAULT_NODE_LIMIT, Limits
    from themis.cli.auction_file import read_auction_file

    nodes = DEFAULT_NODE_LIMIT if args.node_limit is None else (args.node_limit or None)
    data = read_auction_file(str(path))
    start, wall = time.process_time(), time.perf_counter()
    outcome = partial_allocation(
        data.bids, data.gpus, random.Random(0), limits=Limits(nodes, args.deadline)
    )
    cpu = time.process_time() - start
    wall = time.perf_counter() - wall
    cs = [o.c for o in outcome.apps.values() if o.choice]
    unpaid = sum(c == 1.0 for c in cs)
    mean_c = sum(cs) / len(cs) if cs else 1.0
    bound = outcome.objective + outcome.gap
    relative = outcome.gap / bound if bound > 0 else 0.0
    return (
        f"{cpu:.2f} s CPU, {wall:.2f} s wall, limited {outcome.limited}, gap {outcome.gap:.3f} "
        f"({100 * relative:.2f}%), re-solve gap {outcome.resolve_gap:.3f}, "
        f"objective {outcome.objective:.3f}, winners {len(cs)} (c = 1: {unpaid}, "
        f"mean c {mean_c:.3f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["write", "time", "budget"])
    parser.add_argument("dir", nargs="?", default=None)
    parser.add_argument("--bidders", default="50,100,200")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--node-limit", type=int, default=None, help="budget: 0 = none")
    parser.add_argument("--deadline", type=float, default=None, help="budget: seconds")
    parser.add_argument("extra", nargs="*", help="after --: arguments for themis auction")
    args = parser.parse_args(argv)
    sizes = [int(b) for b in args.bidders.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    folder = Path(args.dir or tempfile.mkdtemp(prefix="heldout-"))
    folder.mkdir(parents=True, exist_ok=True)
    for bidders in sizes:
        for seed in seeds:
            path = write_auction(folder / f"heldout-{bidders}-s{seed}.json", bidders, seed)
            if args.command == "write":
                print(path)
                continue
            if args.command == "budget":
                print(f"{bidders:>5} bidders seed {seed}: {_budget_one(path, args)}", flush=True)
                continue
            text, _ = _time_one(path, args.timeout, args.extra)
            print(f"{bidders:>5} bidders seed {seed}: {text}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
