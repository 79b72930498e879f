"""``srtf`` and ``themis`` against PCS's own simulator (abdullahfsm/PCS, OSDI'24): the same
apps (tests/fixtures/pcs/, README there for provenance) run through PCS's unmodified
``sim.py`` under its ``SRTF``, ``SRSF`` and ``THEMIS``, whose per-app finishes are the
fixtures.

What is checked:

- the conversion: each PCS app (one malleable job of demand ``num_jobs`` and ``service``
  GPU-seconds, linear speedup) is here ``num_jobs`` 1-GPU trials of equal length with the
  same total work, and arrives when PCS says it was submitted;
- the model of the cluster: where both simulators follow the same rule, our ``srtf`` and
  PCS's ``SRTF`` agree on mean JCT and per app (tolerances below); PCS's ``SRSF`` (the
  reference rule) is near, by less where apps are wide;
- the gap between the two Themis: both simulators' mean JCT and worst demand-capped rho
  are printed (``pytest -s``) and bounded by what was measured, so that a change that
  widens the gap fails here (docs/results.md, "Against PCS's Themis", explains the gap).

Tolerances, from the six cells (three slices at 32 and 64 GPUs; PCS commit 62a6ca3).
``srtf`` ranks each trial by its remaining time, PCS's ``SRTF`` each app by its remaining
GPU-seconds over its demand: the same number for an app whose trials have all run alike,
different once a partly served app's trials have run unequally. Measured ``srtf / SRTF``
mean JCT: 1.000 to 1.002 on the two slices of narrow apps (1-8 trials), 1.007 and 1.028 on
the slice with apps of up to 16 trials (half of 32 GPUs): hence 4%. ``SRSF`` ranks an app by
its GPU-seconds alone, so a wide app goes later than under either SRTF: ``srtf / SRSF``
1.000 to 1.025, and 1.104 on that slice at 32 GPUs: hence 12% for it, a report more than a
check. A rule that ignores the work is far outside both (our ``fifo``: 1.69 against SRTF
on the 400-app slice at 64 GPUs).

The demand-capped rho, computed the same way for both simulators from each one's finishes:
``(f - a) / (W / min(D, G / N_avg))``, with ``W`` the app's GPU-seconds, ``D`` its demand,
``G`` the GPUs and ``N_avg`` the time-averaged number of active apps over ``[a, f]`` (PCS's
own ``fair_act`` averages N over its events instead). It is the app's time on a private
``1/N`` slice, at most its demand: the promise the README makes.
"""

from __future__ import annotations

import csv
import gzip
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from themis.model.cluster import Cluster
from themis.model.workload import Workload
from themis.policies import make_policy
from themis.simulator.engine import simulate
from themis.workload.loader import load_workload

FIXTURES = Path(__file__).parent.parent / "fixtures" / "pcs"

SLICES = ("s0e4a51_0_400", "s6c71a0_1000_200", "see9e8c_3000_100")
#: GPUs -> our cluster (PCS has no topology; 1-GPU trials never span machines)
CLUSTERS = {32: "1x4x8", 64: "1x8x8"}
#: srtf / SRTF and srtf / SRSF mean JCT must be within these of 1 (module docstring)
SRTF_TOLERANCE = 0.04
SRSF_TOLERANCE = 0.12

#: (slice, GPUs) -> bounds on (our themis / PCS's THEMIS mean JCT, our worst demand-capped
#: rho / PCS's), a little above what was measured at seed 0, the run here (in brackets),
#: and above the range over seeds 0-4 where it was measured (docs/results.md): the gap
#: may close, never widen unnoticed. Mean JCT moves by at most 0.1 h over seeds; the worst
#: rho more (one app). Our ``themis`` on the 400-app slice takes minutes per run, so its
#: seeds 1-4 and its 32-GPU cell (1.71x, 4.26 against 8.42: 0.51x) are not run here.
THEMIS_GAP_BOUNDS = {
    ("s0e4a51_0_400", 64): (1.40, 1.20),  # (1.356, 1.72 / 1.54 = 1.12)
    ("s6c71a0_1000_200", 32): (1.05, 1.65),  # (1.010, 6.09 / 4.69 = 1.30; seeds 0.96-1.55)
    ("s6c71a0_1000_200", 64): (1.05, 1.15),  # (1.000, 1.46 / 1.38 = 1.05; seeds 1.05-1.06)
    ("see9e8c_3000_100", 32): (1.60, 1.70),  # (1.543, 3.93 / 2.44 = 1.61; seeds 1.61-1.62)
    ("see9e8c_3000_100", 64): (1.20, 0.90),  # (1.143, 2.04 / 3.01 = 0.68; seeds 0.66-0.84)
}


