"""app.yaml: every field checked, one-line errors naming the field, configs drawn once."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.runtime.state.appfile import Halving, load_app_file

GOOD = """
name: sweep-1
entrypoint: mlp:train
trials: 5
gpus_per_trial: 2
steps: 100
step_time: 0.5
search_space:
  lr: [0.1, 0.01]
  hidden: [8, 16]
  wd: {loguniform: [0.0001, 0.01]}
early_stopping: {rule: successive_halving, metric: loss, mode: min, eta: 3, min_steps: 10}
placement: {cross_machine: 0.8}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.yaml"
    path.write_text(text)
    return path


def test_good_file_resolves_every_field(tmp_path: Path) -> None:
    app = load_app_file(write(tmp_path, GOOD))
    assert (app.name, app.entrypoint, app.trials, app.gpus_per_trial) == (
        "sweep-1",
        "mlp:train",
        5,
        2,
    )
    assert app.steps == 100 and app.step_time == 0.5
    assert app.halving == Halving("loss", "min", 3, 10)
    assert app.halving.rungs(100) == [10, 30, 90]
    assert (app.cross_machine, app.cross_rack) == (0.8, 0.8)  # cross_rack defaults to it
    assert app.workdir == str(tmp_path.resolve())
    # The grid is walked in order and cycled: 4 points for 5 trials.
    grid = [(c["lr"], c["hidden"]) for c in app.configs]
    assert grid == [(0.1, 8), (0.1, 16), (0.01, 8), (0.01, 16), (0.1, 8)]
    assert all(1e-4 <= c["wd"] <= 1e-2 for c in app.configs)
    assert len({c["wd"] for c in app.configs}) == 5


def test_draws_are_a_function_of_the_seed(tmp_path: Path) -> None:
    first = load_app_file(write(tmp_path, GOOD)).configs
    again = load_app_file(write(tmp_path, GOOD)).configs
    other = load_app_file(write(tmp_path, GOOD + "seed: 3\n")).configs
    assert first == again
    assert [c["wd"] for c in first] != [c["wd"] for c in other]


def test_round_trip_through_the_store_format(tmp_path: Path) -> None:
    from themis.runtime.state.appfile import AppFile

    app = load_app_file(write(tmp_path, GOOD))
    assert app.ranks == "gpu"  # one process per GPU unless the file says otherwise
    assert AppFile.from_dict(app.to_dict()) == app
    per_node = load_app_file(write(tmp_path, GOOD + "ranks: node\n"))
    assert per_node.ranks == "node" and AppFile.from_dict(per_node.to_dict()) == per_node
    stored_before = {k: v for k, v in app.to_dict().items() if k != "ranks"}
    assert AppFile.from_dict(stored_before).ranks == "gpu"
    assert app.progress_weight == 1.0
    depth_first = load_app_file(write(tmp_path, GOOD + "progress_weight: 0\n"))
    assert depth_first.progress_weight == 0.0
    assert AppFile.from_dict(depth_first.to_dict()) == depth_first
    before = {k: v for k, v in depth_first.to_dict().items() if k != "progress_weight"}
    assert AppFile.from_dict(before).progress_weight == 1.0


def test_the_progress_weight_reaches_the_apps_trial_order(tmp_path: Path) -> None:
    """The runtime builds its ``AppState`` from the file: with weight 0 a partly made
    trial keeps its place ahead of fresh ones; with the default it goes behind them."""
    from themis.agent.app_scheduler import waiting_order
    from themis.model.state import AppState
    from themis.runtime.loop.app_model import app_profile, app_spec

    orders = {}
    for extra in ("", "progress_weight: 0\n"):
        app = load_app_file(write(tmp_path, GOOD + extra))
        state = AppState(app_spec(app, 0.0), app_profile(app), 1.0)
        state.jobs[0].start((0,), rate=1.0, now=0.0)
        state.jobs[0].stop(10.0, best=True)
        orders[extra] = [j.index for j in waiting_order(state, 10.0)]
    assert orders[""][-1] == 0 and orders["progress_weight: 0\n"][0] == 0


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        (("trials: 5", "trials: 0"), "trials", "must be >= 1"),
        (("trials: 5", "trials: five"), "trials", "must be an integer"),
        (("steps: 100", "steps: 1.5"), "steps", "must be an integer"),
        (("step_time: 0.5", "step_time: -1"), "step_time", "> 0"),
        (("entrypoint: mlp:train", "entrypoint: mlp.train"), "entrypoint", "module:function"),
        (("name: sweep-1", "name: 'a b'"), "name", "letters"),
        (("eta: 3", "eta: 1"), "early_stopping.eta", ">= 2"),
        (("mode: min", "mode: lowest"), "early_stopping.mode", "'min' or 'max'"),
        (("rule: successive_halving", "rule: hyperband"), "early_stopping.rule", "successive"),
        (("cross_machine: 0.8", "cross_machine: 1.5"), "placement.cross_machine", "at most"),
        (("[0.1, 0.01]", "[]"), "search_space.lr", "empty"),
        (("loguniform: [0.0001, 0.01]", "lognormal: [1, 2]"), "search_space.wd", "unknown"),
        (("loguniform: [0.0001, 0.01]", "uniform: [2, 1]"), "search_space.wd", "low < high"),
        (("gpus_per_trial: 2", "gpus_per_trial: 2\ncolour: red"), "colour", "unknown field"),
        (("gpus_per_trial: 2", "gpus_per_trial: 2\nranks: machine"), "ranks", "gpu, node"),
        (("steps: 100", "steps: 100\nprogress_weight: -1"), "progress_weight", "at least 0"),
        (("steps: 100", "steps: 100\nprogress_weight: 101"), "progress_weight", "at most 100"),
        (("steps: 100", "steps: 100\nprogress_weight: .inf"), "progress_weight", "finite"),
        (("steps: 100", "steps: 100\nprogress_weight: x"), "progress_weight", "a number"),
    ],
)
def test_malformed_field_is_named(tmp_path: Path, change, field, fragment) -> None:
    old, new = change
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ThemisError) as info:
        load_app_file(path)
    message = info.value.format()
    assert f"field '{field}'" in message
    assert fragment in message
    assert "\n" not in message
    assert message.startswith(str(path))


