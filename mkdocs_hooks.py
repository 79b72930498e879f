"""MkDocs hooks for the documentation site (mkdocs.yml, ``hooks:``).

The docstrings are Markdown with a few reStructuredText roles left in them
(``:class:`Cluster```, ``:func:`~themis.x.f```); Markdown renders those as the role's name
followed by code. This hook drops the role and, for a ``~`` target, keeps the last part of
the dotted name, as Sphinx would show it, so the API pages read as the source means.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):<code>(~?)([^<]*)</code>")


def _plain(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **_: Any) -> str:
    """Rewrite the roles in a page's HTML (the API pages are the only ones that have them)."""
    return _ROLE.sub(_plain, html)
