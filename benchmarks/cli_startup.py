"""Start-up time of the ``themis`` command: ``--help`` and a one-line user error.

Each command runs ``--runs`` times in a fresh process; the median wall time is reported,
since the first runs pay for a cold file cache and a shared machine adds noise. Run with
the project's venv: ``.venv/bin/python benchmarks/cli_startup.py``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

THEMIS = str(Path(sys.executable).with_name("themis"))

COMMANDS = {
    "themis --help": [THEMIS, "--help"],
    "themis simulate --policy nope (error)": [THEMIS, "simulate", "--policy", "nope"],
    "themis trace inspect missing.csv (error)": [THEMIS, "trace", "inspect", "missing.csv"],
}


def median_seconds(argv: list[str], runs: int) -> float:
    """Median wall time of ``runs`` fresh processes running ``argv``."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    median_seconds(COMMANDS["themis --help"], 2)  # warm the file cache
    for label, argv in COMMANDS.items():
        print(f"{label:45s} {median_seconds(argv, args.runs):6.3f} s (median of {args.runs})")


if __name__ == "__main__":
    main()
