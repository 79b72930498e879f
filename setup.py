"""Extension modules for setuptools: the mypyc-compiled core when ``THEMIS_COMPILE=1``.

Everything else is in pyproject.toml; the logic is in ``tools/themis_build.py``, the build
backend, so that pyproject.toml, this file and the backend agree on one switch.
"""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
from themis_build import setup_arguments  # noqa: E402

setup(**setup_arguments())
