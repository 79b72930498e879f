"""What the runtime did, as a workload the simulator can replay (``themis replay``).

The arbiter's state directory records every app it was given: the app file (gang, step
budget, declared step time, placement factors), when the arbiter admitted it (its
arrival on the runtime's clock), and per trial the steps in its last checkpoint
(``steps_done``) and the GPU-seconds it held (``attained``). From these:

- **apps and arrivals**: every admitted app, arriving at its admission time minus the
  first admission of an app kept (so the workload starts at 0 even when the first app
  admitted ran nothing and is left out). Apps never admitted (still queued, or
  refused because no machine could hold their gang) ran nothing and are left out, counted
  in the workload's notes.
- **gangs**: each trial's gang as recorded; its job id is ``app/trial``.
- **work**: a trial that ended (finished, stopped by successive halving, failed,
  cancelled) did exactly ``steps_done`` steps, and that is its work. A trial not over yet
  (waiting, running, parked at a rung) has its remaining work *estimated*: with
  ``unfinished="budget"`` (the default) it runs to its declared step budget, as its app
  file says it would; with ``"done"`` only its checkpointed steps count. A trial with no
  work at all is left out (and an app left with no trial).
- **speed**: an app's model runs at its *measured* GPU-seconds per step: the GPU-seconds
  its trials held over the steps they checkpointed (start-up, checkpoints and lost steps
  included: what a step really cost on that cluster). An app none of whose trials
  checkpointed a step has no measurement and runs at its declared ``step_time`` times its
  gang (``speed="declared"``: every app does, for a replay free of the runtime's
  overheads). Placement factors are the app file's.

Each app is its own model (named after the app), so the workload file carries every
speed with it and replays identically anywhere. Successive halving is not re-decided:
which trial stopped where is what happened, taken as the trials' work.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.runtime.state.store import DB_NAME, ENDED, AppRow, Store, TrialRow

#: The arbiter's settings besides the policy's knobs that a simulation takes as its own:
#: ``meta.serve`` key -> the run option of ``themis replay`` (and ``make_config``) that
#: sets it. The knobs it takes by the knob table (``policies/knobs.py``).
SIMULATED = {
    "batch_window": "batch_window",
    "seed": "seed",
}
#: Knobs every arbiter recorded: a record without one is said to lack it.
ALWAYS_RECORDED = ("fairness_knob", "lease")
#: What the arbiter ran with that the simulator has no counterpart of.
NOT_SIMULATED = {
    "grace": "grace {:g} s (the simulator stops a job at once)",
    "tick": "tick {:g} s (the simulator acts at each event)",
    "auction_deadline": "auction deadline {} s (the simulator bounds auctions by "
    "search nodes, reproducibly)",
}

#: How the remaining work of a trial not over yet is estimated.
UNFINISHED = ("budget", "done")
#: Where an app's speed comes from: what its trials took, or what its app file declares.
SPEEDS = ("measured", "declared")


@dataclass(frozen=True)
class Recorded:
    """What a state directory holds that a replay needs."""

    state_dir: Path
    apps: tuple[AppRow, ...]
    trials: dict[str, tuple[TrialRow, ...]]
    #: The last cluster the arbiter scheduled on (``runtime.cluster.cluster_record``).
    cluster: dict[str, Any] | None = None
    #: The policy options of the last arbiter started on it.
    serve: dict[str, Any] | None = None


@dataclass
class Conversion:
    """The workload and what was left out or estimated on the way."""

    workload: Workload
    #: reason -> count of apps or trials left out.
    excluded: dict[str, int] = field(default_factory=dict)
    #: Trials whose work is an estimate (not over yet).
    estimated: int = 0
    #: Apps whose speed is their declared step time (no step checkpointed).
    declared_speed: int = 0


def read_state(state_dir: str | Path) -> Recorded:
    """Read a state directory, read-only; a missing, empty or unreadable one is refused
    with one line naming it."""
    path = Path(state_dir)
    if not path.exists():
        raise ThemisError("no such state directory", source=str(path))
    if not path.is_dir():
        raise ThemisError(
            f"not a directory: give the arbiter's --state-dir (a backup: copy it into a "
            f"directory as {DB_NAME})",
            source=str(path),
        )
    db = path / DB_NAME
    if not db.exists():
        raise ThemisError(
            f"no state database ({DB_NAME}): not a themis state directory", source=str(path)
        )
    if db.stat().st_size == 0:
        raise ThemisError("an empty state database: nothing was recorded", source=str(db))
    store = Store(path, readonly=True)
    try:
        apps = tuple(store.apps())
        trials = {app.app_id: tuple(store.trials(app.app_id)) for app in apps}
        cluster = _json_meta(store, "cluster")
        serve = _json_meta(store, "serve")
    except (sqlite3.DatabaseError, ValueError, KeyError) as exc:
        raise ThemisError(f"not a readable themis database ({exc})", source=str(db)) from None
    finally:
        store.close()
    return Recorded(path, apps, trials, cluster, serve)


@dataclass
class Settings:
    """What a replay simulates with, from the arbiter's record (``meta.serve``)."""

    #: The recorded policy (None: none recorded).
    policy: str | None = None
    #: Run option name -> the arbiter's value.
    values: dict[str, Any] = field(default_factory=dict)
    #: What the arbiter ran with that the replay cannot reproduce, or did not record.
    unknown: list[str] = field(default_factory=list)


