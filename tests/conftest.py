"""The whole suite's hooks: tests marked ``pure_only`` skip against a compiled install.

A test that patches a function of a compiled module (``themis.compiled.MODULES``) changes
the module's attribute, not what compiled callers call: mypyc binds calls within its
group natively. Such a test checks the pure package's wiring; against the compiled wheel
(CI's second run, .ci/run) it would test the patch, not the code, so it is skipped there.
So is a test that hands a compiled function a value its annotation excludes (``True`` or
a string for a ``float``): mypyc converts or refuses it at the call, before the function's
own check runs; what users pass (files, the CLI) is checked before it gets there.
"""

from __future__ import annotations

import pytest

from themis.compiled import core_status


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    compiled = core_status().compiled
    if not compiled:
        return
    skip = pytest.mark.skip(
        reason="pure only: patches, subclasses or reloads a compiled module, or passes it bad types"
    )
    for item in items:
        if item.get_closest_marker("pure_only") is not None:
            item.add_marker(skip)
