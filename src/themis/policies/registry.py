"""Policies register under a name; the CLI's ``--policy`` choices are this registry.

Every module of this package other than the interface and the registry is a policy and is
imported on first use, so adding a policy is adding one module: no list to keep in step.

Other packages add policies through the entry-point group ``themis.policies``: each entry
is named after the policy and points at its :class:`Policy` subclass (or at a module whose
import registers it), e.g. ``round-robin = my_pkg.rr:RoundRobinPolicy``. They are loaded
with the built-ins, on first use. A plugin that fails to load or clashes with a registered
name is skipped with one :class:`PluginWarning` naming the entry point and the error, so
that one broken package never takes the built-in policies down with it; asking for it by
name is then a user error carrying the same text, and :func:`broken_plugins` lists it.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import warnings
from typing import TYPE_CHECKING

from themis.errors import ThemisError
from themis.policies.base import Policy, PolicyOptions
from themis.policies.knobs import BadOption, Knob, all_knobs, declare

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

_REGISTRY: dict[str, type[Policy]] = {}
#: Plugins skipped: entry-point name -> (its target "module:attr", what is wrong).
_BROKEN: dict[str, tuple[str, str]] = {}


class PluginWarning(UserWarning):
    """A ``themis.policies`` entry point was skipped (its message says which and why)."""


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a :class:`Policy` subclass known by its ``name``. A name
    registered twice is a programming error (``ValueError``), not a user's."""
    if cls.name in _REGISTRY:
        raise ValueError(f"policy '{cls.name}' registered twice")
    problem = declare(cls.knobs)
    if problem is not None:
        raise ValueError(f"policy '{cls.name}': {problem}")
    _REGISTRY[cls.name] = cls
    return cls


#: The entry-point group third-party packages register policies under.
ENTRY_POINT_GROUP = "themis.policies"

#: Modules of this package that are not policies.
_NOT_POLICIES = frozenset({"base", "knobs", "registry"})
#: Listed first, in this order; the rest follow by name.
_FIRST = ("themis",)


def knobs() -> tuple[Knob, ...]:
    """Every knob: the built-ins' table, then those the plug-in policies declare (loaded
    first, so that their flags, config keys and recorded names are known)."""
    _load_builtins()
    return all_knobs()


def policy_names() -> list[str]:
    """Registered policies: Themis first, then the baselines by name."""
    _load_builtins()
    first = [n for n in _FIRST if n in _REGISTRY]
    return first + sorted(n for n in _REGISTRY if n not in first)


def broken_plugins() -> dict[str, tuple[str, str]]:
    """Plugins skipped because they failed to load or clashed: name -> (the entry point's
    target, what is wrong)."""
    _load_builtins()
    return dict(_BROKEN)


def _broken_text(name: str) -> str:
    target, problem = _BROKEN[name]
    return f"policy plugin '{name}' ({target}): {problem}"


def unknown_policy(name: str, flag: str = "--policy") -> ThemisError:
    """The error for a policy name not registered: a broken plugin's own reason, or the
    closest registered names and the full list."""
    names = policy_names()
    if name in _BROKEN:
        return ThemisError(_broken_text(name), field=flag)
    close = difflib.get_close_matches(name, names, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return ThemisError(f"unknown policy '{name}' ({hint}known: {', '.join(names)})", field=flag)


def make_policy(name: str, options: PolicyOptions | None = None) -> Policy:
    """A new instance of the policy registered as ``name`` (built-in or plugin), with
    ``options`` (the defaults when ``None``). A policy keeps state across rounds, so each
    run needs its own instance. An unknown name is a :class:`ThemisError` with the
    closest names."""
    _load_builtins()
    cls = _REGISTRY.get(name)
    if cls is None:
        raise unknown_policy(name)
    options = options or PolicyOptions()
    known = {knob.field for knob in all_knobs()}
    for field, _ in options.plugin_knobs:
        if field not in known:
            raise BadOption("no installed policy declares this knob", field=field)
    return cls(options)


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
    """Register the policies of the ``themis.policies`` entry points; returns the names
    registered. A broken entry is skipped with a :class:`PluginWarning` (see the module's
    docstring) and recorded for :func:`broken_plugins`."""
    from importlib.metadata import entry_points

    names = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        problem = _register_plugin(entry)
        if problem is None:
            names.append(entry.name)
            continue
        if _BROKEN.get(entry.name) != (entry.value, problem):
            _BROKEN[entry.name] = (entry.value, problem)
            warnings.warn(f"{_broken_text(entry.name)}; skipped", PluginWarning, stacklevel=2)
    return names


def _register_plugin(entry: EntryPoint) -> str | None:
    """Register one entry point's policy; what is wrong with it, or ``None``."""
    existing = _REGISTRY.get(entry.name)
    if existing is not None and existing.__module__.startswith("themis.policies."):
        return "the name of a built-in policy"
    try:
        target = entry.load()
    except Exception as exc:  # a broken plugin is the user's to fix, not a themis bug
        return f"cannot load: {type(exc).__name__}: {exc}"
    if isinstance(target, type) and issubclass(target, Policy):
        if getattr(target, "name", None) != entry.name:
            return (
                f"the class's name is {getattr(target, 'name', None)!r}, "
                f"the entry point's '{entry.name}'"
            )
        if existing is None:
            problem = declare(target.knobs)
            if problem is not None:
                return problem
            register(target)
        elif existing is not target:
            return f"another package registers '{entry.name}' too"
    elif entry.name not in _REGISTRY:
        return "names neither a Policy subclass nor a module registering it"
    return None
