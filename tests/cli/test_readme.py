"""The README's commands and outputs are the real program's.

Every ``themis`` command of the README's ``bash`` blocks is run as a user would (the
installed script, from a working directory that has the repository's ``examples/``),
except the runtime's, which need a running ``themis serve`` (tests/runtime covers them).
Commands on the bundled trace run on a small HyperDrive trace instead (``--trace``
appended; the Themis policy takes a minute on the whole trace): they check that each
command line is valid and runs, not the numbers. ``text`` blocks that start with
``$ themis ...`` must be exactly what that command prints, the auction input shown must
be the example file, and the Python example runs (on the small trace).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
THEMIS = Path(sys.executable).with_name("themis")
SMALL = ROOT / "tests" / "workload" / "samples" / "hyperdrive.csv"
#: Need a running arbiter (``themis serve``) or the state it wrote: covered by tests/runtime.
SERVER = {"serve", "submit", "status", "logs", "cancel", "replay"}

pytestmark = pytest.mark.skipif(not THEMIS.exists(), reason="themis script not installed")


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)


def commands() -> list[list[str]]:
    out = []
    for block in blocks("bash"):
        for line in block.splitlines():
            if line.startswith("themis "):
                out.append(shlex.split(line, comments=True))
    return out


def runnable(argv: list[str]) -> list[str]:
    """The command as the test runs it: small trace for the bundled one, a small generated
    workload for a generated one, at most two seeds."""
    if argv[1] in ("simulate", "compare") and "--trace" not in argv:
        argv = [*argv, "--trace", str(SMALL), "--cluster", "1x2x4"]
    out = []
    for k, arg in enumerate(argv):
        if arg.startswith("generate:"):
            arg = re.sub(r"jobs=\d+", "jobs=40", arg)
        elif k > 0 and argv[k - 1] == "--seeds" and arg.isdigit():
            arg = str(min(int(arg), 2))
        elif k > 0 and argv[k - 1] == "--seeds":
            arg = ",".join(arg.split(",")[:2])
        out.append(arg)
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A working directory with the repository's examples, as a fresh clone has."""
    path = tmp_path_factory.mktemp("readme")
    (path / "examples").symlink_to(ROOT / "examples")
    write_readme_files(path)
    return path


def write_readme_files(path: Path) -> None:
    """The files the README shows in full for a reader to write (``toml`` blocks whose
    first line names them), written into ``path`` as a reader would."""
    for block in blocks("toml"):
        name = re.match(r"# (\S+\.toml)\n", block)
        if name is not None:
            (path / name.group(1)).write_text(block)


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(THEMIS), *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_readme_has_the_commands_this_test_expects() -> None:
    names = {argv[1] for argv in commands()}
    assert {"simulate", "compare", "auction", "policies", "trace"} <= names
    known = {"simulate", "compare", "auction", "policies", "trace", "experiment"}
    assert names - SERVER - known == set()


def test_no_example_overwrites_the_main_jobs_runs() -> None:
    """The set-up's main job writes its twelve runs to out/compare/; a later example that
    writes there too (compare's default) replaced them."""
    examples = [argv for argv in commands() if argv[1] == "compare"]
    assert examples
    for argv in examples:
        if argv[2:] and argv[2] == "--report" and len(argv) == 4:
            continue  # the main job itself, with its report: the same runs
        out = argv[argv.index("--out") + 1] if "--out" in argv else "out/compare"
        assert out != "out/compare", " ".join(argv)


def test_every_readme_command_that_reads_the_repository_runs(workdir: Path) -> None:
    """The README's commands that read a file of the repository (``examples/``), run here
    with the examples beside them as in a fresh clone. Every other command is run by
    ``tests/test_wheel.py`` from the installed wheel in an empty folder (and only there:
    the same commands of the same code, a stricter place to run them)."""
    failures = []
    reading = [argv for argv in commands() if argv[1] not in SERVER and repository_files(argv)]
    assert {argv[1] for argv in reading} >= {"auction", "trace", "simulate"}
    for argv in reading:
        done = run(runnable(argv), workdir)
        if done.returncode != 0:
            failures.append(f"{shlex.join(argv)}: exit {done.returncode}: {done.stderr[-300:]}")
    assert failures == []


def repository_files(argv: list[str]) -> list[str]:
    """The arguments (or ``KEY=`` values) that name a file or folder of the repository: one
    that exists in this checkout outside what ``.gitignore`` ignores at the top (``out/``
    that earlier commands write, a developer's ``.themis/``)."""
    ignored = {
        line.strip().strip("/")
        for line in (ROOT / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    found = []
    for arg in argv[1:]:
        path = arg.split("=", 1)[-1].rstrip("/")
        if path and path != "." and path.split("/")[0] not in ignored and (ROOT / path).exists():
            found.append(arg)
    return found


def test_output_blocks_are_what_the_commands_print(workdir: Path) -> None:
    shown = [b for b in blocks("text") if b.startswith("$ themis ")]
    assert len(shown) >= 2  # the auction and the Gavel inspect
    for block in shown:
        first, _, expected = block.partition("\n")
        done = run(shlex.split(first[2:]), workdir)
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected, first


def test_the_auction_input_shown_is_the_example_file() -> None:
    [shown] = [b for b in blocks("json") if '"bids"' in b]
    example = (ROOT / "examples" / "auction_2x2.json").read_text()
    assert json.loads(shown) == json.loads(example)


def test_the_python_example_runs() -> None:
    [code] = blocks("python")
    small = code.replace('load_workload("hyperdrive"', f'load_workload("{SMALL}"')
    small = small.replace('"2x4x8"', '"1x2x4"')
    assert small != code
    done = subprocess.run(
        [sys.executable, "-c", small], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) > 0  # max rho


def test_the_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    [command] = [line for line in ci.splitlines() if line.startswith(".venv/bin/pip install")]
    assert command in README
