"""themis: finish-time fair GPU cluster scheduling (Themis, NSDI 2020).

The package is laid out by concept: ``model`` (cluster, profiles, jobs, apps),
``fairness`` (finish-time fairness), ``auction`` (Partial Allocation), ``agent`` (one per
app), ``arbiter`` (the round mechanism), ``policies`` (Themis and baselines behind one
interface), ``simulator`` (discrete-event replay), ``workload`` (trace readers),
``reports`` (metrics and output files) and ``cli``.
"""

from typing import Any

from themis.errors import ThemisError

__all__ = ["ThemisError", "Trial", "lease"]
__version__ = "0.2.0"

#: The lease API for training code, loaded on first use so that ``import themis`` stays
#: light (the runtime's Ray-facing modules are never imported from here).
_LAZY = {"lease": "themis.runtime.workers.lease", "Trial": "themis.runtime.workers.lease"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'themis' has no attribute '{name}'")
    import importlib

    return getattr(importlib.import_module(module), name)