def test_missing_field_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("steps: 100\n", ""))
    with pytest.raises(ThemisError, match="field 'steps': is required"):
        load_app_file(path)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: a\ntrials: [1, 2\nsteps: 3\n")
    with pytest.raises(ThemisError) as info:
        load_app_file(path)
    assert info.value.line is not None and info.value.line >= 2
    assert "invalid YAML" in info.value.message


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ThemisError, match="expected a mapping"):
        load_app_file(write(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(ThemisError, match="cannot read app file"):
        load_app_file(tmp_path / "nope.yaml")


def test_loguniform_draws_are_log_spread(tmp_path: Path) -> None:
    text = GOOD.replace("trials: 5", "trials: 400")
    configs = load_app_file(write(tmp_path, text)).configs
    logs = [math.log10(c["wd"]) for c in configs]
    below = sum(x < -3 for x in logs)  # half the log range
    assert 150 < below < 250


# -- hostile input: refused fast, before anything is stored ------------------------------

ALIAS_BOMB = """name: bomb
entrypoint: m:f
trials: 1
gpus_per_trial: 1
steps: 1
step_time: 1
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
search_space: {x: *g}
"""


def refused_fast(path: Path, *fragments: str) -> str:
    import time

    started = time.monotonic()
    with pytest.raises(ThemisError) as info:
        load_app_file(path)
    assert time.monotonic() - started < 1.0
    message = info.value.format()
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def test_a_yaml_alias_bomb_is_refused_in_under_a_second(tmp_path: Path) -> None:
    assert len(ALIAS_BOMB) < 600
    refused_fast(write(tmp_path, ALIAS_BOMB), "aliases", ":7")


def test_an_anchor_alone_is_refused_too(tmp_path: Path) -> None:
    refused_fast(write(tmp_path, GOOD + "seed: &s 3\n"), "anchors")


def test_a_huge_app_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(GOOD + "#" + "x" * (7 * 1024 * 1024) + "\n")
    refused_fast(path, "7.0 MiB", "at most 64 KiB")


def test_deep_nesting_is_one_error_not_a_recursion_traceback(tmp_path: Path) -> None:
    refused_fast(write(tmp_path, GOOD + "seed: " + "[" * 5000 + "]" * 5000 + "\n"), "nested")


def test_trials_and_search_space_are_bounded(tmp_path: Path) -> None:
    from themis.runtime.state.appfile import MAX_CHOICES, MAX_PARAMS, MAX_TRIALS

    refused_fast(
        write(tmp_path, GOOD.replace("trials: 5", f"trials: {MAX_TRIALS + 1}")),
        "field 'trials'",
        f"at most {MAX_TRIALS}",
    )
    many = "\n".join(f"  p{k}: [1]" for k in range(MAX_PARAMS + 1))
    refused_fast(
        write(tmp_path, GOOD.replace("search_space:\n", "search_space:\n" + many + "\n")),
        "field 'search_space'",
        f"at most {MAX_PARAMS}",
    )
    choices = ", ".join(str(k) for k in range(MAX_CHOICES + 1))
    refused_fast(
        write(tmp_path, GOOD.replace("lr: [0.1, 0.01]", f"lr: [{choices}]")),
        "field 'search_space.lr'",
        f"at most {MAX_CHOICES}",
    )
    refused_fast(
        write(tmp_path, GOOD.replace("lr: [0.1, 0.01]", "lr: [[1, 2], 3]")),
        "field 'search_space.lr'",
        "numbers, strings or booleans",
    )
    refused_fast(
        write(tmp_path, GOOD.replace("lr: [0.1, 0.01]", f"lr: ['{'y' * 300}']")),
        "field 'search_space.lr'",
        "at most 256 characters",
    )


# -- numbers bounded, names whole, keys unique, floats finite and normal -----------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("steps: 100", "steps: 1180591620717411303424"), "steps"),
        (("steps: 100", "steps: 9223372036854775807"), "steps"),
        (("gpus_per_trial: 2", "gpus_per_trial: 4294967296"), "gpus_per_trial"),
        (("trials: 5", "trials: 5\nseed: 18446744073709551616"), "seed"),
        (("trials: 5", "trials: 5\ncheckpoint_every: 99999999999999999999"), "checkpoint_every"),
        (("min_steps: 10", "min_steps: 99999999999999999999"), "early_stopping.min_steps"),
        (("eta: 3", "eta: 99999999999999999999"), "early_stopping.eta"),
        (("step_time: 0.5", "step_time: 1.0e+300"), "step_time"),
        (("[0.1, 0.01]", "[0.1, 99999999999999999999999]"), "search_space.lr"),
        (("loguniform: [0.0001, 0.01]", "randint: [0, 1.0e+300]"), "search_space.wd"),
    ],
)
def test_huge_numbers_are_refused_with_their_field(tmp_path: Path, change, field) -> None:
    """A number SQLite (or the arithmetic of a round) cannot hold would stop the arbiter;
    every numeric field is bounded where the file is read."""
    old, new = change
    assert old in GOOD
    message = refused_fast(write(tmp_path, GOOD.replace(old, new)), f"field '{field}'")
    assert "at most" in message and "\n" not in message


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("name: sweep-1", 'name: "sweep-1\\n"'), "name"),
        (("entrypoint: mlp:train", 'entrypoint: "mlp:train\\n"'), "entrypoint"),
        (("  hidden: [8, 16]", '  "hidden\\n": [8, 16]'), "search_space.'hidden\\n'"),
        (("metric: loss", 'metric: "loss\\n"'), "early_stopping.metric"),
    ],
)
def test_a_name_ending_in_a_newline_is_refused(tmp_path: Path, change, field) -> None:
    """Names are matched whole: ``$`` with ``re.match`` would accept a trailing newline."""
    old, new = change
    assert old in GOOD
    message = refused_fast(write(tmp_path, GOOD.replace(old, new)), f"field '{field}'")
    assert "\n" not in message


