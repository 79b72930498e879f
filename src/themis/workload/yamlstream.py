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


class _ChunkReader:
    """A file-like ``read`` over decoded text chunks, for libyaml."""

    def __init__(self, chunks: Iterator[str]) -> None:
        self._chunks = chunks

    def read(self, size: int = -1) -> str:
        return next(self._chunks, "")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class YamlStream:
    """A cursor over the events of one YAML document read from ``handle``."""

    def __init__(self, handle: BinaryIO, source: str) -> None:
        self.source = source
        self._events = yaml.parse(
            _ChunkReader(decoded_chunks(handle, source)),
            Loader=yaml.CSafeLoader,  # type: ignore[attr-defined]
        )
        self.line = 1

    def error(self, message: str, line: int | None = None, field: str | None = None):
        return ThemisError(message, source=self.source, line=line or self.line, field=field)

    def _next(self) -> yaml.Event:
        try:
            event = next(self._events)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or exc.context or "malformed"
            raise self.error(f"invalid YAML: {problem}", line=line) from None
        except yaml.YAMLError as exc:
            raise self.error(f"invalid YAML: {exc}") from None
        self.line = event.start_mark.line + 1
        return event

    # -- values ------------------------------------------------------------------------

    def _scalar(self, event: yaml.ScalarEvent, path: str) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
        build = _SCALARS.get(tag)
        if build is None:
            raise self.error(f"unsupported YAML tag {tag}", field=path or None)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            return build(_CONSTRUCTOR, node)
        except (yaml.YAMLError, ValueError) as exc:
            raise self.error(f"invalid YAML value {event.value!r}: {exc}", field=path) from None

    def _compose(self, event: yaml.Event, path: str, lines: dict[str, int]) -> Any:
        lines[path] = event.start_mark.line + 1
        if isinstance(event, yaml.ScalarEvent):
            return self._scalar(event, path)
        if isinstance(event, yaml.AliasEvent):
            raise self.error("YAML aliases (*name) are not supported", field=path or None)
        if isinstance(event, yaml.SequenceStartEvent):
            if event.tag not in _SEQ:
                raise self.error(f"unsupported YAML tag {event.tag}", field=path or None)
            items = []
            while not isinstance(nxt := self._next(), yaml.SequenceEndEvent):
                items.append(self._compose(nxt, f"{path}[{len(items)}]", lines))
            return items
        if isinstance(event, yaml.MappingStartEvent):
            if event.tag not in _MAP:
                raise self.error(f"unsupported YAML tag {event.tag}", field=path or None)
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
            raise self.error("a key must be plain text", field=path or None)
        key = self._scalar(event, path)
        if not isinstance(key, str):
            # `1: x` or `true: x`: a key that YAML reads as a number or a boolean.
            raise self.error(f"key {event.value!r} must be text (quote it)", field=path or None)
        return key

    def value(self) -> tuple[Any, int, dict[str, int]]:
        """The next value: (value, its first line, line of each node by relative path)."""
        event = self._next()
        lines: dict[str, int] = {}
        line = event.start_mark.line + 1
        return self._compose(event, "", lines), line, lines

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
            key = self._key(event, "")
            if key in seen:
                raise self.error(f"duplicate key '{key}'", field=key)
            seen.add(key)
            yield key, self.line
        self._next()  # document end
        if not isinstance(self._next(), yaml.StreamEndEvent):
            raise self.error("more than one YAML document (---) in the file")

    def items(self) -> Iterator[tuple[int, Any, int, dict[str, int]]]:
        """The elements of the list at the cursor: (index, value, line, node lines)."""
        event = self._next()
        if not isinstance(event, yaml.SequenceStartEvent):
            raise self.error("expected a list")
        index = 0
        while not isinstance(event := self._next(), yaml.SequenceEndEvent):
            lines: dict[str, int] = {}
            line = event.start_mark.line + 1
            yield index, self._compose(event, "", lines), line, lines
            index += 1
