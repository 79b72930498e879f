"""Progress bars (rich) on stderr for runs that take longer than a moment.

Bars go to stderr, so stdout stays clean for tables and pipes, and are drawn only on a
terminal: logs and CI output get no control characters.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

QUIET = click.option(
    "--quiet", "-q", is_flag=True, help="No progress bar (it is also off when stderr is not a TTY)."
)


@contextmanager
def progress_bar(show: bool) -> Iterator[Progress]:
    """A live progress display on stderr, drawn only when asked for and stderr is a TTY."""
    console = Console(file=sys.stderr)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (show and console.is_terminal),
    )
    with progress:
        yield progress


class RunsProgress:
    """One bar for the batch (runs done) and one per run in flight (apps finished).

    Its ``__call__`` is the runner's progress callback; a run's bar is removed when its
    last app finishes, so the display stays as tall as the number of workers.
    """

    def __init__(self, progress: Progress, runs: int, what: str = "runs") -> None:
        self.progress = progress
        self.overall = progress.add_task(what, total=runs)
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, label: str, done: int, total: int) -> None:
        task = self.tasks.get(label)
        if task is None:
            task = self.tasks[label] = self.progress.add_task(f"  {label}", total=total)
        self.progress.update(task, completed=done, total=total)
        if done >= total:
            self.progress.remove_task(task)
            self.progress.advance(self.overall)
