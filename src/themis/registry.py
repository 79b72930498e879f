"""One registry type for every kind of plug-in themis finds by name: policies
(``policies/registry.py``) and trace formats (``workload/formats.py``).

Each kind has built-ins, loaded on first use, and entries other packages declare in an
entry-point group (``importlib.metadata``, the standard way a Python package advertises a
plug-in), loaded after the built-ins. An entry that fails to load, is not a plug-in of
its kind, or takes a built-in's or another package's name is skipped with one warning
naming the entry point and the problem, so that one broken package never takes the
built-ins down with it; asking for it by name is then a user error carrying the same text.
What differs between kinds (how built-ins are found, what an entry's target must be) is
given to the registry as functions; the machinery is written once.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from themis.errors import ThemisError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

T = TypeVar("T")


class PluginWarning(UserWarning):
    """An entry point was skipped (its message says which and why)."""


class Refused(Exception):
    """An entry point's target is not a plug-in of the registry's kind; the message says
    what is wrong with it."""


class Registry(Generic[T]):
    """Plug-ins of one kind by name: built-ins and entry points, loaded on first use.

    ``kind`` names the kind in messages ("policy", "trace format"; ``short``, when
    given, where a built-in is named: "a built-in format"); ``group`` is the entry-point
    group. ``name_of`` reads a plug-in's name; ``builtin`` tells a built-in
    (its name is never taken by an entry point); ``load_builtins`` registers the
    built-ins; ``admit`` turns an entry point's loaded target into the plug-in to
    register, ``None`` when importing it registered the plug-in already, or raises
    :class:`Refused`; ``same`` tells whether a plug-in already registered under the
    entry's name is the one the entry declares (loaded again, not a clash)."""

    def __init__(
        self,
        kind: str,
        group: str,
        *,
        name_of: Callable[[T], str],
        builtin: Callable[[T], bool],
        load_builtins: Callable[[], None],
        admit: Callable[[EntryPoint, object], T | None],
        same: Callable[[T, T], bool],
        warning: type[PluginWarning] = PluginWarning,
        short: str | None = None,
    ) -> None:
        self.kind = kind
        self.short = short or kind
        self.group = group
        self._name_of = name_of
        self._builtin = builtin
        self._load_builtins = load_builtins
        self._admit = admit
        self._same = same
        self.warning = warning
        #: Registered plug-ins by name, in the order registered.
        self.entries: dict[str, T] = {}
        #: Entry points skipped: name -> (its target "module:attr", what is wrong).
        self.broken: dict[str, tuple[str, str]] = {}
        self.loaded = False

    def register(self, plugin: T) -> T:
        """Make ``plugin`` known by its name. A name registered twice is a programming
        error (``ValueError``), not a user's."""
        name = self._name_of(plugin)
        if name in self.entries:
            raise ValueError(f"{self.kind} '{name}' registered twice")
        self.entries[name] = plugin
        return plugin

    def load(self) -> None:
        """Load the built-ins, then the entry points, once."""
        if self.loaded:
            return
        self.loaded = True
        self._load_builtins()
        self.load_plugins()

    def plugins(self) -> list[T]:
        """Every registered plug-in: the built-ins first, as registered."""
        self.load()
        return list(self.entries.values())

    def get(self, name: str) -> T | None:
        self.load()
        return self.entries.get(name)

    def broken_plugins(self) -> dict[str, tuple[str, str]]:
        """Entry points skipped: name -> (the entry point's target, what is wrong)."""
        self.load()
        return dict(self.broken)

    def broken_text(self, name: str) -> str:
        target, problem = self.broken[name]
        return f"{self.kind} plugin '{name}' ({target}): {problem}"

    def broken_error(self, name: str, flag: str) -> ThemisError | None:
        """The error for asking for ``name`` when its entry point was skipped (its own
        reason, naming ``flag``); None when it was not."""
        self.load()
        if name not in self.broken:
            return None
        return ThemisError(self.broken_text(name), field=flag)

    def load_plugins(self) -> list[str]:
        """Register the plug-ins of the entry-point group; returns the names registered. A
        broken entry is skipped with one warning (see the module's docstring), again only
        when what is wrong with it changed."""
        from importlib.metadata import entry_points

        names = []
        for entry in entry_points(group=self.group):
            problem = self._enter(entry)
            if problem is None:
                names.append(entry.name)
            elif self.broken.get(entry.name) != (entry.value, problem):
                self.broken[entry.name] = (entry.value, problem)
                warnings.warn(
                    f"{self.broken_text(entry.name)}; skipped", self.warning, stacklevel=3
                )
        return names

    def _enter(self, entry: EntryPoint) -> str | None:
        """Register one entry point's plug-in; what is wrong with it, or ``None``."""
        existing = self.entries.get(entry.name)
        if existing is not None and self._builtin(existing):
            return f"the name of a built-in {self.short}"
        try:
            target = entry.load()
        except Exception as exc:  # a broken plug-in is the user's to fix, not a themis bug
            return f"cannot load: {type(exc).__name__}: {exc}"
        try:
            plugin = self._admit(entry, target)
        except Refused as refused:
            return str(refused)
        if plugin is None:
            return None
        existing = self.entries.get(entry.name)
        if existing is None:
            self.register(plugin)
        elif not self._same(existing, plugin):
            return f"another package registers '{entry.name}' too"
        return None
