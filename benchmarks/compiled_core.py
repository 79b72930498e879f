"""A compiled core, measured: Themis with its hot modules compiled by mypyc.

    nice .venv/bin/python benchmarks/compiled_core.py [--jobs 10000] [--modules M,M,...]
                                                      [--lease-align S] [--skip-bundled]
                                                      [--skip-jobs] [--comparison [--repeat N]]
                                                      [--keep DIR]

Copies ``src/themis`` twice into a fresh temporary directory: one copy stays pure Python,
the other gets ``--modules`` compiled in place by mypyc (``python -m mypyc``, run in the
copy: no build artefact is written into the repository). Modules that mypyc's errors name
are dropped and the rest compiled again (the skipped ones are listed, with why); a copy
that compiles but fails a smoke test (every registered policy made) stops the benchmark.
Then, in fresh child processes with ``PYTHONPATH`` on each copy (pure first, then compiled,
one after the other so that they share the machine's state of the moment), it runs Themis
on

- ``bundled``: the bundled HyperDrive workload, the default run of ``themis simulate
  --policy themis`` (the command itself, ``themis.cli.main.run``, with ``--out``);
- ``jobs``: ``--jobs`` generated Philly-like jobs on one GPU per 10 jobs, exactly as
  ``targets.py`` and ``scale.py``'s jobs sweep generate them, the run's files written with
  the same code as ``themis simulate --out`` (``run_texts``); ``--lease-align`` as in
  ``targets.py`` (0, the default: decisions as by default);
- ``--comparison``: the bundled comparison of every registered policy (``targets.py``'s
  third target), with the policies' own modules compiled too (``POLICY_MODULES``), each
  policy's CPU seconds and a SHA-256 of its run's files; with ``--repeat N``, N runs of
  it, pure and compiled alternated, each policy's median (the files must not change).

Each child reports the CPU seconds of the simulation (``time.process_time`` around
``simulate``), the rounds, where ``themis`` and the compiled modules were imported from
(the compiled run checks that they are ``.so`` files) and the SHA-256 of the files the run
wrote (``summary.json``, ``apps.csv``, ``allocations.csv``); pure and compiled must be
byte-identical. Prints a table and, last, one JSON line. The machine may be loaded:
compare the ratio within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from targets import GENERATED_RUN

from themis.compiled import CORE_MODULES, POLICY_MODULES

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

#: The modules to compile: the ones the shipped compiled core compiles (``THEMIS_COMPILE=1
#: pip install .``), listed once in ``themis.compiled`` with why the others are left out.
DEFAULT_MODULES = CORE_MODULES
#: The files a run writes (``themis simulate --out``) that must not differ.
RUN_FILES = ("summary.json", "apps.csv", "allocations.csv")

COMMON = """
import hashlib, importlib, json, sys, time
from pathlib import Path
import themis

def report(out, cpu, wall, rounds, modules):
    files = {{name: hashlib.sha256((Path(out) / name).read_bytes()).hexdigest()
              for name in {files!r}}}
    where = {{m: importlib.import_module(m).__file__ for m in modules}}
    print(json.dumps({{"cpu": cpu, "wall": wall, "rounds": rounds, "themis": themis.__file__,
                      "modules": where, "files": files}}))
"""

BUNDLED = (
    COMMON
    + """
import themis.experiments.runner as runner
from themis.cli.main import run
spent = []
simulate = runner.simulate

def timed(*args, **kwargs):
    w, c = time.perf_counter(), time.process_time()
    result = simulate(*args, **kwargs)
    spent.append((time.process_time() - c, time.perf_counter() - w, result.rounds))
    return result

runner.simulate = timed  # the command's own path, the simulation alone timed
code = run(["simulate", "--policy", "themis", "--out", {out!r}, "--quiet"])
if code != 0:
    raise SystemExit(f"themis simulate exited with {{code}}")
[(cpu, wall, rounds)] = spent
report({out!r}, cpu, wall, rounds, {modules!r})
"""
)

JOBS = (
    COMMON
    + GENERATED_RUN
    + """from themis.reports.files import run_texts, write_texts
from themis.reports.record import record_run
record = record_run(result, "themis")
write_texts(Path({out!r}), run_texts(result, record.summary, record.rows))
report({out!r}, cpu, wall, result.rounds, {modules!r})
"""
)

#: Every registered policy on the bundled workload, as ``targets.py``'s bundled comparison
#: (``run.py``'s ``time_simulations``: the default options, the 2x4x8 cluster), each
#: simulation timed alone and its files hashed.
COMPARISON = """
import hashlib, importlib, json, sys, time
import themis
from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy, policy_names
from themis.reports.files import run_texts
from themis.reports.record import record_run
from themis.simulator import simulate
from themis.workload import load_workload
workload = load_workload()
cluster = Cluster.from_spec("2x4x8")
rows = []
for name in policy_names():
    policy = make_policy(name, PolicyOptions())
    c = time.process_time()
    result = simulate(workload, cluster, policy)
    cpu = time.process_time() - c
    record = record_run(result, name)
    texts = run_texts(result, record.summary, record.rows)
    digest = hashlib.sha256("".join(texts[k] for k in sorted(texts)).encode()).hexdigest()
    rows.append([name, cpu, result.rounds, digest])
