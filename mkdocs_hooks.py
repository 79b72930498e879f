"""MkDocs hooks for the documentation site (mkdocs.yml, ``hooks:``).

The docstrings are Markdown with a few reStructuredText habits left in them: roles
(``:class:`Cluster```, ``:func:`~themis.x.f```), which Markdown renders as the role's name
followed by code, and ``::`` before an indented example. This hook drops the role (for a
``~`` target it keeps the last part of the dotted name, as Sphinx shows it) and the
second colon, so the API pages read as the source means.
"""

from __future__ import annotations

import re
from typing import Any

_LITERAL = re.compile(r"::</p>\n(?=<div class=\"(?:language-|highlight))")
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):<code>(~?)([^<]*)</code>")


def _plain(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **_: Any) -> str:
    """Rewrite a page's HTML (only the API pages have docstrings in them)."""
    return _LITERAL.sub(":</p>\n", _ROLE.sub(_plain, html))
