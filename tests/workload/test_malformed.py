"""The malformed corpus (``tests/workload/malformed/``, written for this project): each
file fails with exactly one line naming the file, the line and (where there is one) the
field, exit code 2, no traceback, through ``themis trace inspect`` and ``themis simulate``.

Each case: (file, file the error names if not the one given, line, field, the start of
the message). Lines were checked by hand against the files.
"""

from __future__ import annotations

import pytest

from .conftest import MALFORMED, one_line_error

#: Files whose format cannot be told from their content (or is told wrongly on purpose).
FORMAT = {"philly_object_not_list.json": "philly", "gavel_commas.trace": "gavel"}

CASES = [
    ("compressed.csv.gz", None, 1, None, "binary data"),
    ("garbage.bin", None, 1, None, "binary data"),
    ("gavel_bad_flag.trace", None, 1, "needs_data_dir", "must be 0 or 1, got '2'"),
    ("gavel_bad_slo.trace", None, 1, "SLO", "must be > 0 or -1"),
    ("gavel_bad_steps.trace", None, 2, "total_steps", "'many' is not a whole number"),
    ("gavel_blank_line.trace", None, 2, None, "blank line"),
    ("gavel_commas.trace", None, 1, "command", "expected 6, 7, 9 or 10 tab-separated fields"),
    ("gavel_empty.trace", None, 1, None, "the trace has no jobs"),
    ("gavel_negative_arrival.trace", None, 1, "arrival_time", "must be >= 0, got -5"),
    ("gavel_short_line.trace", None, 2, "SLO", "expected 10 tab-separated fields like line 1"),
    ("gavel_zero_scale.trace", None, 1, None, "no simulable jobs: every row is excluded (zero"),
    ("hd_bad_timestamp.csv", None, 3, "start-time", "'2018-02-30 10:00:00' is not YYYY-MM-DD "),
    ("hd_blank_row.csv", None, 3, None, "blank row"),
    ("hd_duplicate_job.csv", None, 3, "job-id", "duplicate job id 'trial-a'"),
    ("hd_empty.csv", None, 1, None, "empty file: not a trace"),
    ("hd_header_only.csv", None, 2, None, "the trace has a header but no jobs"),
    ("hd_latin1.csv", None, 3, None, "not UTF-8 text"),
    ("hd_missing_column.csv", None, 1, "run-time", "missing column(s) run-time"),
    ("hd_negative_gpus.csv", None, 2, "num-gpus", "must be >= 1, got -4"),
    ("hd_open_quote.csv", None, 3, None, "malformed CSV: unexpected end of data"),
    ("hd_truncated_row.csv", None, 3, "run-time", "expected 5 fields, got 3"),
    ("hd_unknown_model.csv", None, 2, "model", "unknown model 'gpt-9'"),
    ("hd_wrong_type.csv", None, 3, "run-time", "'ten' is not a number"),
    ("helios_all_cpu.csv", None, 2, None, "no simulable jobs: every row is excluded"),
    ("helios_bad_submit.csv", None, 2, "submit_time", "'yesterday' is not YYYY-MM-DD HH:MM:SS"),
    ("helios_duplicate_id.csv", None, 3, "job_id", "duplicate job id '1'"),
    ("helios_end_before_start.csv", None, 2, "end_time", "ends before it starts"),
    ("helios_missing_vc.csv", None, 1, "vc", "missing column(s) vc"),
    ("helios_negative_duration.csv", None, 2, "duration", "must be >= 0, got -10"),
    ("helios_negative_gpu.csv", None, 2, "gpu_num", "must be >= 0, got -8"),
    ("pai_bad_plan_gpu", "pai_task_table.csv", 1, "plan_gpu", "'lots' is not a number"),
    ("pai_duplicate_job", "pai_job_table.csv", 3, "job_name", "duplicate job_name 'j1'"),
    (
        "pai_duplicate_task",
        "pai_task_table.csv",
        3,
        "task_name",
        "duplicate task 'worker' of job 'j1'",
    ),
    ("pai_negative_instances", "pai_task_table.csv", 2, "inst_num", "must be >= 1, got -1.0"),
    ("pai_short_job_row", "pai_job_table.csv", 1, "end_time", "expected 6 fields, got 5"),
    ("pai_task_ends_first", "pai_task_table.csv", 2, "end_time", "ends before it starts"),
    ("philly_attempts_not_list.json", None, 4, "[0].attempts", "must be a list, got 'none'"),
    (
        "philly_bad_timestamp.json",
        None,
        3,
        "[0].submitted_time",
        "'2017/10/07 01:00:00' is not YYYY-MM-DD ",
    ),
    ("philly_cut_in_string.json", None, 3, None, "invalid JSON: Unterminated string starti"),
    ("philly_duplicate_jobid.json", None, 4, "[1].jobid", "duplicate jobid 'a1'"),
    ("philly_element_not_object.json", None, 2, "[0]", "expected a job object, got 1"),
    ("philly_empty_list.json", None, 1, None, "the trace has no jobs"),
    ("philly_end_before_start.json", None, 6, "[0].attempts[0].end_time", "ends before it starts"),
    (
        "philly_gpus_not_list.json",
        None,
        8,
        "[0].attempts[0].detail[0].gpus",
        "must be a list of GPU names, got 8",
    ),
    ("philly_missing_user.json", None, 4, "[1].user", "missing"),
    ("philly_nan.json", None, 2, None, "invalid JSON: NaN is not a JSON number"),
    ("philly_negative_wrong_type_status.json", None, 2, "[0].status", "must be text, got 5"),
    ("philly_object_not_list.json", None, 1, None, "invalid JSON: expected '['"),
    ("philly_trailing_garbage.json", None, 5, None, "invalid JSON: extra data after the top-l"),
    ("philly_truncated.json", None, 4, None, "invalid JSON: Expecting property name en"),
    ("themis_alias.yaml", None, 9, "apps[1].jobs", "YAML aliases"),
    ("themis_bad_indent.yaml", None, 6, None, "invalid YAML: did not find expected '-' "),
    ("themis_bad_key_type.yaml", None, 7, "apps[0].jobs[0]", "key '3' must be text"),
    (
        "themis_bad_profile.yaml",
        None,
        7,
        "profiles.net.cross_rack",
        "1.5 is greater than the maximum of 1",
    ),
    ("themis_binary.json", None, 1, None, "binary data"),
    (
        "themis_both_work.yaml",
        None,
        7,
        "apps[0].jobs[0]",
        "give exactly one of 'iterations' or 'dur",
    ),
    ("themis_duplicate_app.yaml", None, 7, "apps[1]", "duplicate app id 'a'"),
    ("themis_duplicate_job.json", None, 5, "apps[1].jobs[1].id", "duplicate job id 'j1'"),
    ("themis_empty.yaml", None, 1, None, "empty file: expected a workload"),
    (
        "themis_gpus_text.json",
        None,
        8,
        "apps[1].jobs[0].gpus",
        "must be a whole number of GPUs, got 'fou",
    ),
    ("themis_gpus_zero.yaml", None, 9, "apps[0].jobs[1].gpus", "must be >= 1, got 0"),
    (
        "themis_infinite_duration.yaml",
        None,
        7,
        "apps[0].jobs[0].duration",
        "must be a finite number, got inf",
    ),
    (
        "themis_jobs_not_list.yaml",
        None,
        6,
        "apps[0].jobs",
        "must be a non-empty list of jobs, got {'",
    ),
    ("themis_missing_format.yaml", None, 1, "format", "missing"),
    ("themis_negative_arrival.yaml", None, 5, "apps[0].arrival", "must be >= 0, got -30"),
    ("themis_no_apps.yaml", None, 3, "apps", "must list at least one app"),
    ("themis_tab_indent.yaml", None, 4, None, "invalid YAML: found character that canno"),
    (
        "themis_timestamp_arrival.yaml",
        None,
        5,
        "apps[0].arrival",
        "must be a number, got the date 2020-01-0",
    ),
    ("themis_truncated.json", None, 3, None, "invalid JSON: Unterminated string starti"),
    ("themis_two_documents.yaml", None, 5, None, "more than one YAML document"),
    ("themis_unknown_key.yaml", None, 7, "apps[0].jobs[0].iteration", "unknown key"),
    ("themis_unknown_model.yaml", None, 6, "apps[0].model", "unknown model 'gpt-9'"),
    ("themis_wrong_format.yaml", None, 1, "format", "expected 'themis-workload', got 'gavel-w"),
    ("tiresias_bad_submit.csv", None, 2, "submit_time", "'soon' is not a number"),
    ("tiresias_duplicate_id.csv", None, 3, "job_id", "duplicate job id '0'"),
    ("tiresias_empty_model.csv", None, 2, "model_name", "empty"),
    ("tiresias_extra_field.csv", None, 3, "after interval", "expected 7 fields, got 8"),
    ("tiresias_fractional_gpu.csv", None, 2, "num_gpu", "'1.5' is not a whole number"),
    ("tiresias_missing_column.csv", None, 1, "duration", "missing column(s) duration"),
    ("tiresias_negative_gpu.csv", None, 2, "num_gpu", "must be >= 0, got -1"),
    ("unknown_format.txt", None, 1, None, "cannot tell the trace format from its co"),
]


