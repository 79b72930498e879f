"""The one exception type for mistakes a user can make.

Everything a user can get wrong (a trace row, a flag, an auction file) is raised as
:class:`ThemisError` with a message meant for that user: the CLI prints it on one line
and exits with code 2. Any other exception is a bug in themis and may show a traceback.
"""

from __future__ import annotations


class ThemisError(Exception):
    """A user-facing error: bad input, a bad option, an impossible request."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self.format())

    def format(self) -> str:
        where = []
        if self.source is not None:
            where.append(str(self.source) if self.line is None else f"{self.source}:{self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message
