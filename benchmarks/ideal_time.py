"""The two ideal times of rho, measured: policies run under ``--ideal-time paper`` and
``slice``, each judged by both definitions' figures (docs/metrics.md, "Two ideal times").

    .venv/bin/python benchmarks/ideal_time.py [-j 1] [--families g16,g24,c3]
        [--seeds 5] [--policies themis,ftf-oracle,srtf] [--out DIR]

A family is one of ``fairness_bar.py``'s workload families (its cells' arguments, with the
seed replaced): ``g16`` (16-GPU gang mix), ``g24`` (24-GPU gang mix), ``c3`` (HyperDrive
under 3x contention), and the others of ``FAMILIES``. Each family runs on ``--seeds``
seeds starting at its first cell's. A policy that reads no ideal time (``srtf``) runs once
per seed; ``themis`` and ``ftf-oracle`` once under each definition. Each run is one
``themis simulate`` subprocess, its summary kept under ``--out`` as ``fairness_bar.py``
keeps its own (a rerun of the same code reuses it).

Prints, per family and run, the median and range over seeds of: max rho, p99, the share
of apps above 1 and the max over apps that shared the cluster, each by both definitions,
and the mean completion time; then one JSON line with every per-seed figure.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fairness_bar import CELLS, code_tag, simulate  # beside this script

#: family -> a cell of ``fairness_bar.CELLS`` whose arguments it takes (the seed replaced).
FAMILIES = {
    "g16": "g16_7",
    "g24": "g24_44",
    "g32": "g32_101",
    "g48": "g48_17",
    "c3": "c3_0",
    "c4": "c4_3",
    "l16": "l16_41",
}

#: The figures reported, by summary key, with their short names.
FIGURES = (
    ("max_rho_paper", "max paper"),
    ("max_rho_slice", "max slice"),
    ("max_rho_shared_paper", "shared paper"),
    ("max_rho_shared_slice", "shared slice"),
    ("rho_p99_paper", "p99 paper"),
    ("rho_p99_slice", "p99 slice"),
    ("share_rho_over_1_paper", ">1 paper"),
    ("share_rho_over_1_slice", ">1 slice"),
    ("mean_completion_s", "mean JCT h"),
)


def seeded(args: str, seed: int) -> str:
    """A cell's arguments with its ``--seed`` set to ``seed``."""
    words = shlex.split(args)
    words[words.index("--seed") + 1] = str(seed)
    return shlex.join(words)


def first_seed(args: str) -> int:
    words = shlex.split(args)
    return int(words[words.index("--seed") + 1])


def cell_text(values: list[float], key: str) -> str:
    """Median and range over seeds (hours for a completion, percent for a share)."""
    scale, form = 1.0, "{:.2f}"
    if key == "mean_completion_s":
        scale, form = 1 / 3600, "{:.1f}"
    elif key.startswith("share_"):
        scale, form = 100.0, "{:.0f}%"
    xs = [v * scale for v in values]
    mid = form.format(statistics.median(xs))
    return f"{mid} ({form.format(min(xs))}-{form.format(max(xs))})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="g16,g24,c3", help=f"of {', '.join(FAMILIES)}")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per family (default 5)")
    parser.add_argument("--policies", default="themis,ftf-oracle,srtf")
    parser.add_argument("--out", type=Path, default=Path("out/fairness_bar"))
    parser.add_argument("-j", "--jobs", type=int, default=1, help="runs at once (default 1)")
    args = parser.parse_args(argv)
    families = args.families.split(",")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    #: (label, policy, options): a policy that reads an ideal time runs under each.
    variants = []
    for policy in args.policies.split(","):
        if policy in ("themis", "ftf-oracle"):
            variants += [(f"{policy} paper", policy, ""), (f"{policy} slice", policy,
                          "--ideal-time slice")]  # fmt: skip
        else:
            variants.append((policy, policy, ""))
    runs = []
    for family in families:
        base = CELLS[FAMILIES[family]]
        for k in range(args.seeds):
            seed = first_seed(base) + k
            for label, policy, options in variants:
                runs.append((family, seed, label, policy, options, seeded(base, seed)))
    code = code_tag()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        summaries = list(
            pool.map(
                lambda r: simulate(f"{r[0]}_{r[1]}", r[5], r[3], r[4], 0.0, args.out, code),
                runs,
            )
        )
    table: dict[str, dict[str, dict[str, list[float]]]] = {}
    for (family, _, label, *_), summary in zip(runs, summaries, strict=True):
        row = table.setdefault(family, {}).setdefault(label, {})
        for key, _ in FIGURES:
            row.setdefault(key, []).append(float(summary[key]))
    header = "| family | run | " + " | ".join(name for _, name in FIGURES) + " |"
    print(header)
    print("|---|---|" + "---:|" * len(FIGURES))
    for family, rows in table.items():
        for label, figures in rows.items():
            cells = " | ".join(cell_text(figures[key], key) for key, _ in FIGURES)
            print(f"| {family} | {label} | {cells} |")
    print(json.dumps({"code": code, "seeds": args.seeds, "runs": table}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
