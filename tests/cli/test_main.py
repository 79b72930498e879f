"""The ``themis`` group: version, help, error handling, defaults, ``policies``."""

from __future__ import annotations

import pytest

import themis
from themis.cli import defaults
from themis.cli.main import cli as group
from themis.experiments import runner as runner_module
from themis.policies import PolicyOptions, make_policy, policy_names
from themis.workload.loader import DEFAULT_APP_INTERVAL

from .conftest import assert_one_line_error


def test_version(cli) -> None:
    result = cli("--version")
    assert (result.code, result.out.strip()) == (0, f"themis {themis.__version__}")


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
    }


def test_unknown_command_is_one_line(cli) -> None:
    assert_one_line_error(cli("simulte"), "No such command 'simulte'")


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
    assert options.fairness_knob == defaults.FAIRNESS_KNOB
    assert options.lease == defaults.LEASE_S
    assert options.seed == defaults.SEED
    assert options.gandiva_slice == defaults.GANDIVA_SLICE_S
    assert defaults.APP_INTERVAL_S == DEFAULT_APP_INTERVAL
    assert defaults.POLICY in policy_names()
    assert 0 <= defaults.FAIRNESS_KNOB < 1 and defaults.LEASE_S > 0 and defaults.BATCH_WINDOW_S >= 0


def test_policies_lists_each_with_its_description(cli) -> None:
    result = cli("policies")
    assert result.code == 0
    lines = result.out.splitlines()
    assert [line.split()[0] for line in lines] == policy_names()
    for line, name in zip(lines, policy_names(), strict=True):
        assert make_policy(name).description in line
