"""Workloads as the CLI names them: ``generate:`` specs and variants, per seed."""

from __future__ import annotations

import pytest

from themis.errors import ThemisError
from themis.experiments.variants import VGG_FAMILY, with_gang_mix, with_model_share
from themis.experiments.workloads import (
    Variants,
    generated_workload,
    parse_generate,
    parse_model_share,
)
from themis.model.cluster import Cluster

from .test_runner import PROFILES, small_workload


def test_generate_spec_sets_keys_and_keeps_the_generators_defaults() -> None:
    spec = parse_generate("generate:jobs=1500,load=1.5", gpus=64, seed=3)
    assert (spec.jobs, spec.load, spec.gpus, spec.seed) == (1500, 1.5, 64, 3)
    assert (spec.min_trials, spec.max_trials) == (1, 16)
    assert parse_generate("generate:", 8, 0).jobs == 1000
    assert parse_generate("generate:max-trials=4,min_trials=2", 8, 0).max_trials == 4


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("generate:jobs", "not KEY=VALUE"),
        ("generate:gpus=8", "not KEY=VALUE"),
        ("generate:jobs=many", "'jobs' must be an integer"),
        ("generate:load=-1", "must be a number > 0"),
    ],
)
def test_bad_generate_specs_are_user_errors(text: str, fragment: str) -> None:
    with pytest.raises(ThemisError, match=fragment):
        parse_generate(text, 8, 0)


def test_a_generated_workload_is_drawn_again_per_seed() -> None:
    cluster = Cluster.from_spec("1x2x4")
    one = generated_workload("generate:jobs=30", cluster, PROFILES, 0)
    again = generated_workload("generate:jobs=30", cluster, PROFILES, 0)
    other = generated_workload("generate:jobs=30", cluster, PROFILES, 1)
    assert one.apps == again.apps
    assert one.apps != other.apps
    assert one.job_count == other.job_count == 30
    assert "seed 1" in other.source


def test_variants_compose_as_the_paper_experiment_does() -> None:
    # The paper's VGG sweep: with_model_share(with_gang_mix(w, max_gang=8), share).
    w = small_workload()
    cluster = Cluster.from_spec("1x2x8")
    got = Variants(gang_mix=True, model_share=("vgg", 0.5)).apply(w, cluster, seed=4)
    expected = with_model_share(with_gang_mix(w, seed=4, max_gang=8), 0.5, VGG_FAMILY, seed=4)
    assert got.apps == expected.apps


def test_gang_mix_is_capped_at_one_machine() -> None:
    w = small_workload()
    for seed in range(5):
        got = Variants(gang_mix=True).apply(w, Cluster.from_spec("2x2x2"), seed)
        assert {j.gang for a in got.apps for j in a.jobs} <= {1, 2}


def test_model_share_and_contention() -> None:
    w = small_workload()  # six apps arriving every 30 s
    got = Variants(model_share=("vgg", 1.0), contention=3.0).apply(w, Cluster.from_spec("1x2x2"), 0)
    assert all(a.model.startswith("vgg") for a in got.apps)
    assert [a.arrival for a in got.apps] == [10.0 * i for i in range(6)]
    # Same GPU-time: work is rescaled by the ratio of iteration times.
    assert got.gpu_seconds() == pytest.approx(w.gpu_seconds())


def test_model_share_parsing_and_errors() -> None:
    assert parse_model_share("resnet=0.25", None) == ("resnet", 0.25)
    assert parse_model_share(None, 0.5) == ("vgg", 0.5)
    assert parse_model_share(None, None) is None
    with pytest.raises(ThemisError, match="not both"):
        parse_model_share("vgg=0.5", 0.5)
    for bad in ("vgg", "=0.5", "vgg=half"):
        with pytest.raises(ThemisError, match="FAMILY=SHARE"):
            parse_model_share(bad, None)
    with pytest.raises(ThemisError, match="no model name starts with 'bert'"):
        Variants(model_share=("bert", 0.5)).apply(small_workload(), Cluster.from_spec("1x2x2"), 0)
    for bad_variants in (Variants(model_share=("vgg", 1.5)), Variants(contention=0.0)):
        with pytest.raises(ThemisError):
            bad_variants.check()
