"""``_books``: handing out GPUs from per-gang streams is ``_quantum.fill`` of the merged
order, whatever the keys, gangs and capacity."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from themis.policies._books import WaitingIndex, by_gang, fill_streams
from themis.policies._quantum import fill


@dataclass(frozen=True)
class _Spec:
    gang: int


class _Job:
    """As much of a JobState as filling reads (hashed by identity, as jobs are)."""

    def __init__(self, gang: int) -> None:
        self.spec = _Spec(gang)
        self.gang = gang


def _job(gang: int) -> _Job:
    return _Job(gang)


@pytest.mark.pure_only  # plain objects for JobState: the compiled books check the type
@given(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from([1, 1, 2, 3, 4, 8])), max_size=40),
    st.integers(-1, 30),
)
def test_fill_streams_is_fill_of_the_merged_order(entries: list, capacity: int) -> None:
    keys = [(rank, n, _job(gang)) for n, (rank, gang) in enumerate(entries)]
    expected = fill((key[-1] for key in sorted(keys, key=lambda k: k[:2])), capacity)
    assert fill_streams(by_gang(keys), capacity) == expected


@pytest.mark.pure_only  # plain objects for JobState: the compiled books check the type
@given(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from([1, 2, 4, 8])), max_size=30),
    st.lists(st.integers(0, 29), max_size=10),
    st.integers(0, 20),
)
def test_waiting_index_fills_as_fill(entries: list, dropped: list, capacity: int) -> None:
    """Jobs added, some discarded again, contenders merged in: ``fill`` of what is left."""
    keys = [(rank, n, _job(gang)) for n, (rank, gang) in enumerate(entries)]
    index = WaitingIndex()
    for key in keys:
        index.add(key[-1], key)  # type: ignore[arg-type]
    gone = {n for n in dropped if n < len(keys)}
    for n in gone:
        index.discard(keys[n][-1])  # type: ignore[arg-type]
    left = [k for n, k in enumerate(keys) if n not in gone]
    contenders = [k for k in left if k[1] % 3 == 0]
    for key in contenders:
        index.discard(key[-1])  # type: ignore[arg-type]
    assert len(index) == len(left) - len(contenders)
    expected = fill((key[-1] for key in sorted(left, key=lambda k: k[:2])), capacity)
    assert index.fill(capacity, contenders) == expected
    assert list(index.in_order()) == [
        k[-1] for k in sorted(left, key=lambda k: k[:2]) if k not in contenders
    ]
