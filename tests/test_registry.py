"""The one plug-in registry type (``themis.registry``): a kind of its own made here, and
the kinds it serves, policies and trace formats."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import dist_info
from themis import registry
from themis.cli.main import run
from themis.policies.registry import POLICIES
from themis.workload import formats

GROUP = "themis.tests.things"


@dataclass(frozen=True)
class Thing:
    name: str
    origin: str = "themis.tests"


def things() -> registry.Registry[Thing]:
    """A kind with one built-in, ``box``; an entry's target must be a ``Thing``."""

    def admit(entry: object, target: object) -> Thing:
        if not isinstance(target, Thing):
            raise registry.Refused(f"is a {type(target).__name__}, not a Thing")
        return Thing(target.name, origin=getattr(entry, "value", ""))

    def load_builtins() -> None:
        kind.register(Thing("box"))

    kind: registry.Registry[Thing] = registry.Registry(
        "thing",
        GROUP,
        name_of=lambda t: t.name,
        builtin=lambda t: t.origin.startswith("themis."),
        load_builtins=load_builtins,
        admit=admit,
        same=lambda a, b: a.origin == b.origin,
    )
    return kind


def site_with(tmp_path: Path, monkeypatch, dists: dict[str, dict[str, str]]) -> None:
    """A module ``things_mod`` with Things ``cup`` and ``box`` and a function, and one
    distribution per ``dists`` entry declaring its entry points."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "things_mod.py").write_text(
        "from tests.test_registry import Thing\n"
        "CUP = Thing('cup')\nOTHER_CUP = Thing('cup')\nBOX = Thing('box')\n"
        "def not_a_thing(): pass\n"
    )
    for name, entries in dists.items():
        dist_info.install(site, name, GROUP, entries, monkeypatch)


def test_built_ins_then_entry_points_and_the_broken_ones_skipped_once(tmp_path, monkeypatch):
    site_with(
        tmp_path,
        monkeypatch,
        {
            "good": {"cup": "things_mod:CUP"},
            "bad": {"box": "things_mod:BOX", "fork": "things_mod:not_a_thing"},
        },
    )
    kind = things()
    with pytest.warns(registry.PluginWarning) as caught:
        assert [t.name for t in kind.plugins()] == ["box", "cup"]
    assert sorted(str(w.message) for w in caught) == [
        "thing plugin 'box' (things_mod:BOX): the name of a built-in thing; skipped",
        "thing plugin 'fork' (things_mod:not_a_thing): is a function, not a Thing; skipped",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kind.load_plugins() == ["cup"]  # loaded again: no clash, no new warning
    error = kind.broken_error("fork", "--thing")
    assert error is not None and error.field == "--thing"
    assert "is a function, not a Thing" in error.message
    assert kind.broken_error("cup", "--thing") is None
    with pytest.raises(ValueError, match="thing 'cup' registered twice"):
        kind.register(Thing("cup"))


def test_a_name_two_packages_declare_is_kept_by_the_first_and_the_second_warned(
    tmp_path, monkeypatch
):
    site_with(
        tmp_path,
        monkeypatch,
        {"one": {"cup": "things_mod:CUP"}, "two": {"cup": "things_mod:OTHER_CUP"}},
    )
    kind = things()
    with pytest.warns(registry.PluginWarning, match="another package registers 'cup' too"):
        kind.load()
    assert kind.get("cup") is not None and list(kind.broken) == ["cup"]


def test_policies_and_trace_formats_are_one_registry_type() -> None:
    assert isinstance(POLICIES, registry.Registry)
    assert isinstance(formats.FORMATS, registry.Registry)
    assert issubclass(formats.FormatPluginWarning, registry.PluginWarning)


@pytest.fixture
def fresh_formats():
    """The trace formats as before any was loaded; afterwards as before the test."""
    kind = formats.FORMATS
    saved = (kind.entries, kind.broken, kind.loaded)
    kind.entries, kind.broken, kind.loaded = {}, {}, False
    yield
    kind.entries, kind.broken, kind.loaded = saved


def test_the_command_line_warns_of_a_skipped_format_plugin_on_one_line(
    tmp_path, monkeypatch, capsys, fresh_formats
) -> None:
    dist_info.install(
        tmp_path / "site",
        "bad_format",
        "themis.trace_formats",
        {"broken": "no_such_module_anywhere:FORMAT"},
        monkeypatch,
    )
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "1,1,0,0,resnet50,600,10\n"
    )
    args = ["simulate", "--trace", str(trace), "--cluster", "1x1x2", "--policy", "fifo", "-q"]
    assert run([*args, "--out", str(tmp_path / "o")]) == 0
    [warning] = capsys.readouterr().err.splitlines()
    assert warning.startswith("themis: warning: trace format plugin 'broken'")
    assert "cannot load: ModuleNotFoundError" in warning
