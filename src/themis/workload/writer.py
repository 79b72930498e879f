"""Writer of themis's own workload format, JSON or YAML, streamed app by app.

The output is what the reader reads back to the same workload bit for bit: work is
written as ``iterations`` with Python's shortest round-trip float text, arrivals as
resolved seconds, each app with its model, and the profiles of every model used (so the
file does not depend on the profiles of the machine that reads it). One job per line
keeps error lines meaningful and diffs small.

YAML is written by hand rather than through ``yaml.dump``: every string is a
double-quoted scalar escaped for YAML (not only JSON: YAML folds a raw U+2028 or U+0085
inside quotes and has no raw DEL), and floats always carry a ``.`` so that YAML 1.1
reads ``1.0e-05`` as a number where it would read ``1e-05`` as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TextIO

from themis.model.workload import Workload
from themis.workload.native import FORMAT_TAG, VERSION

_YAML_ESCAPE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _yaml_str(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return _YAML_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _float(value: float) -> str:
    text = repr(float(value))
    mantissa, e, exponent = text.partition("e")
    if e and "." not in mantissa:
        return f"{mantissa}.0e{exponent}"
    return text


def _yaml_value(value: Any) -> str:
    """A value in YAML flow style (for notes and profiles)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _yaml_str(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_yaml_str(str(k))}: {_yaml_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return _yaml_str(str(value))


def _json_value(value: Any) -> str:
    return json.dumps(value, allow_nan=False, default=str)


def _profiles(workload: Workload) -> dict[str, dict[str, Any]]:
    used = sorted({app.model for app in workload.apps})
    gpu_types = workload.notes.get("gpu_types", {})
    out: dict[str, dict[str, Any]] = {}
    for name in used:
        p = workload.profiles[name]
        entry: dict[str, Any] = {
            "time_per_iteration": p.time_per_iteration,
            "cross_machine": p.cross_machine,
            "cross_rack": p.cross_rack,
        }
        if isinstance(gpu_types, Mapping) and name in gpu_types:
            entry["gpu_types"] = dict(gpu_types[name])
        out[name] = entry
    return out


def write_workload(
    workload: Workload, out: TextIO, encoding: str, notes: Mapping[str, Any] | None = None
) -> None:
    """Write ``workload`` to ``out`` as ``json`` or ``yaml``; ``notes`` go to the file's
    free-form ``notes`` (provenance: source format, seed, arrival mode, exclusions)."""
    if encoding == "json":
        _write_json(workload, out, notes or {})
    elif encoding == "yaml":
        _write_yaml(workload, out, notes or {})
    else:
        raise ValueError(f"unknown encoding {encoding!r}")


def _write_json(workload: Workload, out: TextIO, notes: Mapping[str, Any]) -> None:
    out.write("{\n")
    out.write(f'  "format": {_json_value(FORMAT_TAG)},\n  "version": {VERSION},\n')
    out.write(f'  "source": {_json_value(workload.source)},\n')
    out.write(f'  "notes": {_json_value(dict(notes))},\n')
    out.write('  "profiles": {')
    profiles = _profiles(workload)
    for k, (name, entry) in enumerate(profiles.items()):
        out.write(("," if k else "") + f"\n    {_json_value(name)}: {_json_value(entry)}")
    out.write("\n  },\n" if profiles else "},\n")
    out.write('  "apps": [')
    for k, app in enumerate(workload.apps):
        out.write(("," if k else "") + "\n    {")
        out.write(f'"id": {_json_value(app.app_id)}, "arrival": {_float(app.arrival)}, ')
        out.write(f'"model": {_json_value(app.model)}, ')
        if app.owner is not None:
            out.write(f'"owner": {_json_value(app.owner)}, ')
        if app.progress_weight != 1.0:
            out.write(f'"progress_weight": {_float(app.progress_weight)}, ')
        out.write('"jobs": [')
        for j, job in enumerate(app.jobs):
            out.write(("," if j else "") + "\n      ")
            out.write(
                f'{{"id": {_json_value(job.job_id)}, "gpus": {job.gang}, '
                f'"iterations": {_float(job.work)}}}'
            )
        out.write("\n    ]}")
    out.write("\n  ]\n}\n")


def _write_yaml(workload: Workload, out: TextIO, notes: Mapping[str, Any]) -> None:
    out.write("# A themis workload (docs/traces.md; schema: themis/data/workload.schema.json)\n")
    out.write(f"format: {FORMAT_TAG}\nversion: {VERSION}\n")
    out.write(f"source: {_yaml_str(workload.source)}\n")
    out.write(f"notes: {_yaml_value(dict(notes))}\n")
    profiles = _profiles(workload)
    out.write("profiles:\n" if profiles else "profiles: {}\n")
    for name, entry in profiles.items():
        out.write(f"  {_yaml_str(name)}: {_yaml_value(entry)}\n")
    out.write("apps:\n")
    for app in workload.apps:
        out.write(f"  - id: {_yaml_str(app.app_id)}\n    arrival: {_float(app.arrival)}\n")
        out.write(f"    model: {_yaml_str(app.model)}\n")
        if app.owner is not None:
            out.write(f"    owner: {_yaml_str(app.owner)}\n")
        if app.progress_weight != 1.0:
            out.write(f"    progress_weight: {_float(app.progress_weight)}\n")
        out.write("    jobs:\n")
        for job in app.jobs:
            out.write(
                f"      - {{id: {_yaml_str(job.job_id)}, gpus: {job.gang}, "
                f"iterations: {_float(job.work)}}}\n"
            )
