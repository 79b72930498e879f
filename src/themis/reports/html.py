"""A self-contained ``report.html``: tables, and SVG figures inlined in the page.

One file with nothing beside it can be mailed, attached to an issue or opened from a CI
artifact, and still shows every figure; inline SVG is crisp at any zoom and its text is
found by the browser's search. No template engine is needed for a page this plain, and
every value is escaped. Tables marked sortable sort on a click on their header, by a few
lines of inline script (numbers as numbers); without script they stay in the order
written (worst first).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from themis.reports.files import ensure_dir
from themis.reports.metrics import RunSummary
from themis.reports.tables import ROWS

REPORT_FILE = "report.html"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1280px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f3f3f3; }
figure { margin: 1.5em 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; display: block; }
figcaption { font-size: 0.9em; color: #555; }
table.text td, table.text th { text-align: left; }
table.sortable th { cursor: pointer; } table.sortable th:hover { background: #e6e6e6; }
details { margin: 0.5em 0 1em; } summary { cursor: pointer; color: #244; }
.meta { color: #555; font-size: 0.9em; } code { background: #f5f5f5; padding: 0 0.2em; }
.nw { white-space: nowrap; } .scroll { overflow-x: auto; }
table:not(.text) td { white-space: nowrap; }
nav.toc { font-size: 0.92em; } nav.toc ol { margin: 0.3em 0; padding-left: 1.4em; }
"""

#: A range of numbers in a cell ("0.77-4.63", "12%-40%"): kept on one line, since a
#: browser would break it after the hyphen and read as two numbers.
_RANGE = re.compile(r"(?<![\w.])(-?[0-9][0-9,.]*[a-z%]*-[0-9][0-9,.]*[a-z%]*)(?![\w.])")

#: Sorts a ``table.sortable`` by the clicked column (again: the other way). A column whose
#: cells all read as numbers ("1,234", "0.82", "3.5 h", "12%") sorts numerically.
_SCRIPT = r"""
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.title = "sort";
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var num = /^-?[0-9][0-9,]*(\.[0-9]+)?(e[-+]?[0-9]+)?( ?[a-z%]+)?$/i;
      var text = function (r) { return r.cells[col].textContent.trim(); };
      var numeric = rows.every(function (r) { return num.test(text(r)); });
      var dir = th.dataset.dir === "desc" ? 1 : -1;
      th.dataset.dir = dir === 1 ? "asc" : "desc";
      rows.sort(function (a, b) {
        if (numeric) {
          return dir * (parseFloat(text(a).replace(/,/g, "")) -
                        parseFloat(text(b).replace(/,/g, "")));
        }
        return dir * text(a).localeCompare(text(b));
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""
    #: Sort on a click on a header (per-app tables).
    sortable: bool = False
    #: If set, the table is folded under this summary line (long per-app tables).
    folded: str = ""
    #: Numbers are right-aligned; a table of text (the configuration) reads left-aligned.
    text: bool = False


@dataclass(frozen=True)
class Figure:
    """An inline ``<svg>`` element (``plots.to_svg``) and its caption."""

    svg: str
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


def config_table(config: Mapping[str, Any], caption: str = "Configuration") -> Table:
    """A run's settings as a two-column table, as a user writes them on the command line:
    ``lease_s`` as ``--lease``, ``600.0`` as ``600``, ``False`` as ``off``, a list as
    ``0,1,2``, ``None`` as ``default``."""
    from themis.policies.registry import knobs

    flags = {knob.recorded: knob.flag for knob in knobs()}
    rows = [[option_name(str(k), flags), option_text(v)] for k, v in config.items()]
    return Table(["option", "value"], rows, caption, text=True)


def option_name(key: str, flags: Mapping[str, str]) -> str:
    """The flag a setting of ``RunConfig.to_dict`` comes from: a knob's from the knob
    table (``flags``, by recorded key: ``lease_s`` -> ``--lease``), the run's own
    settings by their rule, seconds recorded with ``_s`` (``batch_window_s`` ->
    ``--batch-window``)."""
    if key in flags:
        return flags[key]
    return "--" + key.removesuffix("_s").replace("_", "-")


def option_text(value: Any) -> str:
    """A setting's value as typed on the command line."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}" if value == value and abs(value) < 1e15 else str(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={option_text(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ",".join(option_text(v) for v in value) or "none"
    return str(value)


def provenance(command: str | None = None, now: datetime | None = None) -> str:
    """One line saying what wrote a report: themis's version, the command line when
    known, and the date (UTC)."""
    from themis import __version__

    when = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"themis {__version__}", *([command] if command else []), when]
    return "written by " + " · ".join(parts)


def _table(table: Table) -> str:
    e = html.escape
    classes = " ".join(c for c, on in (("sortable", table.sortable), ("text", table.text)) if on)
    parts = [f'<table class="{classes}">' if classes else "<table>"]
    if table.caption:
        parts.append(f"<caption>{e(table.caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in table.header) + "</tr>")
    parts.append("</thead><tbody>")
    for row in table.rows:
        # A newline in a cell (a median over its range) is a line break.
        cells = (_RANGE.sub(r'<span class="nw">\1</span>', e(str(c))).replace("\n", "<br>")
                 for c in row)  # fmt: skip
        parts.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</tbody></table>")
    text = f'<div class="scroll">{"".join(parts)}</div>'
    if table.folded:
        return f"<details><summary>{e(table.folded)}</summary>{text}</details>"
    return text


def _anchors(titles: Sequence[str]) -> list[str]:
    """A unique id per section title, for the contents' links."""
    out: list[str] = []
    for title in titles:
        base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"
        anchor, k = base, 2
        while anchor in out:
            anchor, k = f"{base}-{k}", k + 1
        out.append(anchor)
    return out


def _figure(figure: Figure) -> str:
    # The SVG comes from matplotlib, not from user input; its text is escaped there.
    caption = html.escape(figure.caption)
    return (
        f'<figure role="img" aria-label="{caption}">{figure.svg}'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def render(title: str, meta: Sequence[str], sections: Sequence[Section]) -> str:
    e = html.escape
    body = [f"<h1>{e(title)}</h1>"]
    body.extend(f'<p class="meta">{e(line)}</p>' for line in meta)
    anchors = _anchors([section.title for section in sections])
    if len(sections) > 1:
        links = "".join(
            f'<li><a href="#{a}">{e(section.title)}</a></li>'
            for a, section in zip(anchors, sections, strict=True)
        )
        body.append(f'<nav class="toc" aria-label="contents"><ol>{links}</ol></nav>')
    for anchor, section in zip(anchors, sections, strict=True):
        body.append(f'<h2 id="{anchor}">{e(section.title)}</h2>')
        if section.text:
            body.extend(f"<p>{e(p)}</p>" for p in section.text.split("\n\n"))
        body.extend(_table(t) for t in section.tables)
        body.extend(_figure(f) for f in section.figures)
    script = (
        f"<script>{_SCRIPT}</script>"
        if any(t.sortable for section in sections for t in section.tables)
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)}</title><style>{_STYLE}</style></head><body>\n"
        + "\n".join(body)
        + f"\n{script}</body></html>\n"
    )


def write_report(
    out_dir: Path,
    title: str,
    meta: Sequence[str],
    sections: Sequence[Section],
    command: str | None = None,
) -> Path:
    """Write ``out_dir/report.html`` (created if missing) and return its path; its first
    line says what wrote it (:func:`provenance`: version, ``command``, date)."""
    ensure_dir(out_dir)
    path = out_dir / REPORT_FILE
    path.write_text(render(title, [provenance(command), *meta], sections), encoding="utf-8")
    return path
