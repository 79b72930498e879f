"""The HyperDrive trace reader and the workload loader: the bundled trace, arrivals,
seeded models, and every kind of bad input named by file, line and field."""

from __future__ import annotations

import csv
from datetime import datetime
from importlib import resources
from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.policies import make_policy
from themis.simulator.engine import simulate
from themis.workload import load_workload

BUNDLED = Path(str(resources.files("themis.data").joinpath("philly_hyperdrive_workload.csv")))
PROFILES = load_profiles()


@pytest.fixture(scope="module")
def trace_rows() -> list[dict[str, str]]:
    """The bundled trace read independently of the reader under test: line -> cells."""
    with BUNDLED.open(newline="") as handle:
        reader = csv.reader(handle, skipinitialspace=True)
        header = next(reader)
        return [dict(zip(header, row, strict=True), line=str(n)) for n, row in enumerate(reader, 2)]


@pytest.fixture(scope="module")
def hyperdrive():
    return load_workload("hyperdrive", seed=0)


def job_by_id(workload, job_id: str):
    for app in workload.apps:
        for job in app.jobs:
            if job.job_id == job_id:
                return app, job
    raise KeyError(job_id)


# -- the bundled trace -------------------------------------------------------------------


def test_bundled_trace_counts(hyperdrive, trace_rows) -> None:
    assert len(trace_rows) == 4697
    assert len(hyperdrive.apps) == 84
    assert hyperdrive.job_count == 4697
    assert len({r["experiment-id"] for r in trace_rows}) == 84
    assert "philly_hyperdrive_workload.csv" in hyperdrive.source
    gangs = sorted({j.gang for a in hyperdrive.apps for j in a.jobs})
    assert gangs == [1, 4, 8]


def test_work_of_rows_checked_by_hand(hyperdrive) -> None:
    # Line 2: "1781, application_1529109938017_0075, 2018-06-16 04:51:49, 7953.0, 1"
    app, job = job_by_id(hyperdrive, "application_1529109938017_0075")
    tpi = PROFILES[app.model].time_per_iteration
    assert app.app_id == "1781"
    assert (job.gang, job.line) == (1, 2)
    assert job.work == pytest.approx(7953.0 * 1 / tpi, rel=1e-12)
    # Line 717: "964, application_1523653358074_9965, 2018-04-24 12:57:49, 9206.0, 8"
    app, job = job_by_id(hyperdrive, "application_1523653358074_9965")
    tpi = PROFILES[app.model].time_per_iteration
    assert app.app_id == "964"
    assert (job.gang, job.line) == (8, 717)
    assert job.work == pytest.approx(9206.0 * 8 / tpi, rel=1e-12)
    # So on one machine it runs exactly its trace run time again.
    speed = PROFILES[app.model].speed(8, Cluster.from_spec("1x1x8").span(range(8)))
    assert job.work / speed == pytest.approx(9206.0, rel=1e-12)


def test_every_row_becomes_one_job(hyperdrive, trace_rows) -> None:
    by_id = {j.job_id: (a, j) for a in hyperdrive.apps for j in a.jobs}
    assert len(by_id) == len(trace_rows)
    for row in trace_rows:
        app, job = by_id[row["job-id"]]
        assert app.app_id == row["experiment-id"]
        assert job.line == int(row["line"])
        assert job.gang == int(row["num-gpus"])
        tpi = PROFILES[app.model].time_per_iteration
        assert job.work == pytest.approx(float(row["run-time"]) * job.gang / tpi, rel=1e-12)


def test_zero_run_time_rows_are_jobs_without_work(hyperdrive, trace_rows) -> None:
    zero = [r for r in trace_rows if float(r["run-time"]) == 0.0]
    assert [r["line"] for r in zero] == ["1173", "3498"]
    for row in zero:
        _, job = job_by_id(hyperdrive, row["job-id"])
        assert job.work == 0.0


def _first_starts(trace_rows) -> dict[str, datetime]:
    first: dict[str, datetime] = {}
    for row in trace_rows:
        t = datetime.strptime(row["start-time"], "%Y-%m-%d %H:%M:%S")
        e = row["experiment-id"]
        if e not in first or t < first[e]:
            first[e] = t
    return first


def test_interval_arrivals_in_trace_order(trace_rows) -> None:
    w = load_workload("hyperdrive", arrivals="interval", app_interval=250.0)
    assert [a.arrival for a in w.apps] == [k * 250.0 for k in range(84)]
    first = _first_starts(trace_rows)
    starts = [first[a.app_id] for a in w.apps]
    assert starts == sorted(starts)  # trace order: by each experiment's first start
    assert w.notes["app_interval_s"] == 250.0
    w0 = load_workload("hyperdrive", app_interval=0.0)
    assert {a.arrival for a in w0.apps} == {0.0}


