"""A plug-in policy's own knobs, like the built-ins': a flag of every command that runs a
policy, a key of config files, a setting ``summary.json`` records and a run reproduces.

The example package ``examples/policy_plugin`` declares ``--lifo-depth``. The commands run
in a fresh ``themis`` process with the package installed the way pip would (its source
and a ``.dist-info`` on ``PYTHONPATH``), since a command's flags are made when its module
is first imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import dist_info
from tests.policies.test_plugins import EXAMPLE, example_entries, fresh_registry  # noqa: F401
from themis.errors import ThemisError
from themis.policies import PolicyOptions, make_policy, policy_names, registry

TRACE = (
    "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
    "1,2,0,0,resnet50,600,10\n2,2,10,0,vgg16,600,0\n3,2,20,0,resnet50,600,0\n"
)


@pytest.fixture
def themis(tmp_path, monkeypatch):
    """``themis ARGS...`` in a new process that has the example plug-in installed."""
    site = tmp_path / "site"
    dist_info.install(site, "themis_lifo", "themis.policies", example_entries(), monkeypatch)
    path = os.pathsep.join([str(site), str(EXAMPLE / "src"), os.environ.get("PYTHONPATH", "")])

    def invoke(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "themis", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": path},
            timeout=300,
        )

    return invoke


def test_a_plugin_knob_is_a_flag_a_config_key_and_a_recorded_setting(themis, tmp_path) -> None:
    for command in ("simulate", "compare", "serve"):
        shown = themis(command, "--help")
        assert shown.returncode == 0, shown.stderr
        assert "--lifo-depth N" in shown.stdout and "only the newest N apps" in shown.stdout
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    args = ["simulate", "--trace", trace, "--cluster", "1x1x2", "--policy", "lifo", "-q"]
    ran = themis(*args, "--lifo-depth", "1", "--out", tmp_path / "a")
    assert ran.returncode == 0, ran.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["config"]["lifo_depth"] == 1 and summary["options"]["lifo-depth"] == 1
    # the summary replays with the knob it recorded; a config file sets it by its name
    again = themis("simulate", "--config", tmp_path / "a" / "summary.json", "--out", "b", "-q")
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["config"]["lifo_depth"] == 1
    (tmp_path / "run.toml").write_text("lifo-depth = 2\n")
    filed = themis(*args, "--config", tmp_path / "run.toml", "--out", tmp_path / "c")
    assert filed.returncode == 0, filed.stderr
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["config"]["lifo_depth"] == 2
    # its rule refuses a bad value in one line naming its flag, as a built-in's does
    bad = themis(*args, "--lifo-depth", "-1", "--out", tmp_path / "d")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "field '--lifo-depth': must be a number of apps >= 0, got -1" in bad.stderr


def test_the_policy_reads_its_knob_from_the_options(
    tmp_path,
    monkeypatch,
    fresh_registry,  # noqa: F811
) -> None:
    dist_info.install(tmp_path / "site", "themis_lifo", "themis.policies", example_entries(),
                      monkeypatch)  # fmt: skip
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    assert "lifo" in policy_names()
    assert make_policy("lifo").options.value("lifo_depth") == 0  # its declared default
    options = PolicyOptions.of({"lifo_depth": 3, "lease": 60.0})
    assert options.value("lifo_depth") == 3 and options.lease == 60.0
    assert options.record()["lifo_depth"] == 3 and options.record()["lease_s"] == 60.0
    with pytest.raises(ThemisError, match="--lifo-depth"):
        PolicyOptions.of({"lifo_depth": -1})
    with pytest.raises(ThemisError, match="no installed policy declares"):
        make_policy("lifo", PolicyOptions.of({"lifo_deep": 3}))


def test_a_plugin_knob_that_takes_a_builtin_name_is_skipped(
    tmp_path,
    monkeypatch,
    fresh_registry,  # noqa: F811
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "themis_lease_thief.py").write_text(
        "from themis_lifo import DEPTH, LifoPolicy\n"
        "from dataclasses import replace\n"
        "class Thief(LifoPolicy):\n"
        "    name = 'thief'\n"
        "    knobs = (replace(DEPTH, field='thief_lease', flag='--lease'),)\n"
    )
    entries = {"thief": "themis_lease_thief:Thief"}
    dist_info.install(tmp_path / "site", "thief", "themis.policies", entries, monkeypatch)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    monkeypatch.syspath_prepend(str(src))
    with pytest.warns(registry.PluginWarning, match="its knob --lease takes the name '--lease'"):
        assert "thief" not in policy_names()
    assert [k.flag for k in registry.knobs()].count("--lease") == 1
