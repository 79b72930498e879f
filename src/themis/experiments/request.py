"""One simulation to do, as a batch asks for it: apart from the runner
(``runner.py``) that does it, so that the store of finished runs (``saved.py``) can
hash a request without importing the runner that imports the store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themis.mechanism.view import DEFAULT_BATCH_WINDOW
from themis.model.workload import Workload
from themis.policies import PolicyOptions
from themis.reports.files import ALLOCATIONS_FILE, APPS_FILE, SUMMARY_FILE
from themis.simulator.engine import Conditions


@dataclass(frozen=True)
class RunRequest:
    """One simulation to do; ``label`` must be unique within a batch."""

    label: str
    policy: str
    workload: Workload
    cluster: str
    options: PolicyOptions = PolicyOptions()
    batch_window: float = DEFAULT_BATCH_WINDOW
    params: Mapping[str, Any] = field(default_factory=dict)
    #: If set, the run's files (``summary.json``, ``apps.csv``, ``allocations.csv``) are
    #: written there by whichever process ran it, with ``config`` recorded in the summary.
    out_dir: Path | None = None
    config: Mapping[str, Any] | None = None
    #: Estimate error and restart cost (the simulator's, applied to every policy alike).
    conditions: Conditions = Conditions()
    #: The ``themis simulate`` options that reproduce the run, recorded in its summary.
    simulate_options: Mapping[str, Any] | None = None
    #: Which of the run's files go to ``out_dir`` (a sweep of hundreds of runs may keep
    #: only the summaries: one allocations.csv can be megabytes).
    files: tuple[str, ...] = (SUMMARY_FILE, APPS_FILE, ALLOCATIONS_FILE)
