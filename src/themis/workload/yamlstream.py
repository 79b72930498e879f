"""Streaming YAML: build one element of a big list at a time from parser events.

``yaml.safe_load`` composes the whole document as a node graph before building any
object, which for a 100,000-job workload costs gigabytes. Here libyaml's event parser
(``CSafeLoader``, reading the file in chunks) drives a small composer that builds plain
Python values one list element at a time, using PyYAML's own safe resolver and scalar
constructors so that values mean exactly what ``safe_load`` would make of them.

Each composed value comes with the line of every node in it (by path, such as
``jobs[2].gpus``), so that a schema error can name its line. Aliases (``*name``) are
refused: a workload has no use for them, and they would let a small file expand without
bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, BinaryIO

import yaml

from themis.errors import ThemisError
from themis.workload.textio import decoded_chunks

_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_SCALARS = {
    tag: build
    for tag, build in yaml.constructor.SafeConstructor.yaml_constructors.items()
    if tag is not None
    and tag.rsplit(":", 1)[-1] in {"null", "bool", "int", "float", "str", "timestamp", "binary"}
}
_STR = "tag:yaml.org,2002:str"
_MAP = {None, "tag:yaml.org,2002:map"}
_SEQ = {None, "tag:yaml.org,2002:seq"}


def _line(event: yaml.Event) -> int:
    """The 1-based line an event starts on (PyYAML always sets the mark when parsing)."""
    mark = event.start_mark
    return mark.line + 1 if mark is not None else 0


class _Unsupported(Exception):
    pass


@lru_cache(maxsize=4096)
def _plain(tag: str | None, value: str, implicit: tuple[bool, bool]) -> Any:
    """The value of a scalar as ``safe_load`` builds it (cached: keys and small numbers
    repeat on every job). Only immutable values come out of the safe scalar tags."""
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, value, implicit)
    build = _SCALARS.get(tag)
    if build is None:
        raise _Unsupported(tag)
    return build(_CONSTRUCTOR, yaml.ScalarNode(tag, value))


class _ChunkReader:
    """A file-like ``read`` over decoded text chunks, for libyaml."""

    def __init__(self, chunks: Iterator[str]) -> None:
        self._chunks = chunks

    def read(self, size: int = -1) -> str:
        return next(self._chunks, "")


@contextmanager
def _prefixed(where: str) -> Iterator[None]:
    """Errors raised inside a value (their field relative to it, ``""`` for the value
    itself) name their field from the document's root."""
    try:
        yield
    except ThemisError as exc:
        if exc.field is None:
            raise
        field = exc.field
        if where:
            field = where + (field if not field or field.startswith("[") else "." + field)
        raise ThemisError(
            exc.message, source=exc.source, line=exc.line, field=field or None
        ) from None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class YamlStream:
    """A cursor over the events of one YAML document read from ``handle``."""

    def __init__(self, handle: BinaryIO, source: str) -> None:
        self.source = source
        # The parser itself, not ``yaml.parse``: one Python call per event fewer.
        self._parser = yaml.CSafeLoader(_ChunkReader(decoded_chunks(handle, source)))  # type: ignore[attr-defined]
        self.line = 1

    def error(self, message: str, line: int | None = None, field: str | None = None):
        return ThemisError(message, source=self.source, line=line or self.line, field=field)

    def _next(self) -> yaml.Event:
        try:
            event = self._parser.get_event()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or exc.context or "malformed"
            raise self.error(f"invalid YAML: {problem}", line=line) from None
        except yaml.YAMLError as exc:
            raise self.error(f"invalid YAML: {exc}") from None
        if event is None:  # the parser is past the end of the stream
            raise self.error("invalid YAML: unexpected end of the file")
        self.line = _line(event)
        return event

    # -- values ------------------------------------------------------------------------

    def _scalar(self, event: yaml.ScalarEvent, path: str) -> Any:
        if event.tag is None and event.style in ('"', "'"):
            return event.value  # a quoted scalar is text
        try:
            return _plain(event.tag, event.value, event.implicit)
        except _Unsupported as exc:
            raise self.error(f"unsupported YAML tag {exc}", field=path) from None
        except (yaml.YAMLError, ValueError) as exc:
            raise self.error(f"invalid YAML value {event.value!r}: {exc}", field=path) from None

    def _compose(self, event: yaml.Event, path: str, lines: dict[str, int]) -> Any:
        lines[path] = _line(event)
        if isinstance(event, yaml.ScalarEvent):
            return self._scalar(event, path)
        if isinstance(event, yaml.AliasEvent):
            raise self.error("YAML aliases (*name) are not supported", field=path)
        if isinstance(event, yaml.SequenceStartEvent):
            if event.tag not in _SEQ:
                raise self.error(f"unsupported YAML tag {event.tag}", field=path)
            items: list[Any] = []
            while not isinstance(nxt := self._next(), yaml.SequenceEndEvent):
                items.append(self._compose(nxt, f"{path}[{len(items)}]", lines))
            return items
        if isinstance(event, yaml.MappingStartEvent):
            if event.tag not in _MAP:
                raise self.error(f"unsupported YAML tag {event.tag}", field=path)
            out: dict[str, Any] = {}
            while not isinstance(nxt := self._next(), yaml.MappingEndEvent):
                key = self._key(nxt, path)
                if key in out:
                    raise self.error(f"duplicate key '{key}'", field=_join(path, key))
                out[key] = self._compose(self._next(), _join(path, key), lines)
            return out
        raise self.error(f"unexpected YAML {type(event).__name__}")

    def _key(self, event: yaml.Event, path: str) -> str:
        if not isinstance(event, yaml.ScalarEvent):
            raise self.error("a key must be plain text", field=path)
        key = self._scalar(event, path)
        if not isinstance(key, str):
            # `1: x` or `true: x`: a key that YAML reads as a number or a boolean.
            raise self.error(f"key {event.value!r} must be text (quote it)", field=path)
        return key

    def value(self, where: str = "") -> tuple[Any, int, dict[str, int]]:
        """The next value: (value, its first line, line of each node by relative path).
        ``where`` (the value's own path) prefixes the field of an error inside it."""
        event = self._next()
        lines: dict[str, int] = {}
        line = _line(event)
        with _prefixed(where):
            return self._compose(event, "", lines), line, lines

    def document(self) -> tuple[Any, int, dict[str, int]]:
        """The whole (single) document as one value, with the line of every node."""
        self._next()  # stream start
        if isinstance(self._next(), yaml.StreamEndEvent):
            raise self.error("empty document", line=1)
        return self.value()

    # -- structure ---------------------------------------------------------------------

    def members(self) -> Iterator[tuple[str, int]]:
        """The keys of the document's top-level mapping: (key, line). The caller reads
        each value (``value()`` or ``items()``) before asking for the next one."""
        self._next()  # stream start
        event = self._next()
        if isinstance(event, yaml.StreamEndEvent):
            raise self.error("empty file: expected a workload", line=1)
        event = self._next()  # the document's root node
        if not isinstance(event, yaml.MappingStartEvent):
            raise self.error("expected a mapping (format:, version:, apps:) at the top level")
        seen: set[str] = set()
        while not isinstance(event := self._next(), yaml.MappingEndEvent):
            with _prefixed(""):
                key = self._key(event, "")
            if key in seen:
                raise self.error(f"duplicate key '{key}'", field=key)
            seen.add(key)
            yield key, self.line
        self._next()  # document end
        if not isinstance(self._next(), yaml.StreamEndEvent):
            raise self.error("more than one YAML document (---) in the file")

    def items(self, where: str = "") -> Iterator[tuple[int, Any, int, dict[str, int]]]:
        """The elements of the list at the cursor: (index, value, line, node lines);
        ``where`` (the list's path) prefixes the field of an error inside an element."""
        event = self._next()
        if not isinstance(event, yaml.SequenceStartEvent):
            raise self.error("expected a list", field=where or None)
        index = 0
        event = self._next()
        while not isinstance(event, yaml.SequenceEndEvent):
            lines: dict[str, int] = {}
            line = _line(event)
            with _prefixed(f"{where}[{index}]"):
                value = self._compose(event, "", lines)
            # Parse on to the next event first: a syntax error just after an element
            # (a key indented wrongly) is what to report, not the element it cut short.
            event = self._next()
            yield index, value, line, lines
            index += 1