where = {{m: importlib.import_module(m).__file__ for m in {modules!r}}}
print(json.dumps({{"rows": rows, "themis": themis.__file__, "modules": where}}))
"""


def module_name(name: str) -> str:
    """``src/themis/arbiter/round.py`` or ``themis.arbiter.round`` -> the latter."""
    if name.endswith(".py"):
        return name.removeprefix("src/").removesuffix(".py").replace("/", ".")
    return name


def module_path(name: str) -> str:
    """``themis.arbiter.round`` -> ``themis/arbiter/round.py``."""
    return name.replace(".", "/") + ".py"


def copy_package(root: Path) -> Path:
    root.mkdir(parents=True)
    shutil.copytree(SRC / "themis", root / "themis", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def mypyc(root: Path, files: list[str], log: Path) -> bool:
    """Compile ``files`` (paths relative to ``root``) in place; the log goes to ``log``."""
    done = subprocess.run(
        [sys.executable, "-m", "mypyc", "--ignore-missing-imports", *files],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    log.write_text(done.stdout)
    return done.returncode == 0


#: A line of mypyc's log that blames a module: a type error, or an internal error of mypyc
#: itself (e.g. "themis/policies/gandiva.py:127: AssertionError: "), not a note.
ERROR = re.compile(r"^(themis/\S+)\.py:\d+: (?!note:)(?:error: )?(.*)$")


def build(root: Path, modules: list[str], logs: Path) -> tuple[list[str], dict[str, str]]:
    """Compile the modules in the copy at ``root``; when mypyc rejects some, drop the
    modules its errors name and try again. Returns (compiled, {skipped module: why})."""
    kept, skipped = list(modules), {}
    for attempt in range(len(modules)):
        for stale in root.rglob("*.so"):  # nothing left over from a failed attempt
            stale.unlink()
        log = logs / f"mypyc-{attempt}.log"
        if mypyc(root, [module_path(m) for m in kept], log):
            return kept, skipped
        blamed: dict[str, str] = {}
        for line in log.read_text().splitlines():
            if match := ERROR.match(line):
                blamed.setdefault(match[1].replace("/", "."), match[2])
        blamed = {m: why for m, why in blamed.items() if m in kept}
        if not blamed:
            raise RuntimeError(f"mypyc failed: {log.read_text()[-2000:]}")
        skipped.update(blamed)
        kept = [m for m in kept if m not in blamed]
        if not kept:
            break
    return kept, skipped


SMOKE = """
import json
from themis.policies import PolicyOptions, make_policy, policy_names
for name in policy_names():
    make_policy(name, PolicyOptions())
