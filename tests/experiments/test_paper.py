"""The paper experiment's plan and outputs, on a small workload (the real one takes minutes)."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

from themis.experiments.paper import (
    CONTENTION,
    ESTIMATE_ERRORS,
    FAIRNESS_KNOBS,
    K80_SHARES,
    LEASES_S,
    RESTART_COSTS_S,
    VGG_SHARES,
    plan,
)
from themis.experiments.paper_report import write_outputs
from themis.experiments.runner import execute, run_many
from themis.policies import make_policy

from .test_runner import small_workload


def test_plan_reuses_main_runs_and_labels_every_point() -> None:
    p = plan({0: small_workload()}, ["themis", "fifo", "tiresias-not-registered"])
    labels = [r.label for r in p.requests]
    assert len(labels) == len(set(labels))
    assert [r.label for r in p.main] == ["themis", "fifo", "tiresias-not-registered"]
    # Sweeps keep only the policies asked for: fifo is in none of them.
    assert {pol for (_, _, pol, _) in p.points} == {"themis"}
    # f = 0.8, a 10-minute lease and 1x contention are the main run, not re-run.
    assert p.points[("fairness_knob", 0.8, "themis", 0)] == "themis"
    assert p.points[("lease_s", 600.0, "themis", 0)] == "themis"
    assert p.points[("contention", 1.0, "themis", 0)] == "themis"
    per_sweep = Counter(key for key, _, _, _ in p.points)
    assert per_sweep == {
        "fairness_knob": len(FAIRNESS_KNOBS),
        "lease_s": len(LEASES_S),
        "contention": len(CONTENTION),
        "vgg_share": len(VGG_SHARES),
        "estimate_error": len(ESTIMATE_ERRORS),
        "restart_cost_s": len(RESTART_COSTS_S),
        "k80_share": len(K80_SHARES),
    }
    # Exact estimates and free restarts are the main run's conditions, not re-run.
    assert p.points[("estimate_error", 0.0, "themis", 0)] == "themis"
    assert p.points[("restart_cost_s", 0.0, "themis", 0)] == "themis"
    extra = (len(FAIRNESS_KNOBS) + len(LEASES_S) + len(CONTENTION) + len(VGG_SHARES)
             + len(ESTIMATE_ERRORS) + len(RESTART_COSTS_S) + len(K80_SHARES) - 5)  # fmt: skip
    assert len(p.requests) == 3 + extra
    f0 = next(r for r in p.requests if r.label == "themis @ fairness_knob=0")
    assert f0.options.fairness_knob == 0.0 and f0.params == {"fairness_knob": 0.0, "seed": 0}
    lease = next(r for r in p.requests if r.label == "themis @ lease_s=3600")
    assert lease.options.lease == 3600.0
    noisy = next(r for r in p.requests if r.label == "themis @ estimate_error=0.2")
    assert noisy.conditions.estimate_error == 0.2 and noisy.conditions.restart_cost == 0.0
    costly = next(r for r in p.requests if r.label == "themis @ restart_cost_s=120")
    assert costly.conditions.restart_cost == 120.0 and costly.conditions.estimate_error == 0.0
    # The GPU-types sweep changes the cluster only: all V100, then one rack of K80s.
    typed = {r.label: r.cluster for r in p.requests if "k80_share" in r.label}
    assert typed == {
        "themis @ k80_share=0": "2x4x8:v100",
        "themis @ k80_share=0.5": "1x4x8:v100+1x4x8:k80",
    }


def test_outputs_hold_every_sweep_table_and_plot(tmp_path: Path) -> None:
    p = plan({0: small_workload()}, ["themis", "fifo"])
    records = run_many(p.requests, workers=1)
    path = write_outputs(tmp_path, p, records, ["meta line"])
    html = path.read_text()
    for title in ["Main comparison", "Fairness knob f", "Lease length", "Contention"]:
        assert title in html
    assert "<td>--policies</td><td>themis, fifo</td>" in html  # the configuration table
    assert "themis: the 6 worst apps" in html
    # Main: 4 figures; each sweep: max rho and GPU-hours, VGG share also placement score.
    assert html.count("<figure") == html.count("<svg") == 4 + 2 * 7 + 1
    md = (tmp_path / "results.md").read_text()
    assert "## Sweep: Lease length" in md
    lease_rows = [line for line in md.splitlines() if re.match(r"\| \d+ min \|", line)]
    assert len(lease_rows) == len(LEASES_S) * 4  # four metric tables, a row per lease
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["runs"]) == len(p.requests)
    assert data["meta"] == ["meta line"]


def test_several_seeds_repeat_every_run_with_that_seeds_draws() -> None:
    w = small_workload()
    p = plan({0: w, 1: w}, ["themis"])
    assert p.seeds == (0, 1)
    assert [r.label for r in p.main] == ["themis seed 0", "themis seed 1"]
    for request in p.requests:
        assert request.options.seed == request.params["seed"]
        assert request.label.endswith(f"seed {request.params['seed']}")
    assert len(p.requests) == 2 * (1 + len(FAIRNESS_KNOBS) + len(LEASES_S) + len(CONTENTION)
                                   + len(VGG_SHARES) + len(ESTIMATE_ERRORS)
                                   + len(RESTART_COSTS_S) + len(K80_SHARES) - 5)  # fmt: skip
    # The VGG sweep's gang sizes and model choices are drawn with the run's seed.
    vgg = {r.params["seed"]: r.workload for r in p.requests if r.params.get("vgg_share") == 0.5}
    assert vgg[0].apps != vgg[1].apps
    assert p.points[("lease_s", 600.0, "themis", 1)] == "themis seed 1"


def test_sweep_tables_show_median_and_range_over_seeds(tmp_path: Path) -> None:
    p = plan({0: small_workload(), 1: small_workload(), 2: small_workload()}, ["themis"])
    base = execute(replace(p.main[0], label="base"))
    # Known max rho per seed at every point: seed 0 -> 1.0, seed 1 -> 3.0, seed 2 -> 2.0.
    records = [
        replace(
            base,
            label=r.label,
            summary=replace(base.summary, max_rho=[1.0, 3.0, 2.0][r.params["seed"]]),
        )
        for r in p.requests
    ]
    write_outputs(tmp_path, p, records, ["meta"])
    md = (tmp_path / "results.md").read_text()
    assert "| 5 min | 2.00 (1.00-3.00) |" in md
    assert "median and range over seeds 0, 1, 2" in md
    html = (tmp_path / "report.html").read_text()
    assert "median (min-max) over seeds 0, 1, 2" in html
    assert "band: min-max" in html


def test_sweeps_without_any_chosen_policy_are_dropped() -> None:
    p = plan({0: small_workload()}, ["fifo", "max-min"])
    assert [s.key for s in p.sweeps] == ["contention", "vgg_share", "k80_share"]  # max-min's
    assert all(policy == "max-min" for (_, _, policy, _) in p.points)


def test_kept_runs_have_the_same_folder_with_one_seed_or_several(tmp_path: Path) -> None:
    """--seeds 1 then --seeds 2: the second run reuses every run of seed 0."""
    from themis.experiments.paper import saved_in
    from themis.experiments.runner import run_batch

    one = saved_in(plan({0: small_workload()}, ["themis", "fifo"]), tmp_path)
    two = saved_in(plan({0: small_workload(), 1: small_workload()}, ["themis", "fifo"]), tmp_path)
    folders = {r.out_dir for r in one.requests}
    assert len(folders) == len(one.requests)
    assert folders < {r.out_dir for r in two.requests}
    assert all(r.files == ("summary.json",) for r in two.requests)
    assert run_batch(one.requests, workers=1).reused == 0
    batch = run_batch(two.requests, workers=1)
    assert batch.reused == len(one.requests) and not batch.failures
    assert sorted(p.name for p in (tmp_path / "seed0" / "themis").iterdir()) == [
        "summary.json",
        "themis-record.json",
    ]


def test_the_restart_cost_sweep_leaves_out_gandiva_which_refuses_long_resumes() -> None:
    p = plan({0: small_workload()}, ["themis", "gandiva"])
    assert ("restart_cost_s", 120.0, "themis", 0) in p.points
    assert not any(s == "restart_cost_s" and pol == "gandiva" for (s, _, pol, _) in p.points)
    # Every run the plan makes is one gandiva accepts.
    for request in p.requests:
        if request.policy == "gandiva":
            make_policy("gandiva", request.options).set_restart_cost(
                request.conditions.restart_cost
            )
