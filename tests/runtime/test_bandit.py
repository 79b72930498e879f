"""Security lint in CI: bandit finds nothing of medium or high severity in
``src``. A finding is fixed, or justified where it is (``# nosec BXXX`` with the reason
on the line above): today ``yaml.load`` with a SafeLoader subclass (appfile), urlopen on
a URL whose scheme is checked to be http(s) (http_client), and an UPDATE built from
allow-listed column names with bound values (store)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.timeout(300)
def test_bandit_finds_no_medium_or_high_issue() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bandit", "-q", "-r", str(SRC), "-ll", "-f", "txt"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert "No module named bandit" not in done.stderr, "bandit is a test dependency"
    assert done.returncode == 0, done.stdout[-4000:]