def test_the_corpus_is_complete() -> None:
    files = {p.name for p in MALFORMED.iterdir()}
    assert files == {case[0] for case in CASES}
    assert len(CASES) >= 50


def _expected_prefix(name: str, named: str | None, line: int, field: str | None) -> str:
    path = MALFORMED / name
    source = str(path / named) if named else str(path)
    prefix = f"{source}:{line}"
    if field is not None:
        prefix += f", field '{field}'"
    return prefix + ": "


@pytest.mark.parametrize("command", ["inspect", "simulate"])
@pytest.mark.parametrize(
    ("name", "named", "line", "field", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_one_line_naming_file_line_and_field(
    themis,
    tmp_path,
    command: str,
    name: str,
    named: str | None,
    line: int,
    field: str | None,
    message: str,
) -> None:
    path = MALFORMED / name
    extra = ["--format", FORMAT[name]] if name in FORMAT else []
    if command == "inspect":
        outcome = themis("trace", "inspect", path, *extra)
    else:
        outcome = themis("simulate", "--trace", path, *extra, "--out", tmp_path / "out")
        assert not (tmp_path / "out").exists()
    error = one_line_error(outcome)
    prefix = _expected_prefix(name, named, line, field)
    assert error.startswith(prefix), (error, prefix)
    assert error[len(prefix) :].startswith(message), error
