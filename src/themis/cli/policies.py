"""``themis policies``: the policy registry, one line each."""

from __future__ import annotations

import click

from themis.policies import make_policy, policy_names


@click.command(short_help="List the registered policies.")
def policies() -> None:
    """List the registered policies (the names --policy and --policies accept)."""
    names = policy_names()
    width = max(len(n) for n in names)
    for name in names:
        click.echo(f"{name:<{width}}  {make_policy(name).description}".rstrip())
