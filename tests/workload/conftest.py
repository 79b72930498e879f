"""Shared helpers of the workload tests: the sample traces, and the CLI with the ``trace``
group attached (the way main.py wires it) so that errors go through ``themis.cli.main.run``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from themis.cli.main import cli as themis_group
from themis.cli.main import run
from themis.cli.trace import trace
from themis.model.profiles import load_profiles

SAMPLES = Path(__file__).parent / "samples"
MALFORMED = Path(__file__).parent / "malformed"
PROFILES = load_profiles()

#: Every sample, by format: what the detection must say and what simulations run on.
SAMPLE_FILES = {
    "hyperdrive": SAMPLES / "hyperdrive.csv",
    "philly": SAMPLES / "philly_cluster_job_log.json",
    "gavel": SAMPLES / "gavel.trace",
    "tiresias": SAMPLES / "tiresias.csv",
    "pai": SAMPLES / "pai",
    "helios": SAMPLES / "helios_cluster_log.csv",
    "themis-yaml": SAMPLES / "themis_workload.yaml",
    "themis-json": SAMPLES / "themis_workload.json",
}


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@pytest.fixture
def themis(capsys, monkeypatch):
    """``themis(*args)`` runs the CLI in-process, with ``trace`` registered as main.py will."""
    monkeypatch.setitem(themis_group.commands, "trace", trace)

    def invoke(*args: object) -> Outcome:
        code = run([str(a) for a in args])
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return invoke


def one_line_error(outcome: Outcome) -> str:
    """The single stderr line of a user error (exit 2, no traceback, nothing on stdout)."""
    assert outcome.code == 2, outcome
    assert "Traceback" not in outcome.err
    lines = outcome.err.splitlines()
    assert len(lines) == 1, outcome.err
    assert lines[0].startswith("themis: error: "), lines[0]
    return lines[0][len("themis: error: ") :]


def workload_key(workload) -> list[tuple]:
    """What a simulation depends on, app by app (lines and sources apart)."""
    return [
        (
            app.app_id,
            app.arrival,
            app.model,
            app.owner,
            app.progress_weight,
            workload.profiles[app.model],
            [(j.job_id, j.gang, j.work) for j in app.jobs],
        )
        for app in workload.apps
    ]
