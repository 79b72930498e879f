"""Policies register under a name; the CLI's ``--policy`` choices are this registry."""

from __future__ import annotations

from themis.errors import ThemisError
from themis.policies.base import Policy, PolicyOptions

_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    if cls.name in _REGISTRY:
        raise ValueError(f"policy '{cls.name}' registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def policy_names() -> list[str]:
    _load_builtins()
    return list(_REGISTRY)


def make_policy(name: str, options: PolicyOptions | None = None) -> Policy:
    _load_builtins()
    cls = _REGISTRY.get(name)
    if cls is None:
        known = ", ".join(_REGISTRY)
        raise ThemisError(f"unknown policy '{name}' (known: {known})", field="--policy")
    return cls(options or PolicyOptions())


def _load_builtins() -> None:
    # Importing the modules registers them; kept lazy so registry imports stay cheap.
    from themis.policies import fifo, max_min, themis  # noqa: F401
