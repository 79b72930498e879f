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
The machinery is ``themis.registry``'s, shared with the trace formats.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import TYPE_CHECKING

from themis import registry
from themis.errors import ThemisError
from themis.policies.base import Policy, PolicyOptions
from themis.policies.knobs import BadOption, Knob, all_knobs, declare

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


class PluginWarning(registry.PluginWarning):
    """A ``themis.policies`` entry point was skipped (its message says which and why)."""


#: The entry-point group third-party packages register policies under.
ENTRY_POINT_GROUP = "themis.policies"

#: Modules of this package that are not policies.
_NOT_POLICIES = frozenset({"base", "knobs", "registry"})
#: Listed first, in this order; the rest follow by name.
_FIRST = ("themis",)


def _load_builtins() -> None:
    # Importing the modules registers them; kept lazy so registry imports stay cheap.
    package = importlib.import_module("themis.policies")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in _NOT_POLICIES and not module.name.startswith("_"):
            importlib.import_module(f"themis.policies.{module.name}")


def _admit(entry: EntryPoint, target: object) -> type[Policy] | None:
    """An entry point's policy class, or None for a module whose import registered it."""
    if isinstance(target, type) and issubclass(target, Policy):
        if getattr(target, "name", None) != entry.name:
            raise registry.Refused(
                f"the class's name is {getattr(target, 'name', None)!r}, "
                f"the entry point's '{entry.name}'"
            )
        if target.name not in POLICIES.entries:
            # A plug-in's knobs are declared before it registers: a knob that takes a
            # name already in use (field, flag, recorded key) keeps the policy out.
            problem = declare(target.knobs)
            if problem is not None:
                raise registry.Refused(problem)
        return target
    if entry.name not in POLICIES.entries:
        raise registry.Refused("names neither a Policy subclass nor a module registering it")
    return None


POLICIES: registry.Registry[type[Policy]] = registry.Registry(
    "policy",
    ENTRY_POINT_GROUP,
    name_of=lambda cls: cls.name,
    builtin=lambda cls: cls.__module__.startswith("themis.policies."),
    load_builtins=_load_builtins,
    admit=_admit,
    same=lambda registered, declared: registered is declared,
    warning=PluginWarning,
)


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a :class:`Policy` subclass known by its ``name``. A name
    registered twice is a programming error (``ValueError``), not a user's."""
    if cls.name in POLICIES.entries:
        raise ValueError(f"policy '{cls.name}' registered twice")
    problem = declare(cls.knobs)
    if problem is not None:
        raise ValueError(f"policy '{cls.name}': {problem}")
    return POLICIES.register(cls)


def knobs() -> tuple[Knob, ...]:
    """Every knob: the built-ins' table, then those the plug-in policies declare (loaded
    first, so that their flags, config keys and recorded names are known)."""
    POLICIES.load()
    return all_knobs()


def policy_names() -> list[str]:
    """Registered policies: Themis first, then the baselines by name."""
    names = [cls.name for cls in POLICIES.plugins()]
    first = [n for n in _FIRST if n in names]
    return first + sorted(n for n in names if n not in first)


def broken_plugins() -> dict[str, tuple[str, str]]:
    """Plugins skipped because they failed to load or clashed: name -> (the entry point's
    target, what is wrong)."""
    return POLICIES.broken_plugins()


def unknown_policy(name: str, flag: str = "--policy") -> ThemisError:
    """The error for a policy name not registered: a broken plugin's own reason, or the
    closest registered names and the full list."""
    names = policy_names()
    broken = POLICIES.broken_error(name, flag)
    if broken is not None:
        return broken
    close = difflib.get_close_matches(name, names, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return ThemisError(f"unknown policy '{name}' ({hint}known: {', '.join(names)})", field=flag)


def make_policy(name: str, options: PolicyOptions | None = None) -> Policy:
    """A new instance of the policy registered as ``name`` (built-in or plugin), with
    ``options`` (the defaults when ``None``). A policy keeps state across rounds, so each
    run needs its own instance. An unknown name is a :class:`ThemisError` with the
    closest names."""
    cls = POLICIES.get(name)
    if cls is None:
        raise unknown_policy(name)
    options = options or PolicyOptions()
    known = {knob.field for knob in all_knobs()}
    for field, _ in options.plugin_knobs:
        if field not in known:
            raise BadOption("no installed policy declares this knob", field=field)
    return cls(options)


def load_plugins() -> list[str]:
    """Register the policies of the ``themis.policies`` entry points; returns the names
    registered. A broken entry is skipped with a :class:`PluginWarning` (see the module's
    docstring) and recorded for :func:`broken_plugins`."""
    return POLICIES.load_plugins()
