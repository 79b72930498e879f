"""``themis replay`` on a hand-built state directory: the conversion of recorded apps,
trials and step times into a workload, and the command's errors and files.

The state database is written through the store's own methods, as the arbiter writes
it; tests/runtime/test_replay_ray.py replays one a real runtime session wrote.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.cli.conftest import assert_one_line_error, cli  # noqa: F401 (fixture)
from tests.runtime.conftest import app_yaml
from themis.errors import ThemisError
from themis.runtime.loop.halving import ENDED
from themis.runtime.loop.options import RUNTIME_KNOBS
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.replay import Recorded, convert, read_state
from themis.runtime.state.store import DB_NAME, AppRow, Store, TrialRow
from themis.runtime.workers.ray_inventory import Inventory, NodeInfo, cluster_record, regular_spec


def build_state(tmp_path: Path, cluster: bool = True) -> Path:
    """Four apps: a finished one, one stopped by halving, one still running, one never
    admitted; arrivals at 100, 130, 190 s of the runtime's clock."""
    state = tmp_path / "state"
    store = Store(state, init=True)
    files = tmp_path / "apps"
    files.mkdir()
    specs = {
        "done": app_yaml(files, "done", trials=2, gpus_per_trial=1, steps=100, step_time=0.5),
        "halved": app_yaml(files, "halved", trials=2, gpus_per_trial=2, steps=80, step_time=0.2),
        "live": app_yaml(files, "live", trials=3, gpus_per_trial=1, steps=50, step_time=1.0),
        "queued": app_yaml(files, "queued", trials=1, gpus_per_trial=1, steps=10),
    }
    for name, path in specs.items():
        store.add_app(load_app_file(path), "hash-" + name, str(path))
    store.update_app("done", state="finished", arrival=100.0, finish=400.0, t_cluster=50.0)
    for trial in ("t000", "t001"):  # 100 steps in 60 GPU-seconds: 0.6 s a step
        store.update_trial("done", trial, state="finished", steps_done=100, attained=60.0)
    store.update_app("halved", state="finished", arrival=130.0, finish=300.0, t_cluster=20.0)
    store.update_trial("halved", "t000", state="finished", steps_done=80, attained=40.0)
    store.update_trial("halved", "t001", state="stopped-early", steps_done=20, attained=10.0)
    store.update_app("live", state="running", arrival=190.0, t_cluster=60.0)
    store.update_trial("live", "t000", state="running", steps_done=20, attained=30.0)
    store.update_trial("live", "t001", state="waiting", steps_done=0, attained=0.0)
    store.update_trial("live", "t002", state="parked", steps_done=10, attained=15.0)
    if cluster:
        store.set_meta("cluster", json.dumps({"machines": [], "spec": "1x2x2"}))
    store.close()
    return state


def test_conversion_keeps_apps_gangs_arrivals_and_observed_work(tmp_path: Path) -> None:
    recorded = read_state(build_state(tmp_path))
    conversion = convert(recorded)
    workload = conversion.workload
    assert [a.app_id for a in workload.apps] == ["done", "halved", "live"]
    assert [a.arrival for a in workload.apps] == [0.0, 30.0, 90.0]
    jobs = {
        a.app_id: [(j.job_id.removeprefix(f"{a.app_id}/"), j.gang, j.work) for j in a.jobs]
        for a in workload.apps
    }
    assert jobs["done"] == [("t000", 1, 100.0), ("t001", 1, 100.0)]
    assert jobs["halved"] == [("t000", 2, 80.0), ("t001", 2, 20.0)]  # stopped at its rung
    # Not over yet: the declared budget, the waiting trial included.
    assert jobs["live"] == [("t000", 1, 50.0), ("t001", 1, 50.0), ("t002", 1, 50.0)]
    assert conversion.estimated == 3
    assert conversion.excluded == {"apps never admitted": 1}
    # Measured GPU-seconds per step; placement factors from the app file.
    profiles = workload.profiles
    assert profiles["done"].time_per_iteration == pytest.approx(0.6)
    assert profiles["halved"].time_per_iteration == pytest.approx(0.5)
    assert profiles["live"].time_per_iteration == pytest.approx(1.5)
    assert [a.model for a in workload.apps] == ["done", "halved", "live"]


def test_unfinished_done_counts_only_checkpointed_steps(tmp_path: Path) -> None:
    conversion = convert(read_state(build_state(tmp_path)), "done")
    live = next(a for a in conversion.workload.apps if a.app_id == "live")
    assert [(j.job_id, j.work) for j in live.jobs] == [("live/t000", 20.0), ("live/t002", 10.0)]
    assert conversion.excluded == {"apps never admitted": 1, "trials with no step done": 1}


