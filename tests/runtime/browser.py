"""Headless Chromium for the dashboard's browser tests: load a page, let its script run,
and read back the DOM it built (``--dump-dom``), parsed.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it); Playwright's browser
download is not available offline, and ``--dump-dom`` is all these tests need: the page
is loaded exactly as a user's browser loads it, script, headers and all.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
#: The skip reason, worded apart from the report's screenshot tests (their conftest counts
#: skips by "chromium is not installed").
ABSENT = (
    "dashboard browser test: chromium is absent (apt-get install -y chromium; .ci/run installs it)"
)


def dump_dom(url: str, profile: Path, budget_ms: int = 5000) -> str:
    """The DOM of ``url`` after its scripts ran for ``budget_ms`` of virtual time (network
    waits do not count against it)."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
        "--dump-dom", url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=True)
    return done.stdout


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""  # the text directly inside it and inside its children


@dataclass
class Dom(HTMLParser):
    """The elements of a dumped DOM with their attributes and text."""

    elements: list[Element] = field(default_factory=list)
    _open: list[Element] = field(default_factory=list)

    def __post_init__(self) -> None:
        HTMLParser.__init__(self, convert_charrefs=True)

    @classmethod
    def of(cls, html: str) -> Dom:
        dom = cls()
        dom.feed(html)
        dom.close()
        return dom

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in ("meta", "link", "input", "br", "img", "line", "polyline", "text"):
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for k in range(len(self._open) - 1, -1, -1):
            if self._open[k].tag == tag:
                del self._open[k:]
                return

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text += data

    def find(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """Elements of ``tag`` (any if None) whose attributes include ``attrs``
        (``class_`` for ``class``; a class matches one word of the attribute)."""
        found = []
        for e in self.elements:
            if tag is not None and e.tag != tag:
                continue
            ok = True
            for key, value in attrs.items():
                name = key.rstrip("_").replace("_", "-")
                have = e.attrs.get(name)
                if name == "class":
                    ok = ok and have is not None and value in have.split()
                else:
                    ok = ok and have == value
            if ok:
                found.append(e)
        return found

    def by_id(self, id_: str) -> Element:
        [element] = [e for e in self.elements if e.attrs.get("id") == id_]
        return element

    @property
    def state(self) -> str:
        [body] = self.find("body")
        return body.attrs.get("data-state", "")
