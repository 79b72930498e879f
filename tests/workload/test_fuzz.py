"""Hypothesis fuzzing of every reader: files that are mostly right with random damage.

For each, loading either succeeds with every row accounted for (a job or a counted
exclusion), or fails with a ThemisError naming the file; never another exception.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from themis.errors import ThemisError
from themis.workload import load_workload

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_junk = st.text(max_size=6)
_stamp = st.builds(
    "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}".format,
    st.integers(2017, 2021),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 24),
    st.integers(0, 60),
    st.integers(0, 60),
)


def _num(low: int, high: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(low, high).map(str),
        st.floats(low, high, allow_nan=False).map(repr),
        _junk,
    )


def _load(path: Path, fmt: str | None = None):
    """(workload or None, error or None); anything but a ThemisError fails the test."""
    try:
        return load_workload(str(path), format=fmt), None
    except ThemisError as exc:
        assert exc.source is not None and str(path.parent) in exc.source, exc
        assert exc.line is None or exc.line >= 1
        return None, exc


def _accounted(workload) -> int:
    return workload.job_count + sum(workload.notes.get("excluded", {}).values())


def _csv_rows(path: Path) -> int:
    with path.open(newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    return path


def _rows(columns: list[st.SearchStrategy[str]], sep: str = ",") -> st.SearchStrategy[list[str]]:
    return st.lists(st.tuples(*columns).map(sep.join), min_size=0, max_size=6)


@SETTINGS
@given(rows=_rows([st.sampled_from(["1", "2", " 3"]), _junk, _stamp, _num(-1, 9999), _num(-1, 9)]))
def test_hyperdrive(tmp_path: Path, rows: list[str]) -> None:
    path = _write(
        tmp_path, "h.csv", "experiment-id,job-id,start-time,run-time,num-gpus\n" + "\n".join(rows)
    )
    workload, _ = _load(path)
    if workload is not None:
        assert _accounted(workload) == _csv_rows(path)


@SETTINGS
@given(
    rows=_rows(
        [
            _junk,
            _num(-1, 9),
            _num(-5, 999),
            _num(-1, 99),
            st.sampled_from(["vgg16", "", "x"]),
            _num(-1, 999),
            _num(-1, 9),
        ]
    )
)
def test_tiresias(tmp_path: Path, rows: list[str]) -> None:
    header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
    path = _write(tmp_path, "t.csv", header + "\n".join(rows))
    workload, _ = _load(path)
    if workload is not None:
        assert _accounted(workload) == _csv_rows(path)


@SETTINGS
@given(
    rows=_rows(
        [
            _junk,
            st.sampled_from(["u1", "u2"]),
            st.sampled_from(["vc1", ""]),
            _num(-1, 9),
            _num(0, 9),
            _num(0, 2),
            st.sampled_from(["COMPLETED", "FAILED", ""]),
            _stamp,
            st.one_of(_stamp, st.just("")),
            st.one_of(_stamp, st.just("")),
            _num(-1, 9999),
            _num(0, 99),
        ]
    )
)
def test_helios(tmp_path: Path, rows: list[str]) -> None:
    header = (
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,"
        "submit_time,start_time,end_time,duration,queue\n"
    )
    path = _write(tmp_path, "cluster_log.csv", header + "\n".join(rows))
    workload, _ = _load(path)
    if workload is not None:
        assert _accounted(workload) == _csv_rows(path)


@SETTINGS
@given(
    jobs=_rows(
        [
            st.sampled_from(["j1", "j2", "j3"]),
            _junk,
            st.sampled_from(["a", "b"]),
            _junk,
            _num(0, 999),
            st.one_of(_num(0, 999), st.just("")),
        ]
    ),
    tasks=_rows(
        [
            st.sampled_from(["j1", "j2", "j4"]),
            st.sampled_from(["worker", "ps"]),
            _num(0, 4),
            _junk,
            st.one_of(_num(0, 999), st.just("")),
            st.one_of(_num(0, 999), st.just("")),
            _num(0, 900),
            _num(0, 9),
            st.one_of(_num(0, 800), st.just("")),
            _junk,
        ]
    ),
)
def test_pai(tmp_path: Path, jobs: list[str], tasks: list[str]) -> None:
    _write(tmp_path, "pai_job_table.csv", "\n".join(jobs))
    _write(tmp_path, "pai_task_table.csv", "\n".join(tasks))
    workload, _ = _load(tmp_path)
    if workload is not None:
        task_jobs = [row[0] for row in csv.reader(io.StringIO("\n".join(tasks)))]
        job_names = {row[0] for row in csv.reader(io.StringIO("\n".join(jobs)))}
        orphans = sum(1 for name in task_jobs if name not in job_names)
        assert _accounted(workload) == len(jobs) + orphans


@SETTINGS
@given(
    rows=_rows(
        [
            st.sampled_from(["ResNet-50 (batch size 64)", "LM", ""]),
            st.sampled_from(["cmd", ""]),
            _junk,
            st.just("--steps"),
            st.sampled_from(["0", "1", "2"]),
            _num(-1, 9999),
            _num(-1, 8),
            _num(-1, 2),
            _num(-2, 99),
            _num(-1, 999),
        ],
        sep="\t",
    )
)
def test_gavel(tmp_path: Path, rows: list[str]) -> None:
    path = _write(tmp_path, "g.trace", "\n".join(rows) + ("\n" if rows else ""))
    workload, _ = _load(path)
    if workload is not None:
        assert _accounted(workload) == len(rows)


_time = st.one_of(_stamp, st.none(), st.just("None"), st.integers())
_attempt = st.fixed_dictionaries(
    {
        "start_time": _time,
        "end_time": _time,
        "detail": st.lists(
            st.fixed_dictionaries(
                {
                    "ip": st.sampled_from(["m1", "m2"]),
                    "gpus": st.lists(st.sampled_from(["gpu0", "gpu1"]), max_size=3),
                }
            ),
            max_size=2,
        ),
    }
)
_philly_job = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["Pass", "Killed"]),
        "vc": st.sampled_from(["v1", "v2"]),
        "jobid": st.text(min_size=1, max_size=4),
        "user": st.sampled_from(["u1", "u2"]),
        "submitted_time": st.one_of(_stamp, st.none()),
        "attempts": st.lists(_attempt, max_size=3),
    }
)


@SETTINGS
@given(
    jobs=st.lists(st.one_of(_philly_job, st.integers()), max_size=5),
    cut=st.integers(0, 4000),
    damage=st.booleans(),
)
def test_philly(tmp_path: Path, jobs: list, cut: int, damage: bool) -> None:
    text = json.dumps(jobs, indent=1)
    if damage:
        text = text[:cut]
    path = _write(tmp_path, "cluster_job_log", text)
    workload, _ = _load(path, "philly")
    if workload is not None:
        assert _accounted(workload) == len(json.loads(text))


_native_job = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=3), "gpus": st.one_of(st.integers(0, 4), _junk)},
    optional={"iterations": st.floats(-1, 1e4), "duration": st.integers(-1, 100)},
)
_native_app = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=3),
        "arrival": st.floats(-1, 1e4),
        "jobs": st.lists(_native_job, max_size=3),
    },
    optional={"model": st.sampled_from(["vgg16", "nope", ""])},
)


@SETTINGS
@given(
    apps=st.lists(_native_app, max_size=4),
    encoding=st.sampled_from(["json", "yaml"]),
    cut=st.integers(0, 2000),
    damage=st.booleans(),
)
def test_themis(tmp_path: Path, apps: list, encoding: str, cut: int, damage: bool) -> None:
    document = {"format": "themis-workload", "version": 1, "apps": apps}
    if encoding == "json":
        text = json.dumps(document, indent=1)
    else:
        import yaml

        text = yaml.safe_dump(document, allow_unicode=True)
    if damage:
        text = text[:cut]
    path = _write(tmp_path, f"w.{encoding}", text)
    workload, _ = _load(path)
    if workload is not None:
        assert workload.job_count == sum(len(app["jobs"]) for app in apps)


@SETTINGS
@given(
    blob=st.binary(max_size=300),
    fmt=st.sampled_from(
        ["themis", "hyperdrive", "philly", "gavel", "tiresias", "pai", "helios", None]
    ),
)
def test_any_bytes_in_any_format(tmp_path: Path, blob: bytes, fmt: str | None) -> None:
    path = tmp_path / ("pai_job_table.csv" if fmt == "pai" else "blob")
    path.write_bytes(blob)
    if fmt == "pai":
        (tmp_path / "pai_task_table.csv").write_bytes(blob[::-1])
    _load(path, fmt)
