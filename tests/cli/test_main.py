"""The ``themis`` group: version, help, error handling, defaults, ``policies``."""

from __future__ import annotations

import click
import pytest

import themis
from themis.cli import defaults
from themis.cli.main import cli as group
from themis.compiled import MODULES, core_status
from themis.experiments import runner as runner_module
from themis.policies import PolicyOptions, make_policy, policy_names
from themis.workload.loader import DEFAULT_APP_INTERVAL

from .conftest import assert_one_line_error


def test_version_says_whether_the_core_is_compiled(cli) -> None:
    result = cli("--version")
    status = core_status()
    assert (result.code, result.out.strip()) == (
        0,
        f"themis {themis.__version__} ({status.describe()})",
    )
    # This checkout's tests run against the pure install (an editable one) and, in CI,
    # against the compiled wheel (.ci/run): either every listed module or none.
    assert status.describe() in ("pure Python", f"compiled core: {len(MODULES)} modules")


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["simulate", "--help"], ["compare", "-h"]])
def test_help_exits_zero(cli, args) -> None:
    result = cli(*args)
    assert result.code == 0
    assert result.out.startswith("Usage: themis")
    assert result.err == ""


def test_every_command_is_registered() -> None:
    ctx = group.make_context("themis", ["--help"], resilient_parsing=True)
    assert set(group.list_commands(ctx)) == {
        "simulate",
        "compare",
        "replay",
        "auction",
        "policies",
        "experiment",
        "trace",
        "serve",
        "submit",
        "status",
        "cancel",
        "logs",
        "token",
        "state",
    }


def test_unknown_command_is_one_line(cli) -> None:
    assert_one_line_error(cli("simulte"), "No such command 'simulte'")


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["simulte"], "Did you mean 'simulate'?"),  # a command not imported yet
        (["trace", "inspct"], "Did you mean 'inspect'?"),
        (["experiment", "papr"], "Did you mean 'paper'?"),
    ],
)
def test_a_mistyped_command_gets_the_closest_name(cli, args, hint) -> None:
    assert_one_line_error(cli(*args), f"No such command '{args[-1]}'. {hint}")


def test_a_command_nothing_like_any_gets_no_guess(cli) -> None:
    assert "Did you mean" not in assert_one_line_error(cli("xyzzy"), "No such command")


def test_ctrl_c_exits_130(cli, tiny_trace, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner_module, "simulate", interrupted)
    result = cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path / "o")
    assert result.code == 130
    assert "Traceback" not in result.err


def test_a_bug_is_not_hidden(cli, tiny_trace, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise AssertionError("a bug")

    monkeypatch.setattr(runner_module, "simulate", broken)
    with pytest.raises(AssertionError, match="a bug"):
        cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--out", tmp_path / "o")


def test_cli_defaults_agree_with_the_library() -> None:
    options = PolicyOptions()
    assert options.seed == defaults.SEED
    assert defaults.APP_INTERVAL_S == DEFAULT_APP_INTERVAL
    assert defaults.POLICY in policy_names()
    assert defaults.BATCH_WINDOW_S >= 0


def test_policies_lists_each_with_its_description(cli) -> None:
    result = cli("policies")
    assert result.code == 0
    lines = result.out.splitlines()
    assert [line.split()[0] for line in lines] == policy_names()
    for line, name in zip(lines, policy_names(), strict=True):
        assert make_policy(name).description in line


def _groups(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The path of every group under ``command`` (itself included)."""
    if not isinstance(command, click.Group):
        return []
    ctx = click.Context(command)
    found = [path]
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        assert sub is not None
        found += _groups(sub, (*path, name))
    return found


def test_every_group_run_bare_prints_its_help_and_exits_zero(cli) -> None:
    paths = _groups(group)
    assert {(), ("trace",), ("experiment",), ("token",)} <= set(paths)
    for path in paths:
        result = cli(*path)
        assert (result.code, result.err) == (0, ""), (path, result)
        assert result.out.startswith(" ".join(("Usage: themis", *path)) + " "), result.out
        assert "Commands:" in result.out


def test_a_command_with_no_args_is_help_prints_help(cli, monkeypatch) -> None:
    @click.command(no_args_is_help=True)
    @click.argument("thing")
    def needy(thing: str) -> None:
        """Needs a thing."""

    monkeypatch.setitem(group.commands, "needy", needy)
    result = cli("needy")
    assert (result.code, result.err) == (0, "")
    assert result.out.startswith("Usage: themis needy") and "Needs a thing." in result.out