def test_trace_arrivals_relative_to_first_start(trace_rows) -> None:
    w = load_workload("hyperdrive", arrivals="trace")
    first = _first_starts(trace_rows)
    origin = min(first.values())
    for app in w.apps:
        assert app.arrival == (first[app.app_id] - origin).total_seconds()
    assert min(a.arrival for a in w.apps) == 0.0
    arrivals = [a.arrival for a in w.apps]
    assert arrivals == sorted(arrivals)
    # The first app's first job started at 2018-04-1x; 63 days of trace.
    assert 50 * 86400 < max(arrivals) < 70 * 86400


def test_seeded_model_draw() -> None:
    def models(seed: int) -> list[str]:
        return [a.model for a in load_workload("hyperdrive", seed=seed).apps]

    m0, m1 = models(0), models(1)
    assert m0 == models(0)
    assert m0 != m1
    assert set(m0) <= set(PROFILES) and set(m1) <= set(PROFILES)
    assert len(set(m0)) >= 5  # a uniform draw over 10 models for 84 apps


def test_bad_interval_and_missing_trace(tmp_path: Path) -> None:
    with pytest.raises(ThemisError) as err:
        load_workload("hyperdrive", app_interval=-1.0)
    assert err.value.field == "--app-interval"
    with pytest.raises(ThemisError) as err:
        load_workload(str(tmp_path / "missing.csv"))
    assert "missing.csv" in str(err.value)
    with pytest.raises(ThemisError) as err:
        load_workload(str(tmp_path))
    assert "directory" in str(err.value)
    with pytest.raises(ThemisError) as err:
        load_workload("hyperdrive", arrivals="sometimes")
    assert err.value.field == "--arrivals"
    assert "sometimes" in str(err.value)


# -- small traces -----------------------------------------------------------------------

HEADER = "experiment-id,job-id,start-time,run-time,num-gpus\n"
ROW1 = "1, j1, 2018-06-16 04:51:49, 100.0, 1\n"


