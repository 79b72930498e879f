"""The build backend: setuptools, plus mypyc when ``THEMIS_COMPILE=1``.

pyproject.toml names this module (``backend-path = ["tools"]``). It is setuptools'
own backend with one difference: when the environment has ``THEMIS_COMPILE=1``, building
a wheel (or an editable install) also asks for mypy, and ``setup.py`` hands setuptools the
mypyc extension modules of ``themis.compiled.MODULES``. Without the variable nothing
changes: a pure ``py3-none-any`` wheel, and no build-time dependency beyond setuptools,
so that installing never needs a C compiler or mypy unless asked to.

This is how black, mypy and charset-normalizer ship a compiled build and a pure fallback
from the same sources; they choose by an environment variable too.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import (  # noqa: F401  (the backend's other hooks, unchanged)
    build_editable,
    build_wheel,
)

#: The variable that asks for the compiled core.
COMPILE_VARIABLE = "THEMIS_COMPILE"
#: The compiler, pinned: CI checks the compiled core's decisions byte for byte against the
#: pure package's with this version; another mypyc may compile the same source otherwise.
MYPY_REQUIREMENT = "mypy==2.4.1"

ROOT = Path(__file__).resolve().parent.parent
#: The one list of compiled modules, read by path (the package is not installed yet).
LIST = ROOT / "src" / "themis" / "compiled.py"


def compile_requested() -> bool:
    """Whether ``THEMIS_COMPILE`` asks for the compiled core (``1``; ``0`` or unset: pure)."""
    value = os.environ.get(COMPILE_VARIABLE, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{COMPILE_VARIABLE} must be 1 (compiled) or 0 (pure), not {value!r}")
    return value == "1"


def _compiler() -> list[str]:
    return [MYPY_REQUIREMENT] if compile_requested() else []


#: True while setuptools runs setup.py only to ask what it needs or what the metadata
#: says: mypy may not be installed yet, and compiling then would be work thrown away.
_asking = False


@contextmanager
def _only_asking() -> Iterator[None]:
    global _asking
    _asking = True
    try:
        yield
    finally:
        _asking = False


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements, and mypy (with mypyc) when the core is to be compiled."""
    with _only_asking():
        return build_meta.get_requires_for_build_wheel(config_settings) + _compiler()


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    """As for a wheel: an editable compiled install builds the extensions in place."""
    with _only_asking():
        return build_meta.get_requires_for_build_editable(config_settings) + _compiler()


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: dict[str, Any] | None = None
) -> str:
    """setuptools' metadata, without compiling: the compiled wheel's is the same."""
    with _only_asking():
        return build_meta.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: dict[str, Any] | None = None
) -> str:
    """As for a wheel."""
    with _only_asking():
        return build_meta.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' alone: a source distribution is the sources, compiled or not."""
    with _only_asking():
        return build_meta.get_requires_for_build_sdist(config_settings)


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """The sources, with this backend and setup.py (MANIFEST.in): no compiler needed,
    even with ``THEMIS_COMPILE=1`` set for the wheel built from it."""
    with _only_asking():
        return build_meta.build_sdist(sdist_directory, config_settings)


def compiled_modules() -> tuple[str, ...]:
    """``themis.compiled.MODULES``, loaded from its file alone."""
    name = "_themis_compiled_list"
    spec = importlib.util.spec_from_file_location(name, LIST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass looks its module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return tuple(module.MODULES)


#: Where a compiled build works (setuptools' build tree and mypyc's C): apart from the
#: pure build's ``build/``, so that a pure wheel built after a compiled one in the same
#: checkout never packs an extension module left in ``build/lib``.
COMPILED_BUILD = "build/compiled"


def setup_arguments() -> dict[str, Any]:
    """What setup.py passes to ``setup()``: nothing for the pure package; the extension
    modules and their own build tree for the compiled one."""
    modules = ext_modules()
    if not modules:
        return {}
    return {"ext_modules": modules, "options": {"build": {"build_base": COMPILED_BUILD}}}


def ext_modules() -> list[Any]:
    """The mypyc extension modules for ``setup(ext_modules=...)``; none unless requested.

    One group (``themis``): the modules share one runtime library and call each other
    natively. mypy's configuration is pyproject.toml's ``[tool.mypy]``, as in CI's
    ``mypy src``.
    """
    if _asking or not compile_requested():
        return []
    from mypyc.build import mypycify  # the build environment has it (get_requires_...)

    paths = [f"src/{name.replace('.', '/')}.py" for name in compiled_modules()]
    missing = [p for p in paths if not (ROOT / p).is_file()]
    if missing:
        raise FileNotFoundError(f"src/themis/compiled.py lists missing modules: {missing}")
    return list(mypycify(paths, opt_level="3", group_name="themis", target_dir=COMPILED_BUILD))
