"""``themis policies``: the policy registry, one line each, then any plugin skipped."""

from __future__ import annotations

import click

from themis.cli.json_output import JSON_OPTION, emit
from themis.policies import make_policy, policy_names
from themis.policies.registry import broken_plugins


@click.command(short_help="List the registered policies.")
@JSON_OPTION
def policies(as_json: bool) -> None:
    """List the registered policies (the names --policy and --policies accept), then the
    third-party plugins that failed to load, each with what is wrong."""
    names = policy_names()
    broken = broken_plugins()
    if as_json:
        emit(
            {
                "policies": [{"name": n, "description": make_policy(n).description} for n in names],
                "broken": [
                    {"name": n, "target": target, "problem": problem}
                    for n, (target, problem) in broken.items()
                ],
            }
        )
        return
    width = max(len(n) for n in [*names, *broken])
    for name in names:
        click.echo(f"{name:<{width}}  {make_policy(name).description}".rstrip())
    for name, (target, problem) in broken.items():
        click.echo(f"{name:<{width}}  BROKEN plugin, skipped ({target}): {problem}")
