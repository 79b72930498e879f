"""Tables as GitHub-flavoured Markdown, for ``results.md`` and ``docs/results.md``."""

from __future__ import annotations

from themis.reports.html import Table


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(table: Table) -> str:
    lines = []
    if table.caption:
        lines += [f"*{table.caption}*", ""]
    lines.append("| " + " | ".join(_cell(h) for h in table.header) + " |")
    lines.append("|" + "|".join([" --- "] + [" ---: "] * (len(table.header) - 1)) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)
