"""What every foreign-trace reader hands to the assembler: one record per job, plus an
account of every row that is not a job.

A reader's only job is to turn its format into :class:`TraceJob` records, raising a
:class:`~themis.errors.ThemisError` for anything malformed. A well-formed row that cannot
be simulated (a CPU-only job, a job still running when the trace was cut) is not an
error and is not dropped silently either: it is counted in :class:`Exclusions` under a
documented reason, and the count is shown by ``themis trace inspect`` and ``simulate``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Grouping(StrEnum):
    """How a format's jobs become apps (rules in ``themis.workload.grouping``)."""

    KEY = "key"
    SESSION = "session"
    SINGLE = "single"


@dataclass(slots=True)
class TraceJob:
    """One job of a trace, before it is placed in an app.

    ``submit`` is in seconds on the trace's own clock (only differences matter). The
    work is given either as ``seconds`` the job ran on its whole gang (the usual trace
    measurement, turned into iterations with the app's model) or directly as
    ``iterations``. ``group`` is an explicit app key (a HyperDrive experiment); otherwise
    apps are formed by the format's grouping rule from ``user`` (see ``grouping``).
    """

    job_id: str
    submit: float
    gang: int
    seconds: float | None
    iterations: float | None
    model: str | None
    line: int | None
    group: str | None = None
    user: str | None = None

    def work(self, time_per_iteration: float) -> float:
        """Iterations of a model of this ``time_per_iteration``: given, or the recorded
        seconds on the gang at one-machine speed."""
        if self.iterations is not None:
            return self.iterations
        if self.seconds is None:
            raise ValueError(f"job {self.job_id} has neither seconds nor iterations")
        return self.seconds * self.gang / time_per_iteration


@dataclass
class Exclusions:
    """Well-formed rows that are not simulable jobs, by reason, with the first line of each."""

    counts: dict[str, int] = field(default_factory=dict)
    first_line: dict[str, int | None] = field(default_factory=dict)

    def add(self, reason: str, line: int | None) -> None:
        if reason not in self.counts:
            self.counts[reason] = 0
            self.first_line[reason] = line
        self.counts[reason] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self) -> str:
        """``never_started 3 (first: line 7), cpu_only 2 (first: line 2)``."""
        parts = []
        for reason, count in self.counts.items():
            line = self.first_line[reason]
            where = f" (first: line {line})" if line is not None else ""
            parts.append(f"{reason} {count:,}{where}")
        return ", ".join(parts)


@dataclass
class TraceRead:
    """A reader's result: the jobs (streamed), and what it learnt on the way.

    ``jobs`` is an iterator: the file is read while the assembler consumes it, and the
    exclusions and ignored columns are complete only once it is exhausted.
    """

    jobs: Iterator[TraceJob]
    exclusions: Exclusions = field(default_factory=Exclusions)
    #: Columns (keys, for JSON formats) outside the format: ignored, and reported.
    ignored_columns: Sequence[str] = ()
    #: Whether a model name in the trace is in themis's vocabulary (must be a known
    #: profile: HyperDrive's ``model`` column) or a foreign one (Gavel job types,
    #: Tiresias names: matched by normalized name, else assigned per name).
    strict_models: bool = False
    #: How jobs become apps.
    grouping: Grouping = Grouping.KEY
