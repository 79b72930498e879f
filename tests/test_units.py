"""Adaptive units: small runs must not read as "0.0 h" or "0 GPU-hours"."""

from __future__ import annotations

import math

import pytest

from themis.units import duration_text, gpu_hours_text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (59.6, "60 s"), (119, "119 s"), (178, "3.0 min"), (7199, "120.0 min"),
     (7200, "2.0 h"), (3_600_000, "1,000.0 h"), (math.inf, "n/a")],
)  # fmt: skip
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.parametrize(
    ("hours", "text"),
    [(0.0, "0.00"), (0.149, "0.15"), (8.44, "8.4"), (99.9, "99.9"), (19590.2, "19,590")],
)
def test_gpu_hours_text(hours: float, text: str) -> None:
    assert gpu_hours_text(hours) == text