def write(tmp_path: Path, text: str | bytes, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_small_trace_loads(tmp_path: Path) -> None:
    text = (
        HEADER + ROW1 + "2, j2, 2018-06-16 04:50:49, 30, 2\n" + "1, j3, 2018-06-16 04:52:49, 0, 4\n"
    )
    w = load_workload(str(write(tmp_path, text)), arrivals="trace", seed=3)
    assert [(a.app_id, a.arrival) for a in w.apps] == [("2", 0.0), ("1", 60.0)]
    app1 = w.apps[1]
    tpi = PROFILES[app1.model].time_per_iteration
    assert [(j.job_id, j.gang, j.line) for j in app1.jobs] == [("j1", 1, 2), ("j3", 4, 4)]
    assert app1.jobs[0].work == pytest.approx(100.0 / tpi, rel=1e-12)
    assert app1.jobs[1].work == 0.0


def test_model_column(tmp_path: Path) -> None:
    text = (
        "experiment-id,job-id,start-time,run-time,num-gpus,model\n"
        "1, j1, 2018-06-16 04:51:49, 12, 1, vgg16\n"
        "1, j2, 2018-06-16 04:51:50, 12, 2, vgg16\n"
    )
    w = load_workload(str(write(tmp_path, text)), seed=0)
    assert w.apps[0].model == "vgg16"
    assert w.apps[0].jobs[1].work == pytest.approx(12 * 2 / 1.2, rel=1e-12)


BAD_CASES = [
    # (name, file text, line, field, words the message must contain)
    ("field count", HEADER + ROW1 + "1, j2, 2018-06-16 04:51:49, 100.0\n", 3, "num-gpus", "fields"),
    ("too many", HEADER + "1, j2, 2018-06-16 04:51:49, 1, 1, 1\n", 2, "after num-gpus", "fields"),
    ("start", HEADER + ROW1 + "1, j2, 2018-13-16 04:51:49, 1, 1\n", 3, "start-time", "2018-13"),
    ("start text", HEADER + "1, j2, yesterday, 1, 1\n", 2, "start-time", "yesterday"),
    ("run nan", HEADER + ROW1 + "1, j2, 2018-06-16 04:51:49, abc, 1\n", 3, "run-time", "abc"),
    ("run neg", HEADER + ROW1 + "1, j2, 2018-06-16 04:51:49, -1, 1\n", 3, "run-time", "-1"),
    ("run inf", HEADER + "1, j2, 2018-06-16 04:51:49, inf, 1\n", 2, "run-time", "inf"),
    ("run empty", HEADER + "1, j2, 2018-06-16 04:51:49, , 1\n", 2, "run-time", "number"),
    ("gpus 0", HEADER + ROW1 + "1, j2, 2018-06-16 04:51:49, 1, 0\n", 3, "num-gpus", "0"),
    ("gpus x", HEADER + ROW1 + "1, j2, 2018-06-16 04:51:49, 1, x\n", 3, "num-gpus", "'x'"),
    ("gpus 1.5", HEADER + "1, j2, 2018-06-16 04:51:49, 1, 1.5\n", 2, "num-gpus", "1.5"),
    ("dup", HEADER + ROW1 + "2, j1, 2018-06-16 04:51:49, 1, 1\n", 3, "job-id", "line 2"),
    ("no job id", HEADER + "1, , 2018-06-16 04:51:49, 1, 1\n", 2, "job-id", "empty"),
    ("no exp id", HEADER + " , j1, 2018-06-16 04:51:49, 1, 1\n", 2, "experiment-id", "empty"),
    (
        "missing column",
        "experiment-id,job-id,start-time,run-time\n1, j1, 2018-06-16 04:51:49, 1\n",
        1,
        "num-gpus",
        "missing",
    ),
    ("unknown column", HEADER.rstrip() + ",colour\n", 1, "colour", "unknown"),
    ("empty", "", 1, None, "empty"),
    ("header only", HEADER, 2, None, "no jobs"),
    ("blank row", HEADER + ROW1 + "\n" + ROW1.replace("j1", "j2"), 3, None, "blank"),
    (
        "unknown model",
        "experiment-id,job-id,start-time,run-time,num-gpus,model\n"
        "1, j1, 2018-06-16 04:51:49, 1, 1, vgg16\n"
        "1, j2, 2018-06-16 04:51:49, 1, 1, gpt5\n",
        3,
        "model",
        "gpt5",
    ),
    (
        "mixed models",
        "experiment-id,job-id,start-time,run-time,num-gpus,model\n"
        "1, j1, 2018-06-16 04:51:49, 1, 1, vgg16\n"
        "1, j2, 2018-06-16 04:51:49, 1, 1, vgg19\n",
        3,
        "model",
        "mixes",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [case[1:] for case in BAD_CASES],
    ids=[case[0] for case in BAD_CASES],
)
def test_bad_trace_names_file_line_field(
    tmp_path: Path, text: str, line: int, field: str | None, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ThemisError) as err:
        load_workload(str(path))
    e = err.value
    message = str(e)
    assert e.source == str(path)
    assert e.line == line
    assert f"{path}:{line}" in message
    assert e.field == field
    if field is not None:
        assert f"field '{field}'" in message
    assert words in message


@pytest.mark.parametrize(
    "blob",
    [
        bytes(range(256)) * 4,
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\xfd" * 20,
        HEADER.encode() + "1, j\xe9, 2018-06-16 04:51:49, 1, 1\n".encode("latin-1"),
    ],
    ids=["all bytes", "png", "latin-1"],
)
def test_binary_garbage_is_a_user_error(tmp_path: Path, blob: bytes) -> None:
    path = write(tmp_path, blob)
    with pytest.raises(ThemisError) as err:
        load_workload(str(path))
    assert str(path) in str(err.value)


def test_non_utf8_byte_names_its_line(tmp_path: Path) -> None:
    blob = (HEADER + ROW1).encode() + "1, j\xe9, 2018-06-16 04:51:49, 1, 1\n".encode("latin-1")
    path = write(tmp_path, blob)
    with pytest.raises(ThemisError) as err:
        load_workload(str(path))
    assert f"{path}:3" in str(err.value)


def test_nul_bytes_are_a_user_error(tmp_path: Path) -> None:
    path = write(tmp_path, b"\x00\x01\x02" * 50)
    with pytest.raises(ThemisError) as err:
        load_workload(str(path))
    assert f"{path}:1" in str(err.value)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, ("\ufeff" + HEADER + ROW1).encode("utf-8"))
    w = load_workload(str(path))
    assert w.job_count == 1


def test_gang_larger_than_cluster_is_a_user_error(hyperdrive) -> None:
    with pytest.raises(ThemisError) as err:
        simulate(hyperdrive, Cluster.from_spec("1x1x4"), make_policy("fifo"))
    e = err.value
    assert e.field == "num-gpus"
    assert e.line is not None
    # The named line really is an 8-GPU row of the trace.
    lines = BUNDLED.read_text().splitlines()
    assert lines[e.line - 1].split(",")[-1].strip() == "8"
    message = str(e)
    assert f"philly_hyperdrive_workload.csv (bundled):{e.line}" in message
    assert "field 'num-gpus'" in message
    assert "8 GPUs" in message and "4" in message


def test_gang_larger_than_cluster_in_a_small_trace(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + ROW1 + "1, j2, 2018-06-16 04:51:49, 5, 3\n")
    w = load_workload(str(path))
    with pytest.raises(ThemisError) as err:
        simulate(w, Cluster.from_spec("1x1x2"), make_policy("themis"))
    assert str(err.value).startswith(f"{path}:3, field 'num-gpus'")
    assert "j2" in str(err.value)
