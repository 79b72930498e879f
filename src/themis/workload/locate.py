"""The line of a value inside a JSON element, found only when an error needs it.

The JSON stream decodes a whole element (a Philly job, a themis app) at once, so it
knows where the element starts but not where each of its values sits. An element's JSON
text is also YAML, so on an error the YAML stream re-reads just that text and reports
the line of every node by path; the line of the offending value (or of its nearest
enclosing value) is then named in the error.
"""

from __future__ import annotations

import io
from typing import Any

from themis.errors import ThemisError


def node_lines(extra: Any, base: int, source: str) -> dict[str, int]:
    """Lines by relative path: ``extra`` is the YAML stream's own map (returned as is) or
    the element's JSON text starting on line ``base``."""
    if isinstance(extra, dict):
        return extra
    from themis.workload.yamlstream import YamlStream

    try:
        _, _, rel = YamlStream(io.BytesIO(str(extra).encode("utf-8")), source).document()
    except ThemisError:
        return {}
    return {path: base + n - 1 for path, n in rel.items()}


def line_of(lines: dict[str, int], path: str, default: int) -> int:
    """The line of ``path``, or of its nearest ancestor that has one."""
    while path:
        if path in lines:
            return lines[path]
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return lines.get("", default)
