"""The runtime commands as a user runs them (``python -m themis.runtime``, the same click
commands the ``themis`` group adds): errors are one line with exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from themis.runtime.store import Store


def themis(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "themis.runtime", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def one_line_error(out: subprocess.CompletedProcess, *fragments: str) -> str:
    assert out.returncode == 2, out
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.timeout(60)
def test_malformed_app_yaml_is_one_line_naming_the_field(tmp_path: Path) -> None:
    bad = app_yaml(tmp_path, "bad", gpus_per_trial=0)
    line = one_line_error(
        themis("submit", bad, "--state-dir", tmp_path / "s"), "field 'gpus_per_trial'", ">= 1"
    )
    assert line.startswith(f"themis: error: {bad}")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nsearch_space: {lr: [1, 2}\n")
    one_line_error(themis("submit", broken, "--state-dir", tmp_path / "s"), "invalid YAML", ":2")
    assert Store(tmp_path / "s").apps() == []  # nothing half-submitted


@pytest.mark.timeout(60)
def test_submit_status_logs_and_cancel_without_an_arbiter(tmp_path: Path) -> None:
    state = tmp_path / "s"
    out = themis(
        "submit",
        app_yaml(tmp_path, "a", trials=3),
        "--state-dir",
        state,
        "--token-file",
        tmp_path / "tok",
    )
    assert out.returncode == 0, out.stderr
    token = out.stdout.splitlines()[1].removeprefix("token: ")
    assert out.stdout.splitlines()[0] == "submitted app 'a' (3 trials)"
    assert (tmp_path / "tok").read_text().strip() == token
    assert (tmp_path / "tok").stat().st_mode & 0o077 == 0
    one_line_error(
        themis("submit", app_yaml(tmp_path, "a"), "--state-dir", state), "field 'name'", "already"
    )
    status = themis("status", "--state-dir", state)
    assert status.returncode == 0
    header, row = status.stdout.splitlines()
    assert header.split() == [
        "app",
        "state",
        "rho",
        "GPUs",
        "leases",
        "alive",
        "stopped",
        "done",
        "failed",
        "steps",
    ]
    assert row.split() == ["a", "submitted", "-", "0", "0", "3", "0", "0", "0", "0/60"]
    # No arbiter answers: the request stays queued and the user is told so, in one line.
    one_line_error(
        themis("cancel", "a", "--state-dir", state, "--wait", "0.3", env={"THEMIS_TOKEN": token}),
        "no answer from the arbiter",
    )
    one_line_error(themis("cancel", "a", "--state-dir", state), "a token is needed")
    one_line_error(themis("logs", "nope", "--state-dir", state), "no app named 'nope'")
    assert themis("logs", "a", "--state-dir", state).stdout == ""


def test_serve_defaults_are_the_service_defaults() -> None:
    from themis.cli.runtime import serve
    from themis.runtime.arbiter_service import ServiceOptions

    params = {p.name: p.default for p in serve.params}
    options = ServiceOptions()
    assert params["lease_s"] == options.lease
    assert params["fairness_knob"] == options.fairness_knob
    assert params["batch_window"] == options.batch_window
    assert params["grace"] == options.grace
    assert params["policy"] == options.policy
    assert params["host"] == "127.0.0.1"
