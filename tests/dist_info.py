"""A distribution made importable the way pip would install it, for the plug-in tests: a
``.dist-info`` on ``sys.path`` whose ``entry_points.txt`` declares ``entries`` under
``group`` (``themis.policies``, ``themis.trace_formats``)."""

from __future__ import annotations

from pathlib import Path

import pytest


def install(
    site: Path, name: str, group: str, entries: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = [f"{k} = {v}" for k, v in entries.items()]
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(site))
