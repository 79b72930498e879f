"""Reading trace text safely: open, decode UTF-8 line by line, name the line of a bad byte.

Every reader goes through here so that a file that is not text (binary garbage, a
latin-1 export, a NUL-filled crash dump) fails the same way: one :class:`ThemisError`
naming the file and the line, never a ``UnicodeDecodeError`` traceback.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from themis.errors import ThemisError

#: ``YYYY-MM-DD HH:MM:SS``, the timestamp of the Philly, HyperDrive and Helios traces.
_STAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")
_EPOCH = datetime(1970, 1, 1)
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")

#: Bytes read at a time by the streaming readers.
CHUNK = 1 << 16


def open_binary(path: Path, source: str) -> BinaryIO:
    try:
        return path.open("rb")
    except OSError as exc:
        raise ThemisError(f"cannot read trace: {exc.strerror}", source=source) from None


def decoded_lines(handle: BinaryIO, source: str) -> Iterator[str]:
    """Decode line by line (streaming), so that a byte that is not UTF-8 is reported on its
    own line; a leading byte-order mark (spreadsheet exports) is dropped."""
    for number, raw in enumerate(handle, start=1):
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise ThemisError(
                f"not UTF-8 text (byte {exc.start + 1} of the line)", source=source, line=number
            ) from None


def decoded_chunks(handle: BinaryIO, source: str) -> Iterator[str]:
    """Decode a file in chunks (for the JSON stream); a bad byte is reported with the line
    it sits on, counted over everything decoded before it."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    lines_before = 1
    while True:
        raw = handle.read(CHUNK)
        try:
            text = decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            good = exc.object[: exc.start].decode("utf-8", errors="replace")
            line = lines_before + good.count("\n")
            raise ThemisError("not UTF-8 text", source=source, line=line) from None
        if text:
            lines_before += text.count("\n")
            yield text
        if not raw:
            return


def seconds_of_stamp(text: str) -> float:
    """Seconds since 1970-01-01 of a ``YYYY-MM-DD HH:MM:SS`` stamp (no time zone: traces
    only ever need differences). Raises ValueError when ``text`` is anything else."""
    if not _STAMP_RE.fullmatch(text):
        raise ValueError(text)
    return (datetime.fromisoformat(text) - _EPOCH).total_seconds()


def parse_number(text: str) -> float:
    """A finite decimal number in ASCII (``12``, ``-0.5``, ``1e3``); ValueError for anything
    else, including what Python's ``float`` would also take (``nan``, ``inf``, ``1_0``)."""
    if not _NUMBER_RE.fullmatch(text):
        raise ValueError(text)
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise ValueError(text)
    return value


def parse_int(text: str) -> int:
    """A whole number written with ASCII digits only (``8``, ``-3``)."""
    if not _INT_RE.fullmatch(text):
        raise ValueError(text)
    return int(text)


def parse_whole(text: str) -> int:
    """A whole number written as ``8`` or ``8.0`` (PAI writes counts as floats)."""
    value = parse_number(text)
    if value != int(value):
        raise ValueError(text)
    return int(value)
