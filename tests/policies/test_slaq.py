"""SLAQ: the job with the largest predicted loss reduction per GPU over the next quantum runs
first, so a job early on its loss curve preempts one near convergence. Schedules and gains
derived by hand in the comments (toy model: 1 s per iteration; no batching window).

The toy model has no entry in the per-model table: it gets the default curve, half of the
loss reduction at 10% of the work: loss(x) = (1 - x) / (1 + 8 x).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.policies.slaq import (
    DEFAULT_CURVE,
    LOSS_CURVES,
    Gains,
    LossCurve,
    curve_for,
    gain_per_gpu,
)

from .hand import VGG, approx, assert_intervals, finishes, make_app, run


def test_default_curve_is_the_hand_computed_one() -> None:
    assert curve_for("toy") is DEFAULT_CURVE
    assert (DEFAULT_CURVE.a, DEFAULT_CURVE.b) == (0.0, approx(8.0))
    for x, loss in [(0.0, 1.0), (0.1, 0.5), (0.5, 0.1), (0.625, 0.0625), (1.0, 0.0)]:
        assert DEFAULT_CURVE.loss(x) == approx(loss)


def test_job_early_on_its_curve_preempts_one_near_convergence() -> None:
    # 1x1x1, quantum 10. a0 (100 it) runs alone from 0; at 50 it is half done. b0 (80 it)
    # arrives at 50. Gain over one quantum: a moves 0.1 of its work, b 0.125.
    #   a at 0.5: 0.1 - 0.0690 = 0.0310      b at 0: 1 - 0.4375 = 0.5625
    #   b's next gains: 0.1875 (at .125), 0.0938 (.25), 0.0563 (.375), 0.0375 (.5): all
    #   above a's 0.0310, so b runs 50-100 (SRTF would have kept a, with less left).
    # t=100 b at .625: 0.0268 < a's 0.0310: a runs; a at .6: 0.0235 < b's 0.0268: b at 110;
    #   b at .75: 0.0201 < a's 0.0235: a at 120; a at .7: 0.0184 < b's 0.0201: b at 130;
    #   b at .875: 0.0156 < a's 0.0184: a at 140; a at .8: 0.0148 < b's last 0.0156: b at
    #   150, done at 160; a runs its last 20 it from 160 to 180.
    r = run([("a", 0.0, [(1, 100.0)]), ("b", 50.0, [(1, 80.0)])], "1x1x1", "slaq", lease=10.0)
    assert finishes(r) == {"a": approx(180.0), "b": approx(160.0)}
    assert_intervals(
        r,
        [
            (0.0, 50.0, "a0", (0,)),
            (50.0, 100.0, "b0", (0,)),
            (100.0, 110.0, "a0", (0,)),
            (110.0, 120.0, "b0", (0,)),
            (120.0, 130.0, "a0", (0,)),
            (130.0, 140.0, "b0", (0,)),
            (140.0, 150.0, "a0", (0,)),
            (150.0, 160.0, "b0", (0,)),
            (160.0, 180.0, "a0", (0,)),
        ],
    )


def test_short_job_gains_its_whole_curve_in_one_quantum() -> None:
    # 1x1x2, quantum 10, t=0. a: one 1000 it job; b: one 5 it job; c: one 100 it job.
    # Gains: b goes from 0 to done in a quantum: 1. c: 1 - loss(0.1) = 0.5.
    # a: 1 - loss(0.01) = 1 - 0.99 / 1.08 = 0.0833. b and c run; b ends at 5 and a takes
    # its GPU. Nothing else waits, so no boundary rotates anything: c ends at 100, and a
    # runs uninterrupted from 5 to 1005.
    r = run(
        [("a", 0.0, [(1, 1000.0)]), ("b", 0.0, [(1, 5.0)]), ("c", 0.0, [(1, 100.0)])],
        "1x1x2",
        "slaq",
        lease=10.0,
    )
    assert finishes(r) == {"a": approx(1005.0), "b": approx(5.0), "c": approx(100.0)}
    assert_intervals(
        r,
        [(0.0, 5.0, "b0", (0,)), (0.0, 100.0, "c0", (1,)), (5.0, 1005.0, "a0", (0,))],
    )


def test_gain_is_per_gpu_on_the_gangs_best_span() -> None:
    # 1x2x2: a 2-GPU VGG gang fits one machine: 2 it/s. 100 it, 10 done, quantum 10:
    # x goes from 0.1 to 0.3. (loss(.1) - loss(.3)) / 2 = (0.5 - 0.7 / 3.4) / 2.
    c = Cluster.from_spec("1x2x2")
    app = make_app("a", 0.0, [(2, 100.0)])
    app.profile = VGG  # gain reads the app's profile
    (job,) = app.jobs
    assert gain_per_gpu(job, 10.0, c, DEFAULT_CURVE, 10.0) == approx((0.5 - 0.7 / 3.4) / 2)
    # 1x2x1: the gang must span the machines: 2 * 0.5 = 1 it/s, x from 0.1 to 0.2.
    c = Cluster.from_spec("1x2x1")
    assert gain_per_gpu(job, 10.0, c, DEFAULT_CURVE, 10.0) == approx((0.5 - 0.8 / 2.6) / 2)
    # Near the end the step stops at convergence: 95 done -> x from 0.95 to 1.
    assert gain_per_gpu(job, 95.0, c, DEFAULT_CURVE, 10.0) == approx(0.05 / 8.6 / 2)


@pytest.mark.pure_only  # reads a spec's __dict__, which a compiled class has not
@given(
    st.sampled_from(["toy", "vgg16", "resnet50", "alexnet", "googlenet"]),
    st.sampled_from([1, 2, 3, 4, 8]),
    st.floats(0.0, 1e6),
    st.floats(-10.0, 2e6),
    st.sampled_from([1.0, 10.0, 600.0, 3.3]),
    st.sampled_from(["1x2x2", "1x2x1", "2x4x8", "1x1x8"]),
)
def test_cached_gains_are_gain_per_gpu_bit_for_bit(
    model: str, gang: int, work: float, done: float, quantum: float, spec: str
) -> None:
    """``Gains`` (what ``changes`` ranks by) is ``gain_per_gpu`` to the last bit, the first
    time and from its cache."""
    cluster = Cluster.from_spec(spec)
    app = make_app("a", 0.0, [(min(gang, cluster.size), work)])
    app.profile = VGG
    app.spec = app.spec.__class__(**{**app.spec.__dict__, "model": model})
    (job,) = app.jobs
    gains = Gains(quantum)
    expected = repr(gain_per_gpu(job, done, cluster, curve_for(model), quantum))  # nan too
    assert repr(gains(job, done, cluster)) == expected
    assert repr(gains(job, done, cluster)) == expected


def test_curves_cover_every_bundled_model_and_are_well_formed() -> None:
    assert set(load_profiles()) <= set(LOSS_CURVES)
    for curve in LOSS_CURVES.values():
        assert curve.loss(0.0) == approx(1.0)
        assert curve.loss(1.0) == approx(0.0)
        xs = [i / 20 for i in range(21)]
        losses = [curve.loss(x) for x in xs]
        drops = [p - q for p, q in zip(losses, losses[1:], strict=False)]
        assert all(d > 0 for d in drops)  # decreasing
        assert all(d1 > d2 for d1, d2 in zip(drops, drops[1:], strict=False))  # convex
    # Batch-normalised nets are modelled as converging earliest (half way at 5% of the work).
    assert LOSS_CURVES["resnet50"].loss(0.05) == approx(0.5)
    assert LOSS_CURVES["vgg16"].loss(0.10) == approx(0.5)


def test_general_curve_with_a_quadratic_term() -> None:
    # a = 2, b = 1: L(x) = 1 / (2x^2 + x + 1); L(1) = 1/4, L(0.5) = 1/2.
    # Normalised: (L(x) - 1/4) / (3/4) -> loss(0.5) = (1/2 - 1/4) / (3/4) = 1/3.
    assert LossCurve(2.0, 1.0).loss(0.5) == approx(1.0 / 3.0)


@pytest.mark.parametrize(("a", "b"), [(0.0, 0.0), (-1.0, 2.0), (1.0, -2.0)])
def test_bad_curves_are_refused(a: float, b: float) -> None:
    with pytest.raises(ValueError, match="loss curve"):
        LossCurve(a, b)


def test_halfway_needs_a_point_before_half_the_work() -> None:
    with pytest.raises(ValueError, match="half"):
        LossCurve.halfway(0.5)
