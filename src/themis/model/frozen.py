"""Frozen dataclasses that pickle the same, interpreted or compiled."""

from __future__ import annotations

from dataclasses import fields


def by_fields(spec: object) -> tuple[type, tuple[object, ...]]:
    """A frozen dataclass pickled as a call of its class on its fields.

    What pickle does by default (a bare instance, then each attribute set) cannot rebuild
    these classes once compiled (docs/compiled.md): a frozen dataclass's ``__setattr__``
    refuses, and mypyc's classes are built by their ``__init__``. Calling the class is the
    same object either way, so process pools and Ray can carry workloads to their workers.
    """
    return type(spec), tuple(getattr(spec, f.name) for f in fields(spec))  # type: ignore[arg-type]
