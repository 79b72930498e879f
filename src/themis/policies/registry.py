"""Policies register under a name; the CLI's ``--policy`` choices are this registry.

Every module of this package other than the interface and the registry is a policy and is
imported on first use, so adding a policy is adding one module: no list to keep in step.

Other packages add policies through the entry-point group ``themis.policies``: each entry
is named after the policy and points at its :class:`Policy` subclass (or at a module whose
import registers it), e.g. ``round-robin = my_pkg.rr:RoundRobinPolicy``. They are loaded
with the built-ins, on first use; a plugin that fails to load or clashes with a registered
name is a user error naming the entry point.
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


#: The entry-point group third-party packages register policies under.
ENTRY_POINT_GROUP = "themis.policies"

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


_loaded = False


def _load_builtins() -> None:
    # Importing the modules registers them; kept lazy so registry imports stay cheap.
    global _loaded
    if _loaded:
        return
    package = importlib.import_module("themis.policies")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in _NOT_POLICIES and not module.name.startswith("_"):
            importlib.import_module(f"themis.policies.{module.name}")
    _loaded = True
    load_plugins()


def load_plugins() -> list[str]:
    """Register the policies of the ``themis.policies`` entry points; returns their names."""
    from importlib.metadata import entry_points

    names = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        where = f"policy plugin '{entry.name}' ({entry.value})"
        if entry.name in _REGISTRY and _REGISTRY[entry.name].__module__.startswith(
            "themis.policies."
        ):
            raise ThemisError(f"{where}: the name of a built-in policy")
        try:
            target = entry.load()
        except Exception as exc:  # a broken plugin is the user's to fix, not a themis bug
            raise ThemisError(f"{where}: cannot load: {type(exc).__name__}: {exc}") from None
        if isinstance(target, type) and issubclass(target, Policy):
            if getattr(target, "name", None) != entry.name:
                raise ThemisError(
                    f"{where}: the class's name is {getattr(target, 'name', None)!r}, "
                    f"the entry point's '{entry.name}'"
                )
            existing = _REGISTRY.get(entry.name)
            if existing is None:
                register(target)
            elif existing is not target:
                raise ThemisError(f"{where}: another package registers '{entry.name}' too")
        elif entry.name not in _REGISTRY:
            raise ThemisError(
                f"{where}: names neither a Policy subclass nor a module registering it"
            )
        names.append(entry.name)
    return names