@dataclass(frozen=True)
class Runs:
    """One simulator's per-app arrival and finish, in slice order (seconds)."""

    arrival: list[float]
    finish: list[float]

    @property
    def mean_jct(self) -> float:
        return statistics.fmean(f - a for a, f in zip(self.arrival, self.finish, strict=True))


@dataclass(frozen=True)
class Slice:
    """A slice as PCS reads it: per app, its work (GPU-seconds) and demand."""

    work: list[float]
    demand: list[int]


@cache
def pcs_slice(name: str) -> Slice:
    with (FIXTURES / f"{name}.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["app_id"]) for r in rows] == list(range(len(rows)))
    return Slice([float(r["service"]) for r in rows], [int(r["num_jobs"]) for r in rows])


def pcs_rows(name: str, policy: str, gpus: int) -> list[dict[str, str]]:
    """PCS's output file (gzipped as it wrote it), by app id."""
    with gzip.open(FIXTURES / f"{name}.{policy}.{gpus}.csv.gz", "rt", newline="") as f:
        return sorted(csv.DictReader(f), key=lambda r: int(r["app_id"]))


@cache
def pcs_run(name: str, policy: str, gpus: int) -> Runs:
    """PCS's finishes, its clock moved so that the first app arrives at 0 (PCS's origin is
    its scheduler's creation, microseconds before the first submission)."""
    rows = pcs_rows(name, policy, gpus)
    assert [int(r["app_id"]) for r in rows] == list(range(len(pcs_slice(name).work)))
    origin = min(float(r["submit_time"]) for r in rows)
    return Runs(
        [float(r["submit_time"]) - origin for r in rows],
        [float(r["end_time"]) - origin for r in rows],
    )


@cache
def workload(name: str) -> Workload:
    return load_workload(str(FIXTURES / f"{name}.csv"))


@cache
def our_run(name: str, policy: str, gpus: int) -> Runs:
    result = simulate(workload(name), Cluster.from_spec(CLUSTERS[gpus]), make_policy(policy))
    by_id = {app.app_id: app for app in result.apps}
    apps = [by_id[str(k)] for k in range(len(by_id))]
    assert all(app.finish is not None for app in apps)
    return Runs([app.arrival for app in apps], [float(app.finish or 0.0) for app in apps])


def n_avg(runs: Runs) -> list[float]:
    """Each app's time-averaged number of active apps (itself included) over its life."""
    spans = list(zip(runs.arrival, runs.finish, strict=True))
    out = []
    for a, f in spans:
        if f <= a:
            out.append(1.0)
            continue
        overlap = sum(max(0.0, min(f, f2) - max(a, a2)) for a2, f2 in spans)
        out.append(overlap / (f - a))
    return out


def capped_rhos(runs: Runs, piece: Slice, gpus: int) -> list[float]:
    """Every app's demand-capped rho (module docstring)."""
    return [
        (f - a) / (w / min(d, gpus / n))
        for a, f, w, d, n in zip(
            runs.arrival, runs.finish, piece.work, piece.demand, n_avg(runs), strict=True
        )
    ]


# -- the conversion -----------------------------------------------------------------------


@pytest.mark.parametrize("name", SLICES)
def test_each_app_is_its_demand_in_1_gpu_trials_of_equal_length_and_the_same_work(
    name: str,
) -> None:
    piece = pcs_slice(name)
    w = workload(name)
    assert [a.app_id for a in w.apps] == [str(k) for k in range(len(piece.work))]
    for app, work, demand in zip(w.apps, piece.work, piece.demand, strict=True):
        tpi = w.profiles[app.model].time_per_iteration
        seconds = [j.work * tpi for j in app.jobs]
        assert [j.gang for j in app.jobs] == [1] * demand
        assert seconds == pytest.approx([work / demand] * demand, rel=1e-12)
        assert sum(seconds) == pytest.approx(work, rel=1e-12)


@pytest.mark.parametrize("name", SLICES)
@pytest.mark.parametrize("policy", ["THEMIS", "SRSF", "SRTF"])
@pytest.mark.parametrize("gpus", sorted(CLUSTERS))
def test_apps_arrive_when_pcs_submitted_them(name: str, policy: str, gpus: int) -> None:
    ours = [app.arrival for app in workload(name).apps]
    theirs = pcs_run(name, policy, gpus).arrival
    # PCS's clock is a datetime: microseconds
    assert ours == pytest.approx(theirs, abs=1e-5)


def test_the_demand_capped_rho_is_pcss_fair_time_with_a_time_averaged_n() -> None:
    # A control for capped_rhos: with PCS's own (event-averaged) N it gives PCS's
    # ``fair_act``; with ours, the same within the two averages' difference.
    name, gpus = "s0e4a51_0_400", 64
    rows = pcs_rows(name, "THEMIS", gpus)
    piece = pcs_slice(name)
    for r, w, d in zip(rows, piece.work, piece.demand, strict=True):
        n = float(r["num_apps_seen_diff"])
        assert w / min(d, gpus / n) == pytest.approx(float(r["fair_act"]), rel=1e-9)
    runs = pcs_run(name, "THEMIS", gpus)
    ratios = [
        c / ((f - a) / float(r["fair_act"]))
        for c, a, f, r in zip(
            capped_rhos(runs, piece, gpus), runs.arrival, runs.finish, rows, strict=True
        )
    ]
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.05)


