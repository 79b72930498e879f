"""The CLI starts light: ``themis --help`` and one-line errors import none of numpy,
scipy, matplotlib, jsonschema or ray (they cost about a second on a busy 2-core machine;
docs/benchmarks.md has the times). Checked by module, not by the clock, so the test is
deterministic."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from themis.cli.main import LAZY_COMMANDS, cli

HEAVY = ("numpy", "scipy", "matplotlib", "jsonschema", "ray", "pandas")

PROBE = f"""
import json, sys
from themis.cli.main import run
code = run(sys.argv[1:])
heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps([code, heavy]))
"""


def imported(*args: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    return code, heavy


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        (["--version"], 0),
        (["simulate", "--help"], 0),
        (["trace", "inspect", "--help"], 0),
        (["simulate", "--policy", "nope"], 2),
        (["simulate", "--trace", "missing.csv"], 2),
        (["compare", "--policies", "themis,nope"], 2),
        (["compare", "--policies", "themis,nope", "--ray", "auto"], 2),
        (["trace", "inspect", "missing.csv"], 2),
        (["auction", "missing.json"], 2),
        (["experiment", "paper", "--policies", "nope"], 2),
        (["status", "--help"], 0),
        (["simulte"], 2),
    ],
)
def test_help_and_one_line_errors_import_nothing_heavy(args: list[str], code: int) -> None:
    assert imported(*args) == (code, [])


def test_listing_the_policies_imports_no_solver() -> None:
    code, heavy = imported("policies")
    assert code == 0 and heavy == []  # every policy module is imported, its solver is not


def test_the_lazy_table_matches_each_commands_own_help() -> None:
    ctx = cli.make_context("themis", ["--help"], resilient_parsing=True)
    for name, (_, short) in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None
        assert command.get_short_help_str(200) == short, name
    assert sorted(cli.list_commands(ctx)) == sorted(LAZY_COMMANDS)
