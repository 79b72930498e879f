"""The trace formats themis reads, and how a file's format is told from its content.

Detection looks at the file name and its first few kilobytes, never at the whole file:

- a directory holding ``pai_job_table.csv``, or a file named ``pai_job_table*`` /
  ``pai_task_table*``: Alibaba PAI 2020;
- ``.yaml``/``.yml``, or text starting with ``{``, or YAML with a top-level ``format:``,
  ``version:`` or ``apps:`` key: themis's own format;
- text starting with ``[``: Philly ``cluster_job_log``;
- ``.trace``, or a first line with tabs: Gavel;
- a CSV header: ``experiment-id`` is HyperDrive, ``num_gpu``/``model_name`` Tiresias,
  ``gpu_num``/``node_num`` Helios, ``job_name``/``inst_id`` PAI.

Anything else is refused with a request for ``--format``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

from themis.errors import ThemisError


class TraceFormat(StrEnum):
    """The trace formats themis reads (``DESCRIPTIONS`` says what each is)."""

    THEMIS = "themis"
    HYPERDRIVE = "hyperdrive"
    PHILLY = "philly"
    GAVEL = "gavel"
    TIRESIAS = "tiresias"
    PAI = "pai"
    HELIOS = "helios"


#: One line per format for help texts and ``inspect``.
DESCRIPTIONS = {
    TraceFormat.THEMIS: "themis workload, YAML or JSON (data/workload.schema.json)",
    TraceFormat.HYPERDRIVE: "the Themis paper's HyperDrive CSV (Philly sweeps)",
    TraceFormat.PHILLY: "Microsoft Philly cluster_job_log (JSON list of jobs)",
    TraceFormat.GAVEL: "Gavel .trace (tab-separated, one job per line)",
    TraceFormat.TIRESIAS: "Tiresias simulator CSV",
    TraceFormat.PAI: "Alibaba PAI 2020 pai_job_table + pai_task_table CSVs",
    TraceFormat.HELIOS: "SenseTime Helios cluster_log.csv",
}

#: The field that holds a job's GPU count, per format, for error messages.
GANG_FIELD = {
    TraceFormat.THEMIS: "gpus",
    TraceFormat.HYPERDRIVE: "num-gpus",
    TraceFormat.PHILLY: "attempts[].detail[].gpus",
    TraceFormat.GAVEL: "scale_factor",
    TraceFormat.TIRESIAS: "num_gpu",
    TraceFormat.PAI: "plan_gpu",
    TraceFormat.HELIOS: "gpu_num",
}


def gang_field(fmt: str | None) -> str:
    """The name a format gives a job's GPU count (``gpus`` for a workload of no format)."""
    try:
        return GANG_FIELD[TraceFormat(fmt)] if fmt is not None else "gpus"
    except ValueError:
        return "gpus"


_YAML_KEY = re.compile(r"^(format|version|apps|profiles)\s*:", re.MULTILINE)


def format_names() -> list[str]:
    return [f.value for f in TraceFormat]


def parse_format(name: str, flag: str = "--format") -> TraceFormat:
    try:
        return TraceFormat(name)
    except ValueError:
        known = ", ".join(format_names())
        raise ThemisError(f"unknown trace format '{name}' (known: {known})", field=flag) from None


def detect_format(path: Path, source: str) -> TraceFormat:
    """The format of ``path`` (see the module docstring); ThemisError when it cannot tell."""
    if path.is_dir():
        if (path / "pai_job_table.csv").exists():
            return TraceFormat.PAI
        raise ThemisError(
            "is a directory, expected a trace file (or a folder with pai_job_table.csv "
            "and pai_task_table.csv)",
            source=source,
        )
    name = path.name.lower()
    if name.startswith(("pai_job_table", "pai_task_table")):
        return TraceFormat.PAI
    if path.suffix.lower() in (".yaml", ".yml"):
        return TraceFormat.THEMIS
    if path.suffix.lower() == ".trace":
        return TraceFormat.GAVEL
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
    head = raw.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if head.startswith("{"):
        return TraceFormat.THEMIS
    if head.startswith("["):
        return TraceFormat.PHILLY
    first = head.split("\n", 1)[0]
    if "\t" in first:
        return TraceFormat.GAVEL
    cells = {c.strip().strip('"') for c in first.split(",")}
    if "experiment-id" in cells:
        return TraceFormat.HYPERDRIVE
    if {"num_gpu", "model_name"} <= cells:
        return TraceFormat.TIRESIAS
    if {"gpu_num", "node_num"} <= cells:
        return TraceFormat.HELIOS
    if {"job_name", "inst_id"} <= cells or {"job_name", "task_name"} <= cells:
        return TraceFormat.PAI
    if _YAML_KEY.search(head):
        return TraceFormat.THEMIS
    known = ", ".join(format_names())
    raise ThemisError(
        f"cannot tell the trace format from its content; pass --format ({known})",
        source=source,
        line=1,
    )
