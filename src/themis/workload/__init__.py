"""Workload readers: traces in, validated :class:`~themis.model.workload.Workload` out.

Formats (``formats.TraceFormat``): themis's own YAML/JSON, HyperDrive, Philly, Gavel,
Tiresias, Alibaba PAI 2020, Helios; each reader documents its mapping, and
``docs/traces.md`` collects them. ``generator`` makes synthetic Philly-like workloads,
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

__all__ = [
    "DEFAULT_APP_GAP",
    "DEFAULT_APP_INTERVAL",
    "ArrivalMode",
    "TraceFormat",
    "default_arrivals",
    "detect_format",
    "load_workload",
    "trace_format",
]
