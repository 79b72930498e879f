"""The policies' knobs are declared once (``policies/knobs.py``) and checked once (by
``PolicyOptions``): every command that runs a policy offers the same flags, and a bad
value is refused the same way from each."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import click
import pytest

from tests.cli.conftest import assert_one_line_error
from themis.cli.main import cli
from themis.cli.policy_flags import policy_values
from themis.errors import ThemisError
from themis.policies import PolicyOptions
from themis.policies.knobs import KNOBS, NOT_FLAGS, BadOption
from themis.runtime.loop.options import ServiceOptions

SRC = Path(__file__).resolve().parents[2] / "src" / "themis"


def _flags(path: str) -> set[str]:
    command: click.Command | None = cli
    for name in path.split():
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), name)
    assert command is not None
    return {o for p in command.params if isinstance(p, click.Option) for o in p.opts}


def test_every_policy_option_is_a_knob_or_set_by_the_command() -> None:
    knobs = {knob.field for knob in KNOBS}
    assert knobs.isdisjoint(NOT_FLAGS)
    assert knobs | set(NOT_FLAGS) == {f.name for f in fields(PolicyOptions)}


@pytest.mark.parametrize(
    "command", ["simulate", "compare", "experiment truthfulness", "replay", "serve"]
)
def test_every_command_that_runs_a_policy_offers_every_knob(command: str) -> None:
    offered = _flags(command)
    assert {knob.flag for knob in KNOBS} <= offered
    if command == "serve":  # and what simulate has for a policy besides: its seed
        assert "--seed" in offered and "--batch-window" in offered


def test_each_flag_is_declared_in_one_place() -> None:
    for knob in KNOBS:
        places = [
            path.relative_to(SRC).as_posix()
            for path in SRC.rglob("*.py")
            if re.search(rf"[\"']{re.escape(knob.flag)}[\"'],", path.read_text())
        ]
        assert places == ["policies/knobs.py"], (knob.flag, places)


@pytest.mark.parametrize(
    ("values", "flag", "text"),
    [
        ({"fairness_knob": 1.0}, "--fairness-knob", "must be in [0, 1), got 1.0"),
        ({"fairness_knob": float("nan")}, "--fairness-knob", "must be in [0, 1)"),
        ({"lease": 0.0}, "--lease", "seconds > 0"),
        ({"lease": float("inf")}, "--lease", "seconds > 0"),
        ({"reservation_bound": -1.0}, "--reservation-bound", "seconds >= 0"),
        ({"lease_align": -60.0}, "--lease-align", "seconds >= 0"),
        ({"ranking": "fastest"}, "--ranking", "must be one of verified, verified-avg-n"),
        ({"renewal_share": 1.5}, "--renewal-share", "must be in [0, 1], got 1.5"),
        ({"valuation": "bogus"}, "--valuation", "must be one of paper, remaining"),
        ({"ideal_time": "private"}, "--ideal-time", "must be one of paper, slice"),
        ({"auction_node_limit": -1}, "--auction-node-limit", "nodes >= 0"),
        ({"auction_deadline": 0.0}, "--auction-deadline", "seconds > 0"),
        ({"tiresias_thresholds": (7200.0, 3250.0)}, "--tiresias-queues", "increasing"),
        ({"tiresias_promote_knob": 0.0}, "--tiresias-promote-knob", "> 0"),
        ({"gandiva_slice": 0.0}, "--gandiva-slice", "seconds > 0"),
        ({"gavel_resolve": "never"}, "--gavel-resolve", "simulator, cluster"),
    ],
)
def test_a_bad_value_is_refused_wherever_the_options_are_made(
    values: dict[str, object], flag: str, text: str
) -> None:
    # the library: a ValueError and a ThemisError at once, naming the flag
    with pytest.raises(BadOption) as made:
        PolicyOptions(**values)  # type: ignore[arg-type]
    assert isinstance(made.value, ValueError) and isinstance(made.value, ThemisError)
    assert made.value.field == flag and text in made.value.message
    # the runtime's options, before anything starts
    with pytest.raises(BadOption, match=re.escape(text)):
        ServiceOptions(knobs=PolicyOptions.of(values))


@pytest.mark.parametrize("command", ["simulate", "serve"])
def test_the_command_line_names_the_flag_in_one_line(command: str, tmp_path: Path, cli_run) -> None:
    args = [command, "--renewal-share", "2"]
    if command == "serve":
        args += ["--state-dir", str(tmp_path / "state"), "--init"]
    assert_one_line_error(cli_run(*args), "field '--renewal-share': must be in [0, 1], got 2.0")
    assert not (tmp_path / "state").exists()  # refused before the state was made


def test_command_line_forms_become_the_options_values() -> None:
    values = policy_values({"auction_node_limit": 0, "tiresias_queues": "3600", "lease": 60.0})
    assert values == {"auction_node_limit": None, "tiresias_thresholds": (3600.0,), "lease": 60.0}
    with pytest.raises(BadOption, match="got '7200,3250'"):
        policy_values({"tiresias_queues": "7200,3250"})


@pytest.fixture
def cli_run(cli):
    """The ``cli`` fixture of ``conftest.py``, named apart from the click group."""
    return cli


def test_serve_says_the_renewal_default_it_runs(cli_run) -> None:
    # serve's help says the renewal within the fair share is on once a restart is seen to
    # cost time: the runtime measures restarts and tells the policy (simulate: on when
    # --restart-cost > 0); tests/runtime/test_restart_cost.py shows the service doing it
    from themis.policies import make_policy

    said = " ".join(cli_run("serve", "--help").out.split())  # the help's lines unwrapped
    assert "[default: (on once a restart is measured to cost time)]" in said
    assert "--measure-restart-cost / --fixed-restart-cost" in said
    policy = make_policy("themis", ServiceOptions().knobs)
    assert policy.renews_within_share is False  # type: ignore[attr-defined]
    policy.set_restart_cost(30.0)  # what the simulator, and now the service, tells it
    assert policy.renews_within_share is True  # type: ignore[attr-defined]


def _spelled(tree: ast.AST) -> list[tuple[int, str]]:
    """Every name a module's code spells: identifiers, attributes, keywords, parameters
    and whole string constants (a help text mentioning a flag is prose, not a spelling)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.keyword) and node.arg is not None:
            out.append((node.value.lineno, node.arg))
        elif isinstance(node, ast.arg):
            out.append((node.lineno, node.arg))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    return out


def test_no_knob_is_spelled_in_the_command_line_package() -> None:
    """The command line carries the knobs as one ``PolicyOptions`` and makes their flags
    from the table: no module of ``cli/`` names a knob (field, parameter, recorded key or
    flag), so adding one touches the table, ``PolicyOptions`` and the policy alone."""
    import themis.cli

    names = {n for k in KNOBS for n in (k.field, k.name, k.recorded, k.flag)}
    found = [
        f"{path.name}:{line}: {name}"
        for path in sorted(Path(themis.cli.__file__).parent.glob("*.py"))
        for line, name in _spelled(ast.parse(path.read_text()))
        if name in names
    ]
    assert not found, found
