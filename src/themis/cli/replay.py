"""``themis replay STATE_DIR``: what the runtime ran, simulated under any policy.

The arbiter's state directory becomes a workload (``runtime/state/replay.py`` says how: apps
and gangs as recorded, arrivals relative to the first admission, work from the steps
checkpointed at the measured speed), written in themis's own format to
``OUT/workload.json`` and simulated exactly as ``themis simulate --trace
OUT/workload.json`` would: so an operator can ask "what if we had run gavel, or f = 0.5,
last week" with the same simulator and policy code, and re-run or share the workload
(``--export``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from themis.cli import defaults
from themis.cli.config_file import config_option
from themis.cli.json_output import JSON_OPTION, emit, say
from themis.cli.progress import QUIET
from themis.cli.run_options import (
    check_policies,
    describe,
    load_inputs,
    make_config,
    run_options_except,
)
from themis.cli.simulate import simulate_options
from themis.errors import ThemisError

#: The shared options that say where a workload comes from, or remodel it by model name:
#: a replay's workload is the state directory's.
NOT_FOR_REPLAY = (
    "trace",
    "trace_format_name",
    "app_gap",
    "throughputs",
    "arrivals",
    "app_interval",
    "profiles",
    "cluster",
    "model_share",
    "vgg_share",
)
#: The workload a replay writes into its output folder (and simulates).
WORKLOAD_FILE = "workload.json"


@click.command(short_help="Simulate what the runtime ran, under any policy.")
@config_option
@click.argument("state_dir", type=click.Path(path_type=Path))
@click.option(
    "--policy",
    default=defaults.POLICY,
    show_default=True,
    help="A registered policy (list them with 'themis policies').",
)
@click.option(
    "--cluster",
    default=None,
    metavar="RxMxG",
    help="Racks x machines per rack x GPUs per machine  [default: the cluster the "
    "arbiter recorded; required when it recorded none, or one no RxMxG spec describes]",
)
@run_options_except(*NOT_FOR_REPLAY)
@click.option(
    "--unfinished",
    type=click.Choice(["budget", "done"]),
    default="budget",
    show_default=True,
    help="Work of trials not over yet: their declared step budget (an estimate: they "
    "would have run to it), or only the steps they checkpointed.",
)
@click.option(
    "--speed",
    type=click.Choice(["measured", "declared"]),
    default="measured",
    show_default=True,
    help="Each app's GPU-seconds per step: measured (held over checkpointed steps: "
    "start-up and checkpoints included) or its app file's step_time times its gang.",
)
@click.option(
    "--export",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the workload here (themis format: YAML for .yaml/.yml, else JSON), "
    "to re-run with 'themis simulate --trace FILE'.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Output directory  [default: {defaults.OUT_DIR}/replay/<policy>]",
)
@QUIET
@JSON_OPTION
def replay(
    state_dir: Path,
    policy: str,
    cluster: str | None,
    unfinished: str,
    speed: str,
    export: Path | None,
    out: Path | None,
    quiet: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Turn the apps, trials, step times and arrivals the arbiter recorded in STATE_DIR
    into a workload and simulate it under one policy; write OUT/workload.json (the
    workload), summary.json, apps.csv and allocations.csv."""
    from themis.runtime.state.replay import convert, notes, read_state

    recorded = read_state(state_dir)
    policy, own, given, unknown = _arbiter_settings(recorded.serve, policy, options)
    conversion = convert(recorded, unfinished, speed)
    spec = cluster if cluster is not None else _recorded_cluster(recorded.cluster, state_dir)
    out_dir = out if out is not None else Path(defaults.OUT_DIR) / "replay" / policy
    workload_path = out_dir / WORKLOAD_FILE
    config = make_config(
        trace=str(workload_path), trace_format_name="themis", cluster=spec, **options
    )
    check_policies([policy], "--policy")
    provenance = notes(conversion, recorded, unfinished, speed)
    provenance["settings"] = {"arbiter's own": own, "given": given, "unknown": unknown}
    from themis.cli.out_dir import claim
    from themis.cli.runs import print_table, request, run
    from themis.reports.files import ensure_dir
    from themis.reports.tables import comparison_table

    ensure_dir(out_dir)
    write_workload_file(conversion.workload, workload_path, provenance)
    workload, cluster_model = load_inputs(config)
    if export is not None:
        write_workload_file(conversion.workload, export, provenance)
    settings = {"policy": policy, "state_dir": str(state_dir), "unfinished": unfinished,
                "speed": speed}  # fmt: skip
    claim(out_dir, "replay", {**settings, **config.to_dict()}, ["."])
    line = describe(workload, cluster_model, config)
    say(line, as_json)
    say(_estimates_line(conversion.estimated, conversion.declared_speed, unfinished, speed),
        as_json)  # fmt: skip
    if recorded.serve is not None:
        say(_ran_line(recorded.serve), as_json)
    if own:
        say(f"replay: simulating with the arbiter's own {', '.join(own)}", as_json)
    if given:
        say(f"replay: given instead of the arbiter's: {', '.join(given)}", as_json)
    say(f"replay: not known or not reproduced: {'; '.join(unknown)}", as_json)
    reproduce = simulate_options(
        options,
        policy=policy,
        trace=config.trace,
        trace_format_name=config.format,
        cluster=config.cluster,
    )
    [record] = run([request(policy, workload, config, out_dir, None, reproduce)], 1, quiet, "run")
    if as_json:
        from themis.reports.files import summary_dict

        emit({"workload": line, "config": {"policy": policy, **config.to_dict()},
              "replay": provenance, "out": str(out_dir),
              "summary": summary_dict(record.summary)})  # fmt: skip
    else:
        print_table(comparison_table([record.summary]))
    say(f"wrote {out_dir}/", as_json)
    if export is not None:
        say(
            f"wrote {export}: re-run with 'themis simulate --trace {export} --cluster {spec}'",
            as_json,
        )


