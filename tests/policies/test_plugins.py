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

from tests import dist_info
from themis.cli import main
from themis.cli.main import run
from themis.errors import ThemisError
from themis.policies import knobs, make_policy, policy_names, registry

EXAMPLE = Path(__file__).parents[2] / "examples" / "policy_plugin"


def install(site: Path, name: str, entries: dict[str, str], monkeypatch) -> None:
    """A distribution ``name`` on ``sys.path`` declaring ``entries`` as policies."""
    dist_info.install(site, name, "themis.policies", entries, monkeypatch)


@pytest.fixture
def fresh_registry():
    """The registry as before any policy was loaded; afterwards, exactly as before the
    test (its policy modules included, so that later tests find a loaded registry even
    when this file runs first)."""
    saved = (registry.POLICIES.entries, registry.POLICIES.broken, registry.POLICIES.loaded)
    declared = dict(knobs._DECLARED)  # the plug-ins' knobs, declared as they register
    keep = {"themis.policies.registry", "themis.policies.base", "themis.policies.knobs"}
    keep_cli = {"themis.cli.main", "themis.cli.groups"}

    def ours(name: str) -> bool:
        # The commands too: their flags, a plug-in's knobs among them, are made when
        # their module is imported.
        commands = name.startswith("themis.cli.") and name not in keep_cli
        policies = name.startswith("themis.policies.") and name not in keep
        return policies or commands or name == "themis_lifo"

    modules = {m: sys.modules[m] for m in list(sys.modules) if ours(m)}
    registry.POLICIES.entries, registry.POLICIES.broken, registry.POLICIES.loaded = {}, {}, False
    knobs._DECLARED.clear()
    commands = dict(main.cli.commands)  # loaded on first use, and kept
    main.cli.commands.clear()
    for name in modules:
        del sys.modules[name]  # re-imported: registered again
    yield
    for name in [m for m in sys.modules if ours(m)]:
        del sys.modules[name]
    sys.modules.update(modules)
    registry.POLICIES.entries, registry.POLICIES.broken, registry.POLICIES.loaded = saved
    knobs._DECLARED.clear()
    knobs._DECLARED.update(declared)
    main.cli.commands.clear()
    main.cli.commands.update(commands)


def example_entries() -> dict[str, str]:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    return project["project"]["entry-points"]["themis.policies"]


@pytest.fixture
def tiny_themis_trace(tmp_path) -> Path:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "1,2,0,0,resnet50,600,10\n2,2,10,0,vgg16,600,0\n"
    )
    return trace


@pytest.mark.pure_only  # empties the registry: compiled built-ins are not imported again
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


@pytest.mark.pure_only  # empties the registry: compiled built-ins are not imported again
@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"broken": "no_such_module_anywhere:Policy"}, "cannot load: ModuleNotFoundError"),
        ({"fifo": "themis_lifo:LifoPolicy"}, "the name of a built-in policy"),
        ({"other": "themis_lifo:LifoPolicy"}, "the class's name is 'lifo'"),
        ({"lifo": "themis_lifo:Packer"}, "neither a Policy subclass"),
    ],
)
def test_a_bad_plugin_is_skipped_with_one_warning_naming_it(
    tmp_path, monkeypatch, capsys, fresh_registry, entries, message
) -> None:
    name = next(iter(entries))
    install(tmp_path / "site", "bad_plugin", entries, monkeypatch)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    with pytest.warns(registry.PluginWarning, match=f"policy plugin '{name}'") as caught:
        names = policy_names()
    assert len(caught) == 1 and message in str(caught[0].message)
    assert {"themis", "fifo", "gavel"} <= set(names)  # the built-ins are all there
    assert message in registry.broken_plugins()[name][1]
    if name != "fifo":  # asking for the broken plugin by name: its own error
        with pytest.raises(ThemisError, match=f"policy plugin '{name}'.*{message}"):
            make_policy(name)


@pytest.mark.pure_only  # empties the registry: compiled built-ins are not imported again
@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"broken": "no_such_module_anywhere:Policy"}, "cannot load: ModuleNotFoundError"),
        ({"badpol": "themis_lifo:Nope"}, "cannot load: AttributeError"),
        ({"fifo": "themis_lifo:LifoPolicy"}, "the name of a built-in policy"),
    ],
)
def test_cli_warns_once_lists_the_broken_plugin_and_runs_built_ins(
    tmp_path, monkeypatch, capsys, fresh_registry, tiny_themis_trace, entries, message
) -> None:
    name = next(iter(entries))
    install(tmp_path / "site", "bad_plugin", entries, monkeypatch)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    assert run(["policies"]) == 0
    captured = capsys.readouterr()
    [warning] = captured.err.splitlines()
    assert warning.startswith(f"themis: warning: policy plugin '{name}'") and message in warning
    listed = [line for line in captured.out.splitlines() if "BROKEN" in line]
    assert len(listed) == 1 and listed[0].startswith(name) and message in listed[0]
    assert any(
        line.startswith("fifo ") and "BROKEN" not in line for line in captured.out.splitlines()
    )
    args = ["simulate", "--trace", str(tiny_themis_trace), "--cluster", "1x1x2", "-q"]
    assert run([*args, "--policy", "fifo", "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().err == ""  # warned once per process, not per command
    if name != "fifo":
        assert run([*args, "--policy", name, "--out", str(tmp_path / "p")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"themis: error: field '--policy': policy plugin '{name}'")
        assert message in err and "\n" not in err


@pytest.mark.pure_only  # empties the registry: compiled built-ins are not imported again
def test_unknown_policy_suggests_the_closest_names(capsys, fresh_registry) -> None:
    with pytest.raises(ThemisError, match="did you mean 'themis'\\?"):
        make_policy("themsi")
    assert run(["simulate", "--policy", "tiresais", "--cluster", "1x1x2"]) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'tiresais' (did you mean 'tiresias'? known: themis," in err
    with pytest.raises(ThemisError, match=r"unknown policy 'zzz' \(known: "):
        make_policy("zzz")
