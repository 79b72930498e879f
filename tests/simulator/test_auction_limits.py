"""A run counts the auctions that hit their node limit, and the default limit changes
nothing on the bundled workload (docs/auction.md, "A bound on every auction")."""

from __future__ import annotations

from dataclasses import replace

from themis.cli.run_options import load_inputs, make_config
from themis.policies import make_policy
from themis.reports.metrics import summarize
from themis.simulator.engine import simulate


def _run(node_limit: int | None):
    config = make_config(
        trace="hyperdrive",
        cluster="1x2x8",
        fairness_knob=0.0,  # every app bids: auctions of several bidders
        lease=600.0,
        batch_window=30.0,
        seed=0,
        arrivals=None,
        app_interval=9000.0,
        profiles=None,
        auction_node_limit=node_limit,
    )
    workload, cluster = load_inputs(config)
    workload = replace(workload, apps=workload.apps[:8])
    return simulate(workload, cluster, make_policy("themis", config.options))


def test_a_one_node_limit_is_counted_in_the_summary() -> None:
    tiny = summarize(_run(1))
    assert tiny.auctions_limited > 0
    assert tiny.auction_gap_max >= 0.0


def test_the_default_limit_is_never_hit_and_decides_as_no_limit() -> None:
    default, unlimited = _run(200_000), _run(0)
    assert summarize(default).auctions_limited == 0
    assert summarize(unlimited).auctions_limited == 0
    assert [(i.start, i.job_id, i.gpus) for i in default.intervals] == [
        (i.start, i.job_id, i.gpus) for i in unlimited.intervals
    ]