def test_speed_declared_runs_every_app_at_its_app_file_step_time(tmp_path: Path) -> None:
    conversion = convert(read_state(build_state(tmp_path)), speed="declared")
    per_step = {n: p.time_per_iteration for n, p in conversion.workload.profiles.items()}
    assert per_step == {"done": 0.5, "halved": 0.4, "live": 1.0}  # step_time x gang


def test_an_app_with_no_step_measured_runs_at_its_declared_step_time(tmp_path: Path) -> None:
    state = build_state(tmp_path)
    store = Store(state)
    store.update_trial("live", "t000", steps_done=0, attained=0.0)
    store.update_trial("live", "t002", steps_done=0, attained=0.0)
    store.close()
    conversion = convert(read_state(state))
    assert conversion.declared_speed == 1
    assert conversion.workload.profiles["live"].time_per_iteration == pytest.approx(1.0)


def test_regular_clusters_have_a_spec_and_others_none() -> None:
    nodes = tuple(NodeInfo(f"n{k}", "r0" if k < 2 else "r1", 4, None) for k in range(4))
    assert regular_spec([{"rack": n.rack, "gpus": n.gpus, "type": None} for n in nodes]) == "2x2x4"
    typed = [{"rack": "a", "gpus": 8, "type": "V100"}]
    assert regular_spec(typed) == "1x1x8:v100"
    uneven = [{"rack": "a", "gpus": 4, "type": None}, {"rack": "a", "gpus": 2, "type": None}]
    assert regular_spec(uneven) is None
    assert cluster_record(Inventory(None, (), ())) is None


def test_replay_runs_and_its_export_replays_identically(cli, tmp_path: Path) -> None:  # noqa: F811
    state = build_state(tmp_path)
    out, export = tmp_path / "r", tmp_path / "w.yaml"
    result = cli("replay", state, "--out", out, "--export", export, "--lease", "60", "-q")
    assert result.code == 0, result.err
    assert "3 apps, 7 jobs" in result.out and "4 GPUs (1x2x2)" in result.out
    assert "3 trials not over yet: work estimated as their declared step budget" in result.out
    assert "--cluster 1x2x2" in result.out
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["apps"], summary["jobs"]) == (3, 7)
    again = tmp_path / "s"
    result = cli("simulate", "--trace", export, "--cluster", "1x2x2", "--lease", "60",
                 "--out", again, "-q")  # fmt: skip
    assert result.code == 0, result.err
    assert (again / "allocations.csv").read_bytes() == (out / "allocations.csv").read_bytes()
    # Its summary.json runs it again with simulate (the workload file it wrote).
    result = cli("simulate", "--config", out / "summary.json", "--out", tmp_path / "c", "-q")
    assert result.code == 0, result.err
    assert (tmp_path / "c" / "allocations.csv").read_bytes() == (
        out / "allocations.csv"
    ).read_bytes()
    gavel = cli("replay", state, "--policy", "gavel", "--out", tmp_path / "g", "-q")
    assert gavel.code == 0, gavel.err
    assert json.loads((tmp_path / "g" / "summary.json").read_text())["policy"] == "gavel"


def test_a_state_dir_without_a_recorded_cluster_needs_cluster(cli, tmp_path: Path) -> None:  # noqa: F811
    state = build_state(tmp_path, cluster=False)
    assert_one_line_error(cli("replay", state, "--out", tmp_path / "o"), "--cluster", "records no")
    result = cli("replay", state, "--cluster", "1x1x4", "--out", tmp_path / "o", "-q")
    assert result.code == 0, result.err
    store = Store(state)
    uneven = [{"rack": "r0", "gpus": 4, "type": None}, {"rack": "r0", "gpus": 2, "type": None}]
    store.set_meta("cluster", json.dumps({"machines": uneven, "spec": None}))
    store.close()
    assert_one_line_error(cli("replay", state), "2 machines of 2/4 GPUs", "give --cluster")
    store = Store(state)
    store.set_meta("cluster", json.dumps({"machines": "junk", "spec": 7}))
    store.close()
    assert_one_line_error(cli("replay", state), "not one RxMxG block")


