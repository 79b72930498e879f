"""What a trace format is to themis: a name, how to recognise its files, how to read them,
and the names its rows give the fields errors point at.

Every built-in reader declares its format here (``hyperdrive.FORMAT``, ...), and another
package adds one the same way through the entry-point group ``themis.trace_formats``
(``formats.py``). A format recognises files by *claims*: tests of a :class:`Probe` (the
path, and for a file the first few kilobytes of its text), each with a rank. Detection
tries every registered claim by rank, lowest first, and the first that holds names the
format; claims on the path alone come before the file is read (ranks below
``CONTENT``), so a folder or a file named for its format is told without reading it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from themis.workload.records import TraceRead

#: Claims ranked below this look at the path alone; from this rank on, at the content.
CONTENT = 100
#: The rank a plug-in's content claims get unless they choose one: after every built-in
#: claim on a header, before themis's own format's catch-all (a YAML key, ``LAST``).
PLUGIN = 500
LAST = 900


@dataclass(frozen=True)
class Probe:
    """What a claim may look at: the path, its lower-case name and suffix, whether it is a
    folder, and for a file the start of its text (``head``, leading blanks and a BOM
    removed), that text's first line and the comma-separated cells of that line."""

    path: Path
    name: str
    suffix: str
    folder: bool
    head: str = ""
    first: str = ""
    cells: frozenset[str] = frozenset()

    @staticmethod
    def of_path(path: Path) -> Probe:
        name = path.name.lower()
        return Probe(path, name, path.suffix.lower(), path.is_dir())

    def with_head(self, head: str) -> Probe:
        first = head.split("\n", 1)[0]
        cells = frozenset(c.strip().strip('"') for c in first.split(","))
        return Probe(self.path, self.name, self.suffix, self.folder, head, first, cells)


@dataclass(frozen=True)
class Claim:
    """One way a format recognises its files: ``holds(probe)`` at ``rank`` (below
    ``CONTENT``: the path alone). Only claims with ``folder`` set are asked of a folder."""

    rank: int
    holds: Callable[[Probe], bool]
    folder: bool = False


@dataclass(frozen=True)
class TraceFormatPlugin:
    """A trace format. ``read`` turns a file (or a folder, when ``folder``) into trace rows
    (``records.TraceRead``); None only for themis's own format, which the loader reads
    itself (``native.py``: its apps, profiles and GPU types are already themis's).
    ``gang_field`` and ``model_field`` are the format's own names of a job's GPU count and
    model, which errors name; ``arrivals`` how its apps arrive unless told (``trace``: at
    their trace times; ``interval``: in trace order, one every ``--app-interval``);
    ``folder_hint`` completes "is a directory, expected a trace file (or ...)";
    ``throughputs``: whether Gavel's ``--throughputs`` file applies."""

    name: str
    description: str
    gang_field: str
    read: Callable[[Path, str], TraceRead] | None
    claims: tuple[Claim, ...] = ()
    model_field: str | None = None
    arrivals: str = "trace"
    folder: bool = False
    folder_hint: str = ""
    throughputs: bool = False
    #: The module that declared it (set by the registry; for messages about plug-ins).
    origin: str = field(default="", compare=False)

    @property
    def value(self) -> str:
        """The format's name (as ``TraceFormat``'s values are): what notes record."""
        return self.name

    def __str__(self) -> str:
        return self.name
