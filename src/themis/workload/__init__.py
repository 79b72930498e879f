"""Workload readers: traces in, validated :class:`~themis.model.workload.Workload` out.

Formats (``formats``, a registry of ``plugin.TraceFormatPlugin``): themis's own YAML/JSON,
HyperDrive, Philly, Gavel, Tiresias, Alibaba PAI 2020, Helios, and any format another package
registers under the entry-point group ``themis.trace_formats``; each reader documents its
mapping, and ``docs/traces.md`` collects them. ``generator`` makes synthetic Philly-like workloads,
``writer`` writes the own format, ``summary`` describes a workload.
"""

from themis.workload.formats import TraceFormat, detect_format
from themis.workload.grouping import DEFAULT_APP_GAP
from themis.workload.loader import (
    DEFAULT_APP_INTERVAL,
    ArrivalMode,
    default_arrivals,
    load_workload,
    trace_format,
)
from themis.workload.plugin import TraceFormatPlugin

__all__ = [
    "DEFAULT_APP_GAP",
    "DEFAULT_APP_INTERVAL",
    "ArrivalMode",
    "TraceFormat",
    "TraceFormatPlugin",
    "default_arrivals",
    "detect_format",
    "load_workload",
    "trace_format",
]
