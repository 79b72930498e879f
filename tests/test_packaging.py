"""The package fits its ecosystem: a license file, type information, ``python -m themis``,
one version, an installable torch extra."""

from __future__ import annotations

import importlib.metadata
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
    assert (done.returncode, done.stdout.strip()) == (0, f"themis {themis.__version__}")


def test_the_version_is_written_once() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "themis.__version__"}
    assert importlib.metadata.version("themis-scheduler") == themis.__version__


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
