"""A bidder's packer built from the round's offer index (shared per-machine lists, copied
on first change for large offers) takes exactly what a packer built from its own rotated
offer takes, and never changes the index other bidders read."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.model.cluster import Cluster
from themis.model.placement import (
    SHARED_LISTS,
    OfferIndex,
    OrderedPacker,
    Packer,
    RotatedOffer,
)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["2x4x8", "5x10x8", "4x8x8"]))
def test_indexed_packers_take_what_plain_ones_take(seed: int, spec: str) -> None:
    rng = random.Random(seed)
    cluster = Cluster.from_spec(spec)
    offer = [g for g in range(cluster.size) if rng.random() < 0.8]
    rng.shuffle(offer)
    index = OfferIndex(cluster, offer)
    before = {m: list(free) for m, free in index.by_machine.items()}
    for bidder in range(4):
        start = bidder * len(offer) // 4
        rotated = offer[start:] + offer[:start]
        plain = OrderedPacker(cluster, rotated)
        view = RotatedOffer(offer, start)
        assert list(view) == rotated and len(view) == len(rotated)
        indexed = OrderedPacker(cluster, view, index, start)
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.2 and plain.gpus():
                some = tuple(sorted(rng.sample(sorted(plain.gpus()), 1)))
                assert indexed.take_exact(some) == plain.take_exact(some)
                continue
            gang = rng.choice((1, 1, 2, 4, 8, 12, 16))
            assert indexed.take(gang) == plain.take(gang)
            assert len(indexed) == len(plain) and indexed.gpus() == plain.gpus()
        assert {m: list(f) for m, f in index.by_machine.items()} == before


def test_large_offers_share_lists_small_ones_copy() -> None:
    cluster = Cluster.from_spec("5x10x8")  # 400 GPUs
    offer = list(range(cluster.size))
    assert len(offer) >= SHARED_LISTS
    packer = OrderedPacker(cluster, offer, OfferIndex(cluster, offer), 0)
    assert packer.take(1) == (0,)
    index = OfferIndex(cluster, offer[:16])
    small = OrderedPacker(cluster, offer[:16], index, 0)
    assert small.take(2) is not None
    assert sum(len(f) for f in index.by_machine.values()) == 16


@given(st.lists(st.integers(0, 99), unique=True, min_size=1, max_size=30), st.data())
def test_a_rotated_offer_reads_as_the_rotated_list(offer: list[int], data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(offer) - 1))
    rotated = offer[start:] + offer[:start]
    view = RotatedOffer(offer, start)
    assert list(view) == rotated
    assert [view[i] for i in range(-len(offer), len(offer))] == rotated + rotated
    assert view[1:-1] == rotated[1:-1]
    for out in (len(offer), -len(offer) - 1):
        with pytest.raises(IndexError):
            view[out]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["1x2x8", "2x4x8", "1x4x8:v100+1x2x4:k80"]))
def test_a_packer_settled_from_the_offer_is_one_built_on_its_gpus(seed: int, spec: str) -> None:
    """The leftover's packer starts from the offer's lists (``Packer(shared=...)``) and
    settles the difference: it holds the lists a packer built on the leftover holds, takes
    what that one takes, and leaves the offer's lists as they were."""
    rng = random.Random(seed)
    cluster = Cluster.from_spec(spec)
    offered = {g for g in range(cluster.size) if rng.random() < 0.7}
    index = OfferIndex(cluster, sorted(offered))
    before = {m: list(free) for m, free in index.by_machine.items()}
    leftover = {g for g in offered if rng.random() < 0.8}
    leftover |= {g for g in range(cluster.size) if g not in offered and rng.random() < 0.2}
    settled = Packer(cluster, shared=index.by_machine, size=index.size)
    settled.settle(offered - leftover, leftover - offered)
    built = Packer(cluster, leftover)
    assert settled.by_machine == built.by_machine and len(settled) == len(built)
    for _ in range(6):
        gang = rng.choice((1, 2, 3, 4, 8, 12))
        assert settled.take(gang) == built.take(gang)
        assert settled.gpus() == built.gpus()
    assert {m: list(f) for m, f in index.by_machine.items()} == before
