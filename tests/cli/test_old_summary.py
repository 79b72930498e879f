"""A ``summary.json`` written before the knobs were carried as one ``PolicyOptions`` still
replays and reads the same: ``fixtures/summaries/themis-f9c96f8.json`` is the summary
themis wrote at commit f9c96f8 for

    themis simulate --trace generate:jobs=40,load=1.5 --cluster 1x2x4 --lease 300 \\
        --reservation-bound 100 --tiresias-queues 3600 --valuation remaining \\
        --renew-within-share

(its knobs recorded under the names the knob table now gives: ``lease_s``,
``reservation_bound_s``, ``tiresias_queues`` ...)."""

from __future__ import annotations

import json
from pathlib import Path

from themis.reports.html import config_table

OLD = Path(__file__).parents[1] / "fixtures" / "summaries" / "themis-f9c96f8.json"


def test_an_old_summary_replays_to_the_same_config_and_run(cli, tmp_path) -> None:
    old = json.loads(OLD.read_text())
    result = cli("simulate", "--config", OLD, "--out", tmp_path / "again", "-q")
    assert result.code == 0, result.err
    new = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert new["config"] == old["config"]  # every key, every value
    assert new["options"] == old["options"]
    same = ("apps", "jobs", "max_rho", "jain_rho", "makespan_s", "rounds", "rho_p99")
    assert {k: new[k] for k in same} == {k: old[k] for k in same}


def test_an_old_summary_reads_as_flags_in_the_report() -> None:
    config = json.loads(OLD.read_text())["config"]
    rows = dict(config_table(config).rows)  # type: ignore[arg-type]
    assert rows["--lease"] == "300" and rows["--reservation-bound"] == "100"
    assert rows["--tiresias-queues"] == "3600" and rows["--gandiva-slice"] == "60"
    assert rows["--auction-deadline"] == "default" and rows["--batch-window"] == "30"