# -- the same rule: srtf against PCS's SRTF (and SRSF) ------------------------------------


@pytest.mark.parametrize("name", SLICES)
@pytest.mark.parametrize("gpus", sorted(CLUSTERS))
def test_srtf_matches_pcss_srtf_on_mean_jct(name: str, gpus: int) -> None:
    ours = our_run(name, "srtf", gpus).mean_jct
    theirs = pcs_run(name, "SRTF", gpus).mean_jct
    srsf = pcs_run(name, "SRSF", gpus).mean_jct
    print(
        f"\n{name} {gpus} GPUs: srtf {ours / 3600:.1f} h, PCS SRTF {theirs / 3600:.1f} h "
        f"({ours / theirs:.4f}x), PCS SRSF {srsf / 3600:.1f} h ({ours / srsf:.4f}x)"
    )
    assert ours / theirs == pytest.approx(1.0, abs=SRTF_TOLERANCE)
    assert ours / srsf == pytest.approx(1.0, abs=SRSF_TOLERANCE)


@pytest.mark.parametrize("name", SLICES)
@pytest.mark.parametrize("gpus", sorted(CLUSTERS))
def test_srtf_matches_pcss_srtf_app_by_app(name: str, gpus: int) -> None:
    ours = our_run(name, "srtf", gpus)
    theirs = pcs_run(name, "SRTF", gpus)
    ratios = sorted(
        (fo - a) / (ft - a)
        for a, fo, ft in zip(ours.arrival, ours.finish, theirs.finish, strict=True)
    )
    assert statistics.median(ratios) == pytest.approx(1.0, abs=1e-6)
    # nine apps in ten (p5 to p95) within 2% below and 8% above PCS's time: measured 0.992
    # to 1.070, the widest on the slice of wide apps at 32 GPUs (module docstring)
    assert ratios[len(ratios) // 20] >= 0.98
    assert ratios[-(len(ratios) // 20) - 1] <= 1.08


def test_the_srtf_band_tells_a_rule_that_ignores_work() -> None:
    # The band is narrow enough to fail a rule that does not rank by remaining work: our
    # fifo on the 400-app slice is far from PCS's SRTF.
    ours = our_run("s0e4a51_0_400", "fifo", 64).mean_jct
    theirs = pcs_run("s0e4a51_0_400", "SRTF", 64).mean_jct
    assert ours / theirs > 1 + 10 * SRTF_TOLERANCE


# -- the gap: themis against PCS's THEMIS --------------------------------------------------


@pytest.mark.parametrize(("name", "gpus"), sorted(THEMIS_GAP_BOUNDS))
def test_themis_gap_to_pcss_themis_is_reported_and_bounded(name: str, gpus: int) -> None:
    piece = pcs_slice(name)
    ours, theirs = our_run(name, "themis", gpus), pcs_run(name, "THEMIS", gpus)
    rho_ours = max(capped_rhos(ours, piece, gpus))
    rho_theirs = max(capped_rhos(theirs, piece, gpus))
    print(
        f"\n{name} {gpus} GPUs: mean JCT themis {ours.mean_jct / 3600:.1f} h, "
        f"PCS THEMIS {theirs.mean_jct / 3600:.1f} h "
        f"({ours.mean_jct / theirs.mean_jct:.3f}x); worst demand-capped rho "
        f"{rho_ours:.2f} against {rho_theirs:.2f}"
    )
    jct_bound, rho_bound = THEMIS_GAP_BOUNDS[name, gpus]
    assert ours.mean_jct / theirs.mean_jct <= jct_bound
    assert rho_ours / rho_theirs <= rho_bound
