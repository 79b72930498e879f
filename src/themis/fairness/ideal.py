"""The ideal time ``T_id`` of finish-time fairness (rho = T_sh / T_id), by one of two
definitions, chosen by name (``--ideal-time``; docs/metrics.md, "Two ideal times").

- ``paper`` (the default): ``T_id = T_cluster * N``, the app alone on the whole cluster
  (its GPUs capped by its demand and placed at their best), ``N`` times slower: a 1/N
  *time* share of the whole cluster. The paper's approximation.
- ``slice``: ``T_id`` is the app's time on a private *space* share of ``G / N`` GPUs,
  capped by its demand and placed as ``T_cluster`` is (each gang at its best placement in
  the cluster): ``max(work / min(D, G / N), longest job)``, what PCS's Themis uses for a
  malleable app (``S / min(D, G / N)``). It is the promise as the README words it: no app
  should finish much later than on a private 1/N slice.

An app whose demand ``D`` is below the whole cluster runs on the paper's time share at
``D`` GPUs a 1/N of the time, where on a slice it would use ``min(D, G / N)`` GPUs all of
the time: a 1-GPU app on 64 GPUs among ``N = 10`` apps has a slice ideal of its work (it
runs at full demand), and a paper ideal ten times that, so under the paper's definition it
can wait nine times its work and still read ``rho <= 1``. On a cluster of one GPU type
the slice is never longer than the paper's time share: the slice's GPUs ``min(D, G / N)``
are at least ``D / N`` and ``G / N``, and its longest job is not slowed N-fold. The two are
equal when ``N`` is 1, and when the app can use the whole cluster at once (``D >= G``)
and its work, not its longest job, bounds its time. On a typed cluster a slice holds the
cluster's mix of types while the time share runs on the fastest GPUs, so ``slice`` takes
the shorter of the two ways to hold 1/N of the cluster: an app alone then keeps rho 1 by
either definition.

Light on purpose (no import of the estimators at run time): the policy knobs and the
command line read the names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from themis.model.cluster import SetShape


class ShareableWork(Protocol):
    """Work whose time on a share of a cluster is known (``ftf.RemainingWork``): named by
    what it does, so this module imports nothing of ``ftf``, which imports it."""

    def time_on_share(self, share: float, cluster: SetShape) -> float: ...


PAPER = "paper"
SLICE = "slice"
#: The definitions ``--ideal-time`` offers, the default first.
IDEAL_TIMES = (PAPER, SLICE)


def ideal_time(
    definition: str, alone: float, work: ShareableWork, cluster: SetShape, n: float
) -> float:
    """``T_id`` of ``work`` when the cluster is shared by ``n`` (``N_avg``, or the N a
    ranking uses), by ``definition``.

    ``alone`` is the work's time alone on the whole cluster (``T_cluster``: callers keep
    it, so the paper's ideal is exactly ``alone * n``, the float it always was). The slice
    is ``G / n`` GPUs, ``n`` taken as at least 1 (no slice is larger than the cluster)."""
    paper = alone * n
    if definition == PAPER:
        return paper
    if definition != SLICE:
        raise ValueError(f"unknown ideal time {definition!r}; known: {', '.join(IDEAL_TIMES)}")
    return min(paper, work.time_on_share(cluster.count / max(n, 1.0), cluster))
