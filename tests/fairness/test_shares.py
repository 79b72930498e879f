"""Owners share the cluster equally, an owner's apps share its slice (``fairness/shares.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from themis.fairness.shares import FairShares


class ActiveApps:
    """The count of active apps that N_avg was computed from before owners existed (what
    ``fairness/ftf.py`` had until FairShares replaced it everywhere), kept here as the
    reference the float-for-float test below holds FairShares to."""

    def __init__(self) -> None:
        self.count = 0
        self._integral = 0.0
        self._since = 0.0

    def integral(self, t: float) -> float:
        return self._integral + self.count * (t - self._since)

    def change(self, t: float, delta: int) -> None:
        self._integral = self.integral(t)
        self._since = t
        self.count += delta

    def n_avg(self, arrival: float, integral_at_arrival: float, t: float) -> float:
        if t <= arrival:
            return float(max(self.count, 1))
        return (self.integral(t) - integral_at_arrival) / (t - arrival)


@given(
    st.lists(
        st.tuples(st.floats(0.0, 50.0, allow_nan=False), st.booleans()), min_size=1, max_size=40
    )
)
def test_apps_that_own_themselves_get_the_old_n_avg_bit_for_bit(steps) -> None:
    """Without owners, N_eff is N_avg with the same floats: every schedule is unchanged."""
    old, new = ActiveApps(), FairShares()
    arrived: dict[str, tuple[float, float]] = {}  # app -> (arrival, old integral then)
    t, k = 0.0, 0
    for gap, leave in steps:
        t += gap
        for app, (arrival, integral) in arrived.items():
            assert new.n_eff(app, t) == old.n_avg(arrival, integral, t)
            assert new.share_count(app) == old.count
        if leave and arrived:
            app = next(iter(arrived))
            arrival, integral = arrived.pop(app)
            old.change(t, -1)
            new.leave(t, app)
        else:
            app = f"a{k}"
            k += 1
            old.change(t, +1)
            arrived[app] = (t, old.integral(t))
            new.arrive(t, app, app)


def test_an_owners_apps_share_its_slice_hand_computed() -> None:
    """Owner X submits a1 at 0 and a2 at 10; owner Y submits b at 20; a1 leaves at 30.

    Slices (owners x the owner's apps): a1: 1 on [0,10), 2 on [10,20), 4 on [20,30);
    a2: 2 on [10,20), 4 on [20,30), 2 from 30 (X has one app, two owners); b: 2 on [20,30),
    2 from 30."""
    s = FairShares()
    s.arrive(0.0, "a1", "X")
    s.arrive(10.0, "a2", "X")
    assert s.share_count("a1") == s.share_count("a2") == 2
    s.arrive(20.0, "b", "Y")
    assert (s.share_count("a1"), s.share_count("b")) == (4, 2)
    assert s.n_eff("a1", 30.0) == pytest.approx((10 * 1 + 10 * 2 + 10 * 4) / 30)
    s.leave(30.0, "a1")
    assert s.n_eff("a2", 40.0) == pytest.approx((10 * 2 + 10 * 4 + 10 * 2) / 30)
    assert s.n_eff("b", 40.0) == pytest.approx((10 * 2 + 10 * 2) / 20)
    assert (s.count, s.owners) == (2, 2)
    s.leave(40.0, "a2")
    s.arrive(50.0, "a3", "X")  # the owner comes back: a fresh entry
    assert s.n_eff("a3", 60.0) == pytest.approx(2.0)
    assert s.n_eff("a3", 50.0) == 2.0  # at its arrival: the count now


def test_a_split_in_k_parts_is_entitled_to_what_the_whole_was() -> None:
    """Alone, app W is one of two slices; split in two parts of one owner, each part is
    one of four: together the two parts hold the same half of the cluster."""
    whole, split = FairShares(), FairShares()
    whole.arrive(0.0, "W", "w")
    whole.arrive(0.0, "other", "other")
    for part in ("W~1", "W~2"):
        split.arrive(0.0, part, "w")
    split.arrive(0.0, "other", "other")
    assert 1 / whole.share_count("W") == sum(1 / split.share_count(p) for p in ("W~1", "W~2"))
    assert whole.share_count("other") == split.share_count("other") == 2
