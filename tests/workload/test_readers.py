"""Each reader on its sample, against values worked out by hand from the sample's rows
(the mapping of docs/traces.md), and the rule that no row is lost: every row is a job
or a counted exclusion."""

from __future__ import annotations

import csv
import json
import random

import pytest

from themis.workload import load_workload
from themis.workload.formats import detect_format

from .conftest import PROFILES, SAMPLE_FILES

TPI = {name: p.time_per_iteration for name, p in PROFILES.items()}


def apps_of(workload) -> dict[str, tuple]:
    return {
        a.app_id: (a.arrival, a.model, [(j.job_id, j.gang, j.work, j.line) for j in a.jobs])
        for a in workload.apps
    }


@pytest.mark.parametrize(
    ("sample", "fmt"),
    [
        ("hyperdrive", "hyperdrive"),
        ("philly", "philly"),
        ("gavel", "gavel"),
        ("tiresias", "tiresias"),
        ("pai", "pai"),
        ("helios", "helios"),
        ("themis-yaml", "themis"),
        ("themis-json", "themis"),
    ],
)
def test_format_is_detected(sample: str, fmt: str) -> None:
    path = SAMPLE_FILES[sample]
    assert detect_format(path, str(path)).name == fmt
    assert load_workload(str(path)).notes["format"] == fmt


def test_pai_table_files_find_each_other() -> None:
    by_folder = apps_of(load_workload(str(SAMPLE_FILES["pai"])))
    for table in ("pai_job_table.csv", "pai_task_table.csv"):
        assert apps_of(load_workload(str(SAMPLE_FILES["pai"] / table))) == by_folder


def test_philly_mapping() -> None:
    w = load_workload(str(SAMPLE_FILES["philly"]))
    apps = apps_of(w)
    # Sessions: u3 in vc2 first (00:50), u1's 01:00 and 01:20 jobs, then u1 at 04:00
    # (more than an hour after 01:20). The origin is the first simulable submission.
    assert [a.app_id for a in w.apps] == ["vc2/u3/1", "vc1/u1/1", "vc1/u1/2"]
    assert [a.arrival for a in w.apps] == [0.0, 600.0, 11400.0]
    # A user's sessions are one owner's apps (they share its slice: fairness/shares.py).
    assert [a.owner for a in w.apps] == ["vc2/u3", "vc1/u1", "vc1/u1"]
    m = {a.app_id: TPI[a.model] for a in w.apps}
    # 0006: 60 s on 8 GPUs + 600 s on 4 = 2880 GPU-s over a gang of 8 = 360 s on 8.
    assert apps["vc2/u3/1"][2] == [("application_1_0006", 8, 360.0 * 8 / m["vc2/u3/1"], 40)]
    # 0001: 3600 s on 2 GPUs; 0002: 600 s + 3600 s on 4 GPUs.
    assert apps["vc1/u1/1"][2] == [
        ("application_1_0001", 2, 3600.0 * 2 / m["vc1/u1/1"], 2),
        ("application_1_0002", 4, 4200.0 * 4 / m["vc1/u1/1"], 10),
    ]
    assert apps["vc1/u1/2"][2] == [("application_1_0003", 1, 600.0 / m["vc1/u1/2"], 20)]
    assert w.notes["excluded"] == {"never_started": 1, "unfinished": 1, "attempt_without_times": 1}
    assert w.notes["excluded_first_line"] == {
        "never_started": 28,
        "unfinished": 32,
        "attempt_without_times": 50,
    }


def test_app_gap_changes_philly_sessions() -> None:
    # 01:20 -> 04:00 is 9600 s: with a longer gap u1's three jobs are one app.
    w = load_workload(str(SAMPLE_FILES["philly"]), app_gap=9600.0)
    assert [a.app_id for a in w.apps] == ["vc2/u3/1", "vc1/u1/1"]
    assert len(w.apps[1].jobs) == 3


def test_gavel_mapping() -> None:
    w = load_workload(str(SAMPLE_FILES["gavel"]), seed=4)
    got = [
        (a.app_id, a.arrival, a.model, [(j.job_id, j.gang, j.work) for j in a.jobs]) for a in w.apps
    ]
    names = sorted(PROFILES)

    def assigned(name: str) -> str:  # rule 2 of themis.workload.models
        return random.Random(f"4:{name}").choice(names)

    transformer = assigned("Transformer (batch size 128)")
    assert got == [
        ("0", 0.0, "resnet50", [("0", 2, 3000.0)]),  # ResNet-50 matched by normalized name
        ("1", 120.5, transformer, [("1", 1, 1200.0)]),
        ("2", 300.0, assigned("LM (batch size 80)"), [("2", 4, 500.0)]),
        ("3", 310.0, transformer, [("3", 1, 800.0)]),  # the same job type, the same model
    ]
    names_note = w.notes["models"]["trace_names"]
    assert names_note["ResNet-50 (batch size 64)"] == "resnet50 (matched)"
    assert names_note["Transformer (batch size 128)"] == f"{transformer} (assigned)"


def test_tiresias_mapping() -> None:
    w = load_workload(str(SAMPLE_FILES["tiresias"]))
    got = [
        (a.app_id, a.arrival, a.model, [(j.job_id, j.gang, j.work) for j in a.jobs]) for a in w.apps
    ]
    assert got == [
        ("0", 0.0, "vgg19", [("0", 1, 120.0 * 1 / 1.2)]),
        ("1", 30.0, "resnet50", [("1", 8, 600.0 * 8 / 0.33)]),
        ("2", 50.0, "inception3", [("2", 2, 90.0 * 2 / 0.33)]),
    ]


