"""The import scan (``tools/import_scan.py``) passes on the library and fails, naming
file and line, on each thing it forbids, planted in a small package of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCAN = Path(__file__).resolve().parents[1] / "tools" / "import_scan.py"


def _scan(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCAN), "--root", str(root)], capture_output=True, text=True
    )


def test_the_library_keeps_its_rooms() -> None:
    done = subprocess.run([sys.executable, str(SCAN)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no cycle" in done.stdout


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "finding"),
    [
        # two modules of one package, one importing the other inside a function
        (
            {"a/__init__.py": "", "a/x.py": "def f():\n    from pkg.a import y\n",
             "a/y.py": "from pkg.a.x import f\n"},
            "module cycle: pkg.a.x -> pkg.a.y",
        ),
        # two packages, the way back only for the type checker
        (
            {"a/__init__.py": "", "a/x.py": "from pkg.b.y import Y\n",
             "b/__init__.py": "", "b/y.py": "from typing import TYPE_CHECKING\n"
             "if TYPE_CHECKING:\n    from pkg.a.z import Z\n", "a/z.py": ""},
            "package cycle: pkg.a -> pkg.b",
        ),
        # another package's private module, relatively named
        (
            {"a/__init__.py": "", "a/_inner.py": "", "b/__init__.py": "",
             "b/y.py": "from ..a import _inner\n"},
            "pkg/b/y.py:1: pkg.b.y imports pkg.a._inner, a private module of another package",
        ),
        # another package's private name, from a public module
        (
            {"a/__init__.py": "", "a/x.py": "def _helper():\n    pass\n",
             "b/__init__.py": "", "b/y.py": "def f():\n    from pkg.a.x import _helper\n"},
            "pkg/b/y.py:2: pkg.b.y imports pkg.a.x._helper, a private name of another package",
        ),
        # a low room importing a higher one of a package that declares its rooms
        (
            {"r/__init__.py": '__rooms__ = ("low", "high")\n', "r/low/__init__.py": "",
             "r/low/x.py": "def f():\n    from pkg.r.high import y\n",
             "r/high/__init__.py": "", "r/high/y.py": "import pkg.r.low.x\n"},
            "pkg/r/low/x.py:2: pkg.r.low.x imports pkg.r.high.y, a room above it (low < high)",
        ),
        # a room importing the composition root (a module directly in the package)
        (
            {"r/__init__.py": '__rooms__ = ("low", "high")\n', "r/root.py": "",
             "r/high/__init__.py": "", "r/high/y.py": "from pkg.r import root\n"},
            "pkg/r/high/y.py:1: pkg.r.high.y imports pkg.r.root, the composition root",
        ),
    ],
)  # fmt: skip
def test_each_forbidden_import_is_named(
    tmp_path: Path, files: dict[str, str], finding: str
) -> None:
    done = _scan(_package(tmp_path, files))
    assert done.returncode == 1
    assert finding in done.stderr.replace(str(tmp_path) + "/", "")


def test_a_clean_package_passes_and_its_own_private_modules_are_its_own(tmp_path: Path) -> None:
    # b's entry point (``python -m pkg.b``) may import a, which imports b: nothing imports
    # an entry point, so it is a room of its own.
    root = _package(
        tmp_path,
        {"a/__init__.py": "from pkg.a._inner import x\n", "a/_inner.py": "import pkg.b.y\n",
         "b/__init__.py": "", "b/y.py": "", "b/__main__.py": "import pkg.a\nfrom pkg import a\n"},
    )  # fmt: skip
    done = _scan(root)
    assert done.returncode == 0, done.stderr
    assert "6 modules in 4 packages" in done.stdout


def test_the_architecture_page_quotes_the_current_rooms() -> None:
    done = subprocess.run([sys.executable, str(SCAN), "--graph"], capture_output=True, text=True)
    graph = done.stdout.rsplit("import scan:", 1)[0]
    page = (SCAN.parents[1] / "docs" / "architecture.md").read_text()
    assert f"```\n{graph}```" in page, "docs/architecture.md: run tools/import_scan.py --graph"
