"""Auctions under the simulator's work limit: CPU and certified gap, held-out family.

    nice .venv/bin/python benchmarks/auction_limits.py [--bidders 50,100,200,400,1000]
                                                       [--seeds 3,4,5] [--repeats 3]
                                                       [--node-limit N] [--cli-bidders 1000]

Writes the held-out family's auction files (``benchmarks/heldout.py``: menus that are not
nested prefixes, a fractional LP relaxation) to a temporary folder and measures, each in
its own child process so that no run warms the next:

- per auction, the CPU seconds of the ``partial_allocation`` call alone (after the file is
  read and the solvers imported, as in a running simulator) under ``--node-limit`` (the
  simulator's default), whether it was limited, x*'s certified gap relative to its bound,
  the largest re-solve gap, and how many winners pay nothing (c_i = 1);
- the CPU seconds of the whole ``themis auction FILE`` command (start-up, reading the
  file, the auction, printing) on the ``--cli-bidders`` auctions.

Runs are alternated (every instance once, then again, ``--repeats`` times) and each
figure is the median of an instance's runs; gaps do not vary between runs (the limit is
deterministic). The last lines check the scale targets: every auction <= 1 s CPU, gap
<= 1% at 1,000 bidders and <= 3% at 200-400, the whole command <= 1.5 s at 1,000.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from heldout import write_auction

#: The child that runs one auction and prints its figures as JSON.
_ONE = """
import json, random, sys, time
from themis.auction import partial_allocation
from themis.auction.budget import Limits
from themis.auction.preload import load_solvers
from themis.cli.auction_file import read_auction_file
load_solvers()
data = read_auction_file(sys.argv[1])
nodes = int(sys.argv[2]) or None
start = time.process_time()
out = partial_allocation(data.bids, data.gpus, random.Random(0), limits=Limits(nodes, None))
cpu = time.process_time() - start
bound = out.objective + out.gap
cs = [o.c for o in out.apps.values() if o.choice]
print(json.dumps({"cpu": cpu, "limited": out.limited, "gap": out.gap,
                  "relative": out.gap / bound if bound > 0 else 0.0,
                  "resolve_gap": out.resolve_gap, "winners": len(cs),
                  "unpaid": sum(c == 1.0 for c in cs)}))
"""


def _auction(path: Path, nodes: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _ONE, str(path), str(nodes)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict = json.loads(done.stdout)
    return result


def _command(path: Path) -> float:
    """CPU seconds of the whole ``themis auction FILE`` command, in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "themis", "auction", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    from themis.auction.budget import DEFAULT_NODE_LIMIT

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bidders", default="50,100,200,400,1000")
    parser.add_argument("--seeds", default="3,4,5")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--node-limit", type=int, default=DEFAULT_NODE_LIMIT)
    parser.add_argument("--cli-bidders", default="1000", help="'' for none")
    args = parser.parse_args(argv)
    sizes = [int(b) for b in args.bidders.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    cli_sizes = [int(b) for b in args.cli_bidders.split(",") if b]
    folder = Path(tempfile.mkdtemp(prefix="auction-limits-"))
    paths = {
        (n, s): write_auction(folder / f"heldout-{n}-s{s}.json", n, s)
        for n in sorted(set(sizes) | set(cli_sizes))
        for s in seeds
    }
    runs: dict[tuple[int, int], list[dict]] = {(n, s): [] for n in sizes for s in seeds}
    commands: dict[tuple[int, int], list[float]] = {(n, s): [] for n in cli_sizes for s in seeds}
    for _ in range(args.repeats):  # alternated: every instance once per repeat
        for key in runs:
            runs[key].append(_auction(paths[key], args.node_limit))
        for key in commands:
            commands[key].append(_command(paths[key]))
    print(f"work limit {args.node_limit:,} units; median of {args.repeats} alternated runs")
    print(f"{'bidders':>7} {'seed':>4} {'CPU s':>6} {'limited':>7} {'x* gap':>8} "
          f"{'re-solve gap':>12} {'unpaid':>9}")  # fmt: skip
    worst: dict[int, tuple[float, float]] = {}
    for (n, s), results in runs.items():
        cpu = statistics.median(r["cpu"] for r in results)
        last = results[-1]
        print(
            f"{n:>7} {s:>4} {cpu:6.2f} {last['limited']!s:>7} {100 * last['relative']:7.2f}% "
            f"{last['resolve_gap']:12.2f} {last['unpaid']:>4}/{last['winners']:<4}"
        )
        cpu_max, gap_max = worst.get(n, (0.0, 0.0))
        worst[n] = (max(cpu_max, cpu), max(gap_max, last["relative"]))
    for (n, s), cpus in commands.items():
        print(f"themis auction, {n} bidders seed {s}: {statistics.median(cpus):.2f} s CPU")
    print("targets:")
    for n, (cpu, gap) in worst.items():
        want = 0.01 if n >= 1000 else 0.03 if n >= 200 else None
        gap_ok = "" if want is None else f", gap {100 * gap:.2f}% <= {100 * want:g}%: {gap <= want}"
        print(f"  {n} bidders: max CPU {cpu:.2f} s <= 1 s: {cpu <= 1.0}{gap_ok}")
    if commands:
        top = max(statistics.median(c) for c in commands.values())
        print(f"  themis auction: max {top:.2f} s CPU <= 1.5 s: {top <= 1.5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