def recorded_settings(serve: dict[str, Any] | None) -> Settings:
    """The arbiter's own settings as ``themis replay``'s run options: the policy, the
    batch window, seed and every policy knob it recorded (a plug-in's too, when installed),
    from the record this arbiter writes and from an older one's; and a line for each
    setting it ran with that a simulation cannot know or reproduce."""
    from themis.policies.registry import knobs as all_knobs

    out = Settings()
    if serve is None:
        out.unknown.append(
            "every setting: the state records none (an arbiter older than this themis)"
        )
        return out
    policy = serve.get("policy")
    out.policy = policy if isinstance(policy, str) else None
    for key, option in SIMULATED.items():
        value = serve.get(key)
        if _number(value):
            out.values[option] = value
        else:
            out.unknown.append(f"{key} (not recorded)")
    knobs = serve.get("knobs")
    knobs = dict(knobs) if isinstance(knobs, dict) else {}
    by_field = {k.field: k for k in all_knobs()}
    for name in by_field:  # an older arbiter kept a few knobs beside the others
        if name in serve and name not in knobs:
            knobs[name] = serve[name]
    for name in ALWAYS_RECORDED:
        if not _number(knobs.get(name)):
            knobs.pop(name, None)
            out.unknown.append(f"{name} (not recorded)")
    for name, value in knobs.items():
        knob = by_field.get(name)
        if knob is None or name in NOT_SIMULATED:
            continue
        if isinstance(value, list):  # JSON's form of a tuple (tiresias_thresholds)
            value = tuple(value)
        scalar = value is None or isinstance(value, (bool, int, float, str, tuple))
        if knob.read is None and scalar and not (knob.parse is not None and isinstance(value, str)):
            out.values[knob.name] = value
        elif knob.read is not None and value is None:
            continue  # the runtime's node limit, none: its deadline takes its place (said)
        else:
            out.unknown.append(f"{name} {value!r} (not applied)")
    for key, what in NOT_SIMULATED.items():
        if key in serve or key in knobs:
            value = knobs[key] if key in knobs else serve[key]
            out.unknown.append(what.format(value if value is not None else "none"))
        else:
            out.unknown.append(f"{key} (not recorded)")
    out.unknown.append(
        "restart cost (the arbiter measures none: the replay uses the simulator's --restart-cost)"
    )
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _json_meta(store: Store, key: str) -> dict[str, Any] | None:
    text = store.meta(key)
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None


def measured_time_per_step(app: AppRow, trials: tuple[TrialRow, ...]) -> float | None:
    """GPU-seconds per step over the trials that checkpointed steps (None: none did)."""
    held = sum(t.attained for t in trials if t.steps_done > 0 and t.attained > 0)
    steps = sum(t.steps_done for t in trials if t.steps_done > 0 and t.attained > 0)
    if steps <= 0 or not (math.isfinite(held) and held > 0):
        return None
    return held / steps


