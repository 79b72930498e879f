"""The policies' knobs as command-line flags, generated from their one declaration
(``policies/knobs.py``) for every command that runs a policy: ``simulate``, ``compare``,
``experiment`` (through ``run_options``) and ``serve``. The knobs installed plug-in
policies declare are among them (the registry is loaded first), so a plug-in's knob is a
flag, a config-file key and a recorded setting like a built-in's."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import click

from themis.policies import registry
from themis.policies.base import PolicyOptions, default_of
from themis.policies.knobs import Knob

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _flag(knob: Knob, default: Any, shown: str | None = None) -> Decorator:
    """One knob's click option, named by its parameter. Where the command's default is not
    the library's, the help shows the command's, not the library's; ``shown`` replaces the
    default's text where the command reads the default another way."""
    show: bool | str = knob.show_default if shown is None else shown
    help_text = knob.help
    if default != default_of(knob):
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
    defaults: PolicyOptions | None = None, shown: Mapping[str, str] | None = None
) -> list[Decorator]:
    """Every knob's flag, in the table's order; ``defaults`` the command's options where
    they differ from the library's (the runtime's), ``shown`` where its help must say the
    default another way (by field)."""
    said = shown or {}
    return [
        _flag(
            knob,
            default_of(knob) if defaults is None else defaults.value(knob.field),
            said.get(knob.field),
        )
        for knob in registry.knobs()
    ]


def policy_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``PolicyOptions`` values (by field) of a command's parameters (by name): text
    parsed and command-line forms read (``--auction-node-limit 0``: None). Unchecked:
    making the ``PolicyOptions`` checks them."""
    out: dict[str, Any] = {}
    for knob in registry.knobs():
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
    defaults: PolicyOptions | None = None, shown: Mapping[str, str] | None = None
) -> Decorator:
    """A decorator that adds every knob's flag to a command (``policy_flags``)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for flag in reversed(policy_flags(defaults, shown)):
            command = flag(command)
        return command

    return decorate
