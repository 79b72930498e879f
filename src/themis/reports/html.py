"""A self-contained ``report.html``: tables and PNG figures inlined as data URIs.

One file with nothing beside it can be mailed, attached to an issue or opened from a CI
artifact, and still shows every figure; no template engine is needed for a page this
plain, and every value is escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from themis.reports.files import ensure_dir
from themis.reports.metrics import RunSummary
from themis.reports.tables import ROWS

REPORT_FILE = "report.html"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1000px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f3f3f3; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; }
.meta { color: #555; font-size: 0.9em; } code { background: #f5f5f5; padding: 0 0.2em; }
"""


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    png: bytes
    caption: str


@dataclass
class Section:
    title: str
    text: str = ""
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


def summary_rows_table(
    summaries: Sequence[RunSummary], caption: str = "", labels: Sequence[str] | None = None
) -> Table:
    """The terminal table's metrics, one column per run (headed by ``labels``, default the
    policies): the same labels and formatting."""
    header = ["metric", *(labels if labels is not None else [s.policy for s in summaries])]
    rows = [[label, *(show(s) for s in summaries)] for label, show in ROWS]
    return Table(header, rows, caption)


def _table(table: Table) -> str:
    e = html.escape
    parts = ["<table>"]
    if table.caption:
        parts.append(f"<caption>{e(table.caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in table.header) + "</tr>")
    parts.append("</thead><tbody>")
    for row in table.rows:
        parts.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    caption = html.escape(figure.caption)
    return (
        f'<figure><img alt="{caption}" src="data:image/png;base64,{data}">'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def render(title: str, meta: Sequence[str], sections: Sequence[Section]) -> str:
    e = html.escape
    body = [f"<h1>{e(title)}</h1>"]
    body.extend(f'<p class="meta">{e(line)}</p>' for line in meta)
    for section in sections:
        body.append(f"<h2>{e(section.title)}</h2>")
        if section.text:
            body.extend(f"<p>{e(p)}</p>" for p in section.text.split("\n\n"))
        body.extend(_table(t) for t in section.tables)
        body.extend(_figure(f) for f in section.figures)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)}</title><style>{_STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_report(
    out_dir: Path, title: str, meta: Sequence[str], sections: Sequence[Section]
) -> Path:
    """Write ``out_dir/report.html`` (created if missing) and return its path."""
    ensure_dir(out_dir)
    path = out_dir / REPORT_FILE
    path.write_text(render(title, meta, sections), encoding="utf-8")
    return path