def trial_work(trial: TrialRow, unfinished: str) -> tuple[float, bool]:
    """The trial's work in steps, and whether it is an estimate."""
    if trial.state in ENDED:
        return float(trial.steps_done), False
    if unfinished == "budget":
        return float(max(trial.budget, trial.steps_done)), True
    return float(trial.steps_done), trial.steps_done < trial.budget


def job_id(app_id: str, trial_id: str) -> str:
    """A trial's job id in the workload: ``app/trial`` (a workload's job ids are unique
    across apps, a runtime's trial ids only within theirs)."""
    return f"{app_id}/{trial_id}"


def convert(recorded: Recorded, unfinished: str = "budget", speed: str = "measured") -> Conversion:
    """The recorded apps as a workload (the module's docstring says how); with
    ``speed="declared"`` every app runs at its app file's ``step_time`` instead of its
    measured speed."""
    if unfinished not in UNFINISHED:
        raise ValueError(f"unfinished must be one of {UNFINISHED}, got {unfinished!r}")
    if speed not in SPEEDS:
        raise ValueError(f"speed must be one of {SPEEDS}, got {speed!r}")
    excluded: Counter[str] = Counter()
    admitted = [a for a in recorded.apps if a.arrival is not None]
    for app in recorded.apps:
        if app.arrival is None:
            excluded["apps never admitted"] += 1
    apps: list[AppSpec] = []
    profiles: dict[str, ModelProfile] = {}
    estimated = declared = 0
    for app in sorted(admitted, key=lambda a: (a.arrival, a.submitted_at, a.app_id)):
        assert app.arrival is not None
        trials = recorded.trials.get(app.app_id, ())
        jobs: list[JobSpec] = []
        guesses = 0
        for trial in trials:
            work, guess = trial_work(trial, unfinished)
            if work <= 0:
                excluded["trials with no step done"] += 1
                continue
            guesses += guess
            jobs.append(JobSpec(job_id(app.app_id, trial.trial_id), trial.gang, work))
        if not jobs:
            excluded["apps with no step done"] += 1
            continue
        estimated += guesses
        per_step = measured_time_per_step(app, trials) if speed == "measured" else None
        if per_step is None:
            declared += 1
            per_step = app.spec.step_time * app.spec.gpus_per_trial
        spec = app.spec
        profiles[app.app_id] = ModelProfile(
            app.app_id, per_step, spec.cross_machine, spec.cross_rack
        )
        apps.append(AppSpec(app.app_id, app.arrival, app.app_id, tuple(jobs)))
    if not apps:
        what = "no app" if not recorded.apps else "no app that ran a step or has steps left"
        raise ThemisError(
            f"the state database holds {what}: nothing to replay", source=str(recorded.state_dir)
        )
    first = apps[0].arrival  # the earliest app kept (they are in arrival order)
    apps = [replace(a, arrival=a.arrival - first) for a in apps]
    source = f"replay of {recorded.state_dir}"
    workload = Workload(tuple(apps), profiles, source)
    return Conversion(workload, dict(excluded), estimated, declared)


def notes(
    conversion: Conversion, recorded: Recorded, unfinished: str, speed: str = "measured"
) -> dict[str, Any]:
    """Provenance for the workload file's ``notes``."""
    out: dict[str, Any] = {
        "converted_from": "themis runtime state",
        "state_dir": str(recorded.state_dir),
        "work": "ended trials: steps checkpointed; trials not over: "
        + ("their declared step budget" if unfinished == "budget" else "steps checkpointed"),
        "speed": "measured GPU-seconds per checkpointed step (declared step_time x gang "
        "where no step was checkpointed)"
        if speed == "measured"
        else "declared step_time x gang",
        "estimated_trials": conversion.estimated,
        "declared_speed_apps": conversion.declared_speed,
    }
    if conversion.excluded:
        out["excluded"] = dict(conversion.excluded)
    if recorded.cluster is not None:
        out["cluster"] = recorded.cluster
    if recorded.serve is not None:
        out["serve"] = recorded.serve
    return out
