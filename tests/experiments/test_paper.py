"""The paper experiment's plan and outputs, on a small workload (the real one takes minutes)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from themis.experiments.paper import (
    CONTENTION,
    FAIRNESS_KNOBS,
    LEASES_S,
    VGG_SHARES,
    plan,
)
from themis.experiments.paper_report import write_outputs
from themis.experiments.runner import run_many

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
    }
    extra = len(FAIRNESS_KNOBS) + len(LEASES_S) + len(CONTENTION) + len(VGG_SHARES) - 3
    assert len(p.requests) == 3 + extra
    f0 = next(r for r in p.requests if r.label == "themis @ fairness_knob=0")
    assert f0.options.fairness_knob == 0.0 and f0.params == {"fairness_knob": 0.0, "seed": 0}
    lease = next(r for r in p.requests if r.label == "themis @ lease_s=3600")
    assert lease.options.lease == 3600.0


def test_outputs_hold_every_sweep_table_and_plot(tmp_path: Path) -> None:
    p = plan({0: small_workload()}, ["themis", "fifo"])
    records = run_many(p.requests, workers=1)
    path = write_outputs(tmp_path, p, records, ["meta line"])
    html = path.read_text()
    for title in ["Main comparison", "Fairness knob f", "Lease length", "Contention"]:
        assert title in html
    # Main: 4 figures; each sweep: max rho and GPU-hours, VGG share also placement score.
    assert html.count("<figure") == html.count("<svg") == 4 + 2 * 4 + 1
    md = (tmp_path / "results.md").read_text()
    assert "## Sweep: Lease length" in md
    lease_rows = [line for line in md.splitlines() if re.match(r"\| \d+ min \|", line)]
    assert len(lease_rows) == len(LEASES_S) * 4  # four metric tables, a row per lease
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["runs"]) == len(p.requests)
    assert data["meta"] == ["meta line"]
