"""``themis simulate``: one policy on one workload.

``compare`` (several policies, several seeds) lives in ``cli/compare.py``. The runner and
the reports (numpy, rich tables) are imported after the options are checked, so that
``--help`` and one-line errors start fast (docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from themis.cli import defaults
from themis.cli.config_file import config_option, recorded_options
from themis.cli.json_output import JSON_OPTION, emit, say
from themis.cli.progress import QUIET
from themis.cli.run_options import check_policies, describe, load_inputs, make_config, run_options


@click.command(short_help="Replay a trace under one policy.")
@config_option
@click.option(
    "--policy",
    default=defaults.POLICY,
    show_default=True,
    help="A registered policy (list them with 'themis policies').",
)
@run_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Output directory  [default: {defaults.OUT_DIR}/<policy>]",
)
@QUIET
@JSON_OPTION
def simulate(policy: str, out: Path | None, quiet: bool, as_json: bool, **options: Any) -> None:
    """Replay a trace under one policy; print a summary and write summary.json, apps.csv
    and allocations.csv (metrics: docs/metrics.md). 'themis simulate --config
    OUT/summary.json' runs it again."""
    config = make_config(**options)
    check_policies([policy], "--policy")
    workload, cluster = load_inputs(config)
    from themis.cli.out_dir import claim
    from themis.cli.runs import print_table, request, run  # after the checks: errors stay quick
    from themis.reports.tables import comparison_table

    out_dir = out if out is not None else Path(defaults.OUT_DIR) / policy
    claim(out_dir, "simulate", {"policy": policy, **config.to_dict()}, ["."])
    line = describe(workload, cluster, config)
    say(line, as_json)
    reproduce = simulate_options({"policy": policy, **options})
    [record] = run(
        [request(policy, workload, config, out_dir, None, reproduce)], 1, quiet, "run", resume=False
    )
    if as_json:
        from themis.reports.files import summary_dict

        settings = {"policy": policy, **config.to_dict()}
        emit({"workload": line, "config": settings, "out": str(out_dir),
              "summary": summary_dict(record.summary)})  # fmt: skip
    else:
        print_table(comparison_table([record.summary]))
    say(f"wrote {out_dir}/", as_json)


def simulate_options(values: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """The ``themis simulate`` options that reproduce one run (``recorded_options`` of
    this command's parameters), for its ``summary.json``."""
    return recorded_options(simulate.params, values, **overrides)
