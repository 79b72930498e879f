"""Fixtures shared by the auction tests."""

from __future__ import annotations

import pytest

from themis.auction import solver


@pytest.fixture
def milp_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count calls of the HiGHS path, so a test knows which solver actually answered."""
    calls: list[int] = []
    real = solver._milp

    def spy(groups, *args, **kwargs):
        calls.append(len(groups))
        return real(groups, *args, **kwargs)

    monkeypatch.setattr(solver, "_milp", spy)
    return calls
