"""The documentation site builds with warnings as errors, and its API reference covers the
library: every public module of the documented packages is rendered on its package's page.

CI builds the site here (the README's test command installs the ``docs`` extra through
``test``), so a broken link, a missing anchor, a page left out of the nav or a docstring
mkdocstrings cannot render fails the suite.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
API = ROOT / "docs" / "api"
#: Packages whose every public module the API reference renders; the runtime's page holds
#: its entry points only (the scheduling loop is described in docs/runtime.md).
WHOLE = [
    "model",
    "fairness",
    "auction",
    "agent",
    "mechanism",
    "arbiter",
    "policies",
    "simulator",
    "workload",
    "reports",
    "experiments",
]
RUNTIME_ENTRY_POINTS = [
    "workers.lease",
    "workers.checkpoint",
    "state.appfile",
    "api.server",
    "api.client",
]


def _rendered(page: Path) -> set[str]:
    return set(re.findall(r"^::: (themis\.[\w.]+)$", page.read_text(), flags=re.MULTILINE))


def _nav_files(nav: list) -> list[str]:
    out: list[str] = []
    for entry in nav:
        if isinstance(entry, str):
            out.append(entry)
        else:
            for value in entry.values():
                out.extend(_nav_files(value) if isinstance(value, list) else [value])
    return out


@pytest.mark.parametrize("package", WHOLE)
def test_every_public_module_of_a_package_is_on_its_api_page(package: str) -> None:
    modules = {
        f"themis.{package}.{path.stem}"
        for path in (ROOT / "src" / "themis" / package).glob("*.py")
        if not path.stem.startswith("_")
    }
    assert modules
    assert _rendered(API / f"{package}.md") == modules | {f"themis.{package}"}


def test_the_runtime_page_has_its_entry_points() -> None:
    expected = {f"themis.runtime.{m}" for m in RUNTIME_ENTRY_POINTS} | {"themis.runtime"}
    assert _rendered(API / "runtime.md") == expected


def test_every_api_page_and_every_guide_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    nav = set(_nav_files(config["nav"]))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert nav == pages


@pytest.mark.timeout(300)
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"]
        + ["--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=tmp_path,  # paths in mkdocs.yml are relative to it, not to the working folder
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert "No module named mkdocs" not in done.stderr, "mkdocs is a test dependency (docs)"
    assert done.returncode == 0, done.stderr[-4000:]
    # The reference is rendered from the docstrings: a class, its method and its prose.
    simulator = (site / "api" / "simulator" / "index.html").read_text()
    assert 'id="themis.simulator.engine.simulate"' in simulator
    # The command-line reference is generated from click: every command, its options.
    cli_page = (site / "cli" / "index.html").read_text()
    assert "themis simulate" in cli_page and "--fairness-knob" in cli_page
    assert "themis serve" in cli_page and "--start-timeout" in cli_page
    # The changelog page is CHANGELOG.md itself.
    changelog = (site / "changelog" / "index.html").read_text()
    first = (ROOT / "CHANGELOG.md").read_text().split("\n## ", 2)[1].split("\n")[0]
    assert first and first.strip("[]") in changelog
    model = (site / "api" / "model" / "index.html").read_text()
    assert 'id="themis.model.cluster.Cluster.from_spec"' in model
    assert "racks contain machines, machines contain GPUs" in model
    # reStructuredText left in docstrings reads as Markdown would (mkdocs_hooks.py).
    assert not re.search(r":(class|func|meth):<code>", model)
    assert "lease ends:</p>" in (site / "api" / "runtime" / "index.html").read_text()
    assert (site / "index.html").is_file()
    assert (site / "policies" / "gavel" / "index.html").is_file()
