"""The shipped compiled core against the pure package, both installed: same files, CPU.

    python3 benchmarks/compiled_wheel.py --pure .venv/bin/python \\
        --compiled .venv-compiled/bin/python [--repeat N] [--skip-themis]

``--pure`` and ``--compiled`` are the interpreters of two environments, one with the pure
package (``pip install .``), one with the compiled wheel (``THEMIS_COMPILE=1 pip wheel
.``, installed). In each, in fresh processes with nothing of this checkout on the path,
pure and compiled alternated ``--repeat`` times (the machine drifts: both share each
moment), it runs the commands a user runs:

- ``themis compare -q -j 1``: every registered policy on the bundled trace, one process;
- ``themis simulate -q --policy themis``: Themis alone (unless ``--skip-themis``).

Each command's CPU seconds are the user + system time of its process tree (imports and
start-up included, as a user pays them); the table shows each side's median. Every
policy's ``apps.csv`` and ``allocations.csv`` must be byte-identical between the two
installs in every run, and ``themis --version`` must say which install is which; exit 1
otherwise (CI runs this with ``--repeat 1`` as the compiled core's check, .ci/run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: The files of each policy's run that must not differ between the installs.
COMPARED = ("apps.csv", "allocations.csv")


def _env() -> dict[str, str]:
    """This environment less what would bring a checkout's code in or change themis."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("THEMIS")}


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def themis(python: str, args: list[str], cwd: Path) -> tuple[float, str]:
    """(CPU seconds of the process tree, stdout) of ``python -m themis ARGS``."""
    before = _cpu_of_children()
    done = subprocess.run(
        [python, "-m", "themis", *args], cwd=cwd, env=_env(), capture_output=True, text=True
    )
    spent = _cpu_of_children() - before
    if done.returncode != 0:
        raise SystemExit(f"{python} -m themis {' '.join(args)} failed: {done.stderr[-2000:]}")
    return spent, done.stdout


def files_of(out: Path) -> dict[str, bytes]:
    """Each policy's compared files, by ``policy/file``."""
    return {
        str(path.relative_to(out)): path.read_bytes()
        for name in COMPARED
        for path in sorted(out.glob(f"*/{name}"))
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pure", required=True, help="the pure install's python")
    parser.add_argument("--compiled", required=True, help="the compiled install's python")
    parser.add_argument("--repeat", type=int, default=1, help="alternated runs of each side")
    parser.add_argument("--skip-themis", action="store_true", help="the comparison only")
    args = parser.parse_args(argv)
    sides = {"pure": os.path.abspath(args.pure), "compiled": os.path.abspath(args.compiled)}
    failures: list[str] = []
    cpu: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="themis-wheels-") as tmp:
        work = Path(tmp)
        for kind, python in sides.items():
            _, version = themis(python, ["--version"], work)
            print(f"{kind}: {version.strip()}", flush=True)
            says_compiled = "compiled core" in version
            if says_compiled != (kind == "compiled") or "not compiled" in version:
                failures.append(f"{kind}: themis --version says {version.strip()!r}")
        reference: dict[str, bytes] | None = None
        for run in range(args.repeat):
            for kind, python in sides.items():
                out = work / f"{kind}-{run}"  # fresh: compare reuses runs found in --out
                spent, _ = themis(python, ["compare", "-q", "-j", "1", "--out", str(out)], work)
                cpu.setdefault(("compare -q -j 1 (12 policies)", kind), []).append(spent)
                files = files_of(out)
                if reference is None:
                    reference = files
                    print(f"{len(files)} files compared per run", flush=True)
                differ = sorted(
                    k for k in reference.keys() | files.keys() if reference.get(k) != files.get(k)
                )
                failures += [f"{kind} run {run}: {name} differs" for name in differ]
                print(f"run {run}, {kind}: compare {spent:.2f} s CPU", flush=True)
                if not args.skip_themis:
                    single = work / f"{kind}-{run}-themis"
                    spent, _ = themis(
                        python, ["simulate", "-q", "--policy", "themis", "--out", str(single)], work
                    )
                    cpu.setdefault(("simulate --policy themis", kind), []).append(spent)
                    print(f"run {run}, {kind}: themis {spent:.2f} s CPU", flush=True)
    commands = list(dict.fromkeys(command for command, _ in cpu))
    print(f"\n| command (CPU s, median of {args.repeat}) | pure | compiled | ratio |")
    print("|---|---:|---:|---:|")
    rows = []
    for command in commands:
        pure = statistics.median(cpu[command, "pure"])
        compiled = statistics.median(cpu[command, "compiled"])
        print(f"| {command} | {pure:.2f} | {compiled:.2f} | {pure / compiled:.2f}x |")
        rows.append(
            {"command": command, "pure": cpu[command, "pure"], "compiled": cpu[command, "compiled"]}
        )
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    print(json.dumps({"rows": rows, "identical": not failures, "load": os.getloadavg()}))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
