"""``--json``: a command's result as one JSON document on stdout, for scripts.

With ``--json`` stdout holds the JSON and nothing else: the lines a person reads (what is
about to run, where files went, notes) go to stderr, and progress stays on stderr as
always. Each command's document is described in the README ("Machine-readable output").
Non-finite numbers are written as ``null`` (JSON has no infinity), as in the files.
"""

from __future__ import annotations

import json
from typing import Any

import click

JSON_OPTION = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result as one JSON document on stdout (other lines go to stderr).",
)


def emit(payload: Any) -> None:
    """Print ``payload`` as indented JSON on stdout."""
    from themis.reports.files import jsonable

    click.echo(json.dumps(jsonable(payload), indent=2, allow_nan=False))


def say(text: str, as_json: bool) -> None:
    """A line for people: stdout normally, stderr when stdout carries JSON; inert, line
    by line (it may name what a state directory or a trace file holds: ``cli.inert``)."""
    from themis.cli.inert import inert

    click.echo("\n".join(inert(line) for line in text.split("\n")), err=as_json)
