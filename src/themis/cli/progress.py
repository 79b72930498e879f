"""Progress on stderr for runs that take longer than a moment.

On a terminal: rich bars with counts and the elapsed time. Anywhere else (CI, a log file,
``nohup``): no control characters, but a plain line (done, elapsed) at most every
``THEMIS_PROGRESS_SECONDS`` seconds (default 30) as runs progress, and one at the end, so
a long run in a log is not silent. stdout stays clean for tables and pipes either way.

No time left is shown: nothing known before a run tells its cost. A simulation's cost per
app varies a hundredfold over the run (the bundled trace under Themis: the first quarter
of its apps finished in 1% of the CPU time, the second quarter took 69%), and policies'
runs differ as much (Themis against FIFO), so an estimate from apps or runs done was off
by 2 to 40 times, mostly too hopeful.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO

import click

QUIET = click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="No progress (bars on a terminal, else a plain line at most every 30 s).",
)

#: Seconds between plain progress lines when stderr is not a terminal.
DEFAULT_PLAIN_SECONDS = 30.0
PLAIN_SECONDS_ENV = "THEMIS_PROGRESS_SECONDS"


class ProgressLike(Protocol):
    """What :class:`RunsProgress` needs: rich's ``Progress`` or :class:`PlainProgress`."""

    def add_task(self, description: str, total: float | None = ...) -> Any: ...
    def update(self, task_id: Any, *, completed: float, total: float) -> None: ...
    def remove_task(self, task_id: Any) -> None: ...
    def advance(self, task_id: Any) -> None: ...


def clock_text(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:03``."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class PlainProgress:
    """The subset of rich's ``Progress`` that :class:`RunsProgress` uses, printed as one
    plain line at most every ``interval`` seconds and once when the display closes.

    The first task added is the overall one; the tasks in flight follow it.
    """

    def __init__(
        self,
        stream: TextIO,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.interval = interval
        self.clock = clock
        self.start = clock()
        self.last = self.start
        self.tasks: dict[int, list[Any]] = {}  # id -> [description, completed, total]
        self.next_id = 0

    def add_task(self, description: str, total: float | None = None) -> int:
        task = self.next_id
        self.next_id += 1
        self.tasks[task] = [description.strip(), 0.0, float(total or 0)]
        return task

    def update(self, task_id: int, *, completed: float, total: float) -> None:
        self.tasks[task_id][1:] = [float(completed), float(total)]
        self._maybe_print()

    def advance(self, task_id: int) -> None:
        self.tasks[task_id][1] += 1
        self._maybe_print()

    def remove_task(self, task_id: int) -> None:
        self.tasks.pop(task_id, None)

    def line(self) -> str:
        elapsed = self.clock() - self.start
        name, done, total = self.tasks.get(0, ["progress", 0.0, 0.0])
        text = f"themis: {name} {done:.0f}/{total:.0f}, {clock_text(elapsed)} elapsed"
        running = [f"{d} {c:.0f}/{t:.0f}" for k, (d, c, t) in self.tasks.items() if k != 0]
        if running:
            text += " (" + ", ".join(running) + ")"
        return text

    def _maybe_print(self) -> None:
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            self._print()

    def _print(self) -> None:
        print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if 0 in self.tasks:
            self._print()


def _plain_seconds() -> float:
    try:
        value = float(os.environ.get(PLAIN_SECONDS_ENV, DEFAULT_PLAIN_SECONDS))
    except ValueError:
        return DEFAULT_PLAIN_SECONDS
    return value if value >= 0 else DEFAULT_PLAIN_SECONDS


@contextmanager
def progress_bar(show: bool) -> Iterator[Any]:
    """Bars on a terminal stderr, plain periodic lines elsewhere, nothing when not ``show``."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(file=sys.stderr)
    if show and not console.is_terminal:
        plain = PlainProgress(sys.stderr, _plain_seconds())
        try:
            yield plain
        finally:
            plain.close()
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not show,
    )
    with progress:
        yield progress


class RunsProgress:
    """One bar for the batch (runs done) and one per run in flight (apps finished).

    Its ``__call__`` is the runner's progress callback; a run's bar is removed when its
    last app finishes, so the display stays as tall as the number of workers.
    """

    def __init__(self, progress: ProgressLike, runs: int, what: str = "runs") -> None:
        self.progress = progress
        self.overall = progress.add_task(what, total=runs)
        self.tasks: dict[str, Any] = {}

    def __call__(self, label: str, done: int, total: int) -> None:
        task = self.tasks.get(label)
        if task is None:
            task = self.tasks[label] = self.progress.add_task(f"  {label}", total=total)
        self.progress.update(task, completed=done, total=total)
        if done >= total:
            self.progress.remove_task(task)
            self.progress.advance(self.overall)
