"""MkDocs hooks for the documentation site (mkdocs.yml, ``hooks:``).

The docstrings are Markdown with a few reStructuredText habits left in them: roles
(``:class:`Cluster```, ``:func:`~themis.x.f```), which Markdown renders as the role's name
followed by code, and ``::`` before an indented example. This hook drops the role (for a
``~`` target it keeps the last part of the dotted name, as Sphinx shows it) and the
second colon, so the API pages read as the source means.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: docs/changelog.md holds this line; the page shows the repository's CHANGELOG.md in its
#: place, so the changelog is written once.
CHANGELOG_MARK = "<!-- CHANGELOG.md -->"
CHANGELOG = Path(__file__).parent / "CHANGELOG.md"

_LITERAL = re.compile(r"::</p>\n(?=<div class=\"(?:language-|highlight))")
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):<code>(~?)([^<]*)</code>")


def _plain(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **_: Any) -> str:
    """Rewrite a page's HTML (only the API pages have docstrings in them)."""
    return _LITERAL.sub(":</p>\n", _ROLE.sub(_plain, html))


def on_page_markdown(markdown: str, **_: Any) -> str:
    """docs/changelog.md: the repository's CHANGELOG.md, its first heading dropped (the
    page has its own)."""
    if CHANGELOG_MARK not in markdown:
        return markdown
    text = CHANGELOG.read_text(encoding="utf-8").split("\n", 1)[1]
    return markdown.replace(CHANGELOG_MARK, text)