def _arbiter_settings(
    serve: dict[str, Any] | None, policy: str, options: dict[str, Any]
) -> tuple[str, list[str], list[str], list[str]]:
    """Replay with the arbiter's own settings (``meta.serve``) wherever the command line
    or a config file did not set one: the policy and ``options`` updated in place; what
    came from the arbiter, what was given instead, and what cannot be known."""
    from click.core import ParameterSource

    from themis.policies import policy_names
    from themis.runtime.state.replay import recorded_settings

    settings = recorded_settings(serve)
    ctx = click.get_current_context()
    own: list[str] = []
    given: list[str] = []

    def chosen(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)

    if settings.policy is not None:
        if chosen("policy"):
            if policy != settings.policy:
                given.append(f"policy {policy} (the arbiter ran {settings.policy})")
        elif settings.policy in policy_names():
            policy = settings.policy
            own.append(f"policy {policy}")
    for name, value in settings.values.items():
        if name not in options:
            continue
        if chosen(name):
            if options[name] != value:
                given.append(f"{name} {options[name]} (the arbiter ran {value})")
            continue
        options[name] = value
        own.append(f"{name} {value}")
    return policy, own, given, settings.unknown


def _recorded_cluster(record: dict[str, Any] | None, state_dir: Path) -> str:
    """The ``--cluster`` spec of the cluster the arbiter recorded, or why there is none."""
    if record is None:
        raise ThemisError(
            f"{state_dir} records no cluster (an arbiter older than this themis): give "
            "--cluster RxMxG",
            field="--cluster",
        )
    spec = record.get("spec")
    if not isinstance(spec, str):
        machines = record.get("machines")
        machines = machines if isinstance(machines, list) else []
        sizes = sorted({str(m.get("gpus")) for m in machines if isinstance(m, dict)})
        raise ThemisError(
            f"the recorded cluster ({len(machines)} machines of {'/'.join(sizes) or '?'} "
            "GPUs) is not one RxMxG block: give --cluster",
            field="--cluster",
        )
    return spec


def _estimates_line(estimated: int, declared: int, unfinished: str, speed: str) -> str:
    """What in the workload is an estimate rather than observed."""
    if unfinished == "budget":
        work = f"{estimated} trials not over yet: work estimated as their declared step budget"
    else:
        work = f"{estimated} trials not over yet: only their checkpointed steps counted"
    if speed == "declared":
        pace = "every app runs at its declared step_time (--speed declared)"
    elif declared:
        pace = f"{declared} apps with no step checkpointed run at their declared step_time"
    else:
        pace = "every app runs at its measured GPU-seconds per step"
    return f"replay: {work}; {pace}"


def _ran_line(serve: dict[str, Any]) -> str:
    """What the recorded run was scheduled by (the last arbiter started on the state):
    its policy and the knobs it set otherwise than the library's defaults, as flags."""
    from themis.policies.base import default_of
    from themis.policies.registry import knobs
    from themis.reports.html import option_text
    from themis.runtime.state.replay import SIMULATED, recorded_settings

    values = recorded_settings(serve).values
    parts = [
        f"{knob.flag} {option_text(values[knob.name])}"
        for knob in knobs()
        if knob.name in values and values[knob.name] != default_of(knob)
    ]
    parts += [
        f"--{name.replace('_', '-')} {option_text(values[name])}"
        for name in SIMULATED.values()
        if name in values
    ]
    return f"replay: the arbiter ran {serve.get('policy', '?')} ({', '.join(parts)})"


def write_workload_file(workload: Any, path: Path, notes: dict[str, Any]) -> None:
    """The workload in themis's format: YAML for ``.yaml``/``.yml``, else JSON."""
    from themis.workload.writer import write_workload

    encoding = "yaml" if path.suffix.lower() in (".yaml", ".yml") else "json"
    try:
        if path.parent != Path():
            path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            write_workload(workload, out, encoding, notes)
    except OSError as exc:
        raise ThemisError(f"cannot write: {exc.strerror}", source=str(path)) from None
