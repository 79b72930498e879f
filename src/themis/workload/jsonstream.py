"""Streaming JSON: decode one element of a big top-level list (or object) at a time.

Philly's ``cluster_job_log`` is one JSON list of 117k jobs (hundreds of MB); ``json.load``
would hold the text and every parsed job at once. Here the file is read in 64 KiB
chunks, and each element is decoded by the standard library's C decoder
(``JSONDecoder.raw_decode``) as soon as it is complete; only the current element and the
unread rest of the chunk are held. An element that is cut at a chunk boundary fails to
decode near the end of the buffer (or inside an unterminated string): more text is read
and the decode retried. Any other decode error is a real one and is reported with its
line. Line numbers are counted as text is consumed.

Why not ``ijson``: elements of the traces we stream are small objects, for which the C
decoder is fast and exact; this keeps the package free of a compiled dependency, and the
line of every element is known for error messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from themis.errors import ThemisError
from themis.workload.textio import decoded_chunks

_WS = re.compile(r"[ \t\n\r]*")
#: Characters that may continue a number the decoder has stopped at.
_NUMBER_TAIL = frozenset("0123456789.eE+-")
#: An error this close to the end of the buffer may be a value cut by the chunk boundary.
_TAIL = 64


class _Constant(Exception):
    """``NaN``/``Infinity``: accepted by Python's decoder, not JSON."""


class _DuplicateKey(Exception):
    pass


def _reject_constant(name: str) -> Any:
    raise _Constant(name)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_pairs)


class JsonStream:
    """A cursor over a JSON text read from ``handle`` in chunks."""

    def __init__(self, handle: BinaryIO, source: str) -> None:
        self.source = source
        self._chunks = decoded_chunks(handle, source)
        self._buf = ""
        self._pos = 0
        self._eof = False
        self.line = 1  # the line of the character at the cursor

    # -- low level -------------------------------------------------------------------

    def _fill(self) -> bool:
        """Read one more chunk (dropping what was consumed); False at the end of the file."""
        if self._eof:
            return False
        if self._pos:
            self._buf = self._buf[self._pos :]
            self._pos = 0
        chunk = next(self._chunks, None)
        if chunk is None:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def _advance(self, end: int) -> None:
        self.line += self._buf.count("\n", self._pos, end)
        self._pos = end

    def error(self, message: str, line: int | None = None, field: str | None = None):
        return ThemisError(message, source=self.source, line=line or self.line, field=field)

    def peek(self) -> str | None:
        """The next character that is not white space, or None at the end of the file."""
        while True:
            match = _WS.match(self._buf, self._pos)
            self._advance(match.end())  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return None

    def take(self, char: str, what: str) -> None:
        found = self.peek()
        if found != char:
            shown = "the end of the file" if found is None else repr(found)
            raise self.error(f"invalid JSON: expected {what}, found {shown}")
        self._advance(self._pos + 1)

    def value(self, where: str = "") -> tuple[Any, int, str]:
        """Decode the next value. Returns (value, its first line, its text). (``where``,
        the value's path, is for the YAML stream's signature: a JSON decode error is
        about the text, not a field.)"""
        if self.peek() is None:
            raise self.error("truncated: the file ends where a value should be")
        line = self.line
        while True:
            try:
                obj, end = _DECODER.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                cut = len(self._buf) - exc.pos < _TAIL or exc.msg.startswith("Unterminated")
                if cut and self._fill():
                    continue
                at = self.line + self._buf.count("\n", self._pos, exc.pos)
                raise self.error(f"invalid JSON: {exc.msg}", line=at) from None
            except _Constant as exc:
                raise self.error(f"invalid JSON: {exc} is not a JSON number", line=line) from None
            except _DuplicateKey as exc:
                raise self.error(f"duplicate key '{exc}'", line=line) from None
            if (end == len(self._buf) or self._buf[end] in _NUMBER_TAIL) and self._fill():
                continue  # a number cut by the chunk boundary ("0" of "0.5") goes on
            text = self._buf[self._pos : end]
            self._advance(end)
            return obj, line, text

    def end(self) -> None:
        """Check that nothing but white space follows the top-level value."""
        found = self.peek()
        if found is not None:
            raise self.error(f"invalid JSON: extra data after the top-level value ({found!r})")

    # -- structure ---------------------------------------------------------------------

    def items(self, where: str = "") -> Iterator[tuple[int, Any, int, str]]:
        """The elements of the list at the cursor: (index, value, line, text); ``where``
        is the list's path."""
        if where and self.peek() != "[":
            raise self.error("must be a list", field=where)
        self.take("[", "'[' (a list)")
        if self.peek() == "]":
            self._advance(self._pos + 1)
            return
        index = 0
        while True:
            obj, line, text = self.value()
            yield index, obj, line, text
            found = self.peek()
            if found == ",":
                self._advance(self._pos + 1)
                index += 1
                continue
            if found == "]":
                self._advance(self._pos + 1)
                return
            if found is None:
                raise self.error(f"truncated: the list ends after element [{index}] without ']'")
            raise self.error(f"invalid JSON: expected ',' or ']' after element [{index}]")

    def members(self) -> Iterator[tuple[str, int]]:
        """The keys of the object at the cursor: (key, line). The caller reads each value
        (``value()`` or ``items()``) before asking for the next one."""
        self.take("{", "'{' (an object)")
        if self.peek() == "}":
            self._advance(self._pos + 1)
            return
        seen: set[str] = set()
        while True:
            if self.peek() != '"':
                raise self.error("invalid JSON: expected a key in double quotes")
            key, line, _ = self.value()
            if key in seen:
                raise self.error(f"duplicate key '{key}'", line=line)
            seen.add(key)
            self.take(":", "':' after a key")
            yield key, line
            found = self.peek()
            if found == ",":
                self._advance(self._pos + 1)
                continue
            if found == "}":
                self._advance(self._pos + 1)
                return
            if found is None:
                raise self.error("truncated: the object ends without '}'")
            raise self.error("invalid JSON: expected ',' or '}' after a value")
