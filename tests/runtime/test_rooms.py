"""The runtime's rooms keep to what they are for: the loop is written against the launcher
protocol, so neither it nor the state imports Ray; only the API imports the web stack."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _imported(module: str) -> set[str]:
    code = (
        f"import sys, {module}; "
        "print(' '.join(m for m in ('ray', 'fastapi', 'uvicorn') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


@pytest.mark.parametrize(
    "module",
    [
        "themis.runtime.state.store",
        "themis.runtime.state.replay",
        "themis.runtime.loop.service",
        "themis.runtime.workers.launcher",
    ],
)
def test_the_loop_and_the_state_import_neither_ray_nor_the_web_stack(module: str) -> None:
    assert _imported(module) == set()


def test_the_ray_launcher_is_the_only_room_part_that_imports_ray() -> None:
    assert "ray" in _imported("themis.runtime.workers.jobs")
