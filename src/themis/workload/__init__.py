"""Workload readers: traces in, validated :class:`~themis.model.workload.Workload` out."""

from themis.workload.loader import ArrivalMode, load_workload

__all__ = ["ArrivalMode", "load_workload"]
