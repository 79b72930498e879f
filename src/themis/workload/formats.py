"""The trace formats themis reads, found through a registry, and how a file's format is
told from its content.

Each format is a :class:`~themis.workload.plugin.TraceFormatPlugin` declared by its reader
(``hyperdrive.FORMAT``, ...), and other packages add theirs through the entry-point group
``themis.trace_formats`` (each entry names its format's plug-in object, e.g. ``mylog =
my_pkg.mylog:FORMAT``). They are loaded on first use, the built-ins first; a plug-in that
fails to load, is not a format or takes a taken name is skipped with one
:class:`FormatPluginWarning` naming the entry point and the error, so one broken package
never takes the built-in formats down.

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
import warnings
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

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

_REGISTRY: dict[str, TraceFormatPlugin] = {}
#: Plug-ins skipped: entry-point name -> (its target "module:attr", what is wrong).
_BROKEN: dict[str, tuple[str, str]] = {}
_loaded = False


class FormatPluginWarning(UserWarning):
    """A ``themis.trace_formats`` entry point was skipped (its message says which, why)."""


def register_format(plugin: TraceFormatPlugin) -> TraceFormatPlugin:
    """Make ``plugin`` known by its name. A name registered twice is a programming error
    (``ValueError``)."""
    if plugin.name in _REGISTRY:
        raise ValueError(f"trace format '{plugin.name}' registered twice")
    _REGISTRY[plugin.name] = plugin
    return plugin


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in _BUILTIN_MODULES:
        module = importlib.import_module(f"themis.workload.{name}")
        register_format(replace(module.FORMAT, origin=module.__name__))
    load_format_plugins()


def load_format_plugins() -> list[str]:
    """Register the formats of the ``themis.trace_formats`` entry points; returns the names
    registered. A broken entry is skipped with a :class:`FormatPluginWarning`."""
    from importlib.metadata import entry_points

    names = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        problem = _register_entry(entry)
        if problem is None:
            names.append(entry.name)
        elif _BROKEN.get(entry.name) != (entry.value, problem):
            _BROKEN[entry.name] = (entry.value, problem)
            warnings.warn(
                f"trace format plugin '{entry.name}' ({entry.value}): {problem}; skipped",
                FormatPluginWarning,
                stacklevel=2,
            )
    return names


def _register_entry(entry: EntryPoint) -> str | None:
    """Register one entry point's format; what is wrong with it, or ``None``."""
    if entry.name in _REGISTRY and _REGISTRY[entry.name].origin.startswith("themis."):
        return "the name of a built-in format"
    if entry.name in _REGISTRY:
        return None  # registered by an earlier call of load_format_plugins
    try:
        target = entry.load()
    except Exception as exc:  # a broken plug-in is the user's to fix, not a themis bug
        return f"cannot load: {type(exc).__name__}: {exc}"
    if not isinstance(target, TraceFormatPlugin):
        return f"is a {type(target).__name__}, not a TraceFormatPlugin"
    if target.name != entry.name:
        return f"declares the name '{target.name}', not '{entry.name}'"
    if target.read is None:
        return "has no reader (read=None is themis's own format only)"
    register_format(replace(target, origin=entry.value))
    return None


def formats() -> list[TraceFormatPlugin]:
    """Every registered format: the built-ins in ``TraceFormat``'s order, then plug-ins."""
    _load()
    return list(_REGISTRY.values())


def format_names() -> list[str]:
    return [f.name for f in formats()]


def parse_format(name: str, flag: str = "--format") -> TraceFormatPlugin:
    """The format called ``name``; a ``ThemisError`` naming ``flag`` when none is."""
    _load()
    found = _REGISTRY.get(str(name))
    if found is not None:
        return found
    if name in _BROKEN:
        target, problem = _BROKEN[name]
        raise ThemisError(f"trace format plugin '{name}' ({target}): {problem}", field=flag)
    known = ", ".join(format_names())
    raise ThemisError(f"unknown trace format '{name}' (known: {known})", field=flag)


def gang_field(fmt: str | None) -> str:
    """The name a format gives a job's GPU count (``gpus`` for a workload of no format)."""
    _load()
    found = _REGISTRY.get(fmt) if fmt is not None else None
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
