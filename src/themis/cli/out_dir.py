"""An output folder holds one run (``simulate``) or one comparison (``compare``), never
pieces of several.

Each run writes a manifest, ``themis-run.json``: the command, its settings and the run
folders it wrote (``.`` for ``simulate``; ``themis``, ``srtf`` or ``seed0/themis`` ... for
``compare``). Writing into a folder that holds an earlier run with other settings or
other runs first removes that run's files (only the files themis writes: per-run
``summary.json``, ``apps.csv``, ``allocations.csv``, and ``comparison.json``; other files
are left alone, and a run folder is removed only once empty) and says so on stderr, so
that ``out/compare/`` never shows one policy's typed-cluster run beside another's default
one. Folders written before the manifest existed are recognised by their
``summary.json`` files. The same command run again replaces its own files, silently.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from themis.errors import ThemisError
from themis.reports.files import (
    ALLOCATIONS_FILE,
    APPS_FILE,
    COMPARISON_FILE,
    RECORD_FILE,
    SUMMARY_FILE,
    ensure_dir,
    write_json,
)

MANIFEST_FILE = "themis-run.json"
#: What one run writes into its folder (the record: ``experiments/saved.py``).
RUN_FILES = (SUMMARY_FILE, APPS_FILE, ALLOCATIONS_FILE, RECORD_FILE)
#: Most changed settings named in the note.
MAX_CHANGES_SHOWN = 3


def claim(out_dir: Path, command: str, settings: Mapping[str, Any], runs: Sequence[str]) -> None:
    """Make ``out_dir`` ready for this run alone: clear an earlier, different run's files
    (with a note on stderr) and record this one's manifest."""
    ensure_dir(out_dir)
    manifest = {"command": command, "settings": _plain(settings), "runs": list(runs)}
    earlier = _earlier(out_dir)
    if earlier is not None and _same(earlier, manifest):
        return
    if earlier is not None:
        removed = _remove(out_dir, earlier.get("runs", []))
        if removed:
            click.echo(
                f"themis: note: {out_dir}/ held an earlier run "
                f"({_difference(earlier, manifest)}); removed its files "
                f"({', '.join(removed)})",
                err=True,
            )
    write_json(out_dir / MANIFEST_FILE, manifest)


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, default=str))


def _same(earlier: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """The same command, settings and run folders (in any order: the folders found on
    disk are listed sorted, the command's own in its policies' order)."""
    return all(earlier.get(k) == manifest[k] for k in ("command", "settings")) and sorted(
        earlier.get("runs") or []
    ) == sorted(manifest["runs"])


def _earlier(out_dir: Path) -> dict[str, Any] | None:
    """The run ``out_dir`` holds: its manifest, or what its files show, or ``None``."""
    path = out_dir / MANIFEST_FILE
    if path.exists():
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = None
        if isinstance(manifest, dict):
            manifest["runs"] = sorted({*manifest.get("runs", []), *_found_runs(out_dir)})
            return manifest
    runs = _found_runs(out_dir)
    if not runs and not (out_dir / COMPARISON_FILE).exists():
        return None
    return {"command": None, "settings": None, "runs": runs}


def _found_runs(out_dir: Path) -> list[str]:
    """Run folders under ``out_dir`` (itself, a child, a grandchild) with a summary."""
    found = []
    for pattern in (SUMMARY_FILE, f"*/{SUMMARY_FILE}", f"*/*/{SUMMARY_FILE}"):
        for path in out_dir.glob(pattern):
            found.append(path.parent.relative_to(out_dir).as_posix())
    return sorted(found)


def _remove(out_dir: Path, runs: Sequence[str]) -> list[str]:
    """Delete the earlier run's files; returns what went, as ``srtf/`` or a file name."""
    removed = []
    try:
        for run in runs:
            folder = (out_dir / run).resolve()
            if out_dir.resolve() not in (folder, *folder.parents):
                continue  # a manifest naming a folder outside: not ours to touch
            gone = False
            for name in RUN_FILES:
                if (folder / name).exists():
                    (folder / name).unlink()
                    gone = True
            if gone:
                removed.append("./" if run == "." else f"{run}/")
            for empty in (folder, folder.parent):
                if empty != out_dir.resolve():
                    with contextlib.suppress(OSError):
                        empty.rmdir()  # only when empty
        if (out_dir / COMPARISON_FILE).exists():
            (out_dir / COMPARISON_FILE).unlink()
            removed.append(COMPARISON_FILE)
    except OSError as exc:
        raise ThemisError(
            f"cannot clear an earlier run: {exc.strerror}", source=str(out_dir), field="--out"
        ) from None
    return removed


def _difference(earlier: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    """What differs, briefly: ``cluster 1x4x8 -> 4x4x4, policies ...``."""
    if earlier.get("command") is None:
        return "written by an older themis or another command"
    if earlier["command"] != manifest["command"]:
        return f"themis {earlier['command']}"
    old, new = earlier.get("settings") or {}, manifest["settings"]
    changes = [
        f"{key} {_text(old.get(key))} -> {_text(new.get(key))}"
        for key in sorted({*old, *new})
        if old.get(key) != new.get(key)
    ]
    if sorted(earlier.get("runs") or []) != sorted(manifest["runs"]):
        changes.append("other runs")
    if len(changes) > MAX_CHANGES_SHOWN:
        changes = [*changes[:MAX_CHANGES_SHOWN], f"{len(changes) - MAX_CHANGES_SHOWN} more"]
    return ", ".join(changes) or "other settings"


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)
