"""Numbers for people: durations and GPU-hours in a unit that fits their size.

A trace of three short jobs and the paper's 63-day trace go through the same summaries;
a fixed unit shows the first as "0.0 h" and "0 GPU-hours", which reads as nothing ran.
"""

from __future__ import annotations

import math


def duration_text(seconds: float) -> str:
    """``178 s``, ``12.5 min``, ``3.2 h`` or ``1,234.5 h``: seconds up to 2 minutes,
    minutes up to 2 hours, hours beyond (hours, not days, to compare with the paper)."""
    if not math.isfinite(seconds):
        return "n/a"
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:,.1f} h"


def gpu_hours_text(hours: float) -> str:
    """GPU-hours with as many digits as their size needs: ``19,590``, ``8.4``, ``0.21``."""
    if not math.isfinite(hours):
        return "n/a"
    if abs(hours) >= 100:
        return f"{hours:,.0f}"
    if abs(hours) >= 1:
        return f"{hours:.1f}"
    return f"{hours:.2f}"
