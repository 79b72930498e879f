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
def auction(file: str, seed: int, as_json: bool) -> None:
    """Run one Partial Allocation auction and print its outcome as JSON.

    \b
    FILE.json:
      {"gpus": {"<id>": {"machine": "...", "rack": "..."}, ...},
       "bids": {"<app>": {"none": <rho if it wins nothing>,
                          "menu": [{"gpus": ["<id>", ...], "rho": <rho>}, ...]}}}

    \b
    Output:
      {"apps": {"<app>": {"choice": [...], "c": <fraction>, "granted": [...]}},
       "leftover": [...]}

    "choice" is the app's proportional-fair bundle, "c" the fraction of it Partial
    Allocation grants and "granted" the GPUs it keeps after whole-GPU rounding (unbiased,
    seeded by --seed). Machine and rack are checked (strings) but the auction does not use
    them: each bid's rho already prices its placement.
    """
    # Imported here: the solver pulls in scipy, which ``themis --help`` should not wait for.
    from themis.auction import partial_allocation
    from themis.cli.auction_file import read_auction_file

    data = read_auction_file(file)
    outcome = partial_allocation(data.bids, data.gpus, random.Random(seed), source=file)
    payload = {
        "apps": {
            app_id: {"choice": list(o.choice), "c": o.c, "granted": list(o.granted)}
            for app_id, o in outcome.apps.items()
        },
        "leftover": list(outcome.leftover),
    }
    click.echo(json.dumps(payload, indent=2))
