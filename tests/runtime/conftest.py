"""Fixtures of the runtime tests: app files and state directories."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def app_yaml(directory: Path, name: str, **fields: object) -> Path:
    """Write ``<directory>/<name>.yaml`` for the paced trainer of ``trainers.py``."""
    spec: dict[str, object] = {
        "name": name,
        "entrypoint": "trainers:paced",
        "trials": 2,
        "gpus_per_trial": 1,
        "steps": 20,
        "step_time": 0.1,
        "checkpoint_every": 5,
        "workdir": str(HERE),
        "search_space": {"quality": [1.0]},
    }
    spec.update(fields)
    import yaml

    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def pytest_unconfigure(config) -> None:
    """Say it last, after the counts, when the dashboard's browser tests were skipped
    (no chromium): in a run of the whole suite the skip reasons are easy to miss."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = sum(
        "dashboard browser test: chromium is absent" in str(report.longrepr)
        for report in reporter.stats.get("skipped", [])
    )
    if skipped:
        reporter.write_line(
            f"NOTE: {skipped} browser tests of the dashboard did not run: chromium is absent "
            "(apt-get install -y chromium; .ci/run installs it)",
            yellow=True,
            bold=True,
        )
