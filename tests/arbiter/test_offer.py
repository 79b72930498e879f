"""The offer kept from round to round is the offer built anew, in every round."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import themis.arbiter.offer as offer_module
import themis.model.placement as placement_module
from themis.arbiter.offer import OfferOrder, machine_ranks, offer_order
from themis.model.cluster import Cluster
from themis.model.placement import (
    SHARED_LISTS,
    OfferIndex,
    OfferPositions,
    OrderedPacker,
    RotatedOffer,
)
from themis.model.profiles import load_profiles
from themis.policies import PolicyOptions, make_policy
from themis.simulator.engine import simulate
from themis.workload.generator import GeneratorSpec, generate

SPECS = ("1x1x4", "1x2x8", "2x3x4", "2x4x8", "1x4x8:v100+1x2x4:k80")


@st.composite
def rounds(draw: st.DrawFn) -> tuple[Cluster, list[set[int]]]:
    """A cluster and the pools of successive rounds: each round toggles a few GPUs (the
    kept path) or, now and then, many (the rebuilt path)."""
    cluster = Cluster.from_spec(draw(st.sampled_from(SPECS)))
    gpus = st.integers(0, cluster.size - 1)
    pool = draw(st.sets(gpus, min_size=1))
    pools = [pool]
    for _ in range(draw(st.integers(1, 12))):
        toggled = draw(st.sets(gpus, max_size=draw(st.sampled_from((1, 3, cluster.size)))))
        pool = pool ^ toggled
        if pool:  # the arbiter never orders an empty pool
            pools.append(pool)
    return cluster, pools


@pytest.mark.pure_only
@pytest.mark.parametrize("found_from", [0, SHARED_LISTS])
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=rounds())
def test_kept_offer_is_the_offer_built_anew(
    case: tuple[Cluster, list[set[int]]], found_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``found_from``: offers from this size on find their positions when asked
    (``OfferPositions``), as offers of 256 GPUs or more do; 0 tries it on every offer."""
    monkeypatch.setattr(offer_module, "SHARED_LISTS", found_from)
    cluster, pools = case
    kept = OfferOrder(cluster)
    first = machine_ranks(cluster)
    earlier: list[tuple[list[int], dict[int, list[int]], list[int], dict[int, list[int]]]] = []
    for pool in pools:
        index = kept(set(pool))
        offer, on = index.offer, index.by_machine
        assert isinstance(index.position, OfferPositions) == (len(offer) >= found_from)
        fresh_offer, fresh_on = offer_order(cluster.machine_of, first, set(pool))
        assert list(offer) == fresh_offer
        assert on == fresh_on
        # Positions found when asked are the offer's, and none for a GPU not offered.
        assert {g: index.position[g] for g in offer} == {g: i for i, g in enumerate(offer)}
        assert list(index.position) == offer and len(index.position) == len(offer)
        assert all(
            index.position.get(g) is None for g in range(-1, cluster.size + 1) if g not in pool
        )
        assert index.position.get("gpu-0") is None and "gpu-0" not in index.position
        assert sorted(offer) == sorted(pool)
        # Machines with the fewest free GPUs first, ties by topology; GPUs ascending.
        keys = [(len(on[cluster.machine_of[g]]), first[cluster.machine_of[g]], g) for g in offer]
        assert keys == sorted(keys)
        earlier.append((offer, on, list(offer), {m: list(v) for m, v in on.items()}))
    # What a round returned is never changed by a later round.
    for offer, on, offer_then, on_then in earlier:
        assert offer == offer_then
        assert on == on_then


def test_a_round_that_changes_one_gpu_reorders_its_machine() -> None:
    cluster = Cluster.from_spec("1x3x4")  # machines 0, 1, 2 of GPUs 0-3, 4-7, 8-11
    kept = OfferOrder(cluster)
    assert kept({0, 1, 4, 5, 6, 8, 9, 10, 11}).offer == [0, 1, 4, 5, 6, 8, 9, 10, 11]
    # Machine 2 loses two GPUs: it now has the fewest free and goes first.
    index = kept({0, 1, 4, 5, 6, 8, 9})
    assert index.offer == [0, 1, 8, 9, 4, 5, 6]
    assert index.by_machine == {0: [0, 1], 1: [4, 5, 6], 2: [8, 9]}
    assert index.position[9] == 3 and index.position[4] == 4
    # Machine 0 empties: it leaves the offer and the index.
    index = kept({4, 5, 6, 8, 9})
    assert index.offer == [8, 9, 4, 5, 6]
    assert 0 not in index.by_machine and 0 not in index.position


def _shared_from(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Offers from ``size`` GPUs on take the large-offer paths: kept offer order, positions
    found when asked, bidders walking the offer in place, the leftover's packer settled
    from the offer's lists."""
    for module in (placement_module, offer_module):
        monkeypatch.setattr(module, "SHARED_LISTS", size)


@pytest.mark.pure_only
def test_large_offer_paths_decide_what_small_offer_paths_decide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole Themis run on 320 GPUs with every offer on the large-offer paths and with
    every offer on the small ones (the code before those paths): the same schedule."""
    cluster = Cluster.from_spec("4x10x8")
    workload = generate(
        GeneratorSpec(jobs=500, seed=7, gpus=cluster.size, load=1.5), load_profiles()
    )
    runs = []
    for size in (0, 10**9):
        _shared_from(monkeypatch, size)
        result = simulate(workload, cluster, make_policy("themis", PolicyOptions()))
        runs.append([(i.start, i.end, i.app_id, i.job_id, i.gpus) for i in result.intervals])
    assert runs[0] == runs[1]
    assert len(runs[0]) > 500


def test_a_bidder_walks_around_the_end_of_a_large_offer() -> None:
    """A bidder whose start is near the end of a large offer walks on from the offer's
    first GPU, as the packer of its rotated copy does."""
    cluster = Cluster.from_spec("5x10x8")  # 400 GPUs, 50 machines of 8
    offer = list(range(cluster.size))
    start = 390
    index = OfferIndex(cluster, offer)
    assert index.size >= SHARED_LISTS
    walked = OrderedPacker(cluster, RotatedOffer(offer, start), index, start)
    copied = OrderedPacker(cluster, offer[start:] + offer[:start])
    takes = [1] * 10 + [8, 4, 1, 8]  # the last ten GPUs, then on from GPU 0
    assert [walked.take(g) for g in takes] == [copied.take(g) for g in takes]
    assert walked.gpus() == copied.gpus()