def test_pai_mapping() -> None:
    w = load_workload(str(SAMPLE_FILES["pai"]))
    apps = apps_of(w)
    assert [a.app_id for a in w.apps] == ["userA/1", "userB/1"]
    assert [a.owner for a in w.apps] == ["userA", "userB"]
    assert [a.arrival for a in w.apps] == [0.0, 4900.0]
    a, b = (TPI[x.model] for x in w.apps)
    assert apps["userA/1"][2] == [
        # j1: worker 2 x 50% = 1 GPU from 150 to 1250 (the CPU-only ps does not count).
        ("j1", 1, 1100.0 * 1 / a, 1),
        # j2: 800% = 8 GPUs from 420 to 880.
        ("j2", 8, 460.0 * 8 / a, 2),
    ]
    # j3: 4 x 100% + 1 x 50% = 4.5 GPUs -> a gang of 5, from 5010 to 5590.
    assert apps["userB/1"][2] == [("j3", 5, 580.0 * 5 / b, 3)]
    assert w.notes["excluded"] == {
        "unfinished": 1,
        "cpu_only": 1,
        "no_tasks": 1,
        "task_without_job": 1,
    }


def test_helios_mapping() -> None:
    w = load_workload(str(SAMPLE_FILES["helios"]))
    apps = apps_of(w)
    assert [(a.app_id, a.arrival) for a in w.apps] == [
        ("vcY/uB/1", 0.0),  # 17:00, cancelled before it started: a job without work
        ("vcX/uA/1", 3600.0),  # 18:00 and 18:30
        ("vcX/uA/2", 14400.0),  # 21:00, 2.5 h after 18:30
    ]
    m = {a.app_id: TPI[a.model] for a in w.apps}
    assert apps["vcY/uB/1"][2] == [("1004", 16, 0.0, 5)]
    assert apps["vcX/uA/1"][2] == [
        ("1001", 1, 3600.0 / m["vcX/uA/1"], 2),
        ("1003", 8, 600.0 * 8 / m["vcX/uA/1"], 4),
    ]
    assert apps["vcX/uA/2"][2] == [("1005", 2, 3600.0 * 2 / m["vcX/uA/2"], 6)]
    assert w.notes["excluded"] == {"cpu_only": 1}


def test_hyperdrive_sample_mapping() -> None:
    w = load_workload(str(SAMPLE_FILES["hyperdrive"]), arrivals="trace")
    got = [
        (a.app_id, a.arrival, [(j.job_id, j.gang, j.work * TPI[a.model]) for j in a.jobs])
        for a in w.apps
    ]
    assert got == [
        ("8", 0.0, [("trial-c", 4, pytest.approx(600.0 * 4))]),
        ("7", 3600.0, [
            ("trial-a", 1, pytest.approx(3600.0)),
            ("trial-b", 1, pytest.approx(1800.0)),
            ("trial-d", 1, 0.0),
        ]),
    ]  # fmt: skip


def _rows(sample: str) -> int:
    """Rows of a sample counted without the reader under test."""
    path = SAMPLE_FILES[sample]
    if sample == "philly":
        return len(json.loads(path.read_text()))
    if sample == "gavel":
        return len(path.read_text().splitlines())
    if sample == "pai":
        jobs = (path / "pai_job_table.csv").read_text().splitlines()
        tasks = list(csv.reader((path / "pai_task_table.csv").open()))
        orphans = [t for t in tasks if t[0] not in {j.split(",")[0] for j in jobs}]
        return len(jobs) + len(orphans)
    with path.open() as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


@pytest.mark.parametrize("sample", ["hyperdrive", "philly", "gavel", "tiresias", "pai", "helios"])
def test_no_row_is_lost(sample: str) -> None:
    w = load_workload(str(SAMPLE_FILES[sample]))
    excluded = sum(w.notes.get("excluded", {}).values())
    assert w.job_count + excluded == _rows(sample)
    assert excluded > 0 or sample in ("hyperdrive", "gavel", "tiresias")


def test_ignored_columns_are_reported(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval,liar\n"
        "0,1,0,10,vgg16,60,0,1\n"
    )
    w = load_workload(str(path))
    assert w.notes["ignored_columns"] == ["liar"]
    assert w.job_count == 1


def test_pai_headers_are_accepted(tmp_path) -> None:
    src = SAMPLE_FILES["pai"]
    (tmp_path / "pai_job_table.csv").write_text(
        "job_name,inst_id,user,status,start_time,end_time\n"
        + (src / "pai_job_table.csv").read_text()
    )
    (tmp_path / "pai_task_table.csv").write_text(
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
        + (src / "pai_task_table.csv").read_text()
    )
    headed = load_workload(str(tmp_path))
    plain = load_workload(str(src))
    assert [
        (a.app_id, a.arrival, [(j.job_id, j.gang, j.work) for j in a.jobs]) for a in headed.apps
    ] == [(a.app_id, a.arrival, [(j.job_id, j.gang, j.work) for j in a.jobs]) for a in plain.apps]
    # Line numbers move down by the header line.
    assert [j.line for a in headed.apps for j in a.jobs] == [2, 3, 4]


def test_gavel_nine_field_form(tmp_path) -> None:
    path = tmp_path / "old.trace"
    path.write_text("ResNet-50\tcmd\t--steps\t0\t300\t2\t1\t-1\t7.5\n")
    w = load_workload(str(path))
    assert [(a.arrival, a.model, a.jobs[0].gang, a.jobs[0].work) for a in w.apps] == [
        (0.0, "resnet50", 2, 300.0)
    ]


def test_arrivals_interval_applies_to_any_format() -> None:
    w = load_workload(str(SAMPLE_FILES["tiresias"]), arrivals="interval", app_interval=100.0)
    assert [a.arrival for a in w.apps] == [0.0, 100.0, 200.0]
    assert w.notes["arrivals"] == "interval"
