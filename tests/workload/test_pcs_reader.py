"""The PCS trace reader (``themis.workload.pcs``): a hand-written trace, its apps and jobs,
and a one-line error naming file, line and field for every bad cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.workload.formats import detect_format
from themis.workload.loader import load_workload

HEADER = "app_id,submit_time,service,num_jobs,sleep_time"


def _write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_row_is_num_jobs_one_gpu_trials_of_equal_length(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"{HEADER}\n0,0.0,100.0,1,0.0\n1,5.0,800.0,4,5.0\n2,12.0,30.0,2,7.0\n",
    )
    w = load_workload(str(path))
    assert w.notes["format"] == "pcs"
    assert [a.app_id for a in w.apps] == ["0", "1", "2"]
    # arrivals: the running sum of sleep_time
    assert [a.arrival for a in w.apps] == [0.0, 5.0, 12.0]
    assert [len(a.jobs) for a in w.apps] == [1, 4, 2]
    for app, service in zip(w.apps, (100.0, 800.0, 30.0), strict=True):
        tpi = w.profiles[app.model].time_per_iteration
        assert all(j.gang == 1 for j in app.jobs)
        seconds = [j.work * tpi for j in app.jobs]
        assert seconds == pytest.approx([service / len(app.jobs)] * len(app.jobs))
        assert sum(seconds) == pytest.approx(service)


def test_arrivals_follow_sleep_time_not_submit_time_and_skip_commented_rows(
    tmp_path: Path,
) -> None:
    # PCS's sim.py places apps by the running sum of sleep_time and skips a row with '#'
    # (its sleep_time too).
    path = _write(
        tmp_path,
        f"{HEADER},model_name\n0,0,10,1,0,VggnetModel256\n1,999,10,1,4,#x\n2,3,10,1,6,Resnet\n",
    )
    w = load_workload(str(path))
    assert [(a.app_id, a.arrival) for a in w.apps] == [("0", 0.0), ("2", 6.0)]
    assert w.notes["excluded"] == {"commented": 1}


def test_detected_from_its_header(tmp_path: Path) -> None:
    path = _write(tmp_path, f"{HEADER},model_name\n0,0,10,1,0,VggnetModel256\n")
    assert detect_format(path, "t").name == "pcs"


@pytest.mark.parametrize(
    ("row", "line", "field", "words"),
    [
        ("1,0,-5,1,0", 3, "service", "must be >= 0"),
        ("1,0,0,1,0", 3, "service", "> 0"),
        ("1,0,10,0,0", 3, "num_jobs", "must be >= 1"),
        ("1,0,10,two,0", 3, "num_jobs", "not a whole number"),
        ("1,0,10,1,-1", 3, "sleep_time", "must be >= 0"),
        ("1,x,10,1,0", 3, "submit_time", "not a number"),
        ("0,0,10,1,0", 3, "app_id", "duplicate app id '0' (first on line 2)"),
        ("1,0,10,1", 3, "sleep_time", "expected 5 fields"),
    ],
)
def test_a_bad_cell_is_named_by_file_line_and_field(
    tmp_path: Path, row: str, line: int, field: str, words: str
) -> None:
    path = _write(tmp_path, f"{HEADER}\n0,0,10,1,0\n{row}\n")
    with pytest.raises(ThemisError) as caught:
        load_workload(str(path), format="pcs")
    err = caught.value
    assert (err.source, err.line, err.field) == (str(path), line, field)
    assert words in err.message
    assert "\n" not in err.format()


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "app_id,submit_time,service,num_jobs\n0,0,10,1\n")
    with pytest.raises(ThemisError) as caught:
        load_workload(str(path), format="pcs")
    assert (caught.value.line, caught.value.field) == (1, "sleep_time")
