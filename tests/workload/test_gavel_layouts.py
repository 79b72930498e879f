"""Gavel's four ``.trace`` layouts, its zero-scale rows, and its throughput file.

The rows are written for these tests in the shape of Gavel's own files (the 10-field
form of current Gavel, the 9-field form of older releases, the 7-field ``traces/msr``
form and the 6-field first generated form); the throughput file has both of Gavel's key
shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.workload import load_workload

from .conftest import one_line_error

RESNET = "ResNet-50 (batch size 64)"
LM = "LM (batch size 20)"
CMD = "cd %s/image_classification/imagenet && python3 main.py -b 64 %s/data/imagenet"

#: The same two jobs in each layout: (job_type, total_steps, scale_factor, arrival_time).
JOBS = [(RESNET, 3000, 2, "0.000000"), (LM, 500, 1, "44477.000000")]


def rows(layout: int) -> str:
    out = []
    for job_type, steps, scale, arrival in JOBS:
        if layout == 10:
            cells = [
                job_type,
                CMD,
                "imagenet",
                "--num_minibatches",
                "1",
                steps,
                scale,
                1,
                -1,
                arrival,
            ]
        elif layout == 9:
            cells = [job_type, CMD, "--num_minibatches", "1", steps, scale, 1, -1, arrival]
        elif layout == 7:
            cells = [job_type, CMD, "--num_minibatches", "1", steps, arrival, scale]
        else:
            cells = [job_type, CMD, "--num_minibatches", steps, arrival, scale]
        out.append("\t".join(str(c) for c in cells))
    return "\n".join(out) + "\n"


def write(tmp_path: Path, text: str, name: str = "jobs.trace") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def jobs_of(path: Path, **options) -> list[tuple]:
    w = load_workload(str(path), **options)
    return [(a.arrival, a.jobs[0].gang, a.jobs[0].work, a.jobs[0].line) for a in w.apps]


@pytest.mark.parametrize("layout", [10, 9, 7, 6])
def test_every_layout_reads_the_same_jobs(tmp_path: Path, layout: int) -> None:
    got = jobs_of(write(tmp_path, rows(layout)))
    assert got == [(0.0, 2, 3000.0, 1), (44477.0, 1, 500.0, 2)]


@pytest.mark.parametrize(
    ("fields", "field"),
    [(8, "arrival_time"), (5, "scale_factor"), (1, "command"), (11, "after arrival_time")],
)
def test_a_first_line_of_no_layout_names_the_missing_field(
    tmp_path: Path, fields: int, field: str
) -> None:
    line = "\t".join(["ResNet-18"] + ["1"] * (fields - 1))
    with pytest.raises(ThemisError) as caught:
        load_workload(str(write(tmp_path, line + "\n")))
    err = caught.value
    assert (err.line, err.field) == (1, field)
    assert err.message.startswith("expected 6, 7, 9 or 10 tab-separated fields")
    assert err.message.endswith(
        f"got {fields}" + (" (is it tab-separated?)" if fields == 1 else "")
    )


def test_a_later_line_must_keep_the_first_lines_layout(tmp_path: Path) -> None:
    text = rows(7).splitlines()
    text[1] = "\t".join(text[1].split("\t")[:6])  # the 7-field line lost scale_factor
    with pytest.raises(ThemisError) as caught:
        load_workload(str(write(tmp_path, "\n".join(text) + "\n")))
    err = caught.value
    assert (err.line, err.field) == (2, "scale_factor")
    assert "expected 7 tab-separated fields like line 1, got 6" in err.message


def test_seven_field_errors_name_the_seven_field_names(tmp_path: Path) -> None:
    bad = rows(7).replace("\t44477.000000\t", "\tlater\t")
    with pytest.raises(ThemisError) as caught:
        load_workload(str(write(tmp_path, bad)))
    assert (caught.value.line, caught.value.field) == (2, "arrival_time")


def test_zero_scale_factor_rows_are_counted_and_skipped(tmp_path: Path) -> None:
    text = rows(7) + "\t".join([LM, CMD, "--steps", "1", "10", "50.0", "0"]) + "\n"
    w = load_workload(str(write(tmp_path, text)))
    assert len(w.apps) == 2
    assert w.notes["excluded"] == {"zero_scale_factor": 1}
    assert w.notes["excluded_first_line"] == {"zero_scale_factor": 3}


def throughputs_file(tmp_path: Path, table: dict) -> Path:
    path = tmp_path / "throughputs.json"
    path.write_text(json.dumps(table, indent=4))
    return path


def test_throughputs_turn_steps_into_gavels_durations(tmp_path: Path) -> None:
    trace = write(tmp_path, rows(7))
    table = {
        "v100": {
            f"('{RESNET}', 2)": {"null": 6.0, f"('{LM}', 1)": [1.0, 2.0]},
            f"('{LM}', 1)": {"null": 2.5},
            f"('{RESNET}', 1)": {"null": 99.0},  # another scale factor: not used
        },
        "k80": {f"('{RESNET}', 2)": {"null": 1.0}},
    }
    w = load_workload(str(trace), throughputs=str(throughputs_file(tmp_path, table)))
    for app, (seconds, gang) in zip(w.apps, [(3000 / 6.0, 2), (500 / 2.5, 1)], strict=True):
        tpi = w.profiles[app.model].time_per_iteration
        job = app.jobs[0]
        assert job.gang == gang
        # Work is the seconds on the gang in the app's model: it runs that long alone.
        assert job.work * tpi / job.gang == pytest.approx(seconds)
    assert w.notes["throughputs"]["worker"] == "v100"


def test_throughputs_keyed_by_job_type_alone(tmp_path: Path) -> None:
    trace = write(tmp_path, rows(10))
    table = {"v100": {f"{RESNET} (scale factor 2)": {"null": 3.0}, LM: {"null": 5.0}}}
    w = load_workload(str(trace), throughputs=str(throughputs_file(tmp_path, table)))
    seconds = [
        a.jobs[0].work * w.profiles[a.model].time_per_iteration / a.jobs[0].gang for a in w.apps
    ]
    assert seconds == pytest.approx([1000.0, 100.0])


def test_a_job_type_missing_from_the_throughputs_is_an_error_at_its_line(tmp_path: Path) -> None:
    trace = write(tmp_path, rows(9))
    table = {"v100": {f"('{RESNET}', 2)": {"null": 6.0}}}
    with pytest.raises(ThemisError) as caught:
        load_workload(str(trace), throughputs=str(throughputs_file(tmp_path, table)))
    err = caught.value
    assert (err.source, err.line, err.field) == (str(trace), 2, "job_type")
    assert f"no throughput for job type '{LM}' at scale factor 1 on v100" in err.message


def test_a_bad_throughput_entry_names_its_line_and_key(tmp_path: Path) -> None:
    table = {"v100": {f"('{RESNET}', 2)": {"null": 6.0}, f"('{LM}', 1)": {"null": "fast"}}}
    path = throughputs_file(tmp_path, table)
    with pytest.raises(ThemisError) as caught:
        load_workload(str(write(tmp_path, rows(7))), throughputs=str(path))
    err = caught.value
    assert err.source == str(path)
    assert err.field == f"v100.('{LM}', 1).null"
    assert path.read_text().splitlines()[err.line - 1].strip().startswith(f"\"('{LM}', 1)\"")


def test_throughputs_on_another_format_is_refused(tmp_path: Path) -> None:
    csv = write(
        tmp_path,
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "1,1,0,0,resnet50,60,0\n",
        "t.csv",
    )
    with pytest.raises(ThemisError) as caught:
        load_workload(str(csv), throughputs=str(throughputs_file(tmp_path, {"v100": {}})))
    assert caught.value.field == "--throughputs"


def test_cli_throughputs_option(tmp_path: Path, themis) -> None:
    trace = write(tmp_path, rows(6))
    table = {"v100": {f"('{RESNET}', 2)": {"null": 6.0}, f"('{LM}', 1)": {"null": 2.5}}}
    path = throughputs_file(tmp_path, table)
    out = themis("trace", "inspect", trace, "--throughputs", path, "--json")
    assert out.code == 0, out.err
    summary = json.loads(out.out)
    assert summary["durations_s"]["min"] == pytest.approx(200.0)
    assert summary["durations_s"]["max"] == pytest.approx(500.0)
    missing = themis("trace", "inspect", trace, "--throughputs", tmp_path / "nope.json")
    assert one_line_error(missing).endswith("field '--throughputs': no such throughput file")
