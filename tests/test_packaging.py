"""The package fits its ecosystem: a license file, type information, ``python -m themis``,
one version, an installable torch extra."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

from packaging.requirements import Requirement

import themis

ROOT = Path(__file__).parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_file_is_the_apache_2_text_pyproject_declares() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "LICENSE" in PYPROJECT["project"]["license-files"]


def test_py_typed_marker_ships_with_the_package() -> None:
    assert resources.files("themis").joinpath("py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["themis"]


def test_python_dash_m_themis_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "themis", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert done.stdout.startswith(f"themis {themis.__version__} (")


def test_the_version_is_written_once() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "themis.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", themis.__version__)
    # The installed metadata is this checkout's when it was installed from here (CI, the
    # README's `pip install -e`); a shared environment installed from another checkout
    # keeps that one's until reinstalled. The wheel built from this checkout carries this
    # version in any case (tests/test_wheel.py).
    dist = importlib.metadata.distribution("themis-scheduler")
    source = json.loads(dist.read_text("direct_url.json") or "{}").get("url")
    if source == ROOT.resolve().as_uri():
        assert dist.version == themis.__version__, (
            f"the installed metadata says {dist.version}: an editable install keeps the "
            "version it was installed with; reinstall (pip install --no-deps -e .)"
        )


def test_the_torch_extra_is_a_range_the_cpu_build_on_disk_satisfies() -> None:
    [torch] = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["torch"]]
    assert torch.name == "torch"
    assert "2.13.0" in torch.specifier
    assert "2.14.1" in torch.specifier  # a range, not a pin


def test_mypy_runs_in_ci_through_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in ci.splitlines() if "pytest" in line and "pip install" in line)
    assert ".venv/bin/mypy src" in command
    assert command in readme
    assert "mypy" in " ".join(PYPROJECT["project"]["optional-dependencies"]["test"])


def test_the_package_index_page_has_metadata_and_the_readme_names_the_distribution() -> None:
    project = PYPROJECT["project"]
    assert project["name"] == "themis-scheduler"
    assert project["urls"] and all(u.startswith("https://") for u in project["urls"].values())
    assert {"gpu", "scheduling", "fairness"} <= set(project["keywords"])
    classifiers = project["classifiers"]
    assert "Typing :: Typed" in classifiers  # py.typed ships (test above)
    lowest = project["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {lowest}" in classifiers
    readme = (ROOT / "README.md").read_text()
    assert "`themis-scheduler`" in readme
    # Not on the package index yet: the README must not send users to a name that is not
    # there as if it were, and says how to install from a clone or a wheel built from it.
    assert "not on the\npackage index yet" in readme and "pip install ." in readme
    assert "pip wheel --no-deps -w dist ." in readme


def _manifest_grafts() -> set[str]:
    lines = (ROOT / "MANIFEST.in").read_text().splitlines()
    return {line.split()[1] for line in lines if line.startswith("graft ")}


def test_every_file_the_readme_links_is_in_the_source_distribution() -> None:
    """The README's relative links work in the repository and in the unpacked sdist (the
    README says so): each target exists and is in a folder MANIFEST.in grafts, or is one
    of the files an sdist always holds."""
    readme = (ROOT / "README.md").read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)#][^)]*)\)", readme)}
    local = sorted(t for t in targets if "://" not in t)
    assert len(local) > 10
    always = {"README.md", "LICENSE", "pyproject.toml", "CHANGELOG.md"}
    grafted = _manifest_grafts()
    assert {"examples", "docs"} <= grafted
    for target in local:
        assert (ROOT / target).exists(), target
        assert target in always or target.split("/")[0] in grafted | {"src"}, target
    assert "include CHANGELOG.md" in (ROOT / "MANIFEST.in").read_text()


def test_build_output_is_ignored_and_the_changelog_has_this_version() -> None:
    assert "dist/" in (ROOT / ".gitignore").read_text().splitlines()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{themis.__version__}]" in changelog


def test_the_newest_changelog_entry_is_this_version_with_its_date() -> None:
    """A release is a dated entry at the top; work after it goes under "Unreleased"."""
    headings = re.findall(r"^## \[([^\]]+)\](.*)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    released = [(name, rest) for name, rest in headings if name != "Unreleased"]
    name, rest = released[0]
    assert name == themis.__version__
    assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", rest), rest
