"""Reader of themis's own workload format (YAML or JSON; ``data/workload.schema.json``).

The file is streamed: the top-level keys are read in order, and the ``apps`` list one app
at a time, each checked as soon as it is read (``native_check``; the small header keys
against the JSON Schema itself). An error names the file, the line and the JSON path of
the offending value (``apps[3].jobs[0].gpus``).

Models are checked once the whole file is read, because a JSON file may put ``profiles``
after ``apps``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile
from themis.workload.jsonstream import JsonStream
from themis.workload.locate import line_of, node_lines
from themis.workload.native_check import Problem, check_app
from themis.workload.plugin import LAST, Claim, TraceFormatPlugin
from themis.workload.textio import open_binary
from themis.workload.yamlstream import YamlStream

if TYPE_CHECKING:  # jsonschema loads when a header key is checked: not on every start
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

FORMAT_TAG = "themis-workload"
VERSION = 1
SCHEMA_FILE = "workload.schema.json"
_HEADER_KEYS = ("format", "version", "source", "notes", "profiles")


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of the format (bundled package data)."""
    return json.loads(resources.files("themis.data").joinpath(SCHEMA_FILE).read_text())


@cache
def _key_validator(key: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    full = schema()
    return Draft202012Validator({**full["properties"][key], "$defs": full["$defs"]})


@dataclass
class NativeJob:
    job_id: str
    gpus: int
    iterations: float | None
    duration: float | None
    line: int

    def work(self, time_per_iteration: float) -> float:
        """Iterations: given, or ``duration`` on the gang at one-machine speed."""
        if self.iterations is not None:
            return self.iterations
        return (self.duration or 0.0) * self.gpus / time_per_iteration


@dataclass
class NativeApp:
    app_id: str
    arrival: float
    model: str | None
    jobs: list[NativeJob]
    line: int
    index: int
    model_line: int
    owner: str | None = None
    progress_weight: float = 1.0


@dataclass
class NativeRead:
    apps: list[NativeApp]
    profiles: dict[str, ModelProfile]
    gpu_types: dict[str, dict[str, float]]
    source_note: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def encoding_of(path: Path) -> str:
    """``json`` or ``yaml``: by extension, else by the first character (``{`` is JSON)."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    with path.open("rb") as handle:
        head = handle.read(4096).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    return "json" if head.startswith("{") else "yaml"


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_message(error: ValidationError) -> tuple[str, str]:
    """(relative path, message) of a jsonschema error, naming the key it is about."""
    path = _path(error.absolute_path)
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return (f"{path}.{missing[0]}" if path else missing[0]), "missing"
    if error.validator == "additionalProperties":
        allowed = error.schema.get("properties", {})
        extra = [k for k in error.instance if k not in allowed]
        if allowed and extra:
            return (f"{path}.{extra[0]}" if path else extra[0]), (
                f"unknown key (known: {', '.join(allowed)})"
            )
    message = error.message
    return path, message if len(message) <= 160 else message[:157] + "..."


class _Reader:
    def __init__(self, path: Path, source: str) -> None:
        self.source = source
        self.encoding = encoding_of(path)
        self.handle = open_binary(path, source)
        self.stream: JsonStream | YamlStream = (
            JsonStream(self.handle, source)
            if self.encoding == "json"
            else YamlStream(self.handle, source)
        )
        self.header: dict[str, Any] = {}
        self.header_lines: dict[str, int] = {}
        self.apps: list[NativeApp] = []
        self.app_ids: dict[str, int] = {}
        self.job_ids: dict[str, int] = {}

    def fail(self, message: str, line: int | None, field: str | None) -> ThemisError:
        return ThemisError(message, source=self.source, line=line, field=field)

    def read(self) -> NativeRead:
        with self.handle:
            stream = self.stream
            for key, line in stream.members():
                if key == "apps":
                    self._read_apps(line)
                elif key in _HEADER_KEYS:
                    self._read_header_key(key, line)
                else:
                    known = ", ".join(_HEADER_KEYS + ("apps",))
                    raise self.fail(f"unknown key (known: {known})", line, key)
            if isinstance(stream, JsonStream):
                stream.end()
        for key in ("format", "version", "apps"):
            if key not in self.header and not (key == "apps" and self.apps):
                raise self.fail("missing", 1, key)
        profiles, gpu_types = self._profiles()
        return NativeRead(
            self.apps, profiles, gpu_types, self.header.get("source"), self.header.get("notes", {})
        )

    def _read_header_key(self, key: str, line: int) -> None:
        value, line, extra = self.stream.value(key)
        self.header[key] = value
        self.header_lines[key] = line
        from jsonschema.exceptions import best_match

        error = best_match(_key_validator(key).iter_errors(value))
        if error is not None:
            path, message = _schema_message(error)
            if key == "format" and error.validator == "const":
                message = f"expected '{FORMAT_TAG}', got {value!r} (is this a themis workload?)"
            at = self._line_of(self._lines(extra, line), path, line)
            raise self.fail(message, at, f"{key}.{path}" if path else key)

    def _read_apps(self, line: int) -> None:
        if "apps" in self.header:
            raise self.fail("duplicate key", line, "apps")
        self.header["apps"] = True
        count = 0
        for index, raw, app_line, extra in self.stream.items("apps"):
            self._add_app(index, raw, app_line, extra)
            count += 1
        if count == 0:
            raise self.fail("must list at least one app", line, "apps")

    def _lines(self, extra: Any, base: int) -> dict[str, int]:
        return node_lines(extra, base, self.source)

    def _line_of(self, lines: dict[str, int], path: str, default: int) -> int:
        return line_of(lines, path, default)

    def _add_app(self, index: int, raw: Any, line: int, extra: Any) -> None:
        where = f"apps[{index}]"
        try:
            app_id, arrival, model, jobs, owner, weight = check_app(raw)
        except Problem as problem:
            lines = self._lines(extra, line)
            at = self._line_of(lines, problem.path, line)
            raise self.fail(problem.message, at, f"{where}.{problem.path}") from None
        lines = extra if isinstance(extra, dict) else {}
        if app_id in self.app_ids:
            first = self.app_ids[app_id]
            raise self.fail(f"duplicate app id '{app_id}' (first on line {first})", line, where)
        self.app_ids[app_id] = line
        specs = []
        for k, (job_id, gpus, iterations, duration) in enumerate(jobs):
            # Jobs of a JSON app are placed at the app's line (the stream decodes an app
            # as one value); the exact line is looked up only for an error.
            job_line = lines.get(f"jobs[{k}]", line)
            if job_id in self.job_ids:
                exact = self._line_of(self._lines(extra, line), f"jobs[{k}].id", line)
                raise self.fail(
                    f"duplicate job id '{job_id}' (first on line {self.job_ids[job_id]})",
                    exact,
                    f"{where}.jobs[{k}].id",
                )
            self.job_ids[job_id] = job_line
            specs.append(NativeJob(job_id, gpus, iterations, duration, job_line))
        model_line = lines.get("model", line)
        self.apps.append(
            NativeApp(app_id, arrival, model, specs, line, index, model_line, owner, weight)
        )

    def _profiles(self) -> tuple[dict[str, ModelProfile], dict[str, dict[str, float]]]:
        raw = self.header.get("profiles", {})
        profiles = {}
        gpu_types = {}
        for name, entry in raw.items():
            numbers = {k: v for k, v in entry.items() if k != "gpu_types"}
            numbers.update({f"gpu_types.{k}": v for k, v in entry.get("gpu_types", {}).items()})
            for key, value in numbers.items():
                if not math.isfinite(value):
                    line = self.header_lines.get("profiles")
                    raise self.fail(
                        f"must be a finite number, got {value}", line, f"profiles.{name}.{key}"
                    )
            profiles[name] = ModelProfile(
                name,
                float(entry["time_per_iteration"]),
                float(entry["cross_machine"]),
                float(entry["cross_rack"]),
            )
            if "gpu_types" in entry:
                gpu_types[name] = {k: float(v) for k, v in entry["gpu_types"].items()}
        return profiles, gpu_types


def read_native(path: Path, source: str) -> NativeRead:
    """Read and check a themis workload file (see the module docstring)."""
    return _Reader(path, source).read()


_YAML_KEY = re.compile(r"^(format|version|apps|profiles)\s*:", re.MULTILINE)

#: themis's own format, as the registry (``formats.py``) knows it: ``.yaml``/``.yml``, text
#: starting with ``{``, or (when nothing else claimed it) YAML with a top-level
#: ``format:``, ``version:``, ``apps:`` or ``profiles:`` key. The loader reads it itself
#: (``read_native``): no ``read``.
FORMAT = TraceFormatPlugin(
    "themis",
    "themis workload, YAML or JSON (data/workload.schema.json)",
    gang_field="gpus",
    read=None,
    claims=(
        Claim(2, lambda p: p.suffix in (".yaml", ".yml")),
        Claim(100, lambda p: p.head.startswith("{")),
        Claim(LAST, lambda p: _YAML_KEY.search(p.head) is not None),
    ),
)
