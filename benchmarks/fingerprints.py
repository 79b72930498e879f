"""Schedule fingerprints: does a change keep every decision bit for bit?

    .venv/bin/python benchmarks/fingerprints.py [--policies a,b] [--workloads w1,w2]
                                                [-j N] [--options "..."] [--save F | --check F]

Runs ``themis simulate`` (a subprocess, so the script survives any refactor of the
library) for each policy on each workload below and prints a SHA-256 of the run's
``allocations.csv`` and ``apps.csv`` (its first ten columns, ``APPS_COLUMNS``): every
interval of every job on every GPU, and every app's arrival, finish and rho. Two trees
that print the same fingerprints made the same decisions. ``--save`` writes the table as
JSON; ``--check`` compares against a saved table and exits 1 on any difference (naming
the cells).

The workloads are the six the project checks refactors against: the bundled HyperDrive
trace, its gang mix, the same with estimate error and restart costs, two generated
workloads (plain and contended, on a smaller cluster), and a typed (V100 + K80) cluster.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

WORKLOADS: dict[str, list[str]] = {
    "bundled": [],
    "gang-mix": ["--gang-mix", "--vgg-share", "0.5"],
    "knowledge": ["--estimate-error", "0.2", "--restart-cost", "30"],
    "generated": ["--trace", "generate:jobs=600,load=1.0", "--cluster", "1x4x8"],
    "contended": ["--trace", "generate:jobs=600,load=2.0", "--cluster", "1x2x8", "--seed", "3"],
    "typed": ["--cluster", "1x4x8:v100+1x4x8:k80"],
}


def registered_policies() -> list[str]:
    """Every policy ``themis policies`` lists (the installed package's registry)."""
    out = subprocess.run(
        [sys.executable, "-m", "themis", "policies"], capture_output=True, text=True, check=True
    ).stdout
    names = []
    for line in out.splitlines():
        word = line.split()[0] if line.split() else ""
        if word and word[0].isalpha() and word.lower() == word and word not in names:
            names.append(word)
    return names


def fingerprint(policy: str, workload: str, options: Sequence[str] = ()) -> str:
    """SHA-256 (16 hex digits) of one run's allocations and apps tables."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "themis", "simulate", "-q", "--policy", policy]
        command += WORKLOADS[workload] + [*options, "--out", tmp]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            return f"error: {done.stderr.strip().splitlines()[-1:]}"
        digest = hashlib.sha256()
        digest.update((Path(tmp) / "allocations.csv").read_bytes())
        digest.update(apps_bytes(Path(tmp) / "apps.csv"))
        return digest.hexdigest()[:16]


#: The columns of ``apps.csv`` a fingerprint covers: those it had when fingerprints were
#: first saved (arrival, finish, rho ...). Columns added since (both ideal times' rho,
#: ``shared``) are derived figures, not decisions; left out, fingerprints saved before
#: them still compare.
APPS_COLUMNS = 10


def apps_bytes(path: Path) -> bytes:
    """``apps.csv``'s first ``APPS_COLUMNS`` columns, written as the run writes them."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.reader(handle):
            writer.writerow(row[:APPS_COLUMNS])
    return out.getvalue().encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", help="comma-separated (default: every registered)")
    parser.add_argument("--workloads", help=f"comma-separated of {', '.join(WORKLOADS)}")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument(
        "--options",
        default="",
        help="extra options of every run (e.g. the option that keeps an earlier default, to"
        " show it decides as the code before did)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--save", type=Path, help="write the fingerprints as JSON")
    group.add_argument("--check", type=Path, help="compare with fingerprints saved before")
    args = parser.parse_args()
    policies = args.policies.split(",") if args.policies else registered_policies()
    workloads = args.workloads.split(",") if args.workloads else list(WORKLOADS)
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    cells = [(p, w) for p in policies for w in workloads]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        options = shlex.split(args.options)
        runs = pool.map(lambda c: fingerprint(*c, options), cells)
        prints = dict(zip(cells, runs, strict=True))
    table = {f"{p} {w}": value for (p, w), value in prints.items()}
    for key, value in table.items():
        print(f"{key:32s} {value}")
    if args.save:
        args.save.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    if args.check:
        before = json.loads(args.check.read_text())
        changed = [k for k in table if k in before and before[k] != table[k]]
        for key in changed:
            print(f"CHANGED {key}: {before[key]} -> {table[key]}")
        print(f"{len(table) - len(changed)} same, {len(changed)} changed")
        return 1 if changed else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
