"""The command line: ``themis trace inspect|convert|generate``, and ``--trace`` of
``simulate``/``compare`` reading every format (detected or ``--format``)."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from themis.workload import load_workload

from .conftest import SAMPLE_FILES, one_line_error


@pytest.mark.parametrize("sample", sorted(SAMPLE_FILES))
def test_simulate_reads_every_format(themis, tmp_path, sample: str) -> None:
    out = tmp_path / "run"
    outcome = themis(
        "simulate", "--trace", SAMPLE_FILES[sample], "--policy", "fifo", "--out", out, "-q"
    )
    assert outcome.code == 0, outcome.err
    summary = json.loads((out / "summary.json").read_text())
    fmt = sample.split("-")[0]
    assert summary["config"]["format"] == fmt
    # HyperDrive replays at an interval (the paper's way); every other format at trace times.
    assert summary["config"]["arrivals"] == ("interval" if fmt == "hyperdrive" else "trace")
    assert summary["apps"] == len(load_workload(str(SAMPLE_FILES[sample])).apps)


def test_simulate_line_reports_rows_not_simulable(themis, tmp_path) -> None:
    outcome = themis(
        "simulate",
        "--trace",
        SAMPLE_FILES["philly"],
        "--policy",
        "fifo",
        "--out",
        tmp_path / "o",
        "-q",
    )
    assert outcome.code == 0, outcome.err
    first = outcome.out.splitlines()[0]
    assert "3 apps, 4 jobs" in first
    assert (
        "3 trace rows not simulable (never_started 1, unfinished 1, attempt_without_times 1)"
        in first
    )


def test_format_flag_reads_a_file_detection_cannot(themis, tmp_path) -> None:
    renamed = tmp_path / "jobs.txt"  # a Gavel trace under another name
    shutil.copy(SAMPLE_FILES["gavel"], renamed)
    tiresias = tmp_path / "notes.txt"
    tiresias.write_text("0,1,0,10,vgg16,60,0\n")  # no header: nothing to detect
    assert one_line_error(themis("trace", "inspect", tiresias)).startswith(
        f"{tiresias}:1: cannot tell"
    )
    outcome = themis("trace", "inspect", tiresias, "--format", "tiresias")
    assert "missing column(s)" in one_line_error(outcome)
    outcome = themis("trace", "inspect", renamed, "--format", "gavel", "--json")
    assert outcome.code == 0, outcome.err
    assert json.loads(outcome.out)["jobs"] == 4


def test_compare_reads_other_formats(themis, tmp_path) -> None:
    outcome = themis(
        "compare",
        "--trace",
        SAMPLE_FILES["tiresias"],
        "--policies",
        "fifo",
        "--out",
        tmp_path / "c",
        "-q",
    )
    assert outcome.code == 0, outcome.err
    assert (
        json.loads((tmp_path / "c" / "comparison.json").read_text())["config"]["format"]
        == "tiresias"
    )


def test_inspect_prints_counts_and_histograms(themis) -> None:
    outcome = themis("trace", "inspect", SAMPLE_FILES["pai"])
    assert outcome.code == 0, outcome.err
    text = outcome.out
    assert "format pai, apps by session (gap 3600 s), arrivals trace" in text
    assert "2 apps, 3 jobs" in text
    assert (
        "rows excluded: 4: unfinished 1 (first: line 4), cpu_only 1 (first: line 5), no_tasks 1"
        in text
    )
    assert "GPUs per job" in text and "Job duration" in text
    # Sizes 1, 5 and 8: one job each, a full bar each.
    for label in ("1 GPU |", "5 GPUs |", "8 GPUs |"):
        line = next(line for line in text.splitlines() if label in line)
        assert "#" * 40 in line and "33.3%" in line


def test_inspect_json_numbers(themis) -> None:
    outcome = themis("trace", "inspect", SAMPLE_FILES["tiresias"], "--json", "--cluster", "1x1x8")
    data = json.loads(outcome.out)
    assert (data["apps"], data["jobs"], data["gpus"]) == (3, 3, 8)
    assert data["gangs"] == {"1": 1, "2": 1, "8": 1}
    # GPU-hours: 120 s x 1 + 600 s x 8 + 90 s x 2 = 5100 GPU-seconds.
    assert data["gpu_hours"] == pytest.approx(5100 / 3600)
    assert data["durations_s"]["max"] == pytest.approx(600.0)
    assert data["duration_bins"]["1-10 min"] == 2 and data["duration_bins"]["10 min-1 h"] == 1


def test_generate_creates_the_output_folder(themis, tmp_path) -> None:
    # The README's "-o out/synthetic.json" in a fresh folder (it failed: no out/).
    target = tmp_path / "out" / "deeper" / "synthetic.json"
    outcome = themis("trace", "generate", "--jobs", 20, "-o", target)
    assert outcome.code == 0, outcome.err
    assert load_workload(str(target)).job_count == 20
    assert [p.name for p in target.parent.iterdir()] == ["synthetic.json"]  # no .partial


def test_generate_to_stdout_is_a_loadable_yaml(themis, tmp_path) -> None:
    outcome = themis("trace", "generate", "--jobs", 20, "--seed", 4, "-o", "-")
    assert outcome.code == 0, outcome.err
    document = yaml.safe_load(outcome.out)
    assert sum(len(app["jobs"]) for app in document["apps"]) == 20
    path = tmp_path / "g.yaml"
    path.write_text(outcome.out)
    assert load_workload(str(path)).job_count == 20


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["convert", "{hd}", "--to", "themis", "-o", "{tmp}/x.csv"],
            ["field '--output'", ".json, .yaml or .yml"],
        ),
        (["convert", "{hd}", "--to", "gavel", "-o", "{tmp}/x.json"], ["--to", "gavel"]),
        (["convert", "{hd}", "-o", "{tmp}/x.json"], ["--to"]),
        (
            ["convert", "{tmp}/absent.csv", "--to", "themis", "-o", "{tmp}/x.json"],
            ["absent.csv", "no such trace"],
        ),
        (
            ["convert", "{tmp}/in.yaml", "--to", "themis", "-o", "{tmp}/in.yaml"],
            ["field '--output'", "overwrite"],
        ),
        (
            ["convert", "{hd}", "--to", "themis", "-o", "{tmp}/in.yaml/x.json"],
            ["x.json", "cannot write"],  # under a file: missing folders are created
        ),
        (["inspect", "{hd}", "--format", "csv"], ["--format", "csv"]),
        (["inspect", "{hd}", "--app-gap", "-5"], ["field '--app-gap'"]),
        (
            ["inspect", "{hd}", "--arrivals", "interval", "--app-interval", "nan"],
            ["field '--app-interval'"],
        ),
        (["inspect", "{hd}", "--cluster", "2x2"], ["field '--cluster'"]),
        (["generate", "--jobs", "0", "-o", "{tmp}/g.json"], ["field '--jobs'"]),
        (["generate", "--load", "-1", "-o", "{tmp}/g.json"], ["field '--load'"]),
        (
            ["generate", "--min-trials", "5", "--max-trials", "2", "-o", "{tmp}/g.json"],
            ["field '--max-trials'"],
        ),
        (["generate", "-o", "{tmp}/g.txt"], ["field '--output'"]),
    ],
)
def test_trace_errors_are_one_line(themis, tmp_path, args, fragments) -> None:
    (tmp_path / "in.yaml").write_text(SAMPLE_FILES["themis-yaml"].read_text())
    values = {"hd": SAMPLE_FILES["hyperdrive"], "tmp": tmp_path}
    error = one_line_error(themis("trace", *[a.format(**values) for a in args]))
    for fragment in fragments:
        assert fragment in error, (fragment, error)
    assert not list(tmp_path.glob("**/*.partial"))


def test_simulate_format_and_app_gap_options(themis, tmp_path) -> None:
    out = tmp_path / "o"
    outcome = themis(
        "simulate", "--trace", SAMPLE_FILES["philly"], "--format", "philly", "--app-gap", 9600,
        "--policy", "fifo", "--out", out, "-q",
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["apps"] == 2  # u1's three jobs are one app with a 9600 s gap
    assert summary["config"]["app_gap_s"] == 9600.0
    error = one_line_error(
        themis("simulate", "--trace", SAMPLE_FILES["philly"], "--format", "gavel", "--out", out)
    )
    assert error.startswith(
        f"{SAMPLE_FILES['philly']}:1, field 'command': expected 6, 7, 9 or 10 tab-separated"
    )