print(json.dumps({"policies": len(policy_names())}))
"""


def child(root: Path, code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env, cwd=root
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_copies(pure_run: dict, compiled_run: dict, pure: Path, compiled: Path) -> None:
    """Each child ran its own copy of ``themis``, and the compiled one its ``.so`` modules."""
    where = (pure_run["themis"], compiled_run["themis"])
    if not where[0].startswith(str(pure)) or not where[1].startswith(str(compiled)):
        raise RuntimeError(f"themis imported from elsewhere: {where[0]}, {where[1]}")
    not_so = [m for m, f in compiled_run["modules"].items() if not f.endswith(".so")]
    if not_so:
        raise RuntimeError(f"not compiled in the compiled run: {not_so}")


def median_rows(runs: list[dict]) -> dict:
    """One comparison of several runs: each policy's median CPU seconds; its rounds and
    files must be the same in every run (a repeat that decides otherwise is a bug)."""
    first = runs[0]
    for run in runs[1:]:
        if [r[2:] for r in run["rows"]] != [r[2:] for r in first["rows"]]:
            raise RuntimeError("a repeated comparison wrote other files")
    rows = [
        [row[0], statistics.median(run["rows"][k][1] for run in runs), *row[2:]]
        for k, row in enumerate(first["rows"])
    ]
    return {**first, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument(
        "--modules", default=",".join(DEFAULT_MODULES), help="dotted names or paths, by commas"
    )
    parser.add_argument(
        "--lease-align", type=float, default=0.0, help="generated jobs only (targets.py's)"
    )
    parser.add_argument("--skip-bundled", action="store_true")
    parser.add_argument("--skip-jobs", action="store_true")
    parser.add_argument(
        "--comparison",
        action="store_true",
        help="also the bundled comparison of every registered policy (their modules compiled too)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="--comparison: run it this many times, pure and compiled alternated; "
        "each policy's CPU seconds are its median (the machine drifts by 10%%)",
    )
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    args = parser.parse_args(argv)
    modules = [module_name(m.strip()) for m in args.modules.split(",") if m.strip()]
    if args.comparison:
        modules += [m for m in POLICY_MODULES if m not in modules]

    if args.keep is not None:
        work = args.keep
        if work.exists():
            parser.error(f"--keep {work} exists")
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="themis-mypyc-")
        work = Path(tmp.name)
    try:
        pure, compiled, logs = work / "pure", work / "compiled", work / "logs"
        copy_package(pure)
        copy_package(compiled)
        logs.mkdir()
        started = time.perf_counter()
        kept, skipped = build(compiled, modules, logs)
        build_s = time.perf_counter() - started
        print(f"mypyc: {len(kept)} modules compiled in {build_s:.0f} s wall", flush=True)
        for module, why in skipped.items():
            print(f"  skipped {module}: {why}", flush=True)
        try:  # a module may compile and still break at run time: say so, and stop
            child(compiled, SMOKE)
        except RuntimeError as exc:
            last = str(exc).strip().splitlines()[-1]
            print(f"the compiled copy breaks at run time ({last}): drop a module", flush=True)
            return 2

        workloads = []
        if not args.skip_bundled:
            workloads.append(("bundled HyperDrive", BUNDLED, {}))
        if not args.skip_jobs:
            label = f"{args.jobs:,} generated jobs"
            if args.lease_align:
                label += f", lease align {args.lease_align:g} s"
            workloads.append((label, JOBS, {"jobs": args.jobs, "align": args.lease_align}))
        rows = []
        for label, template, extra in workloads:
            runs = {}
            for kind, root in (("pure", pure), ("compiled", compiled)):
                out = work / "out" / f"{label.split()[0]}-{kind}"
                code = template.format(
                    files=RUN_FILES,
                    out=str(out),
                    here=str(HERE),
                    modules=kept if kind == "compiled" else [],
                    **extra,
                )
                runs[kind] = r = child(root, code)
                print(
                    f"{label}, {kind}: {r['cpu']:.2f} s CPU ({r['wall']:.2f} wall), "
                    f"{r['rounds']} rounds",
                    flush=True,
                )
            p, c = runs["pure"], runs["compiled"]
            check_copies(p, c, pure, compiled)
            rows.append(
                {
                    "workload": label,
                    "pure_cpu": p["cpu"],
                    "compiled_cpu": c["cpu"],
                    "ratio": p["cpu"] / c["cpu"],
                    "rounds": [p["rounds"], c["rounds"]],
                    "identical": p["files"] == c["files"] and p["rounds"] == c["rounds"],
                    "sha256": {"pure": p["files"], "compiled": c["files"]},
                }
            )
        if args.comparison:
            repeats: dict[str, list[dict]] = {"pure": [], "compiled": []}
            for _ in range(args.repeat):  # alternated, so both copies share each moment
                for kind, root in (("pure", pure), ("compiled", compiled)):
                    code = COMPARISON.format(modules=kept if kind == "compiled" else [])
                    repeats[kind].append(child(root, code))
            comparison = {kind: median_rows(runs) for kind, runs in repeats.items()}
            check_copies(comparison["pure"], comparison["compiled"], pure, compiled)
            if args.repeat > 1:
                for kind, runs in repeats.items():
                    sums = sorted(sum(r[1] for r in run["rows"]) for run in runs)
                    print(
                        f"all policies, {kind}, {len(sums)} runs: "
                        + ", ".join(f"{x:.2f}" for x in sums)
                        + f" s (median {statistics.median(sums):.2f})",
                        flush=True,
                    )
            print("\n| policy (bundled comparison) | pure CPU s | compiled CPU s | ratio ", end="")
            print("| identical |")
            print("|---|---:|---:|---:|---|")
            totals = [0.0, 0.0]
            for p, c in zip(
                comparison["pure"]["rows"], comparison["compiled"]["rows"], strict=True
            ):
                totals[0] += p[1]
                totals[1] += c[1]
                same = p[2:] == c[2:]
                verdict = "yes" if same else "NO"
                print(f"| {p[0]} | {p[1]:.2f} | {c[1]:.2f} | {p[1] / c[1]:.2f}x | {verdict} |")
                rows.append(
                    {
                        "workload": f"bundled comparison: {p[0]}",
                        "pure_cpu": p[1],
                        "compiled_cpu": c[1],
                        "ratio": p[1] / c[1],
                        "rounds": [p[2], c[2]],
                        "identical": same,
                        "sha256": {"pure": p[3], "compiled": c[3]},
                    }
                )
            print(
                f"| all {len(comparison['pure']['rows'])} | {totals[0]:.2f} | {totals[1]:.2f} "
                f"| {totals[0] / totals[1]:.2f}x | |"
            )
    finally:
        if tmp is not None:
            tmp.cleanup()

    print()
    files = ", ".join(RUN_FILES)
    print(f"| workload | pure CPU s | compiled CPU s | ratio | rounds | identical ({files}) |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row['workload']} | {row['pure_cpu']:.2f} | {row['compiled_cpu']:.2f} "
            f"| {row['ratio']:.2f}x | {row['rounds'][0]:,} "
            f"| {'yes' if row['identical'] else 'NO'} |"
        )
    print(f"compiled: {', '.join(kept)}")
    print(f"skipped: {', '.join(skipped) or 'none'}")
    print(
        json.dumps(
            {
                "compiled": kept,
                "skipped": skipped,
                "build_wall_s": build_s,
                "load": os.getloadavg(),
                "rows": rows,
            }
        )
    )
    return 0 if all(row["identical"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
