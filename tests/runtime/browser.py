"""Headless Chromium for the dashboard's browser tests: load a page, let its script run,
and read back the DOM it built (``--dump-dom``), parsed.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it); Playwright's browser
download is not available offline, and ``--dump-dom`` is all these tests need: the page
is loaded exactly as a user's browser loads it, script, headers and all.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
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


class Tab:
    """One tab of a headless Chromium driven over the DevTools protocol on a pipe
    (``--remote-debugging-pipe``: NUL-separated JSON on file descriptors 3 and 4), for
    what ``--dump-dom`` cannot do: type into the page, click, reload, read
    ``sessionStorage`` and the address bar. No WebSocket client needed."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def plumb() -> None:  # in the child: the pipes on fds 3 and 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        command = [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-pipe",
            "about:blank",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # dup2'd in the child after the fork; the parent's own descriptors are not
            # inheritable (Python's default), so only 0-4 reach Chromium.
            preexec_fn=plumb,  # noqa: PLW1509
            close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session: str | None = attached["sessionId"]

    def _call(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        self._next += 1
        message: dict = {"id": self._next, "method": method, "params": params or {}}
        if getattr(self, "_session", None) is not None:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, _, self._buffer = self._buffer.partition(b"\0")
                answer = json.loads(raw)
                if answer.get("id") == self._next:
                    if "error" in answer:
                        raise RuntimeError(f"{method}: {answer['error']}")
                    return answer.get("result", {})
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to {method} within {timeout}s"
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 16)
                assert chunk, "the browser closed its pipe"
                self._buffer += chunk

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-able values)."""
        result = self._call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(str(result["exceptionDetails"])[:500])
        return result["result"].get("value")

    def go(self, url: str) -> None:
        self._call("Page.navigate", {"url": url})

    def reload(self) -> None:
        self._call("Page.reload", {})

    def wait_for(self, expression: str, timeout: float = 30.0):
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:  # the page is between documents
                value = None
            if value:
                return value
            if time.monotonic() >= deadline:
                seen = self.evaluate(
                    "[document.body && document.body.getAttribute('data-state'), "
                    "(document.getElementById('notice') || {}).textContent, location.href]"
                )
                raise AssertionError(f"never true: {expression}; the page: {seen}")
            time.sleep(0.1)

    def close(self) -> None:
        self._process.kill()
        self._process.wait(30)
        os.close(self._to_browser)
        os.close(self._from_browser)
