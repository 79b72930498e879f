"""``--config FILE``: TOML options, precedence of flags, one-line errors naming file, line
and key, and a run's ``summary.json`` that runs it again byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import assert_one_line_error

#: One small run: a generated workload (no file needed), a small cluster, changed knobs.
FLAGS = [
    "--trace", "generate:jobs=30,load=1.5", "--cluster", "1x2x2", "--lease", "300",
    "--fairness-knob", "0.5", "--seed", "4", "--restart-cost", "10",
]  # fmt: skip
TOML = """\
# the same run as FLAGS, keys with dashes or underscores
trace = "generate:jobs=30,load=1.5"
cluster = "1x2x2"
lease = 300
fairness_knob = 0.5
seed = 4
restart-cost = 10
"""


def allocations(out: Path) -> bytes:
    return (out / "allocations.csv").read_bytes()


def test_a_config_file_runs_as_the_same_flags_do(cli, tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text(TOML)
    flags, filed = tmp_path / "flags", tmp_path / "filed"
    assert cli("simulate", *FLAGS, "--out", flags, "-q").code == 0
    result = cli("simulate", "--config", config, "--out", filed, "-q")
    assert result.code == 0, result.err
    assert allocations(filed) == allocations(flags)
    default = tmp_path / "default"
    assert cli("simulate", "--trace", "generate:jobs=30,load=1.5", "--cluster", "1x2x2",
               "--out", default, "-q").code == 0  # fmt: skip
    assert allocations(default) != allocations(flags)  # the file's knobs did change the run


def test_flags_on_the_command_line_override_the_file(cli, tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text(TOML)
    out = tmp_path / "o"
    result = cli("simulate", "--config", config, "--lease", "900", "--seed", "1", "--out",
                 out, "-q")  # fmt: skip
    assert result.code == 0, result.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["lease_s"] == 900.0 and summary["config"]["seed"] == 1
    assert summary["config"]["fairness_knob"] == 0.5  # from the file
    # The same as the flags alone.
    flags = tmp_path / "f"
    changed = [*FLAGS[:4], "--lease", "900", *FLAGS[6:8], "--seed", "1", *FLAGS[10:]]
    assert cli("simulate", *changed, "--out", flags, "-q").code == 0
    assert allocations(out) == allocations(flags)


def test_summary_json_runs_its_run_again_byte_for_byte(cli, tmp_path: Path, monkeypatch) -> None:
    trace = tmp_path / "w.yaml"
    assert cli("trace", "generate", "--jobs", "25", "--seed", "2", "--output", trace).code == 0
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "first"
    result = cli("simulate", "--trace", "w.yaml", "--cluster", "1x2x2", "--policy", "gavel",
                 "--lease", "120", "--seed", "3", "--gang-mix", "--misreport", "app0=2",
                 "--out", first, "-q")  # fmt: skip
    assert result.code == 0, result.err
    options = json.loads((first / "summary.json").read_text())["options"]
    assert options["trace"] == str(trace.resolve())  # absolute: replays from anywhere
    assert options["policy"] == "gavel" and options["seed"] == 3 and options["gang-mix"]
    monkeypatch.chdir(tmp_path.parent)
    again = tmp_path / "again"
    result = cli("simulate", "--config", first / "summary.json", "--out", again, "-q")
    assert result.code == 0, result.err
    assert allocations(again) == allocations(first)
    assert (again / "apps.csv").read_bytes() == (first / "apps.csv").read_bytes()
    assert "warning" not in result.err
    # A trace changed since: said, not silently run on.
    trace.write_text(trace.read_text().replace("iterations: 1", "iterations: 2", 1))
    result = cli("simulate", "--config", first / "summary.json", "--out", again, "-q")
    assert f"{trace.resolve()} has changed since this run" in result.err


def test_each_compare_run_replays_alone_with_simulate(cli, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    config = tmp_path / "cmp.toml"
    no_seed = TOML.replace("seed = 4\n", "")
    config.write_text(no_seed + 'policies = ["themis", "fifo"]\nseeds = [0, 2]\n')
    result = cli("compare", "--config", config, "--out", out, "-q", "-j", "1")
    assert result.code == 0, result.err
    run = out / "seed2" / "fifo"
    again = tmp_path / "again"
    result = cli("simulate", "--config", run / "summary.json", "--out", again, "-q")
    assert result.code == 0, result.err
    assert allocations(again) == allocations(run)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("leese = 3\n", ["run.toml:1", "field 'leese'", "unknown option", "did you mean 'lease'"]),
        ('seed = 1\nlease = "abc"\n', ["run.toml:2", "field 'lease'", "number, got a string"]),
        ("seed = 1.5\n", ["run.toml:1", "field 'seed'", "must be an integer, got a number"]),
        ("gang-mix = 1\n", ["run.toml:1", "field 'gang-mix'", "true or false"]),
        ('misreport = "a=2"\n', ["field 'misreport'", "must be an array of strings"]),
        ('ranking = "best"\n', ["run.toml:1", "field 'ranking'", "'best' is not one of"]),
        ("[cluster]\nracks = 2\n", ["run.toml:1", "field 'cluster'", "got a table"]),
        ("lease = [1\n", ["run.toml", "not valid TOML"]),
        ("lease = -1\n", ["field '--lease'", "> 0", "(set in", "run.toml:1)"]),
    ],
)  # fmt: skip
def test_bad_files_are_one_line_naming_file_line_and_key(
    cli, tmp_path: Path, text: str, fragments: list[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(text)
    assert_one_line_error(cli("simulate", "--config", config, "--out", tmp_path / "o"), *fragments)


def test_an_error_about_a_flag_does_not_blame_the_file(cli, tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text("lease = 100\n")
    result = cli("simulate", "--config", config, "--lease", "-1")
    message = assert_one_line_error(result, "field '--lease'")
    assert "set in" not in message


def test_missing_config_and_old_summaries_are_one_line(cli, tmp_path: Path) -> None:
    missing = cli("simulate", "--config", tmp_path / "no.toml")
    assert_one_line_error(missing, "no.toml", "no such configuration")
    old = tmp_path / "summary.json"
    old.write_text(json.dumps({"policy": "themis", "config": {"lease_s": 600.0}}))
    assert_one_line_error(cli("simulate", "--config", old), "records no options")
    # A summary's key is found in its options, not in the config above them.
    edited = {"policy": "themis", "config": {"seed": 1}, "options": {"seed": "x"}}
    old.write_text(json.dumps(edited, indent=2))
    lines = old.read_text().splitlines()
    where = next(k for k, line in enumerate(lines, 1) if '"seed": "x"' in line)
    assert_one_line_error(cli("simulate", "--config", old), f"summary.json:{where}", "integer")


def test_compare_and_serve_take_a_config_too(cli, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("policy = 'fifo'\n")  # simulate's option, not compare's
    assert_one_line_error(cli("compare", "--config", config), "did you mean 'policies'")
    config.write_text("seeds = 2\nseed = 1\n")
    assert_one_line_error(cli("compare", "--config", config), "give --seed or --seeds")
    serve = tmp_path / "s.toml"
    # Checked before anything starts: the values reached the command.
    serve.write_text("lease = 10\ngrace = 20\n")
    assert_one_line_error(cli("serve", "--config", serve), "--grace (20s) must be shorter",
                          "(set in")  # fmt: skip
    assert_one_line_error(cli("serve", "--config", serve, "--grace", "5", "--listen", "nope"),
                          "--listen")  # fmt: skip
    serve.write_text("listen = 7878\n")
    assert_one_line_error(cli("serve", "--config", serve), "s.toml:1", "must be a string")
