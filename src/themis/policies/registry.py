"""Policies register under a name; the CLI's ``--policy`` choices are this registry.

Every module of this package other than the interface and the registry is a policy and is
imported on first use, so adding a policy is adding one module: no list to keep in step.
"""

from __future__ import annotations

import importlib
import pkgutil

from themis.errors import ThemisError
from themis.policies.base import Policy, PolicyOptions

_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    if cls.name in _REGISTRY:
        raise ValueError(f"policy '{cls.name}' registered twice")
    _REGISTRY[cls.name] = cls
    return cls


#: Modules of this package that are not policies.
_NOT_POLICIES = frozenset({"base", "registry"})
#: Listed first, in this order; the rest follow by name.
_FIRST = ("themis",)


def policy_names() -> list[str]:
    """Registered policies: Themis first, then the baselines by name."""
    _load_builtins()
    first = [n for n in _FIRST if n in _REGISTRY]
    return first + sorted(n for n in _REGISTRY if n not in first)


def make_policy(name: str, options: PolicyOptions | None = None) -> Policy:
    _load_builtins()
    cls = _REGISTRY.get(name)
    if cls is None:
        known = ", ".join(_REGISTRY)
        raise ThemisError(f"unknown policy '{name}' (known: {known})", field="--policy")
    return cls(options or PolicyOptions())


def _load_builtins() -> None:
    # Importing the modules registers them; kept lazy so registry imports stay cheap.
    package = importlib.import_module("themis.policies")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in _NOT_POLICIES and not module.name.startswith("_"):
            importlib.import_module(f"themis.policies.{module.name}")
