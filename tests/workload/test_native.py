"""themis's own format: the samples by hand, the JSON Schema as the contract (the fast
per-app check accepts exactly what the schema accepts), and the writer's output read back
to the same workload, whatever the strings and floats."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.workload import load_workload
from themis.workload.native import schema
from themis.workload.native_check import Problem, check_app
from themis.workload.writer import write_workload

from .conftest import PROFILES, SAMPLE_FILES, workload_key


def test_yaml_sample_by_hand() -> None:
    w = load_workload(str(SAMPLE_FILES["themis-yaml"]), seed=0)
    got = [
        (a.app_id, a.arrival, a.model, [(j.job_id, j.gang, j.work, j.line) for j in a.jobs])
        for a in w.apps
    ]
    drawn = w.apps[1].model  # sweep-3 names no model: the seeded draw
    assert got == [
        ("sweep-1", 0.0, "toy-cnn", [("s1-t1", 1, 7200.0, 13), ("s1-t2", 2, 1800 * 2 / 0.5, 14)]),
        ("sweep-3", 300.0, drawn, [("s3-t1", 1, 100.25, 23)]),  # apps in arrival order
        ("42", 600.5, "vgg16", [("4201", 4, 600 * 4 / 1.2, 19)]),  # ids may be numbers
    ]
    assert w.profiles["toy-cnn"] == ModelProfile("toy-cnn", 0.5, 0.9, 0.8)
    assert drawn in w.profiles
    assert w.notes["gpu_types"] == {"toy-cnn": {"v100": 0.25, "k80": 1.5}}
    assert w.notes["models"]["drawn_for_apps_without_model"] == 1


def test_json_sample_with_apps_before_format() -> None:
    w = load_workload(str(SAMPLE_FILES["themis-json"]))
    got = [(a.app_id, a.arrival, [(j.job_id, j.gang, j.work) for j in a.jobs]) for a in w.apps]
    assert got == [
        ("b", 0.0, [("b-1", 2, 100 * 2 / 0.5)]),
        ("a", 10.0, [("a-1", 8, 1000.0), ("a-2", 1, 33 / 0.33)]),
    ]


@pytest.mark.parametrize("sample", ["themis-yaml", "themis-json"])
def test_samples_are_valid_under_the_schema(sample: str) -> None:
    text = SAMPLE_FILES[sample].read_text()
    document = yaml.safe_load(text)
    Draft202012Validator.check_schema(schema())
    assert list(Draft202012Validator(schema()).iter_errors(document)) == []


def test_schema_rejects_what_the_reader_rejects_in_the_header() -> None:
    validator = Draft202012Validator(schema())
    assert not validator.is_valid({"format": "themis-workload", "version": 2, "apps": [{}]})
    assert not validator.is_valid({"version": 1, "apps": []})


# -- the per-app check against the schema -------------------------------------------------

_ids = st.one_of(st.text(max_size=3), st.integers(-5, 5), st.none(), st.booleans())
_numbers = st.one_of(
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-5, max_value=5),
    st.text(max_size=2),
    st.none(),
    st.booleans(),
)
_job = st.dictionaries(
    st.sampled_from(["id", "gpus", "iterations", "duration", "extra"]),
    st.one_of(_ids, _numbers),
    max_size=5,
)
_app = st.one_of(
    st.dictionaries(
        st.sampled_from(["id", "arrival", "model", "jobs", "progress_weight", "other"]),
        st.one_of(_ids, _numbers, st.lists(st.one_of(_job, _numbers), max_size=3)),
        max_size=6,
    ),
    st.lists(st.integers(), max_size=2),
    _numbers,
)
_valid_job = st.fixed_dictionaries(
    {
        "id": st.one_of(st.text(min_size=1, max_size=4), st.integers(0, 99)),
        "gpus": st.integers(1, 8),
    },
    optional={"iterations": st.floats(0, 1e6), "duration": st.floats(0, 1e6)},
)
_valid_app = st.fixed_dictionaries(
    {
        "id": st.one_of(st.text(min_size=1, max_size=4), st.integers(0, 99)),
        "arrival": st.one_of(st.integers(0, 100), st.floats(0, 1e6)),
        "jobs": st.lists(_valid_job, min_size=1, max_size=3),
    },
    optional={"model": st.text(max_size=5), "progress_weight": st.floats(0, 4)},
)
_APP_SCHEMA = Draft202012Validator({"$ref": "#/$defs/app", "$defs": schema()["$defs"]})


def _accepted(app: object) -> bool:
    try:
        check_app(app)
    except Problem:
        return False
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_app, _valid_app))
def test_app_check_agrees_with_the_schema(app) -> None:
    assert _accepted(app) == _APP_SCHEMA.is_valid(app)


def test_app_check_also_refuses_what_json_cannot_write() -> None:
    app = {"id": "a", "arrival": 0, "jobs": [{"id": "j", "gpus": 1, "duration": math.inf}]}
    assert _APP_SCHEMA.is_valid(app)  # the schema cannot say "finite"
    with pytest.raises(Problem) as err:
        check_app(app)
    assert err.value.path == "jobs[0].duration"


# -- writing and reading back ----------------------------------------------------------------

#: Characters YAML and JSON treat specially, on top of any encodable character.
_TRICKY = ["\u2028", "\x85", "\x7f", '"', "\\", "\t", "\n", "#", ":", "-", " ", "&", "*", "!"]
_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(_TRICKY),
    min_size=1,
    max_size=8,
)
_finite = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)


@st.composite
def workloads(draw) -> Workload:
    model = draw(_text)
    profile = ModelProfile(
        model,
        draw(st.floats(min_value=1e-9, max_value=1e3)),
        draw(st.floats(min_value=1e-6, max_value=1.0)),
        draw(st.floats(min_value=1e-6, max_value=1.0)),
    )
    app_ids = draw(st.lists(_text, min_size=1, max_size=3, unique=True))
    job_ids = iter(
        draw(st.lists(_text, min_size=len(app_ids) * 2, max_size=len(app_ids) * 2, unique=True))
    )
    arrivals = sorted(draw(st.lists(_finite, min_size=len(app_ids), max_size=len(app_ids))))
    apps = []
    for app_id, arrival in zip(app_ids, arrivals, strict=True):
        jobs = tuple(
            JobSpec(next(job_ids), draw(st.integers(1, 64)), draw(_finite)) for _ in range(2)
        )
        apps.append(AppSpec(app_id, arrival, model, jobs))
    return Workload(tuple(apps), {model: profile}, draw(_text), {"odd": draw(_text)})


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(workloads(), st.sampled_from(["json", "yaml"]))
def test_written_file_reads_back_exactly(tmp_path: Path, workload: Workload, encoding: str) -> None:
    buffer = io.StringIO()
    write_workload(workload, buffer, encoding, workload.notes)
    path = tmp_path / f"w.{encoding}"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    again = load_workload(str(path), profiles=PROFILES)
    assert workload_key(again) == workload_key(workload)
    if encoding == "json":
        assert json.loads(buffer.getvalue())["notes"] == workload.notes
    else:
        assert yaml.safe_load(buffer.getvalue())["notes"] == workload.notes


def test_file_profiles_win_over_given_ones(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "format: themis-workload\nversion: 1\n"
        "profiles: {vgg16: {time_per_iteration: 2.0, cross_machine: 1.0, cross_rack: 1.0}}\n"
        "apps: [{id: a, arrival: 0, model: vgg16, jobs: [{id: j, gpus: 2, duration: 10}]}]\n"
    )
    w = load_workload(str(path))
    assert w.profiles["vgg16"].time_per_iteration == 2.0
    assert w.apps[0].jobs[0].work == 10 * 2 / 2.0
    assert w.profiles["vgg19"] == PROFILES["vgg19"]  # the others are still there


def test_error_line_inside_a_json_app_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(
        '{"format": "themis-workload", "version": 1, "apps": [\n'
        '  {"id": "a",\n'
        '   "arrival": 0,\n'
        '   "jobs": [\n'
        '     {"id": "j1", "gpus": 1, "iterations": 5},\n'
        '     {"id": "j2",\n'
        '      "gpus": 1,\n'
        '      "iterations": -5}\n'
        "   ]}\n"
        "]}\n"
    )
    with pytest.raises(ThemisError) as err:
        load_workload(str(path))
    assert (err.value.line, err.value.field) == (8, "apps[0].jobs[1].iterations")
    assert "-5" in err.value.message
