"""The trace formats themis reads, found through a registry, and how a file's format is
told from its content.

Each format is a :class:`~themis.workload.plugin.TraceFormatPlugin` declared by its reader
(``hyperdrive.FORMAT``, ...), and other packages add theirs through the entry-point group
``themis.trace_formats`` (each entry names its format's plug-in object, e.g. ``mylog =
my_pkg.mylog:FORMAT``). They are loaded on first use, the built-ins first; a plug-in that
fails to load, is not a format or takes a taken name is skipped with one
:class:`FormatPluginWarning` naming the entry point and the error, so one broken package
never takes the built-in formats down. The machinery is ``themis.registry``'s, shared with
the policies.

Detection looks at the file name and its first few kilobytes, never at the whole file:
every registered claim by rank (``plugin.py``), which for the built-ins gives

- a directory holding ``pai_job_table.csv``, or a file named ``pai_job_table*`` /
  ``pai_task_table*``: Alibaba PAI 2020;
- ``.yaml``/``.yml``, or text starting with ``{``, or YAML with a top-level ``format:``,
  ``version:`` or ``apps:`` key (tried last): themis's own format;
- text starting with ``[``: Philly ``cluster_job_log``;
- ``.trace``, or a first line with tabs: Gavel;
- a CSV header: ``experiment-id`` is HyperDrive, ``num_gpu``/``model_name`` Tiresias,
  ``gpu_num``/``node_num`` Helios, ``job_name``/``inst_id`` PAI, ``service``/``num_jobs``/
  ``sleep_time`` PCS.

Anything else is refused with a request for ``--format``.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from themis import registry
from themis.errors import ThemisError
from themis.workload.plugin import CONTENT, Probe, TraceFormatPlugin

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


class TraceFormat(StrEnum):
    """The names of the built-in formats (a plug-in's name is its own)."""

    THEMIS = "themis"
    HYPERDRIVE = "hyperdrive"
    PHILLY = "philly"
    GAVEL = "gavel"
    TIRESIAS = "tiresias"
    PAI = "pai"
    HELIOS = "helios"
    PCS = "pcs"


#: The entry-point group third-party packages register trace formats under.
ENTRY_POINT_GROUP = "themis.trace_formats"
#: The modules declaring the built-in formats (``FORMAT``), in ``TraceFormat``'s order.
_BUILTIN_MODULES = ("native", "hyperdrive", "philly", "gavel", "tiresias", "pai", "helios", "pcs")


class FormatPluginWarning(registry.PluginWarning):
    """A ``themis.trace_formats`` entry point was skipped (its message says which, why)."""


def _load_builtins() -> None:
    for name in _BUILTIN_MODULES:
        module = importlib.import_module(f"themis.workload.{name}")
        FORMATS.register(replace(module.FORMAT, origin=module.__name__))


def _admit(entry: EntryPoint, target: object) -> TraceFormatPlugin:
    """An entry point's format, its origin the entry point's target."""
    if not isinstance(target, TraceFormatPlugin):
        raise registry.Refused(f"is a {type(target).__name__}, not a TraceFormatPlugin")
    if target.name != entry.name:
        raise registry.Refused(f"declares the name '{target.name}', not '{entry.name}'")
    if target.read is None:
        raise registry.Refused("has no reader (read=None is themis's own format only)")
    return replace(target, origin=entry.value)


FORMATS: registry.Registry[TraceFormatPlugin] = registry.Registry(
    "trace format",
    ENTRY_POINT_GROUP,
    name_of=lambda plugin: plugin.name,
    builtin=lambda plugin: plugin.origin.startswith("themis."),
    load_builtins=_load_builtins,
    admit=_admit,
    same=lambda registered, declared: registered.origin == declared.origin,
    warning=FormatPluginWarning,
    short="format",
)


def register_format(plugin: TraceFormatPlugin) -> TraceFormatPlugin:
    """Make ``plugin`` known by its name. A name registered twice is a programming error
    (``ValueError``)."""
    return FORMATS.register(plugin)


def load_format_plugins() -> list[str]:
    """Register the formats of the ``themis.trace_formats`` entry points; returns the names
    registered. A broken entry is skipped with a :class:`FormatPluginWarning`."""
    return FORMATS.load_plugins()


def formats() -> list[TraceFormatPlugin]:
    """Every registered format: the built-ins in ``TraceFormat``'s order, then plug-ins."""
    return FORMATS.plugins()


def format_names() -> list[str]:
    return [f.name for f in formats()]


def parse_format(name: str, flag: str = "--format") -> TraceFormatPlugin:
    """The format called ``name``; a ``ThemisError`` naming ``flag`` when none is."""
    found = FORMATS.get(str(name))
    if found is not None:
        return found
    broken = FORMATS.broken_error(name, flag)
    if broken is not None:
        raise broken
    known = ", ".join(format_names())
    raise ThemisError(f"unknown trace format '{name}' (known: {known})", field=flag)


def gang_field(fmt: str | None) -> str:
    """The name a format gives a job's GPU count (``gpus`` for a workload of no format)."""
    found = FORMATS.get(fmt) if fmt is not None else None
    return found.gang_field if found is not None else "gpus"


def detect_format(path: Path, source: str) -> TraceFormatPlugin:
    """The format of ``path`` (see the module docstring); ThemisError when it cannot tell."""
    ranked = sorted(
        ((claim.rank, order, claim, plugin) for order, plugin in enumerate(formats())
         for claim in plugin.claims),
        key=lambda c: (c[0], c[1]),
    )  # fmt: skip
    probe = Probe.of_path(path)
    if probe.folder:
        for _, _, claim, plugin in ranked:
            if claim.folder and plugin.folder and claim.holds(probe):
                return plugin
        hints = " or ".join(f.folder_hint for f in formats() if f.folder and f.folder_hint)
        raise ThemisError(
            "is a directory, expected a trace file" + (f" (or {hints})" if hints else ""),
            source=source,
        )
    for rank, _, claim, plugin in ranked:
        if rank < CONTENT and not claim.folder and claim.holds(probe):
            return plugin
    try:
        with path.open("rb") as handle:
            raw = handle.read(8192)
    except OSError as exc:
        raise ThemisError(f"cannot read trace: {exc.strerror}", source=source) from None
    if not raw.strip():
        raise ThemisError("empty file: not a trace", source=source, line=1)
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise ThemisError("binary data (a NUL byte), not a trace", source=source, line=line)
    probe = probe.with_head(raw.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n"))
    for rank, _, claim, plugin in ranked:
        if rank >= CONTENT and not claim.folder and claim.holds(probe):
            return plugin
    known = ", ".join(format_names())
    raise ThemisError(
        f"cannot tell the trace format from its content; pass --format ({known})",
        source=source,
        line=1,
    )
