"""Third-party policies through the ``themis.policies`` entry-point group.

The in-tree example package ``examples/policy_plugin`` is made importable the way pip
would install it: its source on ``sys.path`` and a ``.dist-info`` whose
``entry_points.txt`` is written from the example's own pyproject.toml, so what is tested
is what the example declares.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from themis.cli.main import run
from themis.errors import ThemisError
from themis.policies import make_policy, policy_names, registry

EXAMPLE = Path(__file__).parents[2] / "examples" / "policy_plugin"


def install(site: Path, name: str, entries: dict[str, str], monkeypatch) -> None:
    """A distribution ``name`` on ``sys.path`` declaring ``entries`` as policies."""
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = [f"{k} = {v}" for k, v in entries.items()]
    (info / "entry_points.txt").write_text("[themis.policies]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(site))


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as before any policy was loaded; restored after the test."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_loaded", False)
    keep = {"themis.policies.registry", "themis.policies.base"}
    for module in [m for m in sys.modules if m.startswith("themis.policies.") and m not in keep]:
        monkeypatch.delitem(sys.modules, module)  # re-imported: registered again
    monkeypatch.delitem(sys.modules, "themis_lifo", raising=False)


def example_entries() -> dict[str, str]:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    return project["project"]["entry-points"]["themis.policies"]


def test_the_example_package_registers_its_policy(tmp_path, monkeypatch, fresh_registry) -> None:
    install(tmp_path / "site", "themis_lifo", example_entries(), monkeypatch)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    names = policy_names()
    assert "lifo" in names and names[0] == "themis"
    policy = make_policy("lifo")
    assert type(policy).__module__ == "themis_lifo"


def test_cli_lists_and_runs_a_plugin_policy(tmp_path, monkeypatch, capsys, fresh_registry) -> None:
    install(tmp_path / "site", "themis_lifo", example_entries(), monkeypatch)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    assert run(["policies"]) == 0
    assert any(line.startswith("lifo ") for line in capsys.readouterr().out.splitlines())
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "1,2,0,0,resnet50,600,10\n2,2,10,0,vgg16,600,0\n"
    )
    out = tmp_path / "o"
    args = ["simulate", "--trace", str(trace), "--cluster", "1x1x2", "--policy", "lifo"]
    assert run([*args, "--out", str(out), "-q"]) == 0
    assert (out / "summary.json").exists()


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"broken": "no_such_module_anywhere:Policy"}, "cannot load: ModuleNotFoundError"),
        ({"fifo": "themis_lifo:LifoPolicy"}, "the name of a built-in policy"),
        ({"other": "themis_lifo:LifoPolicy"}, "the class's name is 'lifo'"),
        ({"lifo": "themis_lifo:Packer"}, "neither a Policy subclass"),
    ],
)
def test_a_bad_plugin_is_one_line_naming_the_entry_point(
    tmp_path, monkeypatch, capsys, fresh_registry, entries, message
) -> None:
    install(tmp_path / "site", "bad_plugin", entries, monkeypatch)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    with pytest.raises(ThemisError, match="policy plugin"):
        policy_names()
    monkeypatch.setattr(registry, "_loaded", False)
    assert run(["policies"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"themis: error: policy plugin '{next(iter(entries))}'")
    assert message in err and "\n" not in err
