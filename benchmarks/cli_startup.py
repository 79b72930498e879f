"""Start-up time of the ``themis`` command: ``--help`` and one-line user errors.

Each command runs ``--runs`` times in a fresh process; the median wall time and the median
CPU time (user + system, of the child) are reported. On a shared machine the CPU time is
the steadier figure: other work stretches wall time, not CPU time.
``--src DIR`` runs the CLI of another source tree (``DIR/themis``, e.g. an older commit
unpacked with ``git archive <commit> src | tar -x -C /tmp/old``) with this venv's
packages, so two trees can be compared in one run, alternating:

    .venv/bin/python benchmarks/cli_startup.py --src src --src /tmp/old/src
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

ENTRY = "import sys; from themis.cli.main import main; sys.argv[0] = 'themis'; main()"

COMMANDS = {
    "themis --help": ["--help"],
    "themis simulate --policy nope (error)": ["simulate", "--policy", "nope"],
    "themis trace inspect missing.csv (error)": ["trace", "inspect", "missing.csv"],
}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(src: str, args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh process."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    cpu, start = _child_cpu(), time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        check=False,
    )
    return time.perf_counter() - start, _child_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--src", action="append", default=None, help="source tree(s)")
    args = parser.parse_args()
    trees = args.src or ["src"]
    for tree in trees:  # warm the file cache
        one_run(tree, ["--help"])
    for label, argv in COMMANDS.items():
        times: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
        for _ in range(args.runs):
            for tree in trees:  # alternate, so load from other work hits both alike
                times[tree].append(one_run(tree, argv))
        print(f"{label}  (median of {args.runs})")
        for tree, runs in times.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"  {tree:30s} wall {wall:6.3f} s   cpu {cpu:6.3f} s")


if __name__ == "__main__":
    main()
