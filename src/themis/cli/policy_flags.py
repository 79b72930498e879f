"""The policies' knobs as command-line flags, generated from their one declaration
(``policies/knobs.py``) for every command that runs a policy: ``simulate``, ``compare``,
``experiment`` (through ``run_options``) and ``serve``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

import click

from themis.policies.base import PolicyOptions
from themis.policies.knobs import KNOBS, Knob

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

_DEFAULTS = {f.name: f.default for f in fields(PolicyOptions)}


def _flag(knob: Knob, default: Any, shown: str | None = None) -> Decorator:
    """One knob's click option, named by its parameter. Where the command's default is not
    the library's, the help shows the command's, not the library's; ``shown`` replaces the
    default's text where the command reads the default another way."""
    show: bool | str = knob.show_default if shown is None else shown
    help_text = knob.help
    if default != _DEFAULTS[knob.field]:
        show = True
        help_text = re.sub(r"\s*\[default: [^]]*\]$", "", help_text)
    if knob.kind is bool:
        off = "--no-" + knob.flag.removeprefix("--")
        return click.option(
            f"{knob.flag}/{off}", knob.name, default=default, show_default=show, help=help_text
        )
    if knob.choices:
        kind: Any = click.Choice(knob.choices)
    elif knob.parse is not None:
        kind = str  # parsed, then checked, when the options are made
    else:
        kind = knob.kind
    given = default
    if knob.read is not None and default is None:
        given = 0  # ``--auction-node-limit 0``: no limit
    return click.option(
        knob.flag,
        knob.name,
        type=kind,
        default=given if knob.parse is None else None,
        show_default=show,
        metavar=knob.metavar,
        help=help_text,
    )


def policy_flags(
    defaults: Mapping[str, Any] | None = None, shown: Mapping[str, str] | None = None
) -> list[Decorator]:
    """Every knob's flag, in the table's order; ``defaults`` where a command's differ from
    ``PolicyOptions``'s, ``shown`` where its help must say the default another way (both
    by field)."""
    chosen = {**_DEFAULTS, **(defaults or {})}
    said = shown or {}
    return [_flag(knob, chosen[knob.field], said.get(knob.field)) for knob in KNOBS]


def policy_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``PolicyOptions`` values (by field) of a command's parameters (by name): text
    parsed and command-line forms read (``--auction-node-limit 0``: None). Unchecked:
    making the ``PolicyOptions`` checks them."""
    out: dict[str, Any] = {}
    for knob in KNOBS:
        if knob.name not in values:
            continue
        value = values[knob.name]
        if knob.parse is not None and isinstance(value, str):
            value = knob.parse(value)
        if knob.read is not None:
            value = knob.read(value)
        out[knob.field] = value
    return out


def policy_flags_of(
    defaults: Mapping[str, Any] | None = None, shown: Mapping[str, str] | None = None
) -> Decorator:
    """A decorator that adds every knob's flag to a command (``policy_flags``)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for flag in reversed(policy_flags(defaults, shown)):
            command = flag(command)
        return command

    return decorate
