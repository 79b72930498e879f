"""The compiled core's switch: one list of modules, a backend that asks for mypy only when
``THEMIS_COMPILE=1``, and ``themis --version`` reading what is installed.

Building the compiled wheel takes minutes, so the suite does not: CI builds it once and
checks its decisions byte for byte against the pure install (.ci/run). These tests check
what decides whether it is built and what the installed files say.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from themis.compiled import CORE_MODULES, MODULES, POLICY_MODULES, core_status, source_path

ROOT = Path(__file__).parents[1]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The backend, over a setuptools that runs setup.py's ``ext_modules()`` as the real
    one does when asked for requirements or metadata (without reading pyproject.toml,
    which this environment's setuptools may be too old for; tests/test_wheel.py builds
    with pip's own)."""
    monkeypatch.delenv("THEMIS_COMPILE", raising=False)
    module = _load(ROOT / "tools" / "themis_build.py", "themis_build_under_test")

    def setup_py(*args: object) -> list[str]:
        assert module.ext_modules() == []  # would import mypyc, not installed yet
        return ["setuptools>=77"]

    for hook in (
        "get_requires_for_build_wheel",
        "get_requires_for_build_editable",
        "get_requires_for_build_sdist",
    ):
        monkeypatch.setattr(module.build_meta, hook, setup_py)
    for hook in ("prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable"):
        monkeypatch.setattr(module.build_meta, hook, lambda *a: str(setup_py()))
    return module


def test_every_listed_module_is_a_source_file_listed_once() -> None:
    assert len(set(MODULES)) == len(MODULES) == len(CORE_MODULES) + len(POLICY_MODULES)
    missing = [m for m in MODULES if not (ROOT / "src" / source_path(m)).is_file()]
    assert missing == []


def test_pure_build_asks_for_no_compiler(backend: ModuleType) -> None:
    assert backend.get_requires_for_build_wheel() == ["setuptools>=77"]
    assert backend.get_requires_for_build_editable() == ["setuptools>=77"]
    assert backend.ext_modules() == []


def test_themis_compile_asks_for_the_pinned_mypy_and_compiles_only_when_building(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THEMIS_COMPILE", "1")
    assert backend.MYPY_REQUIREMENT == "mypy==2.4.1"
    assert backend.get_requires_for_build_wheel() == ["setuptools>=77", "mypy==2.4.1"]
    assert backend.get_requires_for_build_editable() == ["setuptools>=77", "mypy==2.4.1"]
    # An sdist is the sources either way: no compiler asked for, nothing compiled.
    assert backend.get_requires_for_build_sdist() == ["setuptools>=77"]
    backend.prepare_metadata_for_build_wheel("unused")
    backend.prepare_metadata_for_build_editable("unused")
    # Building (no hook asking): the extension modules, one per listed module.
    mypyc = pytest.importorskip("mypyc.build")
    calls: list[tuple[list[str], dict[str, object]]] = []
    monkeypatch.setattr(mypyc, "mypycify", lambda paths, **kw: calls.append((paths, kw)) or ["ext"])
    assert backend.ext_modules() == ["ext"]
    [(paths, options)] = calls
    assert paths == [f"src/{source_path(m)}" for m in MODULES]
    assert options["group_name"] == "themis"
    # A build tree of its own: a pure wheel built later never packs its extensions.
    assert backend.setup_arguments()["options"]["build"]["build_base"] == "build/compiled"
    monkeypatch.delenv("THEMIS_COMPILE")
    assert backend.setup_arguments() == {}


def test_a_mistyped_switch_is_refused_not_ignored(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THEMIS_COMPILE", "yes")
    with pytest.raises(ValueError, match="THEMIS_COMPILE must be 1"):
        backend.get_requires_for_build_wheel()


def test_backend_and_benchmark_read_the_one_list(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert backend.compiled_modules() == MODULES
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.delitem(sys.modules, "compiled_core", raising=False)
    import compiled_core

    assert compiled_core.DEFAULT_MODULES == CORE_MODULES
    assert compiled_core.POLICY_MODULES == POLICY_MODULES


def _package(tmp_path: Path, compiled: tuple[str, ...]) -> Path:
    """A package tree with each listed module's source, and an extension for ``compiled``."""
    root = tmp_path / "themis"
    for module in MODULES:
        path = root / source_path(module).removeprefix("themis/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        if module in compiled:
            path.with_name(path.stem + SUFFIX).write_bytes(b"")
    return root


def test_status_reads_the_files_beside_the_sources(tmp_path: Path) -> None:
    assert core_status(_package(tmp_path / "pure", ())).describe() == "pure Python"
    every = core_status(_package(tmp_path / "all", MODULES))
    assert every.describe() == f"compiled core: {len(MODULES)} modules"
    assert every.interpreted == ()
    some = core_status(_package(tmp_path / "some", MODULES[2:]))
    assert some.describe() == (
        f"compiled core: {len(MODULES) - 2} of {len(MODULES)} modules; "
        f"not compiled: {MODULES[0]}, {MODULES[1]}"
    )