def test_missing_empty_and_corrupt_state_dirs_are_one_line(cli, tmp_path: Path) -> None:  # noqa: F811
    assert_one_line_error(cli("replay", tmp_path / "nope"), "no such state directory")
    (tmp_path / "backup.db").write_bytes(b"")
    assert_one_line_error(cli("replay", tmp_path / "backup.db"), "not a directory", "as themis.db")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(cli("replay", empty), "no state database")
    (empty / DB_NAME).write_bytes(b"")
    assert_one_line_error(cli("replay", empty), "an empty state database")
    (empty / DB_NAME).write_bytes(b"this is not sqlite" * 100)
    assert_one_line_error(cli("replay", empty), "not a readable themis database")
    fresh = tmp_path / "fresh"
    Store(fresh, init=True).close()
    assert_one_line_error(cli("replay", fresh, "--cluster", "1x1x4"), "nothing to replay")


def test_a_database_missing_its_tables_is_one_line(cli, tmp_path: Path) -> None:  # noqa: F811
    state = build_state(tmp_path)
    db = sqlite3.connect(state / DB_NAME)
    db.execute("DROP TABLE trials")
    db.commit()
    db.close()
    assert_one_line_error(cli("replay", state), "not a readable themis database")


STATES = ("waiting", "running", "parked", "finished", "stopped-early", "failed", "cancelled")
trial_rows = st.lists(
    st.tuples(
        st.sampled_from(STATES),
        st.integers(0, 200),  # steps done
        st.integers(1, 200),  # budget
        st.floats(0, 1e4, allow_nan=False),  # GPU-seconds held
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(
    apps=st.lists(
        st.tuples(st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False)), trial_rows),
        min_size=1,
        max_size=5,
    ),
    unfinished=st.sampled_from(["budget", "done"]),
)
# Found by hypothesis in CI: the first app admitted ran nothing and is left out, so the
# workload must start at the next one's arrival.
@example(apps=[(0.0, [("waiting", 0, 1, 0.0)]), (1.0, [("waiting", 1, 1, 0.0)])], unfinished="done")
def test_conversion_properties(tmp_path_factory, apps, unfinished: str) -> None:
    """Whatever was recorded: arrivals start at 0 in admission order; an ended trial's
    work is its checkpointed steps, one not over at least that (its budget, or exactly
    that with 'done'); a measured app's speed times its measured steps is the GPU-time
    its trials held; every app and trial is kept or counted as left out."""
    spec = load_app_file(app_yaml(tmp_path_factory.mktemp("a"), "x", step_time=0.25))
    rows, trials = [], {}
    for k, (arrival, recorded) in enumerate(apps):
        name = f"app{k}"
        rows.append(AppRow(name, "", spec, "", "running", float(k), arrival, None, None,
                           None, None, 0))  # fmt: skip
        trials[name] = tuple(
            TrialRow(
                name, f"t{i:03d}", i, {}, 1, budget, min(done, budget), state, held, None, 0, None
            )  # fmt: skip
            for i, (state, done, budget, held) in enumerate(recorded)
        )
    recorded_state = Recorded(Path("s"), tuple(rows), trials)
    try:
        conversion = convert(recorded_state, unfinished)
    except ThemisError as exc:
        assert "nothing to replay" in str(exc)
        return
    workload = conversion.workload
    arrivals = [a.arrival for a in workload.apps]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0
    kept_jobs = 0
    for app in workload.apps:
        by_id = {f"{app.app_id}/{t.trial_id}": t for t in trials[app.app_id]}
        for job in app.jobs:
            trial = by_id[job.job_id]
            kept_jobs += 1
            if trial.state in ENDED or unfinished == "done":
                assert job.work == trial.steps_done
            else:
                assert job.work == trial.budget >= trial.steps_done
        measured = [t for t in trials[app.app_id] if t.steps_done > 0 and t.attained > 0]
        per_step = workload.profiles[app.app_id].time_per_iteration
        if measured:
            held = sum(t.attained for t in measured)
            assert per_step * sum(t.steps_done for t in measured) == pytest.approx(held)
        else:
            assert per_step == 0.25
    left_out = conversion.excluded
    assert len(workload.apps) + left_out.get("apps never admitted", 0) + left_out.get(
        "apps with no step done", 0
    ) == len(rows)
    admitted_trials = sum(len(trials[r.app_id]) for r in rows if r.arrival is not None)
    assert kept_jobs + left_out.get("trials with no step done", 0) == admitted_trials


