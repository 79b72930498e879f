"""Defects met on real public trace files: CPU-only rows in a Tiresias-format
file, the gang-too-big error naming another format's field, unknown Philly keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.workload import load_workload
from themis.workload.fits import check_fits

from .conftest import one_line_error

TIRESIAS_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"


def test_tiresias_cpu_only_rows_are_counted_and_skipped(tmp_path: Path, themis) -> None:
    path = tmp_path / "philly_derived.csv"
    path.write_text(
        TIRESIAS_HEADER
        + "1,1,0,0,resnet50,60,10\n"
        + "2,0,10,0,resnet50,30,10\n"  # CPU-only: the whole file used to fail here
        + "3,2,20,0,vgg16,90,0\n"
        + "4,0,30,0,vgg16,5,0\n"
    )
    w = load_workload(str(path))
    assert [a.app_id for a in w.apps] == ["1", "3"]
    assert w.notes["excluded"] == {"cpu_only": 2}
    assert w.notes["excluded_first_line"] == {"cpu_only": 3}
    out = themis("trace", "inspect", path)
    assert out.code == 0, out.err
    assert "rows excluded: 2: cpu_only 2 (first: line 3)" in out.out


def test_a_tiresias_file_of_cpu_only_rows_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cpu.csv"
    path.write_text(TIRESIAS_HEADER + "1,0,0,0,resnet50,60,10\n")
    with pytest.raises(ThemisError, match="no simulable jobs: every row is excluded"):
        load_workload(str(path))


GANG_OF_8 = {
    "tiresias": (TIRESIAS_HEADER + "1,8,0,0,resnet50,60,0\n", "num_gpu", 2),
    "gavel": ("ResNet-18\tcmd\t--steps\t1\t100\t0.0\t8\n", "scale_factor", 1),
    "helios": (
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
        "duration,queue\n"
        "1,u,vc,8,1,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,"
        "2020-04-01 00:01:10,60,10\n",
        "gpu_num",
        2,
    ),
    "hyperdrive": (
        "experiment-id,job-id,start-time,run-time,num-gpus\n1,j1,2018-06-16 04:51:49,60.0,8\n",
        "num-gpus",
        2,
    ),
}


@pytest.mark.parametrize("fmt", sorted(GANG_OF_8))
def test_gang_too_big_names_the_formats_own_field(tmp_path: Path, themis, fmt: str) -> None:
    text, field, line = GANG_OF_8[fmt]
    path = tmp_path / f"big.{'trace' if fmt == 'gavel' else 'csv'}"
    path.write_text(text)
    with pytest.raises(ThemisError) as caught:
        check_fits(load_workload(str(path)), Cluster.from_spec("1x1x4"))
    assert (caught.value.field, caught.value.line) == (field, line)
    out = themis("simulate", "--trace", path, "--cluster", "1x1x4", "--out", tmp_path / "o")
    assert one_line_error(out).startswith(f"{path}:{line}, field '{field}': job ")


def test_philly_reports_unknown_keys_like_the_csv_readers(tmp_path: Path, themis) -> None:
    job = {
        "status": "Pass",
        "vc": "vc1",
        "jobid": "application_1",
        "user": "u1",
        "submitted_time": "2017-10-07 01:00:00",
        "cluster": "philly-1",
        "attempts": [
            {
                "start_time": "2017-10-07 01:00:30",
                "end_time": "2017-10-07 02:00:30",
                "exit_code": 0,
                "detail": [{"ip": "m1", "gpus": ["gpu0"], "port": 22}],
            }
        ],
    }
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps([job, {**job, "jobid": "application_2"}]))
    w = load_workload(str(path), format="philly")
    assert w.notes["ignored_columns"] == [
        "[].cluster",
        "[].attempts[].exit_code",
        "[].attempts[].detail[].port",
    ]
    out = themis("trace", "inspect", path)
    assert "ignored: [].cluster, [].attempts[].exit_code, [].attempts[].detail[].port" in out.out


def test_philly_without_unknown_keys_reports_none(tmp_path: Path) -> None:
    from .conftest import SAMPLE_FILES

    w = load_workload(str(SAMPLE_FILES["philly"]))
    assert "ignored_columns" not in w.notes
