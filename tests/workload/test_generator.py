"""The synthetic workload generator: successive halving by hand, the size and duration
mixes, the target load, exact job counts, reproducibility and speed."""

from __future__ import annotations

import json
import math
import time
from collections import Counter

import pytest

from themis.errors import ThemisError
from themis.workload import load_workload
from themis.workload.generator import GeneratorSpec, gang_size, generate, halving_budgets

from .conftest import PROFILES, workload_key


@pytest.mark.parametrize(
    ("trials", "expected"),
    [
        (1, [1.0]),
        (2, [0.5, 1.0]),
        # 5 -> 2 -> 1 survivors: 3 stop at rung 0 (D/4), 1 at rung 1 (D/2), 1 runs D.
        (5, [0.25, 0.25, 0.25, 0.5, 1.0]),
        # 8 -> 4 -> 2 -> 1: 4 at D/8, 2 at D/4, 1 at D/2, 1 at D.
        (8, [0.125] * 4 + [0.25] * 2 + [0.5, 1.0]),
        # 3 -> 1: 2 stop at D/2.
        (3, [0.5, 0.5, 1.0]),
    ],
)
def test_successive_halving_budgets(trials: int, expected: list[float]) -> None:
    assert halving_budgets(trials, 1.0) == expected
    assert halving_budgets(trials, 600.0) == [600.0 * x for x in expected]


@pytest.mark.parametrize(
    ("u", "gang"),
    [(0.0, 1), (0.6999, 1), (0.7, 2), (0.7999, 2), (0.8, 4), (0.9499, 4), (0.95, 8), (0.9999, 8)],
)
def test_gang_mix_thresholds(u: float, gang: int) -> None:
    assert gang_size(u) == gang


def test_exact_job_count_and_reproducible() -> None:
    spec = GeneratorSpec(jobs=1001, seed=5, min_trials=3, max_trials=7)
    a, b = generate(spec, PROFILES), generate(spec, PROFILES)
    assert a.job_count == 1001
    assert [(x.app_id, x.arrival, x.model, x.jobs) for x in a.apps] == [
        (x.app_id, x.arrival, x.model, x.jobs) for x in b.apps
    ]
    assert all(3 <= len(app.jobs) <= 7 for app in a.apps[:-1])  # the last one is cut
    other = generate(GeneratorSpec(jobs=1001, seed=6, min_trials=3, max_trials=7), PROFILES)
    assert [x.arrival for x in other.apps] != [x.arrival for x in a.apps]


def test_every_app_is_a_halving_sweep() -> None:
    w = generate(GeneratorSpec(jobs=3000, seed=1), PROFILES)
    for app in w.apps:
        tpi = PROFILES[app.model].time_per_iteration
        gangs = {job.gang for job in app.jobs}
        assert len(gangs) == 1  # one size for all trials of a sweep
        seconds = sorted(job.work * tpi / job.gang for job in app.jobs)
        full = seconds[-1]
        expected = halving_budgets(len(app.jobs), full)
        assert seconds == pytest.approx(expected, rel=1e-9)
        assert 10**1.5 * 60 * (1 - 1e-9) <= full <= 10**4 * 60 * (1 + 1e-9)


def test_distributions_and_load_on_100k_jobs() -> None:
    spec = GeneratorSpec(jobs=100_000, seed=11, load=0.8, gpus=128)
    start = time.perf_counter()
    w = generate(spec, PROFILES)
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0  # measured about 0.4 s
    apps = w.apps
    gangs = Counter(app.jobs[0].gang for app in apps)
    n = len(apps)
    for gang, share in ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05)):
        assert gangs[gang] / n == pytest.approx(share, abs=0.02)
    # Full (unstopped) durations: 80% within 10^1.5..10^3 minutes, 20% within 10^3..10^4.
    fulls = [
        max(j.work for j in a.jobs) * PROFILES[a.model].time_per_iteration / a.jobs[0].gang
        for a in apps
    ]
    short = sum(1 for f in fulls if f < 1000 * 60) / n
    assert short == pytest.approx(0.8, abs=0.02)
    logs = [math.log10(f / 60) for f in fulls if f < 1000 * 60]
    assert sum(logs) / len(logs) == pytest.approx(2.25, abs=0.03)  # mean of U(1.5, 3)
    # Poisson arrivals at the target load: the offered load lands on it, and the gaps
    # look exponential (coefficient of variation 1).
    assert w.offered_load(spec.gpus) == pytest.approx(0.8, rel=0.05)
    gaps = [b.arrival - a.arrival for a, b in zip(apps, apps[1:], strict=False)]
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps))
    assert sd / mean == pytest.approx(1.0, abs=0.05)
    assert apps[0].arrival == 0.0


@pytest.mark.parametrize(
    ("spec", "flag"),
    [
        (GeneratorSpec(jobs=0), "--jobs"),
        (GeneratorSpec(jobs=5, load=0), "--load"),
        (GeneratorSpec(jobs=5, load=math.nan), "--load"),
        (GeneratorSpec(jobs=5, min_trials=0), "--min-trials"),
        (GeneratorSpec(jobs=5, min_trials=4, max_trials=3), "--max-trials"),
    ],
)
def test_bad_specs_name_their_flag(spec: GeneratorSpec, flag: str) -> None:
    with pytest.raises(ThemisError) as err:
        generate(spec, PROFILES)
    assert err.value.field == flag


def test_cli_generates_the_same_file_for_the_same_seed(themis, tmp_path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        outcome = themis("trace", "generate", "--jobs", 500, "--seed", 2, "--load", 1.5, "-o", out)
        assert outcome.code == 0, outcome.err
        assert (
            outcome.out.strip()
            == f"wrote {out}: {len(json.loads(out.read_text())['apps'])} apps, 500 jobs"
        )
    assert a.read_bytes() == b.read_bytes()
    w = load_workload(str(a))
    assert w.job_count == 500
    assert w.offered_load(64) == pytest.approx(1.5, rel=0.35)  # 60-odd apps: a loose check
    # YAML gives the same workload.
    y = tmp_path / "a.yaml"
    assert themis("trace", "generate", "--jobs", 500, "--seed", 2, "--load", 1.5, "-o", y).code == 0
    assert workload_key(load_workload(str(y))) == workload_key(w)
