"""What ``simulate``, ``compare`` and ``experiment`` share once their options are read:
turning a policy and a workload into a run request, running a batch with a progress bar
(on this machine or on Ray), reporting failed and reused runs, printing a table.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from themis.cli.progress import RunsProgress, progress_bar
from themis.cli.run_options import RunConfig
from themis.experiments.runner import Engine, Outcome, RunRequest, run_batch
from themis.model.workload import Workload
from themis.reports.record import RunRecord

if TYPE_CHECKING:  # Ray is imported only when --ray is given
    from themis.experiments.ray_engine import RayEngine

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
        config.options,
        config.batch_window_s,
        params={"seed": config.seed},
        out_dir=out_dir,
        config={"policy": policy, **config.to_dict()},
        conditions=config.conditions(),
        simulate_options=options,
    )


@contextmanager
def engine(ray: str | None) -> Iterator[RayEngine | None]:
    """Ray started or joined for the batch (``--ray``), or ``None``: the local pool.
    Checked before anything runs: without Ray installed, a one-line error at once."""
    if ray is None:
        yield None
        return
    from themis.experiments.ray_engine import RayEngine

    with RayEngine(ray) as chosen:
        yield chosen


def run(
    requests: Sequence[RunRequest],
    workers: int | None,
    quiet: bool,
    what: str,
    on: Engine | None = None,
    resume: bool = True,
    note: Callable[[str], None] | None = None,
) -> list[RunRecord]:
    """Every request's record in order. A run found finished with the same inputs is
    reused (said through ``note``); a failed run is named on stderr at once and, once
    the others are done and saved, :class:`RunsFailed` ends the command, after the
    traceback of each failure that is a bug (not a ThemisError), so none is hidden. A
    batch of one run done here (``simulate``) raises the run's own error instead."""
    alone = len(requests) == 1
    with progress_bar(not quiet) as progress:
        batch = run_batch(
            requests,
            workers,
            RunsProgress(progress, len(requests), what),
            on,
            on_failure=None if alone else _report_failure,
            resume=resume,
        )
    if alone and batch.failures and batch.failures[0].exception is not None:
        raise batch.failures[0].exception
    for failure in batch.failures:
        if failure.bug and failure.details:
            print(f"themis: run '{failure.label}':\n{failure.details.rstrip()}", file=sys.stderr)
    if batch.reused and note is not None:
        note(
            f"reused {batch.reused} of {batch.runs} runs finished earlier with the same "
            "inputs (each run folder's themis-record.json)"
        )
    return batch.ordered(requests)


def _report_failure(outcome: Outcome) -> None:
    # sys.stderr, not click: rich's live display prints it above the bars.
    print(f"themis: run '{outcome.label}' failed: {outcome.error}", file=sys.stderr, flush=True)


def table_width() -> int:
    """The width tables are drawn for: the terminal's, or PIPE_WIDTH into a pipe."""
    console = Console(highlight=False)
    return console.width if console.is_terminal else PIPE_WIDTH


def print_table(table: Table) -> None:
    Console(highlight=False, width=table_width()).print(table)