def test_the_arbiter_records_its_cluster_and_options_as_they_change(tmp_path: Path) -> None:
    """Without Ray: a fake launcher and inventory. The cluster is recorded at start, again
    when a node joins, and kept (not emptied) while no node has a GPU."""
    from tests.runtime.fakes import FakeLauncher, nodes
    from themis.runtime.loop.service import ArbiterService, ServiceOptions

    shape = [(2, 2)]
    options = ServiceOptions(
        knobs=replace(RUNTIME_KNOBS, lease=3.0), grace=1.0, tick=0.05, inventory_every=0.0
    )
    store = Store(tmp_path / "state", init=True)
    service = ArbiterService(
        store, tmp_path / "ck", options, lambda: nodes(shape[0]), launcher=FakeLauncher(1.0, {})
    )

    def recorded() -> dict | None:
        text = store.meta("cluster")
        return None if text is None else json.loads(text)

    assert recorded()["spec"] == "1x2x2"
    assert json.loads(store.meta("serve") or "{}")["knobs"]["lease"] == 3.0
    shape[0] = (2, 2, 2)
    service.tick()
    assert recorded()["spec"] == "1x3x2"
    shape[0] = (2, 4)
    service.tick()
    assert recorded()["spec"] is None and [m["gpus"] for m in recorded()["machines"]] == [2, 4]
    shape[0] = ()
    service.tick()
    assert service.cluster is None and [m["gpus"] for m in recorded()["machines"]] == [2, 4]
    store.close()


def test_replay_simulates_with_the_arbiters_own_settings_and_says_what_it_cannot_know(
    cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The arbiter ran with a 20 s lease and a 2 s batch window: so does the replay (it
    used to say so, then simulate with 600 s and 30 s)."""
    state = build_state(tmp_path)
    store = Store(state)
    serve = {"policy": "themis", "lease": 20.0, "fairness_knob": 0.8, "batch_window": 2.0,
             "seed": 3, "knobs": {"renewal_share": 0.5}, "grace": 10.0, "tick": 0.2,
             "auction_deadline": 5.0}  # fmt: skip
    store.set_meta("serve", json.dumps(serve))
    store.close()
    out = tmp_path / "r"
    result = cli("replay", state, "--out", out, "-q")
    assert result.code == 0, result.err
    summary = json.loads((out / "summary.json").read_text())
    config = summary.get("config", summary)
    text = json.dumps(config)
    assert '"lease_s": 20.0' in text and '"batch_window_s": 2.0' in text, text
    assert '"fairness_knob": 0.8' in text and '"renewal_share": 0.5' in text, text
    own = next(line for line in result.out.splitlines() if "arbiter's own" in line)
    assert "policy themis" in own and "lease 20.0" in own, own
    assert "batch_window 2.0" in result.out
    unknown = next(line for line in result.out.splitlines() if "not known" in line)
    assert "grace 10 s" in unknown and "restart cost" in unknown and "auction deadline" in unknown
    given = cli("replay", state, "--out", tmp_path / "g", "--lease", "60", "-q")
    assert given.code == 0, given.err
    assert "given instead of the arbiter's: lease 60.0 (the arbiter ran 20.0)" in given.out
    assert '"lease_s": 60.0' in (tmp_path / "g" / "summary.json").read_text()


def test_replay_reads_the_record_an_arbiter_writes_now(
    cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Every knob recorded by field (``ServiceOptions.record``), the lease and the auction
    deadline among them, not beside them as an older arbiter kept them: the replay
    simulates with the knobs and says the deadline it cannot reproduce."""
    from themis.runtime.loop.options import ServiceOptions

    state = build_state(tmp_path)
    knobs = replace(RUNTIME_KNOBS, lease=20.0, renewal_share=0.5, seed=3, auction_deadline=5.0)
    record = ServiceOptions(knobs=knobs, batch_window=2.0, grace=10.0).record()
    assert "lease" not in record and record["knobs"]["auction_deadline"] == 5.0
    store = Store(state)
    store.set_meta("serve", json.dumps(record))
    store.close()
    result = cli("replay", state, "--out", tmp_path / "r", "-q")
    assert result.code == 0, result.err
    config = json.loads((tmp_path / "r" / "summary.json").read_text())["config"]
    assert config["lease_s"] == 20.0 and config["renewal_share"] == 0.5, config
    assert config["batch_window_s"] == 2.0 and config["seed"] == 3, config
    assert "the arbiter ran themis (--lease 20, --renewal-share 0.5" in result.out, result.out
    unknown = next(line for line in result.out.splitlines() if "not known" in line)
    assert "auction deadline 5.0 s" in unknown and "not recorded" not in unknown, unknown
