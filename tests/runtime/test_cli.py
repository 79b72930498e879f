"""``themis serve`` refusals that come before anything starts: one line, exit 2, nothing
created; and its defaults are the service's."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from tests.runtime.test_api import one_line_error, themis
from themis.runtime.loop.options import RUNTIME_KNOBS


def test_serve_refuses_a_grace_not_shorter_than_the_lease(tmp_path: Path) -> None:
    started = time.monotonic()
    one_line_error(
        themis("serve", "--state-dir", tmp_path / "s", "--init", "--lease", "20", "--grace", "30"),
        "--grace (30s) must be shorter than --lease (20s)",
    )
    assert time.monotonic() - started < 15  # before Ray is even imported
    assert not (tmp_path / "s").exists()


def test_serve_refuses_a_start_timeout_that_is_not_a_positive_number(tmp_path: Path) -> None:
    for bad in ("0", "-5", "nan", "soon"):
        one_line_error(
            themis("serve", "--state-dir", tmp_path / "s", "--init", "--start-timeout", bad),
            "'--start-timeout'",
        )
    assert not (tmp_path / "s").exists()


def test_the_start_deadline_defaults_to_the_lease_and_at_least_a_minute() -> None:
    import pytest

    from themis.errors import ThemisError
    from themis.runtime.loop.service import ServiceOptions

    assert ServiceOptions(knobs=replace(RUNTIME_KNOBS, lease=600.0)).start_deadline == 600.0
    assert (
        ServiceOptions(knobs=replace(RUNTIME_KNOBS, lease=20.0), grace=10.0).start_deadline == 60.0
    )
    assert (
        ServiceOptions(
            knobs=replace(RUNTIME_KNOBS, lease=20.0), grace=10.0, start_timeout=5.0
        ).start_deadline
        == 5.0
    )
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ThemisError, match="--start-timeout must be a positive number"):
            ServiceOptions(start_timeout=bad)


def test_serve_refuses_a_missing_state_without_init_and_creates_nothing(tmp_path: Path) -> None:
    one_line_error(
        themis("serve", "--state-dir", tmp_path / "s"),
        "no state database",
        "themis serve --init",
    )
    assert not (tmp_path / "s").exists()
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "themis.db").write_bytes(b"garbage" * 100)
    one_line_error(themis("serve", "--state-dir", tmp_path / "s"), "not a readable themis database")


def test_serve_refuses_a_bad_listen_address(tmp_path: Path) -> None:
    one_line_error(
        themis("serve", "--state-dir", tmp_path / "s", "--listen", "nowhere"),
        "field '--listen'",
        "expected HOST:PORT",
    )


def test_serve_defaults_are_the_service_defaults() -> None:
    from themis.cli.runtime import serve
    from themis.runtime.loop.service import ServiceOptions

    params = {p.name: p.default for p in serve.params}
    options = ServiceOptions()
    assert params["lease"] == options.lease
    assert params["fairness_knob"] == options.knobs.fairness_knob
    assert params["seed"] == options.knobs.seed
    # every policy knob's flag defaults to what the service gives the policy
    from dataclasses import replace

    from themis.cli.policy_flags import policy_values

    values = policy_values({k: v for k, v in params.items() if k is not None})
    assert replace(options.knobs, **values) == options.knobs
    assert params["batch_window"] == options.batch_window
    assert params["grace"] == options.grace
    assert params["policy"] == options.policy
    assert params["host"] == "127.0.0.1"
    assert params["listen"] == "127.0.0.1:7878"


def test_help_imports_neither_ray_nor_the_web_stack() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from themis.cli.main import run; run(['--help']); "
        "bad = [m for m in ('ray', 'fastapi', 'uvicorn', 'prometheus_client') if m in sys.modules];"
        "assert not bad, bad"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