def test_a_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    """Of two ``steps``, the last would silently win."""
    refused_fast(write(tmp_path, GOOD + "steps: 5\n"), "duplicate key 'steps'", ":")
    message = refused_fast(
        write(tmp_path, GOOD.replace("  hidden: [8, 16]", "  hidden: [8, 16]\n  lr: [3]")),
        "duplicate key 'lr'",
    )
    assert f"{tmp_path / 'app.yaml'}:11:" in message  # the line of the second 'lr'


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        (("[0.1, 0.01]", "[0.1, .inf]"), "search_space.lr", "finite"),
        (("[0.1, 0.01]", "[.nan]"), "search_space.lr", "finite"),
        (("[0.1, 0.01]", "[5.0e-324]"), "search_space.lr", "subnormal"),
        (("loguniform: [0.0001, 0.01]", "uniform: [0, .inf]"), "search_space.wd", "finite"),
        (
            ("loguniform: [0.0001, 0.01]", "uniform: [-1.0e+308, 1.0e+308]"),
            "search_space.wd",
            "at most",
        ),
        (("loguniform: [0.0001, 0.01]", "loguniform: [5.0e-324, 1]"), "search_space.wd", "sub"),
        (("step_time: 0.5", "step_time: 5.0e-324"), "step_time", "at least"),
        (("step_time: 0.5", "step_time: .inf"), "step_time", "finite"),
        (("cross_machine: 0.8", "cross_machine: 5.0e-324"), "placement.cross_machine", "least"),
    ],
)
def test_non_finite_and_subnormal_numbers_are_refused(
    tmp_path: Path, change, field, fragment
) -> None:
    """Unchecked, ``uniform: [-1e308, 1e308]`` would store Infinity (not JSON) and
    ``step_time: 5e-324`` make rho infinite."""
    old, new = change
    assert old in GOOD
    refused_fast(write(tmp_path, GOOD.replace(old, new)), f"field '{field}'", fragment)
