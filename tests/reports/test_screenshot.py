"""The report as a browser shows it: headless Chromium renders ``report.html`` and every
figure has a size on the page and pixels in the screenshot.

Skipped, saying why, where Chromium is not installed; ``.ci/run`` installs it (Debian's
``chromium``) so that CI runs it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import cast

import pytest
from PIL import Image

from themis.cli.main import run
from themis.reports.plots import COLOURS

from ..cli.conftest import TINY_ROWS, write_trace

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless browser test: chromium is not installed (apt-get install -y chromium; "
    ".ci/run installs it)",
)

#: Page width and height of the screenshot, in CSS pixels.
WIDTH, HEIGHT = 1100, 4200

#: Appended to a copy of the page: after layout, record each figure's rendered size.
PROBE = """<script>
window.addEventListener("load", function () {
  var sizes = Array.from(document.querySelectorAll("figure")).map(function (f) {
    var svg = f.querySelector("svg");
    if (!svg) { return [0, 0]; }
    var r = svg.getBoundingClientRect();
    return [Math.round(r.width), Math.round(r.height)];
  });
  document.body.setAttribute("data-figures", JSON.stringify(sizes));
});
</script>"""


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A comparison report of two policies over two seeds on a three-app trace."""
    tmp = tmp_path_factory.mktemp("screenshot")
    trace = write_trace(tmp / "tiny.csv", TINY_ROWS)
    code = run(
        ["compare", "--trace", str(trace), "--cluster", "1x1x4", "--policies", "themis,fifo",
         "--seeds", "2", "--out", str(tmp / "out"), "--report", str(tmp / "rep"), "-j", "1",
         "-q"]
    )  # fmt: skip
    assert code == 0
    return tmp / "rep" / "report.html"


def test_every_figure_has_a_size_on_the_page(report: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium(tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom",
                    probe.as_uri()).stdout  # fmt: skip
    found = re.search(r'data-figures="([^"]*)"', dom)
    assert found, "the page did not finish loading"
    sizes = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(sizes) == 5  # CDF of rho, CDF of completion, usage, scatter, CDF of job waits
    for width, height in sizes:
        assert width >= 400 and height >= 200, sizes


def test_screenshot_shows_the_plots(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _chromium(tmp_path / "profile", f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}",
              report.as_uri())  # fmt: skip
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    found = image.getcolors(maxcolors=1 << 20)
    assert found is not None and len(found) > 50  # text, tables and plots, not blank
    # RGB images give (count, (r, g, b)) pairs.
    colours = cast(list[tuple[int, tuple[int, int, int]]], found)
    assert COLOURS[:2] == ("#CC3311", "#0077BB")  # themis red, fifo blue
    # Both policies' colours are drawn (themis red, fifo blue) in lines, filled usage
    # panels and scatter points, blended with white where translucent.
    blue = sum(n for n, (r, g, b) in colours if b > r + 40 and b > g + 10)
    red = sum(n for n, (r, g, b) in colours if r > b + 40 and r > g + 40)
    assert blue > 2000 and red > 2000, (blue, red)
