"""A wheel built from this checkout, installed in a fresh environment, runs every README
command that names no file of the repository, from an empty folder.

The wheel is built as a user's ``pip`` builds it (``pip wheel``, build isolation: pip
fetches the setuptools pyproject.toml asks for, or takes it from its cache) from a copy
of the files the build reads, then installed without its dependencies into a new virtual
environment that sees this environment's packages through a ``.pth`` line (so the test
needs no network for numpy, scipy, ...). That line adds the folder only: an editable
install of themis in this environment (its own ``.pth``) is not processed there, so
``import themis`` finds the wheel's copy, which the test checks.

Commands are the README's, in order (tests/cli/test_readme.py parses them and shrinks the
long ones); instead of the repository's small sample trace they run on a small trace cut
from the HyperDrive trace the wheel ships. Commands that name a file of the repository
(today: of ``examples/``) are left out: the README says where those files come from.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

import themis
from tests.cli.test_readme import (
    SERVER,
    SMALL,
    blocks,
    commands,
    repository_files,
    runnable,
    write_readme_files,
)

ROOT = Path(__file__).parents[1]
#: What ``pip wheel`` reads (pyproject.toml names the readme and the license file).
BUILD_INPUTS = [
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "MANIFEST.in",
    "CHANGELOG.md",
    "setup.py",
    "tools/themis_build.py",  # the build backend (pyproject.toml's backend-path)
]
#: Apps and jobs per app of the bundled trace kept for the small trace.
APPS, JOBS = 3, 5


@dataclass(frozen=True)
class Installed:
    python: Path
    themis: Path
    site: Path
    small: Path
    env: dict[str, str]


def _clean_env() -> dict[str, str]:
    """This environment less what would bring this checkout's code in (a developer's
    ``PYTHONPATH=src``) or change themis's behaviour."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("THEMIS")}


def _build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    shutil.copytree(
        ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"),
    )
    for name in BUILD_INPUTS:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    dist = tmp / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = dist.glob("themis_scheduler-*.whl")
    # Without THEMIS_COMPILE (_clean_env drops it) the wheel is pure: one for every
    # platform, built with no compiler (docs/compiled.md).
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    return wheel


def _small_trace(site: Path, path: Path) -> Path:
    """The first ``APPS`` apps of the wheel's own HyperDrive trace, ``JOBS`` jobs each."""
    header, *rows = (
        (site / "themis" / "data" / "philly_hyperdrive_workload.csv").read_text().splitlines()
    )
    kept: dict[str, list[str]] = {}
    for row in rows:
        app = row.split(",")[0]
        if app in kept or len(kept) < APPS:
            kept.setdefault(app, [])
            if len(kept[app]) < JOBS:
                kept[app].append(row)
    path.write_text("\n".join([header, *(r for app in kept.values() for r in app)]) + "\n")
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    env = _clean_env()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        + ["--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "themis" / "__init__.py").is_file(), done.stdout
    # Only now the dependencies: had pip seen this environment's themis (an editable
    # install of the same version), it would have installed nothing.
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(here)))
    small = _small_trace(site, tmp / "small.csv")
    return Installed(python, venv / "bin" / "themis", site, small, env)


def _run(installed: Installed, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=installed.env, capture_output=True, text=True, timeout=300
    )


def test_the_wheel_is_what_runs_and_carries_this_version(
    installed: Installed, tmp_path: Path
) -> None:
    code = "import importlib.metadata as m, themis\n"
    code += "print(themis.__file__, m.version('themis-scheduler'))"
    done = _run(installed, [str(installed.python), "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    where, version = done.stdout.split()
    assert Path(where).is_relative_to(installed.site)
    assert version == themis.__version__
    done = _run(installed, [str(installed.themis), "--version"], tmp_path)
    expected = f"themis {themis.__version__} (pure Python)"
    assert (done.returncode, done.stdout.strip()) == (0, expected)


def test_the_bundled_trace_and_profiles_load_by_name_from_the_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    done = _run(
        installed, [str(installed.themis), "trace", "inspect", "hyperdrive", "--json"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    inspected = json.loads(done.stdout)
    assert (inspected["apps"], inspected["jobs"]) == (84, 4697)  # as the README says


def test_the_dashboard_page_ships_in_the_wheel(installed: Installed, tmp_path: Path) -> None:
    """``themis serve``'s dashboard (runtime/api/dashboard.py) reads its page from the package:
    the wheel's copy is the checkout's, byte for byte."""
    from themis.runtime.api.dashboard import STATIC

    code = "from themis.runtime.api.dashboard import static_file; import sys\n"
    code += "sys.stdout.write(repr([static_file(n) for n in sys.argv[1:]]))"
    done = _run(installed, [str(installed.python), "-c", code, *STATIC], tmp_path)
    assert done.returncode == 0, done.stderr
    static = ROOT / "src" / "themis" / "runtime" / "api" / "static"
    assert ast.literal_eval(done.stdout) == [(static / n).read_bytes() for n in STATIC]


def test_readme_commands_without_repository_files_run_from_an_empty_folder(
    installed: Installed, tmp_path: Path
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    write_readme_files(folder)  # the configuration files the README shows in full
    ran, left_out, failures = [], [], []
    for argv in commands():  # in order: "trace generate" writes what "simulate" reads
        if argv[1] in SERVER:
            continue
        if repository_files(argv):
            left_out.append(argv)
            continue
        small = [str(installed.small) if a == str(SMALL) else a for a in runnable(argv)]
        done = _run(installed, [str(installed.themis), *small[1:]], folder)
        ran.append(argv)
        if done.returncode != 0:
            failures.append(f"{shlex.join(argv)}: exit {done.returncode}: {done.stderr[-300:]}")
    assert failures == []
    names = {argv[1] for argv in ran}
    assert {"simulate", "compare", "policies", "trace", "experiment"} <= names
    assert left_out  # the README's auction and trace examples read examples/
    assert all(a.startswith("examples/") for argv in left_out for a in repository_files(argv))
    assert not (folder / "examples").exists()


def test_the_python_example_runs_from_the_wheel(installed: Installed, tmp_path: Path) -> None:
    [code] = blocks("python")
    small = code.replace('load_workload("hyperdrive"', f'load_workload("{installed.small}"')
    small = small.replace('"2x4x8"', '"1x2x4"')
    assert small != code
    done = _run(installed, [str(installed.python), "-c", small], tmp_path)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) > 0  # max rho
