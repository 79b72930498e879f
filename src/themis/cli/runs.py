"""What ``simulate`` and ``compare`` share once their options are read: turning a policy
and a workload into a run request, running a batch with a progress bar, printing a table.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from themis.cli.progress import RunsProgress, progress_bar
from themis.cli.run_options import RunConfig
from themis.experiments.runner import RunRequest, run_many
from themis.model.workload import Workload
from themis.reports.record import RunRecord

#: Width of tables written to a file or a pipe (rich would assume 80 columns and squeeze).
PIPE_WIDTH = 120


def request(
    policy: str,
    workload: Workload,
    config: RunConfig,
    out_dir: Path,
    label: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> RunRequest:
    """The run of ``policy`` on ``workload`` with ``config``'s knobs and seed, its files
    written to ``out_dir``; ``options``: the ``themis simulate`` options that reproduce
    it, recorded in its ``summary.json`` (``cli/config_file.simulate_options``)."""
    return RunRequest(
        label or policy,
        policy,
        workload,
        config.cluster,
        config.policy_options(),
        config.batch_window_s,
        params={"seed": config.seed},
        out_dir=out_dir,
        config={"policy": policy, **config.to_dict()},
        conditions=config.conditions(),
        simulate_options=options,
    )


def run(requests: list[RunRequest], workers: int | None, quiet: bool, what: str) -> list[RunRecord]:
    with progress_bar(not quiet) as progress:
        return run_many(requests, workers, RunsProgress(progress, len(requests), what))


def print_table(table: Table) -> None:
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    console.print(table)
