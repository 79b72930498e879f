"""Model assignment (named, matched, assigned per name, drawn per app), a user's profiles
file with GPU types, and the session rule that turns a user's jobs into apps."""

from __future__ import annotations

import json
import random

import pytest

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile
from themis.workload import load_workload
from themis.workload.grouping import Grouping, group_jobs
from themis.workload.models import ModelResolver, normalize
from themis.workload.profiles_file import load_profiles_file
from themis.workload.records import TraceJob

from .conftest import PROFILES, SAMPLE_FILES


@pytest.mark.parametrize(
    ("name", "normal"),
    [
        ("ResNet-50 (batch size 64)", "resnet50"),
        ("Inception-v3", "inception3"),
        ("VGG_16", "vgg16"),
        ("  AlexNet ", "alexnet"),
        ("Transformer (batch size 128)", "transformer"),
        ("LM", "lm"),
    ],
)
def test_normalize(name: str, normal: str) -> None:
    assert normalize(name) == normal


def test_resolver_rules() -> None:
    r = ModelResolver(PROFILES, seed=7)
    assert r.foreign("vgg16") == "vgg16"
    assert r.foreign("VGG-16 (batch size 32)") == "vgg16"
    cyclegan = r.foreign("CycleGAN")
    assert cyclegan == random.Random("7:CycleGAN").choice(sorted(PROFILES))
    assert r.foreign("CycleGAN") == cyclegan  # stable per name
    assert r.mapping == {
        "vgg16": ("vgg16", "named"),
        "VGG-16 (batch size 32)": ("vgg16", "matched"),
        "CycleGAN": (cyclegan, "assigned"),
    }
    rng = random.Random(7)
    assert [r.draw() for _ in range(5)] == [rng.choice(sorted(PROFILES)) for _ in range(5)]
    assert r.notes()["drawn_for_apps_without_model"] == 5


def test_ambiguous_normal_form_matches_nothing() -> None:
    profiles = {
        "res-net": ModelProfile("res-net", 1, 1, 1),
        "resnet": ModelProfile("resnet", 2, 1, 1),
        "solo": ModelProfile("solo", 3, 1, 1),
    }
    r = ModelResolver(profiles, seed=0)
    assert r.foreign("RES_NET")  # assigned, not silently one of the two
    assert r.mapping["RES_NET"][1] == "assigned"
    assert r.foreign("SOLO") == "solo"


def test_user_profiles_file_drives_the_draw_and_carries_gpu_types(tmp_path, themis) -> None:
    path = tmp_path / "profiles.json"
    path.write_text(
        json.dumps(
            {
                "bert": {
                    "time_per_iteration": 2.0,
                    "cross_machine": 0.5,
                    "cross_rack": 0.25,
                    "gpu_types": {"a100": 0.5, "t4": 4.0},
                },
                "mlp": {"time_per_iteration": 0.1, "cross_machine": 1.0, "cross_rack": 1.0},
            }
        )
    )
    profiles, gpu_types = load_profiles_file(path)
    assert sorted(profiles) == ["bert", "mlp"]
    assert gpu_types == {"bert": {"a100": 0.5, "t4": 4.0}}
    w = load_workload(str(SAMPLE_FILES["helios"]), profiles=profiles, gpu_types=gpu_types)
    assert {a.model for a in w.apps} <= {"bert", "mlp"}
    assert w.notes["gpu_types"] == gpu_types
    # The CLI passes them on, and a conversion keeps them with the model's profile.
    out = tmp_path / "w.json"
    outcome = themis(
        "trace", "convert", SAMPLE_FILES["helios"], "--to", "themis", "-o", out, "--profiles", path
    )
    assert outcome.code == 0, outcome.err
    written = json.loads(out.read_text())["profiles"]
    if "bert" in written:
        assert written["bert"]["gpu_types"] == {"a100": 0.5, "t4": 4.0}
    assert load_workload(str(out)).notes.get("gpu_types", {}) == {
        k: v for k, v in gpu_types.items() if k in written
    }


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"gpu_types": [1]}, "m.gpu_types"),
        ({"gpu_types": {"v100": "fast"}}, "m.gpu_types.v100"),
        ({"gpu_types": {"v100": 0}}, "m.gpu_types.v100"),
    ],
)
def test_bad_gpu_types_name_their_field(tmp_path, entry, field: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"m": {"time_per_iteration": 1, "cross_machine": 1, "cross_rack": 1, **entry}})
    )
    with pytest.raises(ThemisError) as err:
        load_profiles_file(path)
    assert (err.value.source, err.value.field) == (str(path), field)


def _job(job_id: str, submit: float, user: str) -> TraceJob:
    return TraceJob(job_id, submit, 1, 1.0, None, None, None, user=user)


def test_session_rule_splits_at_gaps_longer_than_the_app_gap() -> None:
    jobs = [
        _job("a", 0, "u"),
        _job("b", 100, "w"),
        _job("c", 3600, "u"),  # exactly the gap after a: same app
        _job("d", 7201, "u"),  # 3601 s after c: a new app
        _job("e", 7000, "u"),  # submitted before d (file order is not submission order)
    ]
    apps = group_jobs(jobs, Grouping.SESSION, 3600.0)
    assert [(key, [j.job_id for j in members]) for key, members in apps] == [
        ("u/1", ["a", "c", "e", "d"]),  # e (7000) is within an hour of c, d of e
        ("w/1", ["b"]),
    ]
    # With 3000 s, a-c (3600 s) and c-e (3400 s) are pauses; e-d (201 s) is not.
    apps = group_jobs(jobs, Grouping.SESSION, 3000.0)
    assert [(key, [j.job_id for j in members]) for key, members in apps] == [
        ("u/1", ["a"]),
        ("w/1", ["b"]),
        ("u/2", ["c"]),
        ("u/3", ["e", "d"]),
    ]


def test_single_and_key_grouping_order_ties_by_file_order() -> None:
    jobs = [_job("x", 5, "u"), _job("y", 5, "u"), _job("z", 1, "u")]
    assert [k for k, _ in group_jobs(jobs, Grouping.SINGLE, 0)] == ["z", "x", "y"]


def test_bad_app_gap_is_a_user_error() -> None:
    with pytest.raises(ThemisError) as err:
        load_workload(str(SAMPLE_FILES["philly"]), app_gap=-1)
    assert err.value.field == "--app-gap"
