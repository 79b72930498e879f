"""``themis auction``: one Partial Allocation auction from a JSON file."""

from __future__ import annotations

import json
import random

import click


@click.command(short_help="Run one Partial Allocation auction from a JSON file.")
@click.argument("file", metavar="FILE.json")
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the whole-GPU rounding."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Accepted for uniformity with the other commands: the output is always JSON.",
)
@click.option(
    "--node-limit",
    type=int,
    default=None,
    metavar="N",
    help="Search nodes the auction may take (0: no limit)  [default: the simulator's, 200000]",
)
@click.option(
    "--deadline",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Wall-clock seconds the auction may take  [default: none]",
)
def auction(
    file: str, seed: int, as_json: bool, node_limit: int | None, deadline: float | None
) -> None:
    """Run one Partial Allocation auction and print its outcome as JSON.

    \b
    FILE.json:
      {"gpus": {"<id>": {"machine": "...", "rack": "..."}, ...},
       "bids": {"<app>": {"none": <rho if it wins nothing>,
                          "menu": [{"gpus": ["<id>", ...], "rho": <rho>}, ...]}}}

    \b
    Output:
      {"apps": {"<app>": {"choice": [...], "c": <fraction>, "granted": [...]}},
       "leftover": [...], "limited": <bool>, "gap": <bound - objective>}

    "choice" is the app's proportional-fair bundle, "c" the fraction of it Partial
    Allocation grants and "granted" the GPUs it keeps after whole-GPU rounding (unbiased,
    seeded by --seed). "limited" tells whether the auction stopped on --node-limit or
    --deadline before proving its allocation optimal; "gap" is then a certified bound on
    how far the optimum's sum of log-utilities lies above it (docs/auction.md). Machine and
    rack are checked (strings) but the auction does not use
    them: each bid's rho already prices its placement.
    """
    # Imported here: the solver pulls in scipy, which ``themis --help`` should not wait for.
    from themis.auction import partial_allocation
    from themis.auction.budget import DEFAULT_NODE_LIMIT, Limits
    from themis.cli.auction_file import read_auction_file
    from themis.errors import ThemisError

    if node_limit is not None and node_limit < 0:
        raise ThemisError(f"must be >= 0, got {node_limit}", field="--node-limit")
    if deadline is not None and not deadline > 0:
        raise ThemisError(f"must be a number of seconds > 0, got {deadline}", field="--deadline")
    nodes = DEFAULT_NODE_LIMIT if node_limit is None else (node_limit or None)
    data = read_auction_file(file)
    outcome = partial_allocation(
        data.bids, data.gpus, random.Random(seed), source=file, limits=Limits(nodes, deadline)
    )
    payload = {
        "apps": {
            app_id: {"choice": list(o.choice), "c": o.c, "granted": list(o.granted)}
            for app_id, o in outcome.apps.items()
        },
        "leftover": list(outcome.leftover),
        "limited": outcome.limited,
        "gap": outcome.gap,
    }
    click.echo(json.dumps(payload, indent=2))
