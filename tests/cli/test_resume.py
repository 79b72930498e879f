"""``compare`` keeps each finished run and the same command again resumes: a failed run
is named, the others kept, the exit code says it failed, and the rerun runs only it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis.experiments import runner
from themis.policies import PolicyOptions
from themis.reports.files import RECORD_FILE

ARGS = ["--cluster", "1x1x4", "--policies", "themis,las,fifo", "-j", "1", "-q"]


def test_a_failed_run_is_named_the_others_kept_and_the_rerun_runs_it_alone(
    cli, tiny_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = runner.make_policy

    def broken(name: str, options: PolicyOptions):  # type: ignore[no-untyped-def]
        if name == "las":
            raise RuntimeError("injected failure")
        return real(name, options)

    monkeypatch.setattr(runner, "make_policy", broken)
    failed = cli("compare", "--trace", tiny_trace, *ARGS, "--out", tmp_path)
    assert failed.code == 2
    lines = failed.err.splitlines()
    assert lines[0] == "themis: run 'las' failed: RuntimeError: injected failure"
    # Not a ThemisError: a bug, whose traceback is shown, not hidden.
    assert lines[1:3] == ["themis: run 'las':", "Traceback (most recent call last):"]
    assert lines[-2] == "RuntimeError: injected failure"
    assert lines[-1] == (
        "themis: error: 1 of 3 simulations failed, first 'las': RuntimeError: injected failure"
    )
    assert not (tmp_path / "comparison.json").exists()  # no table with a hole
    assert not (tmp_path / "las").exists()
    kept = {p: (tmp_path / p / RECORD_FILE).stat().st_mtime_ns for p in ("themis", "fifo")}
    monkeypatch.setattr(runner, "make_policy", real)
    again = cli("compare", "--trace", tiny_trace, *ARGS, "--out", tmp_path)
    assert again.code == 0, again.err
    assert "reused 2 of 3 runs finished earlier with the same inputs" in again.out
    assert {p: (tmp_path / p / RECORD_FILE).stat().st_mtime_ns for p in kept} == kept
    runs = json.loads((tmp_path / "comparison.json").read_text())["runs"]
    assert [r["policy"] for r in runs] == ["themis", "las", "fifo"]


def test_a_changed_option_reruns_and_the_json_answer_is_unchanged(
    cli, tiny_trace: Path, tmp_path: Path
) -> None:
    base = ["compare", "--trace", tiny_trace, *ARGS, "--out", tmp_path]
    first = cli(*base, "--json")
    assert first.code == 0
    assert cli(*base, "--json").out == first.out  # reused: the same answer, nothing said
    changed = cli(*base, "--lease", "120")
    assert changed.code == 0 and "reused" not in changed.out
