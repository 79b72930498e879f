"""A checked, streaming CSV table: the header is matched against the columns a format
needs, and every cell is read through a parser that names the line and the column it
failed on.

The CSV formats (HyperDrive, Tiresias, Helios, PAI) differ only in their columns and in
what a cell means; this module holds what they share, so that a truncated row, a missing
column or a word where a number belongs reads the same in all of them.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from themis.errors import ThemisError
from themis.workload.textio import (
    decoded_lines,
    open_binary,
    parse_int,
    parse_number,
    parse_whole,
    seconds_of_stamp,
)


@dataclass(frozen=True)
class CsvSpec:
    """The columns of a CSV format.

    ``extra``: what an unknown column is: an ``"error"`` (formats we define, where an
    unknown column is a typo) or ``"ignore"`` (public traces, whose variants add columns;
    the ignored names are reported, see :attr:`CsvTable.ignored`). ``headerless``: the
    file may start with data in ``columns`` order (the PAI tables ship their header in a
    separate file).
    """

    columns: tuple[str, ...]
    optional: tuple[str, ...] = ()
    extra: str = "error"
    headerless: bool = False
    delimiter: str = ","
    what: str = "jobs"


class Row:
    """One data row: its line and cells, read by column name."""

    __slots__ = ("line", "_values", "_index", "_source")

    def __init__(self, line: int, values: list[str], index: dict[str, int], source: str) -> None:
        self.line = line
        self._values = values
        self._index = index
        self._source = source

    def has(self, name: str) -> bool:
        return name in self._index

    def cell(self, name: str) -> str:
        return self._values[self._index[name]].strip()

    def fail(self, name: str | None, message: str) -> ThemisError:
        return ThemisError(message, source=self._source, line=self.line, field=name)

    def text(self, name: str) -> str:
        """A cell that must not be empty."""
        value = self.cell(name)
        if not value:
            raise self.fail(name, "empty")
        return value

    def number(self, name: str, *, minimum: float | None = None) -> float:
        """A finite number (>= ``minimum``)."""
        text = self.cell(name)
        try:
            value = parse_number(text)
        except ValueError:
            raise self.fail(name, f"'{text}' is not a number") from None
        if minimum is not None and value < minimum:
            raise self.fail(name, f"must be >= {minimum:g}, got {text}")
        return value

    def number_or_none(self, name: str, *, minimum: float | None = None) -> float | None:
        """Like :meth:`number`, with None for an empty cell (a time not recorded)."""
        return None if self.cell(name) == "" else self.number(name, minimum=minimum)

    def integer(self, name: str, *, minimum: int | None = None, float_ok: bool = False) -> int:
        """A whole number (>= ``minimum``); ``float_ok`` also takes ``8.0``."""
        text = self.cell(name)
        try:
            value = parse_whole(text) if float_ok else parse_int(text)
        except ValueError:
            raise self.fail(name, f"'{text}' is not a whole number") from None
        if minimum is not None and value < minimum:
            raise self.fail(name, f"must be >= {minimum}, got {text}")
        return value

    def stamp(self, name: str) -> float:
        """A ``YYYY-MM-DD HH:MM:SS`` time as seconds (see ``textio.seconds_of_stamp``)."""
        text = self.cell(name)
        try:
            return seconds_of_stamp(text)
        except ValueError:
            raise self.fail(name, f"'{text}' is not YYYY-MM-DD HH:MM:SS") from None

    def stamp_or_none(self, name: str) -> float | None:
        """Like :meth:`stamp`, with None for an empty cell."""
        return None if self.cell(name) == "" else self.stamp(name)


class CsvTable:
    """Open ``path`` and check its header against ``spec``; :meth:`rows` streams the rest."""

    def __init__(self, path: Path, source: str, spec: CsvSpec) -> None:
        self.source = source
        self.spec = spec
        self.ignored: tuple[str, ...] = ()
        self._handle = open_binary(path, source)
        self._reader = csv.reader(
            decoded_lines(self._handle, source),
            skipinitialspace=True,
            delimiter=spec.delimiter,
            strict=True,
        )
        self._first: list[str] | None = None
        try:
            self.header = self._read_header()
        except BaseException:
            self._handle.close()
            raise

    def _next(self) -> list[str] | None:
        start = self._reader.line_num + 1  # a quoted field may run over several lines
        try:
            return next(self._reader, None)
        except csv.Error as exc:
            hint = " (a quote opened here is never closed)" if "end of data" in str(exc) else ""
            raise ThemisError(
                f"malformed CSV: {exc}{hint}", source=self.source, line=start
            ) from None

    def _read_header(self) -> list[str]:
        spec = self.spec
        first = self._next()
        if first is None:
            raise ThemisError(
                "empty file: expected a header " + ",".join(spec.columns),
                source=self.source,
                line=1,
            )
        header = [h.strip() for h in first]
        if spec.headerless and not set(spec.columns) & set(header):
            self._first = first  # data, in the documented column order
            return list(spec.columns)
        missing = [c for c in spec.columns if c not in header]
        if missing:
            raise ThemisError(
                f"missing column(s) {', '.join(missing)} (header: {','.join(header)})",
                source=self.source,
                line=1,
                field=missing[0],
            )
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise ThemisError(
                    f"column '{name}' appears twice", source=self.source, line=1, field=name
                )
            seen.add(name)
        unknown = [h for h in header if h not in spec.columns + spec.optional]
        if unknown and spec.extra == "error":
            raise ThemisError(
                f"unknown column '{unknown[0]}'", source=self.source, line=1, field=unknown[0]
            )
        self.ignored = tuple(unknown)
        return header

    def rows(self) -> Iterator[Row]:
        """Every data row, checked for blankness and field count; the file is closed at
        the end (or on the first error)."""
        header = self.header
        index = {name: i for i, name in enumerate(header)}
        count = 0
        values: list[str] | None
        with self._handle:
            while True:
                if self._first is not None:
                    values, self._first = self._first, None
                else:
                    values = self._next()
                    if values is None:
                        break
                line = self._reader.line_num
                if not values or all(not v.strip() for v in values):
                    raise ThemisError("blank row", source=self.source, line=line)
                if len(values) != len(header):
                    # Name the first column the row does not line up with.
                    missing = (
                        header[len(values)] if len(values) < len(header) else f"after {header[-1]}"
                    )
                    raise ThemisError(
                        f"expected {len(header)} fields, got {len(values)}",
                        source=self.source,
                        line=line,
                        field=missing,
                    )
                count += 1
                yield Row(line, values, index, self.source)
        if count == 0:
            raise ThemisError(
                f"the trace has a header but no {self.spec.what}", source=self.source, line=2
            )
