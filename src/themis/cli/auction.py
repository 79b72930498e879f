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
    help="Accepted for uniformity with the other commands: stdout is always JSON.",
)
@click.option(
    "--node-limit",
    type=int,
    default=None,
    metavar="N",
    help="Work units the auction may take, ~5 us of CPU each (0: no limit)  "
    "[default: the simulator's, 200000]",
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
    Output (stdout):
      {"apps": {"<app>": {"choice": [...], "c": <fraction>, "granted": [...]}},
       "leftover": [...], "limited": <bool>, "limit": null | "work" | "deadline",
       "gap": <bound - objective>, "gap_relative": <gap / bound>,
       "resolve_gap": <largest gap of the re-solves>, "objective": <sum of gains>,
       "work": <units spent, null without --node-limit>}

    "choice" is the app's proportional-fair bundle, "c" the fraction of it Partial
    Allocation grants and "granted" the GPUs it keeps after whole-GPU rounding (unbiased,
    seeded by --seed). "limited" tells whether the auction stopped before proving its
    allocation optimal, "limit" which limit stopped it (--node-limit's work units or
    --deadline); "gap" is then a certified bound on how far the optimum's sum of
    log-utilities lies above it (docs/auction.md). A summary line for people goes to
    stderr. Machine and rack are checked (strings) but the auction does not use them:
    each bid's rho already prices its placement.
    """
    # Imported here: the solver pulls in numpy and highspy, which ``themis --help`` should
    # not wait for.
    from themis.auction import partial_allocation
    from themis.auction.budget import DEFAULT_NODE_LIMIT, Budget, Limits
    from themis.auction.preload import load_solvers
    from themis.cli.auction_file import read_auction_file
    from themis.errors import ThemisError

    if node_limit is not None and node_limit < 0:
        raise ThemisError(f"must be >= 0, got {node_limit}", field="--node-limit")
    if deadline is not None and not deadline > 0:
        raise ThemisError(f"must be a number of seconds > 0, got {deadline}", field="--deadline")
    nodes = DEFAULT_NODE_LIMIT if node_limit is None else (node_limit or None)
    data = read_auction_file(file)
    # The solvers' imports before the clock starts: they are not the auction's work.
    load_solvers()
    budget = Budget(Limits(nodes, deadline))
    outcome = partial_allocation(
        data.bids, data.gpus, random.Random(seed), source=file, budget=budget
    )
    limit = _limit_hit(outcome.limited, budget)
    bound = outcome.objective + outcome.gap
    relative = outcome.gap / bound if bound > 0 else 0.0
    work = None if nodes is None else nodes - (budget.nodes_left or 0)
    payload = {
        "apps": {
            app_id: {"choice": list(o.choice), "c": o.c, "granted": list(o.granted)}
            for app_id, o in outcome.apps.items()
        },
        "leftover": list(outcome.leftover),
        "limited": outcome.limited,
        "limit": limit,
        "gap": outcome.gap,
        "gap_relative": relative,
        "resolve_gap": outcome.resolve_gap,
        "objective": outcome.objective,
        "work": work,
    }
    click.echo(json.dumps(payload, indent=2))
    winners = sum(1 for o in outcome.apps.values() if o.choice)
    click.echo(_summary(len(data.bids), winners, limit, outcome, relative, work), err=True)


def _limit_hit(limited: bool, budget: object) -> str | None:
    """Which limit stopped a limited auction: the deadline if it has passed, else the
    work limit (None: not limited)."""
    if not limited:
        return None
    return "deadline" if budget.out_of_time() else "work"  # type: ignore[attr-defined]


def _summary(
    bidders: int,
    winners: int,
    limit: str | None,
    outcome: object,
    relative: float,
    work: int | None,
) -> str:
    """The line for people: how many won, and how close to proven the answer is."""
    gap: float = outcome.gap  # type: ignore[attr-defined]
    resolve: float = outcome.resolve_gap  # type: ignore[attr-defined]
    spent = "" if work is None else f", {work:,} work units"
    if limit is None:
        return f"auction: {bidders} bidders, {winners} winners; proven optimal{spent}"
    stopped = "its deadline" if limit == "deadline" else "its work limit"
    return (
        f"auction: {bidders} bidders, {winners} winners; stopped on {stopped}{spent}: "
        f"certified gap {gap:.3g} ({100 * relative:.2f}% of the bound), "
        f"re-solves within {resolve:.3g}"
    )
