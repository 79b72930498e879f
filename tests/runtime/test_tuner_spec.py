"""The app file's ``tuner:`` section: a study declared as data, each mistake refused with
one line naming its field, kept by the store as it was read."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.runtime.state.appfile import AppFile, load_app_file

GOOD = """
name: study-1
entrypoint: objective:objective
trials: 12
gpus_per_trial: 1
steps: 20
step_time: 0.05
tuner:
  kind: optuna
  direction: maximize
  sampler: {TPESampler: {seed: 3, n_startup_trials: 4}}
  pruner: {HyperbandPruner: {min_resource: 1, max_resource: 20, reduction_factor: 3}}
  metric: accuracy
  storage: sqlite:///study.db
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.yaml"
    path.write_text(text)
    return path


def test_a_declared_study_is_read_as_data_and_kept_by_the_store(tmp_path: Path) -> None:
    app = load_app_file(write(tmp_path, GOOD))
    tuner = app.tuner
    assert tuner is not None
    assert (tuner.kind, tuner.direction, tuner.sampler, tuner.pruner) == (
        "optuna",
        "maximize",
        "TPESampler",
        "HyperbandPruner",
    )
    assert tuner.sampler_args == {"seed": 3, "n_startup_trials": 4}
    assert tuner.pruner_args["reduction_factor"] == 3
    assert (tuner.metric, tuner.study_name, tuner.storage) == (
        "accuracy",
        "study-1",
        "sqlite:///study.db",
    )
    assert tuner.label == "optuna TPESampler/HyperbandPruner"
    # No search space: the sampler draws; every trial starts with an empty config.
    assert app.configs == ({},) * 12 and app.halving is None
    assert AppFile.from_dict(app.to_dict()) == app


def test_defaults_are_tpe_and_the_median_pruner(tmp_path: Path) -> None:
    text = GOOD.split("tuner:")[0] + "tuner: {kind: optuna}\n"
    tuner = load_app_file(write(tmp_path, text)).tuner
    assert tuner is not None
    assert (tuner.sampler, tuner.pruner, tuner.direction, tuner.storage) == (
        "TPESampler",
        "MedianPruner",
        "minimize",
        None,
    )


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        (("kind: optuna", "kind: hyperopt"), "tuner.kind", "must be one of optuna"),
        (("direction: maximize", "direction: up"), "tuner.direction", "minimize or maximize"),
        (("{TPESampler:", "{PickleSampler:"), "tuner.sampler", "must be one of TPESampler"),
        (("{HyperbandPruner:", "{CustomPruner:"), "tuner.pruner", "must be one of MedianPruner"),
        (("seed: 3", "seed: .nan"), "tuner.sampler.TPESampler.seed", "finite number"),
        (("seed: 3", "seed: !!binary aGk="), "tuner.sampler.TPESampler.seed", "plain data"),
        (("metric: accuracy", "metric: '1 bad'"), "tuner.metric", "identifier"),
        (("storage: sqlite:///study.db", "storage: study.db"), "tuner.storage", "RDB URL"),
        (("  metric: accuracy", "  objective: x"), "tuner.objective", "unknown field"),
        (("gpus_per_trial: 1", "gpus_per_trial: 2"), "gpus_per_trial", "1 GPU per trial"),
        (("step_time: 0.05", "step_time: 0.05\nsearch_space: {lr: [1]}"), "search_space", "tuner"),
    ],
)
def test_a_bad_tuner_is_one_line_naming_its_field(
    tmp_path: Path, change: tuple[str, str], field: str, fragment: str
) -> None:
    assert change[0] in GOOD
    path = write(tmp_path, GOOD.replace(change[0], change[1], 1))
    with pytest.raises(ThemisError) as caught:
        load_app_file(path)
    message = caught.value.format()
    assert f"field '{field}'" in message and fragment in message, message
    assert "\n" not in message


def test_a_tuner_and_successive_halving_are_refused_together(tmp_path: Path) -> None:
    halving = "early_stopping: {rule: successive_halving, metric: loss, min_steps: 5}\n"
    with pytest.raises(ThemisError, match="pruned by its tuner"):
        load_app_file(write(tmp_path, GOOD + halving))


TUNE = """
name: search-1
entrypoint: trainable:train
trials: 8
gpus_per_trial: 1
steps: 20
step_time: 0.05
tuner:
  kind: ray-tune
  searcher: {OptunaSearch: {seed: 0}}
  scheduler: {ASHAScheduler: {grace_period: 4, max_t: 20}}
  metric: loss
  mode: min
  space:
    lr: {loguniform: [0.001, 3.0]}
    hidden: {choice: [8, 16]}
"""


def test_a_ray_tune_search_is_read_as_data(tmp_path: Path) -> None:
    app = load_app_file(write(tmp_path, TUNE))
    tuner = app.tuner
    assert tuner is not None and tuner.label == "ray-tune OptunaSearch/ASHAScheduler"
    assert tuner.space == {"lr": {"loguniform": [0.001, 3.0]}, "hidden": {"choice": [8, 16]}}
    assert (tuner.metric, tuner.direction, tuner.pruner_args["grace_period"]) == (
        "loss",
        "minimize",
        4,
    )
    assert AppFile.from_dict(app.to_dict()) == app


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        (("{OptunaSearch:", "{MySearch:"), "tuner.searcher", "must be one of OptunaSearch"),
        (("{ASHAScheduler:", "{HyperBandScheduler:"), "tuner.scheduler", "ASHAScheduler"),
        (("mode: min", "mode: lowest"), "tuner.mode", "min or max"),
        (("metric: loss", "metric: [loss]"), "tuner.metric", "name of a reported metric"),
        (("{choice: [8, 16]}", "{normal: [0, 1]}"), "tuner.space.hidden", "kind one of"),
        (("{choice: [8, 16]}", "{choice: []}"), "tuner.space.hidden", "list of arguments"),
        (("  mode: min", "  direction: minimize"), "tuner.direction", "unknown field"),
    ],
)
def test_a_bad_search_is_one_line_naming_its_field(
    tmp_path: Path, change: tuple[str, str], field: str, fragment: str
) -> None:
    assert change[0] in TUNE
    with pytest.raises(ThemisError) as caught:
        load_app_file(write(tmp_path, TUNE.replace(change[0], change[1], 1)))
    message = caught.value.format()
    assert f"field '{field}'" in message and fragment in message, message


def test_the_arbiters_side_imports_no_tuner(tmp_path: Path) -> None:
    """Reading a tuner app and every module of the arbiter (loop, API, store) leaves
    Optuna and Ray Tune unimported: they run only in the trials' jobs."""
    import subprocess
    import sys

    optuna_app = write(tmp_path, GOOD)
    (tmp_path / "tune").mkdir()
    tune_app = write(tmp_path / "tune", TUNE)
    code = (
        "import sys\n"
        "import themis.runtime.loop.service, themis.runtime.api.routes\n"
        "import themis.runtime.loop.launches, themis.runtime.api.queries\n"
        "from themis.runtime.state.appfile import load_app_file\n"
        f"for path in ({str(optuna_app)!r}, {str(tune_app)!r}):\n"
        "    assert load_app_file(path).tuner is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'optuna'"
        " or m.startswith('ray.tune')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
